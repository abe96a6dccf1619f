//! The `/api` endpoints: the MCP tools' operations as JSON resources, in the CLI's `--json`
//! shapes. Each handler is described for the OpenAPI document (`openapi.rs`).

use super::extract::{ApiPath, ApiQuery};
use super::http::{AppState, error};
use super::ops::{Kind, NewTask, OpError, OpResult};
use super::schema::{
    ActionBody, ActionName, ErrorBody, ListItem, LogsPage, MoveBody, ShowTask, ValidateBody,
};
use crate::engine::Action;
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;

/// The `/api` routes (the event stream and the OpenAPI document are added beside them).
pub fn api() -> Router<AppState> {
    Router::new()
        .route("/api/tasks", get(list_tasks).post(create_task))
        .route("/api/tasks/{id}", get(show_task))
        .route("/api/tasks/{id}/logs", get(task_logs))
        .route("/api/tasks/{id}/diff", get(task_diff))
        .route("/api/tasks/{id}/move", post(move_task))
        .route("/api/tasks/{id}/say", post(super::talk_routes::say_task))
        .route(
            "/api/tasks/{id}/answer",
            post(super::talk_routes::answer_task),
        )
        .route("/api/tasks/{id}/{action}", post(act))
        .route("/api/pipelines", get(list_pipelines))
        .route("/api/pipelines/{id}", get(show_pipeline))
        .route("/api/pipelines/validate", post(validate_pipeline))
        .route("/api/agents", get(list_agents))
        .route("/api/openapi.json", get(super::openapi::document))
}

/// An operation's result as a response: 200 with the JSON, or the sentence with a status.
pub fn reply(result: OpResult) -> Response {
    match result {
        Ok(v) => axum::Json(v).into_response(),
        Err(e) => op_error(e),
    }
}

/// An operation's failure with its HTTP status.
pub fn op_error(e: OpError) -> Response {
    let status = match e.kind {
        Kind::NotFound => StatusCode::NOT_FOUND,
        Kind::Invalid => StatusCode::BAD_REQUEST,
        Kind::Refused => StatusCode::CONFLICT,
        Kind::Internal => StatusCode::INTERNAL_SERVER_ERROR,
    };
    error(status, e.message)
}

/// The JSON body of a request (whatever its `Content-Type` says), or a 400 (not JSON) or 422
/// (JSON of the wrong shape) with a sentence.
pub fn parse_json<T: serde::de::DeserializeOwned>(
    body: &Bytes,
    example: &str,
) -> Result<T, Box<Response>> {
    serde_json::from_slice(body).map_err(|e| {
        // Valid JSON of the wrong shape is 422; text that is not JSON at all is 400.
        let status = if e.is_data() {
            StatusCode::UNPROCESSABLE_ENTITY
        } else {
            StatusCode::BAD_REQUEST
        };
        Box::new(error(
            status,
            format!("the request body must be JSON like {example}: {e}"),
        ))
    })
}

/// Filters of `GET /api/tasks`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Only tasks at this status id.
    status: Option<String>,
    /// Only tasks on this pipeline id.
    pipeline: Option<String>,
    /// Only tasks this person created or last moved.
    by: Option<String>,
    /// Only tasks the token's person created or last moved.
    mine: Option<bool>,
}

/// Every task, newest first (`baton list --json`).
#[utoipa::path(get, path = "/api/tasks", params(ListQuery),
    responses((status = 200, body = Vec<ListItem>)), security(("bearer" = [])))]
pub async fn list_tasks(State(s): State<AppState>, ApiQuery(q): ApiQuery<ListQuery>) -> Response {
    let by = super::who::mine_or(q.mine.unwrap_or(false), q.by);
    reply(s.ops.list_tasks_by(q.status, q.pipeline, by).await)
}

/// The headers `POST /api/tasks` reads.
#[derive(Debug, utoipa::IntoParams)]
#[into_params(parameter_in = Header)]
pub struct CreateHeaders {
    /// A key of the client's choosing (1 to 255 bytes, such as a UUID): a retry with the
    /// same key returns the task the first request made.
    #[param(rename = "Idempotency-Key", min_length = 1, max_length = 255)]
    #[allow(dead_code)] // Read from the headers; here for the document.
    idempotency_key: Option<String>,
}

/// Creates a task (and starts it with `"start": true`); returns it as `baton show --json`.
#[utoipa::path(post, path = "/api/tasks", request_body = NewTask,
    params(CreateHeaders),
    responses((status = 201, body = ShowTask, description = "the new task"),
        (status = 200, body = ShowTask, description = "the task an earlier request with this Idempotency-Key made"),
        (status = 404, body = ErrorBody, description = "no such pipeline"),
        (status = 409, body = ErrorBody, description = "the start was refused (nothing was created), or the Idempotency-Key was used for another task"),
        (status = 422, body = ErrorBody, description = "the body is JSON of the wrong shape")),
    security(("bearer" = [])))]
pub async fn create_task(State(s): State<AppState>, headers: HeaderMap, body: Bytes) -> Response {
    let example = r#"{"title": "…", "prompt": "…", "pipeline": "…", "start": true}"#;
    let mut new: NewTask = match parse_json(&body, example) {
        Ok(b) => b,
        Err(r) => return *r,
    };
    if let Some(key) = headers.get("idempotency-key") {
        match key.to_str() {
            Ok(k) => new.idempotency_key = Some(k.trim().to_string()),
            Err(_) => {
                return error(
                    StatusCode::BAD_REQUEST,
                    "the Idempotency-Key header must be printable ASCII, such as a UUID",
                );
            }
        }
    }
    match s.ops.create_task(new).await {
        // A retry with the key of a task made before: that task, as it is now.
        Ok(c) if c.existed => axum::Json(c.task).into_response(),
        Ok(c) => (StatusCode::CREATED, axum::Json(c.task)).into_response(),
        Err(e) => op_error(e),
    }
}

/// One task with its steps, handoffs and history (`baton show --json`).
#[utoipa::path(get, path = "/api/tasks/{id}", params(("id" = i64, Path, description = "task id")),
    responses((status = 200, body = ShowTask), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn show_task(State(s): State<AppState>, ApiPath(id): ApiPath<i64>) -> Response {
    reply(s.ops.show_task(id).await)
}

/// Applies `start`, `approve`, `reject`, `abort`, `resume` or `retry`; returns the task
/// afterwards. A `note` reaches the next step. (`move` has its own operation.)
#[utoipa::path(post, path = "/api/tasks/{id}/{action}",
    params(("id" = i64, Path, description = "task id"),
        ("action" = ActionName, Path, description = "what to do")),
    request_body(content = Option<ActionBody>, description = "optional; `null` or nothing is the same as `{}`"),
    responses((status = 200, body = ShowTask), (status = 404, body = ErrorBody, description = "no such task"),
        (status = 409, body = ErrorBody, description = "the task's pipeline or state does not allow it"),
        (status = 422, body = ErrorBody, description = "the body is JSON of the wrong shape, or a move names no status")),
    security(("bearer" = [])))]
pub async fn act(
    State(s): State<AppState>,
    ApiPath((id, action)): ApiPath<(i64, String)>,
    body: Bytes,
) -> Response {
    let b: ActionBody = if body.iter().all(u8::is_ascii_whitespace) {
        ActionBody::default()
    } else {
        match parse_json::<Option<ActionBody>>(&body, r#"{"note": "…"}"#) {
            Ok(b) => b.unwrap_or_default(),
            Err(r) => return *r,
        }
    };
    let action = match action.as_str() {
        "start" => Action::Start,
        "approve" => Action::Approve { note: b.note },
        "reject" => Action::Reject { note: b.note },
        "abort" => Action::Abort { note: b.note },
        "resume" => Action::Resume,
        "retry" => Action::Retry,
        other => {
            return error(
                StatusCode::NOT_FOUND,
                format!(
                    "no action `{other}` — use start, approve, reject, move, abort, resume or retry"
                ),
            );
        }
    };
    reply(s.ops.act(id, action).await)
}

/// Moves a task to another status of its pipeline (a human move, as `baton move`); returns
/// the task afterwards.
#[utoipa::path(post, path = "/api/tasks/{id}/move",
    params(("id" = i64, Path, description = "task id")),
    request_body = MoveBody,
    responses((status = 200, body = ShowTask), (status = 404, body = ErrorBody, description = "no such task"),
        (status = 409, body = ErrorBody, description = "the pipeline does not allow that move from where the task is"),
        (status = 422, body = ErrorBody, description = "the body is JSON of the wrong shape (it needs `status`)")),
    security(("bearer" = [])))]
pub async fn move_task(
    State(s): State<AppState>,
    ApiPath(id): ApiPath<i64>,
    body: Bytes,
) -> Response {
    let example = r#"{"status": "<status id>", "note": "…"}"#;
    // No body at all is a move that names no status, as `{}` is: the body has the wrong
    // shape (422), not text that is not JSON (400).
    let no_status = || {
        error(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("the request body must name the status to move to, like {example}"),
        )
    };
    if body.iter().all(u8::is_ascii_whitespace) {
        return no_status();
    }
    match parse_json::<MoveBody>(&body, example) {
        Ok(b) if b.status.trim().is_empty() => no_status(),
        Ok(b) => reply(
            s.ops
                .act(
                    id,
                    Action::Move {
                        to: b.status,
                        note: b.note,
                    },
                )
                .await,
        ),
        Err(r) => *r,
    }
}

/// Which log lines `GET /api/tasks/{id}/logs` returns.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct LogsQuery {
    /// The step's position in `steps`, from 1 (default: the latest).
    #[param(minimum = 1)]
    step: Option<i64>,
    /// Only lines after this line id (`next_after` of the previous page).
    after: Option<i64>,
    /// Only the last this many lines (at most 2000).
    #[param(minimum = 1)]
    tail: Option<i64>,
}

/// A step's log lines, at most 2000 per call; follow with `after`.
#[utoipa::path(get, path = "/api/tasks/{id}/logs",
    params(("id" = i64, Path, description = "task id"), LogsQuery),
    responses((status = 200, body = LogsPage), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn task_logs(
    State(s): State<AppState>,
    ApiPath(id): ApiPath<i64>,
    ApiQuery(q): ApiQuery<LogsQuery>,
) -> Response {
    // Whole numbers of the document's range (int64), at least 1.
    let positive = |name: &str, v: Option<i64>| match v {
        None => Ok(None),
        Some(n) if n >= 1 => Ok(Some(usize::try_from(n).unwrap_or(usize::MAX))),
        Some(n) => Err(format!(
            "{name}: {n} is below 1; `{name}` counts {} from 1",
            if name == "tail" { "lines" } else { "steps" }
        )),
    };
    let (step, tail) = match (positive("step", q.step), positive("tail", q.tail)) {
        (Ok(step), Ok(tail)) => (step, tail),
        (Err(why), _) | (_, Err(why)) => return super::extract::query_problem(&why),
    };
    reply(s.ops.task_logs(id, step, q.after, tail).await)
}

/// The task's branch against its base, plus uncommitted work, as a unified diff.
#[utoipa::path(get, path = "/api/tasks/{id}/diff", params(("id" = i64, Path, description = "task id")),
    responses((status = 200, body = Object), (status = 404, body = ErrorBody, description = "no such task"),
        (status = 409, body = ErrorBody, description = "the task has no work to show (no step has run yet, or its worktree and branch are both gone), or the workspace is not a git repository")),
    security(("bearer" = [])))]
pub async fn task_diff(State(s): State<AppState>, ApiPath(id): ApiPath<i64>) -> Response {
    reply(s.ops.task_diff(id).await)
}

/// Every pipeline with its statuses.
#[utoipa::path(get, path = "/api/pipelines", responses((status = 200, body = Vec<Object>)),
    security(("bearer" = [])))]
pub async fn list_pipelines(State(s): State<AppState>) -> Response {
    reply(s.ops.list_pipelines().await)
}

/// One pipeline as its file holds it.
#[utoipa::path(get, path = "/api/pipelines/{id}", params(("id" = String, Path, description = "pipeline id")),
    responses((status = 200, body = Object), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn show_pipeline(State(s): State<AppState>, ApiPath(id): ApiPath<String>) -> Response {
    reply(s.ops.show_pipeline(&id).await)
}

/// Checks a pipeline file's text; errors and warnings with line and column.
#[utoipa::path(post, path = "/api/pipelines/validate", request_body = ValidateBody,
    responses((status = 200, body = Object),
        (status = 422, body = ErrorBody, description = "the body is JSON of the wrong shape")),
    security(("bearer" = [])))]
pub async fn validate_pipeline(State(s): State<AppState>, body: Bytes) -> Response {
    match parse_json::<ValidateBody>(&body, r#"{"text": "<the pipeline file>"}"#) {
        Ok(b) => reply(s.ops.validate_pipeline(b.text, b.file).await),
        Err(r) => *r,
    }
}

/// Every agent profile, and problems in profile files.
#[utoipa::path(get, path = "/api/agents", responses((status = 200, body = Object)),
    security(("bearer" = [])))]
pub async fn list_agents(State(s): State<AppState>) -> Response {
    reply(s.ops.list_agents().await)
}
