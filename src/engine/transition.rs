//! `transition()`: the only way a task's status changes. Guard results, status update,
//! history row, event and step-run creation happen in the caller's one write transaction.

use super::error::{EngineError, Result};
use crate::pipeline::{Decision, Facts, Guard, Pipeline, StatusKind, Trigger};
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
    /// Hooks of the transition (the `merge` one already ran before the commit).
    pub hooks: Vec<crate::pipeline::Hook>,
    /// The follow-ups recorded with the change (clean-up, hooks), to run now it committed.
    pub followups: Vec<crate::store::FollowupRow>,
    /// The task reached a `done` status.
    pub done: bool,
}

/// What a recorded follow-up does; its JSON is the row's body.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FollowUp {
    /// Remove a finished task's worktree, committing what it holds first; delete its branch
    /// when the transition merged it. Skipped if the task has since moved on (`run`).
    Cleanup {
        to: String,
        merged: bool,
        #[serde(default)]
        run: Option<i64>,
    },
    /// One of the transition's hooks (all but `merge`), named by its place in the task's
    /// pipeline snapshot, so its settings (a webhook's headers) are not copied here.
    Hook {
        transition: usize,
        index: usize,
        from: String,
        to: String,
        trigger: String,
    },
}

/// A task's pipeline snapshot, parsed (and cached per connection).
pub fn pipeline_of(db: &Db, task: &Task) -> Result<std::sync::Arc<Pipeline>> {
    db.pipeline(task.id).map_err(|e| match e {
        crate::store::StoreError::Snapshot { task, source } => {
            EngineError::Snapshot { task, source }
        }
        e => e.into(),
    })
}

/// True when any transition of the pipeline is guarded by `clean_worktree`: only then does
/// a move need `git status`, which runs before the transaction, never inside it.
pub fn uses_clean_worktree(pipeline: &Pipeline) -> bool {
    pipeline.transitions.iter().any(|t| {
        t.guards
            .iter()
            .any(|g| matches!(g, Guard::CleanWorktree(true)))
    })
}

/// The hooks a history row starts with: each `pending` until its follow-up finishes, except
/// `merge`, which ran before the commit.
pub fn hooks_pending(hooks: &[crate::pipeline::Hook]) -> serde_json::Value {
    json!(
        hooks
            .iter()
            .map(|h| {
                let state = if matches!(h, crate::pipeline::Hook::Merge(_)) {
                    "ok"
                } else {
                    "pending"
                };
                json!({ "hook": h.name(), "state": state })
            })
            .collect::<Vec<_>>()
    )
}

/// Puts a finished hook's result in its place among a history row's hooks (rows written
/// before hooks were listed up front get it appended).
pub fn record_hook(hooks: &mut serde_json::Value, index: Option<usize>, result: serde_json::Value) {
    if !hooks.is_array() {
        *hooks = json!([]);
    }
    let Some(list) = hooks.as_array_mut() else {
        return;
    };
    match index.and_then(|i| list.get_mut(i)) {
        Some(slot) if slot.get("hook") == result.get("hook") => *slot = result,
        _ => list.push(result),
    }
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

/// The facts guards are checked against, read inside the same transaction. Only what the
/// guards of the task's possible moves ask for is read, so the cost does not grow with the
/// task's history or the board.
pub struct FactsOwned {
    visits: std::collections::HashMap<String, u32>,
    step_running: bool,
    handoff_fields: Vec<String>,
    worktree_clean: Option<bool>,
    run_cost: f64,
    forge: bool,
}

impl FactsOwned {
    /// Reads the facts for a task's current run. `worktree_clean` was gathered before the
    /// transaction (it needs git); None when no guard needs it or there is no worktree.
    /// `forge`: the workspace has a usable forge, also known before the transaction.
    pub fn load(
        db: &Db,
        task: &Task,
        pipeline: &Pipeline,
        worktree_clean: Option<bool>,
        forge: bool,
    ) -> Result<Self> {
        let run = task.run_id.unwrap_or_default();
        let mut visits = std::collections::HashMap::new();
        let (mut handoff, mut cost, mut running) = (false, false, false);
        for t in pipeline
            .transitions
            .iter()
            .filter(|t| t.from == task.status || t.from == "*")
        {
            for g in &t.guards {
                match g {
                    Guard::MaxVisits(_) if !visits.contains_key(&t.to) => {
                        visits.insert(t.to.clone(), db.visits_of(run, &t.to)?);
                    }
                    Guard::HasHandoffField(_) => handoff = true,
                    Guard::Budget(_) => cost = true,
                    Guard::NoRunningStep(true) => running = true,
                    _ => {}
                }
            }
        }
        let handoff_fields = if handoff {
            db.last_handoff(run)?
                .and_then(|s| s.handoff_metadata)
                .and_then(|m| m.get("fields").cloned())
                .and_then(|v| serde_json::from_value(v).ok())
                .unwrap_or_default()
        } else {
            Vec::new()
        };
        Ok(Self {
            visits,
            // Only a `no_running_step` guard looks at it.
            step_running: running
                && db
                    .open_step_runs(task.id)?
                    .iter()
                    .any(|s| s.state == StepState::Running),
            handoff_fields,
            worktree_clean,
            run_cost: if cost { db.run_cost(run)? } else { 0.0 },
            forge,
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
            forge: self.forge,
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
    let why = match decision.trigger {
        crate::pipeline::Trigger::Abort => format!("aborted by {actor}"),
        _ => format!("the task moved on to {}", decision.to),
    };
    let stop = db.end_open_step_runs(task.id, StepState::Cancelled, &why)?;
    let paused = task.breakpoint.as_deref() == Some(target.id.as_str());
    db.set_task_status(task.id, &target.id, entry_state(target.kind, paused))?;
    let terminal = matches!(
        target.kind,
        StatusKind::Done | StatusKind::Failed | StatusKind::Cancelled
    );
    // A task whose start was held leaves the hold with any move (a start, an abort).
    if task.state == TaskState::Idle || terminal {
        db.set_start_waits(task.id, false)?;
    }
    db.set_run_state(run_id, run_state_for(target.kind))?;

    let guards = serde_json::to_value(&decision.guards).unwrap_or_default();
    let hooks = hooks_pending(&decision.hooks);
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
    if crate::workspace::person::is_person(actor) {
        db.set_moved_by(task.id, actor)?;
    }
    let mut summary = format!("{} → {} ({})", task.status, target.id, decision.trigger);
    let blocked: Vec<&str> = decision
        .guards
        .iter()
        .filter(|g| !g.passed)
        .map(|g| g.detail.as_str())
        .collect();
    if !blocked.is_empty() {
        summary.push_str(&format!(", blocked: {}", blocked.join(", ")));
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

    // Follow-ups are recorded here, in the transition's transaction, so none is lost if
    // the engine dies before running them.
    let mut bodies = Vec::new();
    if matches!(target.kind, StatusKind::Done | StatusKind::Cancelled) && task.worktree.is_some() {
        let merged = target.kind == StatusKind::Done
            && decision
                .hooks
                .iter()
                .any(|h| matches!(h, crate::pipeline::Hook::Merge(_)));
        bodies.push(FollowUp::Cleanup {
            to: target.id.clone(),
            merged,
            run: Some(run_id),
        });
    }
    if let Some(transition) = decision.transition {
        for (index, hook) in decision.hooks.iter().enumerate() {
            if !matches!(hook, crate::pipeline::Hook::Merge(_)) {
                bodies.push(FollowUp::Hook {
                    transition,
                    index,
                    from: task.status.clone(),
                    to: target.id.clone(),
                    trigger: decision.trigger.to_string(),
                });
            }
        }
    }
    let mut followups = Vec::new();
    for (i, body) in bodies.iter().enumerate() {
        let body = serde_json::to_value(body).unwrap_or_default();
        followups.push(db.insert_followup(task.id, history_id, i as i64, &body)?);
    }

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
    if terminal {
        super::waits::blocker_finished(db, task.id, target.kind)?;
    }
    Ok(Moved {
        task_id: task.id,
        from: task.status.clone(),
        to: target.id.clone(),
        trigger: decision.trigger.clone(),
        history_id,
        step_run,
        stop,
        hooks: decision.hooks.clone(),
        followups,
        done: target.kind == StatusKind::Done,
    })
}
