//! Requests from a process that is not the engine (the CLI, an attached TUI): handed to a
//! running engine through the commands table, or applied directly when none runs.

use super::actions::{Request, apply};
use super::error::{EngineError, Result};
use crate::store::{CommandState, Store};
use crate::workspace::{EngineLock, Workspace};
use std::time::{Duration, Instant};

/// How long a client waits for a running engine to take its command.
const ANSWER_WITHIN: Duration = Duration::from_secs(10);

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

/// Submits a request: to the running engine if there is one, else applied here.
pub fn submit(ws: &Workspace, store: &mut Store, req: &Request) -> Result<Submitted> {
    if EngineLock::is_held(ws) {
        let body = serde_json::to_value(req).map_err(|e| EngineError::Other(e.to_string()))?;
        let id = store.write(|db| db.insert_command(Some(req.task_id), &body))?;
        let deadline = Instant::now() + ANSWER_WITHIN;
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
            if Instant::now() >= deadline {
                return Err(EngineError::Other(format!(
                    "the running engine did not take command {id} within {} s; it stays queued and will be applied when the engine catches up",
                    ANSWER_WITHIN.as_secs()
                )));
            }
            // Waiting on another process's commit: there is no event to wait on across
            // processes, so poll the row at a short interval.
            std::thread::sleep(Duration::from_millis(25));
        }
    }
    let cfg = ws.config()?;
    let git = super::GitCtx::detect(ws, &cfg, &store.read())
        .ok()
        .flatten();
    let applied = match store.write(|db| {
        apply(db, req, &|t, h| {
            super::effects::pre_commit(git.as_ref(), t, h)
        })
    }) {
        Ok(a) => a,
        Err(e) => {
            super::effects::record_refusal(store, &e);
            return Err(e);
        }
    };
    if let Some(moved) = &applied.moved {
        // Steps recorded as running with no engine alive belong to a dead engine: end them.
        for step in &moved.stop {
            super::recovery::end_orphan(step, cfg.kill_grace);
        }
        super::effects::after_commit(ws, git.as_ref(), moved);
    }
    Ok(Submitted::Direct(Box::new(applied)))
}
