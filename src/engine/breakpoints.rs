//! Breakpoints: pause a task before a status's step, and go on from there.

use super::actions::Applied;
use super::error::{EngineError, Result};
use super::transition::entry_state;
use crate::pipeline::{Pipeline, StatusKind};
use crate::store::{Db, NewEvent, RunState, Task, TaskState};
use serde_json::json;

/// Breakpoints only matter to a task that can still reach a step.
fn refuse_if_finished(task: &Task, pipeline: &Pipeline, verb: &str) -> Result<()> {
    if pipeline
        .status(&task.status)
        .is_some_and(|s| s.kind.is_terminal())
    {
        return Err(EngineError::Refused {
            task: task.id,
            message: format!(
                "it has finished (at `{}`), so there is nothing to {verb}",
                task.status
            ),
        });
    }
    Ok(())
}

pub(super) fn set_break(
    db: &Db,
    task: &Task,
    pipeline: &Pipeline,
    status: &str,
    actor: &str,
) -> Result<Applied> {
    refuse_if_finished(task, pipeline, "pause")?;
    match pipeline.status(status) {
        Some(s) if s.kind == StatusKind::Step => {}
        Some(_) => {
            return Err(EngineError::Refused {
                task: task.id,
                message: format!("`{status}` runs no step, so there is nothing to pause before"),
            });
        }
        None => {
            return Err(EngineError::Refused {
                task: task.id,
                message: format!("its pipeline `{}` has no status `{status}`", pipeline.id),
            });
        }
    }
    // A task waiting at a step status after its step ran: a breakpoint here would make
    // `continue` run that step again.
    if task.state == TaskState::Waiting
        && task.status == status
        && task.breakpoint.as_deref() != Some(status)
    {
        return Err(EngineError::Refused {
            task: task.id,
            message: format!(
                "its step at `{status}` already ran; a breakpoint pauses before a status's step, so set it on a status the task has yet to enter"
            ),
        });
    }
    db.set_breakpoint(task.id, Some(status))?;
    db.insert_event(&NewEvent {
        task_id: Some(task.id),
        category: "lifecycle",
        kind: "breakpoint.set",
        summary: format!("will pause before {status}"),
        data: json!({ "status": status }),
        actor,
        level: "info",
    })?;
    Ok(Applied {
        task_id: task.id,
        summary: format!("task {}: will pause before {status}", task.id),
        moved: None,
        retry: false,
        forge: None,
    })
}

pub(super) fn continue_paused(db: &Db, task: &Task, pipeline: &Pipeline) -> Result<Applied> {
    refuse_if_finished(task, pipeline, "continue")?;
    // Paused before its status's step: the only wait `continue` runs a step from. A task
    // also waits at a step status after its step ran (the loop limit, a refused merge, no
    // transition for the result); running that step again could repeat paid work.
    let paused = task.state == TaskState::Waiting
        && task.breakpoint.as_deref() == Some(task.status.as_str());
    if task.breakpoint.is_none() {
        let at_gate = pipeline.status(&task.status).map(|s| s.kind) == Some(StatusKind::Gate);
        let message = if at_gate {
            format!(
                "it waits at the gate `{}` for a person, not at a breakpoint — `baton approve {}` or `baton reject {}` moves it on",
                task.status, task.id, task.id
            )
        } else if task.state == TaskState::Waiting {
            format!(
                "it is not paused at a breakpoint: its step at `{}` already ran and it waits for a person, so there is nothing to continue — move it on with `baton move {} <status>`",
                task.status, task.id
            )
        } else {
            "it has no breakpoint and is not paused".into()
        };
        return Err(EngineError::Refused {
            task: task.id,
            message,
        });
    }
    db.set_breakpoint(task.id, None)?;
    let at_step = pipeline.status(&task.status).map(|s| s.kind) == Some(StatusKind::Step);
    let open = !db.open_step_runs(task.id)?.is_empty();
    if paused && at_step && !open {
        let run_id = task.run_id.unwrap_or_default();
        // The note of the move that brought the task here still belongs to this step.
        let note = db
            .history(task.id)?
            .into_iter()
            .rev()
            .find(|h| h.to == task.status)
            .and_then(|h| h.reason);
        db.insert_step_run(task.id, run_id, &task.status, note.as_deref(), 0)?;
        db.set_task_state(task.id, entry_state(StatusKind::Step, false))?;
        db.set_run_state(run_id, RunState::Running)?;
        return Ok(Applied {
            task_id: task.id,
            summary: format!("task {}: continuing at {}", task.id, task.status),
            moved: None,
            retry: false,
            forge: None,
        });
    }
    Ok(Applied {
        task_id: task.id,
        summary: format!("task {}: breakpoint cleared", task.id),
        moved: None,
        retry: false,
        forge: None,
    })
}
