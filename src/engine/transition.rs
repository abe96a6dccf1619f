//! `transition()`: the only way a task's status changes. Guard results, status update,
//! history row, event and step-run creation happen in the caller's one write transaction.

use super::error::{EngineError, Result};
use crate::pipeline::{Decision, Facts, Pipeline, StatusKind, Trigger};
use crate::store::{Db, NewEvent, RunState, StepRun, StepState, Task, TaskState};
use serde_json::json;

/// What a committed transition did.
#[derive(Debug, Clone)]
pub struct Moved {
    pub task_id: i64,
    pub from: String,
    pub to: String,
    pub trigger: Trigger,
    /// The history row, for recording hooks after they run.
    pub history_id: i64,
    /// The pending step run created at the target, if any.
    pub step_run: Option<StepRun>,
    /// Step runs that were running and must now be stopped.
    pub stop: Vec<StepRun>,
    /// Hooks to run now that the change is committed.
    pub hooks: Vec<crate::pipeline::Hook>,
}

/// Parses a task's pipeline snapshot.
pub fn pipeline_of(task: &Task) -> Result<Pipeline> {
    serde_json::from_str(&task.pipeline_json).map_err(|source| EngineError::Snapshot {
        task: task.id,
        source,
    })
}

/// The task state a status implies on entry.
pub fn entry_state(kind: StatusKind, paused: bool) -> TaskState {
    match kind {
        StatusKind::Queue => TaskState::Idle,
        StatusKind::Gate => TaskState::Waiting,
        StatusKind::Step if paused => TaskState::Waiting,
        StatusKind::Step => TaskState::Queued,
        StatusKind::Done => TaskState::Done,
        StatusKind::Failed => TaskState::Failed,
        StatusKind::Cancelled => TaskState::Cancelled,
    }
}

fn run_state_for(kind: StatusKind) -> RunState {
    match kind {
        StatusKind::Done => RunState::Completed,
        StatusKind::Failed => RunState::Failed,
        StatusKind::Cancelled => RunState::Cancelled,
        StatusKind::Step => RunState::Running,
        StatusKind::Queue | StatusKind::Gate => RunState::Waiting,
    }
}

/// The facts guards are checked against, read inside the same transaction.
pub struct FactsOwned {
    visits: std::collections::HashMap<String, u32>,
    step_running: bool,
    handoff_fields: Vec<String>,
    worktree_clean: Option<bool>,
    run_cost: f64,
}

impl FactsOwned {
    /// Reads the facts for a task's current run.
    pub fn load(db: &Db, task: &Task) -> Result<Self> {
        let run = task.run_id.unwrap_or_default();
        let steps = db.step_runs(task.id)?;
        let handoff_fields = db
            .last_handoff(run)?
            .and_then(|s| s.handoff_metadata)
            .and_then(|m| m.get("fields").cloned())
            .and_then(|v| serde_json::from_value(v).ok())
            .unwrap_or_default();
        // `clean_worktree` asks git; a task without a worktree (or a failing git) passes.
        let worktree_clean = task
            .worktree
            .as_deref()
            .map(std::path::Path::new)
            .filter(|p| p.exists())
            .and_then(|p| crate::workspace::git::is_clean(p).ok());
        Ok(Self {
            visits: db.visits(run)?,
            step_running: steps.iter().any(|s| s.state == StepState::Running),
            handoff_fields,
            worktree_clean,
            run_cost: db.run_cost(run)?,
        })
    }

    /// Borrows them in the form `decide` takes.
    pub fn facts(&self) -> Facts<'_> {
        Facts {
            visits: &self.visits,
            step_running: self.step_running,
            handoff_fields: &self.handoff_fields,
            worktree_clean: self.worktree_clean,
            run_cost: self.run_cost,
        }
    }
}

/// Applies a decision: ends the task's open step runs, moves it, records history and an
/// event, and creates the target's step run. `run_id` is the run the move belongs to.
pub fn transition(
    db: &Db,
    task: &Task,
    pipeline: &Pipeline,
    decision: &Decision,
    actor: &str,
    note: Option<&str>,
    run_id: i64,
) -> Result<Moved> {
    let target = pipeline
        .status(&decision.to)
        .ok_or_else(|| EngineError::Refused {
            task: task.id,
            message: format!("its pipeline has no status `{}`", decision.to),
        })?;
    let stop = db.end_open_step_runs(task.id, StepState::Cancelled, "the task moved on")?;
    let paused = task.breakpoint.as_deref() == Some(target.id.as_str());
    db.set_task_status(task.id, &target.id, entry_state(target.kind, paused))?;
    db.set_run_state(run_id, run_state_for(target.kind))?;

    let mut guards = serde_json::to_value(&decision.guards).unwrap_or_default();
    if !decision.blocked_by.is_empty() {
        guards = json!({ "checked": guards, "blocked_by": decision.blocked_by });
    }
    let hooks = json!(decision.hooks.iter().map(|h| h.name()).collect::<Vec<_>>());
    let history_id = db.insert_history(
        task.id,
        Some(run_id),
        Some(&task.status),
        &target.id,
        &decision.trigger.to_string(),
        actor,
        note,
        &guards,
        &hooks,
    )?;
    let mut summary = format!("{} → {} ({})", task.status, target.id, decision.trigger);
    if !decision.blocked_by.is_empty() {
        summary.push_str(&format!(", blocked: {}", decision.blocked_by.join(", ")));
    }
    db.insert_event(&NewEvent {
        task_id: Some(task.id),
        category: "transition",
        kind: "task.moved",
        summary,
        data: json!({ "from": task.status, "to": target.id, "trigger": decision.trigger }),
        actor,
        level: "info",
    })?;

    let step_run = if target.kind == StatusKind::Step && !paused {
        Some(db.insert_step_run(task.id, run_id, &target.id, note, 0)?)
    } else {
        if paused {
            db.insert_event(&NewEvent {
                task_id: Some(task.id),
                category: "lifecycle",
                kind: "breakpoint.paused",
                summary: format!(
                    "paused before {} — `baton continue {}` runs it",
                    target.id, task.id
                ),
                data: json!({ "status": target.id }),
                actor: "system",
                level: "info",
            })?;
        }
        None
    };
    Ok(Moved {
        task_id: task.id,
        from: task.status.clone(),
        to: target.id.clone(),
        trigger: decision.trigger.clone(),
        history_id,
        step_run,
        stop,
        hooks: decision.hooks.clone(),
    })
}
