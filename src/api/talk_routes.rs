//! `POST /api/tasks/{id}/say` and `/answer`: talking to a task's agent.

use super::extract::ApiPath;
use super::http::AppState;
use super::routes::{parse_json, reply};
use super::schema::{AnswerBody, ErrorBody, SayBody, ShowTask};
use crate::engine::Action;
use axum::body::Bytes;
use axum::extract::State;
use axum::response::Response;

/// Says something to the task's agent: its running step hears it where the agent takes
/// input mid-run (else the next step gets it); a task that waits or failed continues its
/// agent's last session with it as a new attempt. Returns the task afterwards (`messages`
/// says where it went).
#[utoipa::path(post, path = "/api/tasks/{id}/say",
    params(("id" = i64, Path, description = "task id")),
    request_body = SayBody,
    responses((status = 200, body = ShowTask), (status = 404, body = ErrorBody, description = "no such task"),
        (status = 409, body = ErrorBody, description = "the task has finished (done or cancelled)"),
        (status = 400, body = ErrorBody, description = "the text is empty, holds a NUL byte or is over 32 KiB"),
        (status = 422, body = ErrorBody, description = "the body is JSON of the wrong shape (it needs `text`)")),
    security(("bearer" = [])))]
pub async fn say_task(
    State(s): State<AppState>,
    ApiPath(id): ApiPath<i64>,
    body: Bytes,
) -> Response {
    match parse_json::<SayBody>(&body, r#"{"text": "…"}"#) {
        Ok(b) => reply(s.ops.talk(id, Action::Say { text: b.text }).await),
        Err(r) => *r,
    }
}

/// Answers the open questions (`questions` of the task) of an agent that ended with
/// `needs_info`; the task goes back to the status that asked, as a new attempt. Returns the
/// task afterwards.
#[utoipa::path(post, path = "/api/tasks/{id}/answer",
    params(("id" = i64, Path, description = "task id")),
    request_body = AnswerBody,
    responses((status = 200, body = ShowTask), (status = 404, body = ErrorBody, description = "no such task"),
        (status = 409, body = ErrorBody, description = "its agent asked nothing (its last step did not end with needs_info), or more answers than questions"),
        (status = 400, body = ErrorBody, description = "no answer, or an answer holds a NUL byte or is over 32 KiB"),
        (status = 422, body = ErrorBody, description = "the body is JSON of the wrong shape (it needs `answers`)")),
    security(("bearer" = [])))]
pub async fn answer_task(
    State(s): State<AppState>,
    ApiPath(id): ApiPath<i64>,
    body: Bytes,
) -> Response {
    match parse_json::<AnswerBody>(&body, r#"{"answers": ["…"]}"#) {
        Ok(b) => reply(
            s.ops
                .talk(
                    id,
                    Action::Answer {
                        answers: b.answers.into_iter().map(|a| a.0).collect(),
                    },
                )
                .await,
        ),
        Err(r) => *r,
    }
}
