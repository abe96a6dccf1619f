//! A loopback stand-in for a forge's REST API (GitHub, GitLab, Gitea/Forgejo). It is a
//! stub, written from each forge's documented request and response shapes; it answers
//! from a table of `(method, path)` → `(status, JSON)` and records every request so tests
//! can assert on what baton sent. Answers can be changed while it runs.

use super::{Server, serve};
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// One request the stub saw.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    /// Path and query, as sent.
    pub path: String,
    /// Header values by lower-case name.
    pub headers: HashMap<String, String>,
    pub body: Value,
}

/// The stub's answers and what it saw.
#[derive(Default)]
pub struct ForgeStub {
    answers: Mutex<HashMap<(String, String), (u16, Value)>>,
    seen: Mutex<Vec<Seen>>,
}

impl ForgeStub {
    /// Answers `method path` (the path without its query) with `status` and `body`.
    pub fn answer(&self, method: &str, path: &str, status: u16, body: Value) {
        self.answers
            .lock()
            .unwrap()
            .insert((method.to_string(), path.to_string()), (status, body));
    }

    /// Every request so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// The requests to `method path`, whatever their query (a `path` ending in `?` asks
    /// for those with a query).
    pub fn calls(&self, method: &str, path: &str) -> Vec<Seen> {
        let with_query = format!("{}?", path.trim_end_matches('?'));
        self.seen()
            .into_iter()
            .filter(|s| {
                s.method == method
                    && ((s.path == path && !path.ends_with('?')) || s.path.starts_with(&with_query))
            })
            .collect()
    }
}

async fn any(
    State(s): State<Arc<ForgeStub>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let headers = headers
        .iter()
        .map(|(k, v)| (k.as_str().to_string(), v.to_str().unwrap_or("").to_string()))
        .collect();
    s.seen.lock().unwrap().push(Seen {
        method: method.to_string(),
        path: uri
            .path_and_query()
            .map(|p| p.to_string())
            .unwrap_or_default(),
        headers,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    });
    let key = (method.to_string(), uri.path().to_string());
    match s.answers.lock().unwrap().get(&key).cloned() {
        Some((status, v)) => (StatusCode::from_u16(status).unwrap(), axum::Json(v)).into_response(),
        None => (
            StatusCode::NOT_FOUND,
            axum::Json(serde_json::json!({"message": "Not Found"})),
        )
            .into_response(),
    }
}

/// Starts a forge stub on 127.0.0.1.
pub fn start() -> (Server, Arc<ForgeStub>) {
    let state = Arc::new(ForgeStub::default());
    let app = Router::new().fallback(any).with_state(state.clone());
    (serve(app), state)
}
