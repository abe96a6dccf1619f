//! Requests from a process that is not the engine (the CLI, an attached TUI): handed to a
//! running engine through the commands table, or applied directly when none runs.

use super::actions::{Created, NewTask, Request, apply, create_and_start};
use super::error::{EngineError, Result};
use crate::store::{CommandState, Store};
use crate::workspace::{EngineLock, Workspace};
use std::time::{Duration, Instant};

/// How long a client waits for a running engine to take its command.
const ANSWER_WITHIN: Duration = Duration::from_secs(10);
/// How often a client looks at its command when the engine cannot answer on its socket.
const FALLBACK_POLL: Duration = Duration::from_millis(25);

/// Where a request went.
#[derive(Debug)]
pub enum Submitted {
    /// Applied by this process (no engine was running); any step it queued waits for one.
    Direct(Box<super::Applied>),
    /// Applied by the running engine; its one-line summary.
    ByEngine(String),
}

impl Submitted {
    /// The one-line summary.
    pub fn summary(&self) -> &str {
        match self {
            Self::Direct(a) => &a.summary,
            Self::ByEngine(s) => s,
        }
    }
}

/// The engine lock, unless an engine is running and listening (None then; also when
/// another command held the lock past the patience).
fn lock_unless_engine(ws: &Workspace) -> Option<EngineLock> {
    let until = Instant::now() + ANSWER_WITHIN;
    loop {
        if EngineLock::is_held(ws) && super::wake::listening(&ws.dir()) {
            return None;
        }
        match EngineLock::acquire(ws, Duration::from_millis(50)) {
            Ok(lock) => return Some(lock),
            Err(_) if Instant::now() < until => continue,
            Err(_) => return None,
        }
    }
}

/// Creates a task, and starts it when asked, in one transaction. A running engine is woken
/// to run the step and the start's hooks; with none running, the hooks run here (as
/// [`submit`] runs a request's) and the step waits, queued, for the next engine.
pub fn create(ws: &Workspace, store: &mut Store, new: &NewTask) -> Result<Created> {
    let lock = if new.start {
        lock_unless_engine(ws)
    } else {
        None
    };
    let created = store.write(|db| create_and_start(db, new))?;
    let followups = created
        .started
        .as_ref()
        .and_then(|a| a.moved.as_ref())
        .map(|m| m.followups.clone())
        .unwrap_or_default();
    if lock.is_some() && !followups.is_empty() {
        let cfg = ws.config()?;
        let git = super::GitCtx::detect(ws, &cfg, &store.read())
            .ok()
            .flatten();
        super::followups::run_here(ws, git, cfg.kill_grace, followups);
    }
    drop(lock);
    super::wake::poke(&ws.dir());
    Ok(created)
}

/// Submits a request: to the running engine if there is one, else applied here.
pub fn submit(ws: &Workspace, store: &mut Store, req: &Request) -> Result<Submitted> {
    // Applying here takes the engine lock for the while, so no engine starts meanwhile and
    // runs the same hooks or kills the step this request ends. A lock held by a process that
    // does not listen on the socket is another command applying itself: wait for it.
    // An engine takes the lock a moment before it listens: look again until one of the two.
    let lock = lock_unless_engine(ws);
    if lock.is_none() {
        let body = serde_json::to_value(req).map_err(|e| EngineError::Other(e.to_string()))?;
        let id = match store.write(|db| db.insert_command(Some(req.task_id), &body)) {
            Ok(id) => id,
            // The command cannot be queued (a full disk): an abort goes to the engine on its
            // socket instead, which stops the step at once and records the abort later.
            Err(e) if matches!(req.action, super::Action::Abort { .. }) => {
                return match super::wake::abort(&ws.dir(), req, ANSWER_WITHIN) {
                    Some(Ok(summary)) => Ok(Submitted::ByEngine(summary)),
                    Some(Err(reason)) => Err(EngineError::Other(reason)),
                    None => Err(e.into()),
                };
            }
            Err(e) => return Err(e.into()),
        };
        let deadline = Instant::now() + ANSWER_WITHIN;
        // The engine answers on its socket once it has applied the queued commands; without
        // a socket (or an answer), the row is looked at again every so often.
        let mut waiter = super::wake::Waiter::connect(&ws.dir());
        loop {
            if let Some(cmd) = store.read().command(id)? {
                match cmd.state {
                    CommandState::Done => {
                        return Ok(Submitted::ByEngine(cmd.result.unwrap_or_default()));
                    }
                    CommandState::Failed => {
                        return Err(EngineError::Other(cmd.result.unwrap_or_default()));
                    }
                    CommandState::Pending => {}
                }
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(EngineError::Other(format!(
                    "the running engine did not take command {id} within {} s; it stays queued and will be applied when the engine catches up",
                    ANSWER_WITHIN.as_secs()
                )));
            }
            match waiter.take() {
                Some(w) => {
                    w.wait(deadline - now);
                }
                // No socket to wait on: look again shortly (an engine of another version).
                None => std::thread::sleep(FALLBACK_POLL.min(deadline - now)),
            }
        }
    }
    // A step left `running` with no engine alive was cut off by one that died: only the
    // next engine's recovery can say what became of it.
    if matches!(req.action, super::Action::Resume | super::Action::Retry) {
        let t = store.read().task(req.task_id)?;
        if t.state == crate::store::TaskState::Running {
            return Err(EngineError::Refused {
                task: t.id,
                message: format!(
                    "its step at `{}` was cut off when its engine stopped — start one (`baton engine`, or `baton`), which marks the step interrupted, then {} it",
                    t.status,
                    req.action.verb()
                ),
            });
        }
    }
    let cfg = ws.config()?;
    let git = super::GitCtx::detect(ws, &cfg, &store.read())
        .ok()
        .flatten();
    // `git status` for a `clean_worktree` guard is gathered before the transaction.
    let task = store.read().task(req.task_id)?;
    let clean = match (&git, &task.worktree) {
        (Some(_), Some(wt))
            if store
                .read()
                .pipeline(task.id)
                .is_ok_and(|p| super::transition::uses_clean_worktree(&p)) =>
        {
            super::effects::worktree_clean(std::path::Path::new(wt))
        }
        _ => None,
    };
    let mut merged: Option<std::result::Result<(), String>> = None;
    let applied = loop {
        let gate = |_: &crate::store::Task, hooks: &[crate::pipeline::Hook]| {
            super::actions::merge_gate(git.is_some(), &merged, hooks)
        };
        let outside = super::Outside {
            merge: &gate,
            worktree_clean: clean,
        };
        match store.write(|db| apply(db, req, &outside)) {
            Ok(a) => break a,
            // The merge runs between two transactions, never inside one.
            Err(EngineError::MergePending { task }) if merged.is_none() => {
                let t = store.read().task(task)?;
                merged = Some(match &git {
                    Some(g) => super::effects::merge_for(g, &t),
                    None => Ok(()),
                });
            }
            Err(e) => {
                if let Some(ev) = super::effects::refusal_event(&e) {
                    let _ = store.write(|db| db.insert_event(&ev));
                }
                return Err(e);
            }
        }
    };
    if let Some(moved) = &applied.moved {
        // Steps recorded as running with no engine alive belong to a dead engine: end them.
        for step in &moved.stop {
            super::recovery::end_orphan(ws, step, cfg.kill_grace);
        }
        if !moved.followups.is_empty() {
            super::followups::run_here(ws, git, cfg.kill_grace, moved.followups.clone());
        }
    }
    super::wake::poke(&ws.dir());
    Ok(Submitted::Direct(Box::new(applied)))
}
