//! `say`: something said to a task's agent. A running step whose backend reads input
//! mid-run gets it at once (the engine's live path, `say_live`); otherwise a task
//! with a step on its way keeps it for that step (`{{messages}}`), and a task that waits
//! or ended at a failure continues its last agent session with it, as a new attempt.

use super::actions::Applied;
use super::error::{EngineError, Result};
use super::restart::plain;
use super::session::agent_of;
use super::task_edits::Planned;
use crate::pipeline::{Pipeline, Trigger};
use crate::store::{Db, StepRun, StepState, Task, TaskState};

/// The longest message, in characters: a message is a few paragraphs, not a file.
pub const MAX_MESSAGE: usize = 32 * 1024;

/// How a message went.
pub mod via {
    /// Written to the running step's input.
    pub const LIVE: &str = "live";
    /// Kept for the task's next agent step (`{{messages}}`).
    pub const NEXT_STEP: &str = "next step";
    /// A new attempt was made for it (the message is its `{{note}}`).
    pub const NEW_ATTEMPT: &str = "new attempt";
}

/// What `say` does with a task.
pub(super) enum Said {
    /// Kept for the next agent step: nothing moves.
    Queued(Box<Applied>),
    /// A new attempt of the last agent step, continuing its session.
    Attempt(Planned),
}

/// Why a message cannot be sent, in one sentence; `what` names it (`the message`, `answer 2`).
pub fn check_text(text: &str, what: &str) -> Result<()> {
    let invalid = |m: String| Err(EngineError::Invalid(m));
    if blank(text) {
        return invalid(format!("{what} is empty: give the words to send the agent"));
    }
    if text.contains('\0') {
        return invalid(format!(
            "{what} holds a NUL byte, which no agent can be given — remove it"
        ));
    }
    let n = text.chars().count();
    if n > MAX_MESSAGE {
        return invalid(format!(
            "{what} is {n} characters long; keep it to {MAX_MESSAGE} at most (put long material in a file in the worktree and name it)"
        ));
    }
    Ok(())
}

/// True when `text` says nothing: only spaces and control characters.
pub fn blank(text: &str) -> bool {
    text.chars().all(|c| c.is_whitespace() || c.is_control())
}

/// The checks of answers that need nothing but them: at least one, none with a NUL byte or
/// over the length cap. (All of them blank is the engine's refusal: nothing to send.)
pub fn check_answers(answers: &[String]) -> Result<()> {
    if answers.is_empty() {
        return Err(EngineError::Invalid(
            "no answer given: give one answer per question, in order".into(),
        ));
    }
    for (i, a) in answers.iter().enumerate() {
        if !blank(a) {
            check_text(a, &format!("answer {}", i + 1))?;
        }
    }
    Ok(())
}

/// The latest agent step run of the task's current run that has ended, preferring one that
/// left a session to continue.
pub(super) fn last_agent_step(
    db: &Db,
    task: &Task,
    pipeline: &Pipeline,
) -> Result<Option<StepRun>> {
    let run_id = task.run_id.unwrap_or_default();
    let ended: Vec<StepRun> = db
        .step_runs(task.id)?
        .into_iter()
        .filter(|r| r.run_id == run_id && agent_of(pipeline, &r.status).is_some())
        .filter(|r| !matches!(r.state, StepState::Running | StepState::Pending))
        .collect();
    let with_session = ended.iter().rev().find(|r| r.session_id.is_some());
    Ok(with_session.or(ended.last()).cloned())
}

/// `say` inside the caller's write transaction (the live path found no running step that
/// takes input).
pub(super) fn say(
    db: &Db,
    task: &Task,
    pipeline: &Pipeline,
    text: &str,
    actor: &str,
) -> Result<Said> {
    check_text(text, "the message")?;
    let refuse = |message: String| EngineError::Refused {
        task: task.id,
        message,
    };
    let queued = |summary: String| -> Result<Said> {
        db.insert_message(task.id, text, actor, via::NEXT_STEP)?;
        Ok(Said::Queued(Box::new(Applied {
            task_id: task.id,
            summary: format!("task {}: {summary}", task.id),
            moved: None,
            retry: false,
            forge: None,
        })))
    };
    match task.state {
        TaskState::Done | TaskState::Cancelled => Err(refuse(format!(
            "it has finished (it is {} at `{}`), so no agent is left to hear it — `baton rerun {} --from STATUS` runs it again",
            task.state, task.status, task.id
        ))),
        TaskState::Running | TaskState::Queued => {
            let agent = agent_of(pipeline, &task.status);
            queued(match agent {
                Some(a) => format!("queued for the next step: `{a}` takes no input while it runs"),
                None => "queued for its next agent step (a script step runs now)".into(),
            })
        }
        TaskState::Idle | TaskState::Waiting | TaskState::Interrupted | TaskState::Failed => {
            let Some(last) = last_agent_step(db, task, pipeline)? else {
                return queued("queued for its first agent step".into());
            };
            db.insert_message(task.id, text, actor, via::NEW_ATTEMPT)?;
            Ok(Said::Attempt((
                plain(&last.status, Trigger::Say),
                Some(text.to_string()),
                task.run_id.unwrap_or_default(),
            )))
        }
    }
}

/// The messages a step takes: `own`, the one its new attempt was made for, and `kept`,
/// those its prompt carries. They are the agent's once it runs — when its process starts,
/// or, for a backend with no process of its own, once it answered — and are then marked
/// delivered to the step, once; a step that never started leaves them queued.
pub(super) struct Taking<'a> {
    store: &'a crate::store::StoreHandle,
    step_id: i64,
    own: Vec<i64>,
    pub kept: Vec<crate::store::Message>,
    taken: std::sync::atomic::AtomicBool,
}

impl<'a> Taking<'a> {
    pub fn new(
        store: &'a crate::store::StoreHandle,
        step_id: i64,
        (own, kept): (Vec<i64>, Vec<crate::store::Message>),
    ) -> Self {
        Self {
            store,
            step_id,
            own,
            kept,
            taken: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Marks them delivered (the first call only); the kept ones went as the next step's.
    pub fn take(&self) {
        if self.taken.swap(true, std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        let own = self.own.clone();
        let kept: Vec<i64> = self.kept.iter().map(|m| m.id).collect();
        if own.is_empty() && kept.is_empty() {
            return;
        }
        let step_id = self.step_id;
        self.store
            .write_detached("the messages a step takes", move |db| {
                db.deliver_messages(&own, step_id, None)?;
                db.deliver_messages(&kept, step_id, Some(via::NEXT_STEP))
            });
    }
}

/// Messages as a prompt holds them: each with who said it, oldest first.
pub fn render_messages(messages: &[crate::store::Message]) -> String {
    if messages.is_empty() {
        return String::new();
    }
    let mut out = String::from("## Messages from people while you worked\n");
    for m in messages {
        out.push_str(&format!("\n{} said:\n\n{}\n", m.actor, m.text.trim_end()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blank_nul_and_long_messages_are_refused_in_one_sentence() {
        for (text, want) in [
            ("  \n\t", "is empty"),
            ("\u{7}\r\n", "is empty"),
            ("a\0b", "NUL byte"),
        ] {
            let e = check_text(text, "the message").unwrap_err().to_string();
            assert!(e.contains(want), "{text:?}: {e}");
        }
        let long = "x".repeat(MAX_MESSAGE + 1);
        let e = check_text(&long, "the message").unwrap_err().to_string();
        assert!(e.contains("32768 at most"), "{e}");
        assert!(check_text("use the 2nd API", "the message").is_ok());
    }

    #[test]
    fn messages_render_with_who_said_them() {
        let m = |actor: &str, text: &str| crate::store::Message {
            id: 1,
            task_id: 1,
            text: text.into(),
            actor: actor.into(),
            at: 0,
            state: "queued".into(),
            delivered_to: None,
            via: via::NEXT_STEP.into(),
            delivered_at: None,
        };
        assert_eq!(render_messages(&[]), "");
        let r = render_messages(&[m("user", "use tabs\n"), m("api", "and tests")]);
        assert!(r.contains("user said:\n\nuse tabs\n"), "{r}");
        assert!(r.contains("api said:\n\nand tests"), "{r}");
    }

    #[test]
    fn a_step_takes_its_own_attempt_s_message_as_its_note_and_the_rest_as_messages() {
        let m = |id: i64, text: &str, how: &str| crate::store::Message {
            id,
            task_id: 1,
            text: text.into(),
            actor: "user".into(),
            at: 0,
            state: "queued".into(),
            delivered_to: None,
            via: how.into(),
            delivered_at: None,
        };
        let carried = super::super::session::Carried {
            messages: vec![
                m(1, "an attempt that never ran", via::NEW_ATTEMPT),
                m(2, "kept", via::NEXT_STEP),
                m(3, "this attempt", via::NEW_ATTEMPT),
            ],
            ..Default::default()
        };
        let (own, kept) = carried.split(Some("this attempt"));
        assert_eq!(own, [3]);
        assert_eq!(kept.iter().map(|m| m.id).collect::<Vec<_>>(), [1, 2]);
        // A step that is no attempt of a message carries them all.
        let (own, kept) = carried.split(None);
        assert!(own.is_empty());
        assert_eq!(kept.len(), 3);
    }
}
