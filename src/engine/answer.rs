//! `answer`: the open questions of an agent that ended with `needs_info`, answered one by
//! one; the task goes back to the status that asked, as a new attempt that continues the
//! agent's session with the question and answer pairs (its `{{note}}`).

use super::error::{EngineError, Result};
use super::restart::plain;
use super::say::{check_answers, via};
use super::session::agent_of;
use super::task_edits::Planned;
use crate::pipeline::{Pipeline, Trigger};
use crate::store::{Db, StepRun, StepState, Task, TaskState};

/// The outcome that asks for answers.
pub const NEEDS_INFO: &str = "needs_info";

/// The step run whose questions wait for answers: the task's last ended step in its current
/// run, when it is an agent's that ended with `needs_info`.
pub fn asking_step(db: &Db, task: &Task, pipeline: &Pipeline) -> Result<Option<StepRun>> {
    if matches!(
        task.state,
        TaskState::Running | TaskState::Queued | TaskState::Done | TaskState::Cancelled
    ) {
        return Ok(None);
    }
    let run_id = task.run_id.unwrap_or_default();
    let last = db
        .step_runs(task.id)?
        .into_iter()
        .rev()
        .find(|r| r.run_id == run_id && !matches!(r.state, StepState::Pending));
    Ok(last.filter(|r| {
        r.outcome.as_deref() == Some(NEEDS_INFO) && agent_of(pipeline, &r.status).is_some()
    }))
}

/// The questions of an asking step's handoff, one per item.
pub fn open_questions(step: &StepRun) -> Vec<String> {
    let Some(raw) = step.handoff_content.as_deref() else {
        return Vec::new();
    };
    let handoff = crate::handoff::extract(raw);
    handoff
        .fields
        .open_questions
        .as_deref()
        .map(crate::questions::split)
        .unwrap_or_default()
}

/// `answer` inside the caller's write transaction.
pub(super) fn answer(
    db: &Db,
    task: &Task,
    pipeline: &Pipeline,
    answers: &[String],
    actor: &str,
) -> Result<Planned> {
    let refuse = |message: String| EngineError::Refused {
        task: task.id,
        message,
    };
    let Some(asking) = asking_step(db, task, pipeline)? else {
        return Err(refuse(format!(
            "its agent asked nothing to answer: no agent step of it ended with `needs_info` last (it is {} at `{}`) — `baton say {} TEXT` sends the agent a message",
            task.state, task.status, task.id
        )));
    };
    let questions = open_questions(&asking);
    check_answers(answers)?;
    if answers.iter().all(|a| super::say::blank(a)) {
        return Err(refuse(
            "every answer is empty: answer at least one question (an empty answer leaves that one open)"
                .into(),
        ));
    }
    if !questions.is_empty() && answers.len() > questions.len() {
        return Err(EngineError::Invalid(format!(
            "{} answers for {} questions: give one answer per question, in order",
            answers.len(),
            questions.len()
        )));
    }
    let text = crate::questions::pairs(&questions, answers);
    db.insert_message(task.id, &text, actor, via::NEW_ATTEMPT)?;
    Ok((
        plain(&asking.status, Trigger::Answer),
        Some(text),
        task.run_id.unwrap_or_default(),
    ))
}
