//! A `/baton` comment on a task's pull request reaching its agent: said as `say` says it,
//! or not (its author may not write, the task has finished), and recorded on the task
//! either way, in the transaction that notes its delivery.

use super::actions::{Action, Applied, Request};
use super::error::{EngineError, Result};
use super::forge_events as fe;
use super::say::{Said, say};
use super::task_edits::Planned;
use crate::pipeline::Pipeline;
use crate::store::{Db, NewEvent, Task};
use serde_json::json;

/// The words of a request's summary when the comment was not said.
pub const NOT_SAID: &str = "not said";

/// The most characters of the comment an event's summary shows (its data holds it all).
const PREVIEW: usize = 200;

/// `ForgeSay` inside the caller's write transaction: `Ok(planned)` when a new attempt
/// continues the agent's session with it, `Err(answer)` when the request ends here
/// (kept for the next step, not said, or seen before).
pub(super) fn apply(
    db: &Db,
    task: &Task,
    pipeline: &Pipeline,
    req: &Request,
) -> Result<std::result::Result<Planned, Applied>> {
    let Action::ForgeSay {
        text,
        number,
        author,
        seen,
        refused,
    } = &req.action
    else {
        return Err(EngineError::Other("not a forge comment".into()));
    };
    if let Some(before) = fe::note(db, task.id, seen, None)? {
        return Ok(Err(before));
    }
    let why = match refused {
        Some(why) => why.clone(),
        None => match say(db, task, pipeline, text, &req.actor) {
            Ok(said) => {
                record(db, task.id, *number, author, text, None, &req.actor)?;
                return Ok(match said {
                    Said::Queued(applied) => Err(Applied {
                        forge: Some(fe::ForgeOutcome::Said),
                        ..*applied
                    }),
                    Said::Attempt(planned) => Ok(planned),
                });
            }
            Err(EngineError::Refused { message, .. } | EngineError::Invalid(message)) => message,
            Err(e) => return Err(e),
        },
    };
    record(db, task.id, *number, author, text, Some(&why), &req.actor)?;
    Ok(Err(Applied {
        task_id: task.id,
        summary: format!("task {}: {NOT_SAID}: {why}", task.id),
        moved: None,
        retry: false,
        forge: Some(fe::ForgeOutcome::NotSaid),
    }))
}

/// Records the comment on `task` as a `forge.say` event: said, or not and why.
pub(super) fn record(
    db: &Db,
    task: i64,
    number: u64,
    author: &str,
    text: &str,
    not_said: Option<&str>,
    actor: &str,
) -> crate::store::Result<()> {
    let mut preview: String = text.chars().take(PREVIEW).collect();
    if preview.len() < text.len() {
        preview.push('…');
    }
    let summary = match not_said {
        None => format!("/baton from {author} on #{number}, said to the agent: {preview}"),
        Some(why) => format!("/baton from {author} on #{number} {NOT_SAID} ({why}): {preview}"),
    };
    db.insert_event(&NewEvent {
        task_id: Some(task),
        category: "forge",
        kind: "forge.say",
        summary,
        data: json!({"number": number, "author": author, "text": text,
            "said": not_said.is_none(), "why": not_said}),
        actor,
        level: if not_said.is_some() { "warn" } else { "info" },
    })?;
    Ok(())
}
