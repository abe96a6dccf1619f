//! Turning a finished step into the task's next move.

use super::actions::Applied;
use super::actions::{MergeGate, Outside};
use super::error::Result;
use super::transition::{FactsOwned, pipeline_of, transition};
use crate::pipeline::{DecideError, Decision, Facts, Pipeline, Trigger, decide};
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
    /// The engine's last line for the step's log, stored with the result.
    pub closing: Option<String>,
}

/// The engine moves a task into the same status at most this many times in one run; past
/// that, an unguarded loop of steps is stopped and waits for a person.
pub const MAX_AUTOMATIC_VISITS: u32 = 100;

/// First retry waits this long; each further one doubles it.
const RETRY_BASE_MS: i64 = 1_000;

/// What a step's result asks for, decided without I/O.
#[derive(Debug, Clone, PartialEq)]
pub enum ResultDecision {
    /// Run the step again after `delay_ms`: retry `used` of `retries`.
    Retry {
        delay_ms: i64,
        used: i64,
        retries: i64,
    },
    /// Move the task on.
    Move(Decision),
    /// The move would enter `to` once too often in this run: wait for a person.
    LoopLimit { to: String },
    /// No transition applies (or every one is blocked): wait for a person.
    Wait(DecideError),
    /// The pipeline cannot answer (the task's status is not in it).
    Broken(DecideError),
}

/// What [`on_result`] needs to know about the task.
pub struct ResultFacts<'a> {
    pub pipeline: &'a Pipeline,
    /// The status whose step ended.
    pub status: &'a str,
    /// The facts guards are checked against.
    pub guards: Facts<'a>,
    /// Attempts of the status since the task last entered it, the ended one included.
    pub attempts: i64,
    /// How many times the task has entered a status in this run.
    pub visits: &'a dyn Fn(&str) -> u32,
}

/// Decides what a finished step's report means: a retry with backoff for a retryable
/// error within the step's `retries`, else the pipeline's transition for its trigger,
/// unless that would loop past [`MAX_AUTOMATIC_VISITS`].
pub fn on_result(f: &ResultFacts, report: &StepReport) -> ResultDecision {
    if report.trigger == Trigger::Error && report.retryable {
        let retries = f
            .pipeline
            .status(f.status)
            .and_then(|s| s.step.as_ref())
            .map_or(0, |s| s.retries) as i64;
        let used = f.attempts;
        if used <= retries {
            return ResultDecision::Retry {
                delay_ms: RETRY_BASE_MS << (used - 1).clamp(0, 10),
                used,
                retries,
            };
        }
    }
    match decide(f.pipeline, f.status, &report.trigger, &f.guards) {
        Ok(d) if (f.visits)(&d.to) >= MAX_AUTOMATIC_VISITS => {
            ResultDecision::LoopLimit { to: d.to }
        }
        Ok(d) => ResultDecision::Move(d),
        Err(e @ (DecideError::NoTransition { .. } | DecideError::Blocked { .. })) => {
            ResultDecision::Wait(e)
        }
        Err(e) => ResultDecision::Broken(e),
    }
}

/// Records a step's result and moves the task on. Returns `None` when the result no longer
/// matters (the step was aborted, or the task moved on meanwhile).
pub fn finish_step(
    db: &Db,
    step_run_id: i64,
    report: &StepReport,
    outside: &Outside,
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
    let pipeline = pipeline_of(db, &task)?;
    let owned = FactsOwned::load(db, &task, &pipeline, outside.worktree_clean, outside.forge)?;
    let attempts = if report.trigger == Trigger::Error && report.retryable {
        db.attempts_since_entry(task.id, step.run_id, &step.status)?
    } else {
        1
    };
    let visits_error = std::cell::RefCell::new(None);
    let visits = |to: &str| match db.visits_of(step.run_id, to) {
        Ok(n) => n,
        Err(e) => {
            *visits_error.borrow_mut() = Some(e);
            0
        }
    };
    let decision = on_result(
        &ResultFacts {
            pipeline: &pipeline,
            status: &step.status,
            guards: owned.facts(),
            attempts,
            visits: &visits,
        },
        report,
    );
    if let Some(e) = visits_error.into_inner() {
        return Err(e.into());
    }
    // Leaves the task where it is, waiting for a person, with an event saying why.
    let wait_here = |event: NewEvent, summary: &str| -> Result<Option<Applied>> {
        db.set_task_state(task.id, TaskState::Waiting)?;
        db.set_run_state(step.run_id, RunState::Waiting)?;
        db.insert_event(&event)?;
        Ok(Some(Applied {
            task_id: task.id,
            summary: format!("task {}: {summary}, waiting at {}", task.id, task.status),
            moved: None,
            retry: false,
            forge: None,
        }))
    };
    match decision {
        ResultDecision::Retry {
            delay_ms,
            used,
            retries,
        } => {
            db.insert_step_run(
                task.id,
                step.run_id,
                &step.status,
                step.note.as_deref(),
                now_ms() + delay_ms,
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
                    delay_ms / 1000
                ),
                data: json!({ "attempt": step.attempt, "delay_ms": delay_ms }),
                actor: "system",
                level: "warn",
            })?;
            Ok(Some(Applied {
                task_id: task.id,
                summary: format!("task {}: retrying {}", task.id, step.status),
                moved: None,
                retry: true,
                forge: None,
            }))
        }
        // A loop of steps with no guard would otherwise run forever.
        ResultDecision::LoopLimit { to } => wait_here(
            NewEvent {
                task_id: Some(task.id),
                category: "transition",
                kind: "loop.limit",
                summary: format!(
                    "stopped before entering {to} for the {}th time in this run — add a max_visits guard to the loop, then move the task on by hand",
                    MAX_AUTOMATIC_VISITS + 1
                ),
                data: json!({ "to": to }),
                actor: "engine",
                level: "error",
            },
            "loop limit",
        ),
        ResultDecision::Move(decision) => {
            if !decision.hooks.is_empty() {
                match (outside.merge)(&task, &decision.hooks) {
                    Ok(()) => {}
                    Err(MergeGate::Pending) => {
                        return Err(super::EngineError::MergePending { task: task.id });
                    }
                    Err(MergeGate::Refused(message)) => {
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
                }
            }
            let moved = transition(db, &task, &pipeline, &decision, "engine", None, step.run_id)?;
            Ok(Some(Applied {
                task_id: task.id,
                summary: format!(
                    "task {}: {} → {} ({})",
                    task.id, moved.from, moved.to, moved.trigger
                ),
                moved: Some(moved),
                retry: false,
                forge: None,
            }))
        }
        // Nothing to do with this result: the task waits here for a person.
        ResultDecision::Wait(e) => wait_here(
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
        ResultDecision::Broken(source) => Err(super::error::EngineError::Decide {
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

#[cfg(test)]
#[path = "results_tests.rs"]
mod tests;
