//! Turning a finished step into the task's next move.

use super::actions::Applied;
use super::error::Result;
use super::transition::{FactsOwned, pipeline_of, transition};
use crate::pipeline::{DecideError, Trigger, decide};
use crate::store::{Db, NewEvent, RunState, StepResult, StepState, TaskState, now_ms};
use serde_json::json;

/// What the engine learned from a finished step.
#[derive(Debug, Clone)]
pub struct StepReport {
    pub state: StepState,
    /// The trigger the result fires: success, failure, error or outcome:<name>.
    pub trigger: Trigger,
    pub result: StepResult,
    /// Task events to record with the result (handoff created, extraction failed, …).
    pub events: Vec<crate::exec::agent::AgentEvent>,
    /// For `error`: whether a retry could help (false for a bad key or a bad profile).
    pub retryable: bool,
}

/// The engine moves a task into the same status at most this many times in one run; past
/// that, an unguarded loop of steps is stopped and waits for a person.
const MAX_AUTOMATIC_VISITS: u32 = 100;

/// First retry waits this long; each further one doubles it.
const RETRY_BASE_MS: i64 = 1_000;

/// Records a step's result and moves the task on. Returns `None` when the result no longer
/// matters (the step was aborted, or the task moved on meanwhile).
pub fn finish_step(
    db: &Db,
    step_run_id: i64,
    report: &StepReport,
    pre: super::actions::PreCommit,
) -> Result<Option<Applied>> {
    let step = db.step_run(step_run_id)?;
    if !db.finish_step_run(step_run_id, report.state, &report.result)? {
        return Ok(None);
    }
    for e in &report.events {
        db.insert_event(&NewEvent {
            task_id: Some(step.task_id),
            category: e.category,
            kind: e.kind,
            summary: e.summary.clone(),
            data: e.data.clone(),
            actor: "engine",
            level: e.level,
        })?;
    }
    let task = db.task(step.task_id)?;
    if task.status != step.status || task.run_id != Some(step.run_id) {
        return Ok(None);
    }
    let pipeline = pipeline_of(&task)?;

    if report.trigger == Trigger::Error && report.retryable {
        let retries = pipeline
            .status(&step.status)
            .and_then(|s| s.step.as_ref())
            .map_or(0, |s| s.retries) as i64;
        let used = db.attempts_since_entry(task.id, step.run_id, &step.status)?;
        if used <= retries {
            let delay = RETRY_BASE_MS << (used - 1).clamp(0, 10);
            db.insert_step_run(
                task.id,
                step.run_id,
                &step.status,
                step.note.as_deref(),
                now_ms() + delay,
            )?;
            db.set_task_state(task.id, TaskState::Queued)?;
            db.insert_event(&NewEvent {
                task_id: Some(task.id),
                category: "lifecycle",
                kind: "step.retrying",
                summary: format!(
                    "{} attempt {} failed ({}); retry {used} of {retries} in {} s",
                    step.status,
                    step.attempt,
                    report.result.error.as_deref().unwrap_or("error"),
                    delay / 1000
                ),
                data: json!({ "attempt": step.attempt, "delay_ms": delay }),
                actor: "system",
                level: "warn",
            })?;
            return Ok(Some(Applied {
                task_id: task.id,
                summary: format!("task {}: retrying {}", task.id, step.status),
                moved: None,
            }));
        }
    }

    let owned = FactsOwned::load(db, &task)?;
    // Leaves the task where it is, waiting for a person, with an event saying why.
    let wait_here = |event: NewEvent, summary: &str| -> Result<Option<Applied>> {
        db.set_task_state(task.id, TaskState::Waiting)?;
        db.set_run_state(step.run_id, RunState::Waiting)?;
        db.insert_event(&event)?;
        Ok(Some(Applied {
            task_id: task.id,
            summary: format!("task {}: {summary}, waiting at {}", task.id, task.status),
            moved: None,
        }))
    };
    match decide(&pipeline, &task.status, &report.trigger, &owned.facts()) {
        // A loop of steps with no guard would otherwise run forever.
        Ok(decision)
            if owned.facts().visits.get(&decision.to).copied().unwrap_or(0)
                >= MAX_AUTOMATIC_VISITS =>
        {
            wait_here(
                NewEvent {
                    task_id: Some(task.id),
                    category: "transition",
                    kind: "loop.limit",
                    summary: format!(
                        "stopped before entering {} for the {}th time in this run — add a max_visits guard to the loop, then move the task on by hand",
                        decision.to,
                        MAX_AUTOMATIC_VISITS + 1
                    ),
                    data: json!({ "to": decision.to }),
                    actor: "engine",
                    level: "error",
                },
                "loop limit",
            )
        }
        Ok(decision) => {
            if !decision.hooks.is_empty()
                && let Err(message) = pre(&task, &decision.hooks)
            {
                return wait_here(
                    NewEvent {
                        task_id: Some(task.id),
                        category: "git",
                        kind: "merge.failed",
                        summary: format!(
                            "stays at {}: {message} — its branch and worktree are kept",
                            task.status
                        ),
                        data: json!({ "to": decision.to }),
                        actor: "engine",
                        level: "error",
                    },
                    "merge refused",
                );
            }
            let moved = transition(db, &task, &pipeline, &decision, "engine", None, step.run_id)?;
            Ok(Some(Applied {
                task_id: task.id,
                summary: format!(
                    "task {}: {} → {} ({})",
                    task.id, moved.from, moved.to, moved.trigger
                ),
                moved: Some(moved),
            }))
        }
        // Nothing to do with this result: the task waits here for a person.
        Err(e @ (DecideError::NoTransition { .. } | DecideError::Blocked { .. })) => wait_here(
            NewEvent {
                task_id: Some(task.id),
                category: "transition",
                kind: "transition.none",
                summary: format!("{e}; waiting for a person to move it"),
                data: json!({ "trigger": report.trigger }),
                actor: "engine",
                level: "warn",
            },
            "no transition",
        ),
        Err(source) => Err(super::error::EngineError::Decide {
            task: task.id,
            source,
        }),
    }
}

/// Marks a step run cut off by an engine that stopped (or died) as interrupted.
pub fn interrupt_step(db: &Db, step_run_id: i64, why: &str) -> Result<bool> {
    let step = db.step_run(step_run_id)?;
    let ended = db.finish_step_run(
        step_run_id,
        StepState::Interrupted,
        &StepResult {
            error: Some(why.to_string()),
            ..Default::default()
        },
    )?;
    if !ended {
        return Ok(false);
    }
    let task = db.task(step.task_id)?;
    if task.status == step.status && task.run_id == Some(step.run_id) {
        db.set_task_state(task.id, TaskState::Interrupted)?;
        db.set_run_state(step.run_id, RunState::Interrupted)?;
    }
    db.insert_event(&NewEvent {
        task_id: Some(task.id),
        category: "lifecycle",
        kind: "step.interrupted",
        summary: format!(
            "{} attempt {} was interrupted ({why}) — `baton resume {}` re-runs it",
            step.status, step.attempt, task.id
        ),
        data: json!({ "step_run": step.id, "execution_key": step.execution_key }),
        actor: "engine",
        level: "warn",
    })?;
    Ok(true)
}
