//! Extractors whose rejections are the API's own: a JSON `{"error": "<sentence>"}` saying
//! what is wrong in the address or query string and what to send instead, rather than
//! axum's plain-text messages.

use super::http::error;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{FromRequestParts, Path, Query};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::Response;
use serde::de::DeserializeOwned;

/// `Path`, answering a bad path segment (`/api/tasks/abc`) with a sentence.
pub struct ApiPath<T>(pub T);

impl<T, S> FromRequestParts<S> for ApiPath<T>
where
    T: DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match Path::<T>::from_request_parts(parts, state).await {
            Ok(Path(v)) => Ok(Self(v)),
            Err(e) => Err(path_error(&e)),
        }
    }
}

/// `Query`, answering a bad query parameter (`?tail=-1`) with a sentence.
pub struct ApiQuery<T>(pub T);

impl<T, S> FromRequestParts<S> for ApiQuery<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match Query::<T>::from_request_parts(parts, state).await {
            Ok(Query(v)) => Ok(Self(v)),
            Err(e) => Err(query_error(&e)),
        }
    }
}

fn path_error(e: &PathRejection) -> Response {
    let status = e.status();
    if status.is_server_error() {
        return error(
            status,
            format!(
                "baton could not read this address's parameters ({}) — report this as a bug",
                e.body_text()
            ),
        );
    }
    let detail = e.body_text();
    let detail = detail.strip_prefix("Invalid URL: ").unwrap_or(&detail);
    error(
        StatusCode::BAD_REQUEST,
        format!(
            "the address is wrong: {detail} — task ids are whole numbers as `baton list` shows them, like /api/tasks/12"
        ),
    )
}

fn query_error(e: &QueryRejection) -> Response {
    let detail = e.body_text();
    let detail = detail
        .strip_prefix("Failed to deserialize query string: ")
        .unwrap_or(&detail);
    query_problem(detail)
}

/// The answer to a query string that parsed but holds a value out of range.
pub fn query_problem(detail: &str) -> Response {
    error(
        StatusCode::BAD_REQUEST,
        format!(
            "the query string is wrong ({detail}) — ids, `step`, `tail` and `after` are whole numbers, `step` and `tail` not below 1; GET /api/openapi.json lists each endpoint's parameters"
        ),
    )
}
