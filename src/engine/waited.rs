//! What `run --wait` reports of the task it waited for, read by the engine that ran it
//! before that engine's store closes: the command prints it without opening the board a
//! second time.

use crate::pipeline::StatusKind;
use crate::store::{Db, Result, StepRun, StepState, Task, TaskState};

/// A task as it stood when the engine that waited for it stopped.
#[derive(Debug, Clone)]
pub struct Waited {
    /// The task's row.
    pub task: Task,
    /// The kind of the status it stands in (a gate, done, failed…), when its pipeline says;
    /// the sentence saying why when the task's pipeline snapshot cannot be read.
    pub kind: std::result::Result<Option<StatusKind>, String>,
    /// `baton show --json`'s view of it, when asked for.
    pub json: Option<serde_json::Value>,
    /// Why it stopped, when it failed or was interrupted: see [`why_stopped`].
    pub why: Option<String>,
}

/// Why a task that failed or was interrupted stopped, from its last step run: the step's
/// status and its error, or its exit code (`build exited 2`). None for a task that did
/// not stop so, or whose last step ended well.
pub fn why_stopped(task: &Task, last: Option<&StepRun>) -> Option<String> {
    if !matches!(task.state, TaskState::Failed | TaskState::Interrupted) {
        return None;
    }
    let step = last?;
    let why = step_failure(step)?;
    Some(match step.error {
        Some(_) => format!("{}: {why}", step.status),
        None => format!("{} {why}", step.status),
    })
}

/// Why a step that ended did not succeed: its error, else its exit code; None for a step
/// that succeeded or has not ended.
pub fn step_failure(step: &StepRun) -> Option<String> {
    if !step.state.is_final() || step.state == StepState::Succeeded {
        return None;
    }
    match (&step.error, step.exit_code) {
        (Some(error), _) => Some(crate::ansi::strip(error).into_owned()),
        (None, Some(code)) if code != 0 => Some(format!("exited {code}")),
        _ => None,
    }
}

/// Reads task `id` as [`Waited`]; `json` adds the full view.
pub fn read(db: &Db, id: i64, json: bool) -> Result<Waited> {
    let task = db.task(id)?;
    let kind = super::pipeline_of(db, &task)
        .map(|p| p.status(&task.status).map(|s| s.kind))
        .map_err(|e| e.to_string());
    let json = match json {
        true => Some(super::views::show(db, id)?),
        false => None,
    };
    let why = why_stopped(&task, db.last_step_run(id)?.as_ref());
    Ok(Waited {
        task,
        kind,
        json,
        why,
    })
}
