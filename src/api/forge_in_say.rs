//! A comment starting with `/baton` on a task's pull request: recorded on the task as an
//! event (`forge.say`) with the rest of its text, once per delivery.

use super::http::{AppState, error};
use crate::engine::forge_events::{KEEP, KEEP_MS};
use crate::forge::issues::BatonComment;
use crate::store::{NewEvent, StoreError};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// Records `c` on the task whose pull request it was written on.
pub(super) async fn baton_comment(
    s: &AppState,
    c: BatonComment,
    id_key: String,
    event: &str,
    delivery: &str,
) -> Response {
    let number = c.number;
    let recorded = s
        .ops
        .store()
        .write(move |db| {
            if !db.note_delivery(&id_key, KEEP, KEEP_MS)? {
                return Ok::<_, StoreError>(Err(()));
            }
            let Some(pr) = db.task_pr_by_number(c.number as i64)? else {
                return Ok(Ok(None));
            };
            db.insert_event(&NewEvent {
                task_id: Some(pr.task_id),
                category: "forge",
                kind: "forge.say",
                summary: format!("/baton from {} on #{}: {}", c.author, c.number, c.text),
                data: json!({"number": c.number, "author": c.author, "text": c.text}),
                actor: "forge",
                level: "info",
            })?;
            Ok(Ok(Some(pr.task_id)))
        })
        .await;
    match recorded {
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        Ok(Err(())) => axum::Json(json!({"event": event, "delivery": delivery, "duplicate": true}))
            .into_response(),
        Ok(Ok(task)) => axum::Json(json!({"event": event, "delivery": delivery,
            "duplicate": false, "task": task, "number": number, "recorded": task.is_some()}))
        .into_response(),
    }
}
