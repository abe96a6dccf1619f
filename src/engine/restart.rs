//! Resume and retry: the engine actions that run a task's work again, whatever its
//! pipeline's transitions say.

use super::error::{EngineError, Result};
use crate::pipeline::{Decision, Pipeline, StatusKind, Trigger, decide};
use crate::store::{Db, RunState, StepState, Task, TaskState};

/// A decision that goes straight to `to` (no guards, no hooks).
pub(super) fn plain(to: &str, trigger: Trigger) -> Decision {
    Decision {
        to: to.to_string(),
        trigger,
        transition: None,
        guards: vec![],
        blocked_by: vec![],
        hooks: vec![],
        label: None,
    }
}

/// Resume: re-run the last interrupted or failed step of the current run, where it ran.
pub(super) fn resume_decision(db: &Db, task: &Task) -> Result<(Decision, Option<String>, i64)> {
    if !matches!(task.state, TaskState::Interrupted | TaskState::Failed) {
        return Err(EngineError::Refused {
            task: task.id,
            message: format!(
                "only an interrupted or failed task can be resumed; it is {} (at `{}`)",
                task.state, task.status
            ),
        });
    }
    let run_id = task.run_id.unwrap_or_default();
    let step = db
        .step_runs(task.id)?
        .into_iter()
        .rev()
        .find(|s| {
            s.run_id == run_id
                && matches!(
                    s.state,
                    StepState::Interrupted | StepState::Failed | StepState::TimedOut
                )
        })
        .ok_or_else(|| EngineError::Refused {
            task: task.id,
            message: format!(
                "it has no interrupted or failed step to resume — `baton retry {}` starts over",
                task.id
            ),
        })?;
    // The re-run gets the note its first attempt had (e.g. a reviewer's requested changes).
    Ok((
        plain(&step.status, Trigger::Resume),
        step.note.clone(),
        run_id,
    ))
}

/// Retry from scratch: a new run entering the first status (through `start` from a queue).
pub(super) fn retry_decision(
    db: &Db,
    task: &Task,
    pipeline: &Pipeline,
) -> Result<(Decision, Option<String>, i64)> {
    if !matches!(
        task.state,
        TaskState::Interrupted | TaskState::Failed | TaskState::Cancelled
    ) {
        return Err(EngineError::Refused {
            task: task.id,
            message: format!(
                "only an interrupted, failed or cancelled task can be retried; it is {} (at `{}`)",
                task.state, task.status
            ),
        });
    }
    let first = pipeline
        .statuses
        .first()
        .ok_or_else(|| EngineError::Refused {
            task: task.id,
            message: "its pipeline has no statuses".into(),
        })?;
    if let Some(old) = task.run_id {
        let run = db.run(old)?;
        if matches!(
            run.state,
            RunState::Running | RunState::Waiting | RunState::Interrupted
        ) {
            db.set_run_state(old, RunState::Cancelled)?;
        }
    }
    let new_run = db.insert_run(task.id, RunState::Running)?;
    let to = if first.kind == StatusKind::Queue {
        let empty = Default::default();
        let facts = crate::pipeline::Facts {
            visits: &empty,
            step_running: false,
            handoff_fields: &[],
            worktree_clean: None,
            run_cost: 0.0,
            forge: false,
        };
        decide(pipeline, &first.id, &Trigger::Start, &facts)
            .map(|d| d.to)
            .unwrap_or_else(|_| first.id.clone())
    } else {
        first.id.clone()
    };
    Ok((plain(&to, Trigger::Retry), None, new_run))
}
