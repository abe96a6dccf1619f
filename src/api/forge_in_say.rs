//! A comment starting with `/baton` on a task's pull request: the rest is said to the
//! task's agent (as `baton say` does) when its author may write to the repository, and
//! recorded on the task either way, once per delivery.

use super::http::{AppState, error};
use crate::engine::Action;
use crate::engine::forge_events::ForgeOutcome;
use crate::forge::issues::BatonComment;
use crate::forge::{ForgeSettings, Kind, Target};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// Where a comment came from: the forge, the configured repository, the delivery.
pub(super) struct Origin<'a> {
    pub settings: &'a ForgeSettings,
    pub kind: Kind,
    /// The configured repository (`owner/name`), when known.
    pub ours: Option<&'a str>,
    /// The key noting the delivery.
    pub id_key: String,
    pub event: &'a str,
    pub delivery: &'a str,
}

/// Says `c` to the agent of the task whose pull request it was written on, or records why
/// not.
pub(super) async fn baton_comment(s: &AppState, o: Origin<'_>, c: BatonComment) -> Response {
    let (event, delivery, number) = (o.event, o.delivery, c.number);
    if let (Some(theirs), Some(ours)) = (c.repo.as_deref(), o.ours)
        && !theirs.eq_ignore_ascii_case(ours)
    {
        return axum::Json(json!({"event": event, "delivery": delivery, "task": null,
            "summary": "the comment is not on the configured repository"}))
        .into_response();
    }
    // The task whose pull request it is on; the engine notes a delivery that reaches none
    // on its own, one that does in the transaction that says it.
    let found = s.ops.client().await.task_of_pr(number).await;
    let task = match found {
        Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, e.message),
        Ok(None) => {
            let more = json!({"task": null, "number": number});
            return super::forge_in::stray(s, o.id_key, event, delivery, more).await;
        }
        Ok(Some(task)) => task,
    };
    let repo = o
        .ours
        .or(c.repo.as_deref())
        .unwrap_or("the repository")
        .to_string();
    let refused = refusal(s, &o, &c, &repo).await;
    let actor = format!("forge:{}", c.author);
    let action = Action::ForgeSay {
        text: c.text,
        number,
        author: c.author,
        seen: vec![o.id_key],
        refused,
    };
    match s.ops.forge(task, action, &actor).await {
        Ok((summary, outcome)) => {
            let (fresh, said) = (outcome.fresh(), outcome == ForgeOutcome::Said);
            axum::Json(
                json!({"event": event, "delivery": delivery, "duplicate": !fresh,
                "task": task, "number": number, "said": said, "summary": summary}),
            )
            .into_response()
        }
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.message),
    }
}

/// Why the comment is not said: its author may not write to the repository, or that could
/// not be checked. GitHub's payload says what the author may do; elsewhere the forge's API
/// is asked.
async fn refusal(s: &AppState, o: &Origin<'_>, c: &BatonComment, repo: &str) -> Option<String> {
    if c.author.is_empty() {
        return Some("the comment does not name its author".into());
    }
    let writer = match c.writer {
        Some(w) => Ok(w),
        None => {
            let (settings, kind, root) = (
                o.settings.clone(),
                o.kind,
                s.ops.workspace().root().to_path_buf(),
            );
            let (login, id) = (c.author.clone(), c.author_id);
            tokio::task::spawn_blocking(move || {
                let mut target = Target::of_workspace(&settings, &root)?;
                target.kind = kind;
                let forge = target.connect().map_err(|e| e.to_string())?;
                forge.may_write(&login, id).map_err(|e| e.to_string())
            })
            .await
            .unwrap_or_else(|e| Err(e.to_string()))
        }
    };
    match writer {
        Ok(true) => None,
        Ok(false) => Some(format!("{} may not write to {repo}", c.author)),
        Err(e) => Some(format!(
            "whether {} may write to {repo} could not be checked: {e}",
            c.author
        )),
    }
}
