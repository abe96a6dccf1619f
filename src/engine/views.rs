//! The JSON shapes of tasks that every front end answers with: the command line's `--json`
//! (docs in README.md) and the API's. Tests and users script against these: change with care.

use crate::store::{Db, Result, StoreError, Task, rfc3339};
use serde_json::{Value, json};

/// One element of `list --json`.
pub fn list_item(t: &Task) -> Value {
    json!({
        "id": t.id,
        "title": t.title,
        "pipeline": t.pipeline_id,
        "status": t.status,
        "state": t.state,
        "updated_at": rfc3339(t.updated_at),
        "by": t.moved_by,
        "created_by": t.created_by,
    })
}

/// True when a [`list_item`] was created or last moved by `name` (`list --by`, `--mine`).
pub fn item_by(item: &Value, name: &str) -> bool {
    item["by"].as_str() == Some(name) || item["created_by"].as_str() == Some(name)
}

/// `show --json` (and `run --json`): the task, its steps in the order they ran, its history.
pub fn show(db: &Db, task_id: i64) -> Result<Value> {
    let t = db.task(task_id)?;
    let run = match t.run_id {
        Some(r) => Some(db.run(r)?.number),
        None => None,
    };
    let steps: Vec<Value> = db
        .step_runs(task_id)?
        .into_iter()
        .map(|s| {
            json!({
                "status": s.status,
                "attempt": s.attempt,
                "state": s.state,
                "exit_code": s.exit_code,
                "outcome": s.outcome,
                "error": s.error,
                "started_at": s.started_at.map(rfc3339),
                "finished_at": s.finished_at.map(rfc3339),
                "handoff": s.handoff_content.as_ref().map(|c| json!({
                    "content": c,
                    "metadata": s.handoff_metadata.clone().unwrap_or(Value::Null),
                })),
                "usage": s.usage,
                "cost": s.cost,
                "tests": s.tests,
                "session": s.session_id,
                "continued": s.continued_from.is_some(),
            })
        })
        .collect();
    let runs = db.step_runs(task_id)?;
    let step_name = |id: i64| {
        runs.iter()
            .find(|s| s.id == id)
            .map(|s| format!("{}#{}", s.status, s.attempt))
    };
    let messages: Vec<Value> = db
        .messages(task_id)?
        .into_iter()
        .map(|m| {
            json!({
                "id": m.id,
                "text": m.text,
                "actor": m.actor,
                "at": rfc3339(m.at),
                "state": m.state,
                "via": m.via,
                "delivered_to": m.delivered_to.and_then(step_name),
                "delivered_at": m.delivered_at.map(rfc3339),
            })
        })
        .collect();
    let questions = open_questions(db, &t)?;
    let history: Vec<Value> = db
        .history(task_id)?
        .into_iter()
        .map(|h| {
            json!({
                "from": h.from,
                "to": h.to,
                "trigger": h.trigger,
                "actor": h.actor,
                "reason": h.reason,
                "at": rfc3339(h.at),
                "guards": guard_list(&h.guards),
                "hooks": h.hooks,
            })
        })
        .collect();
    Ok(json!({
        "id": t.id,
        "title": t.title,
        "pipeline": t.pipeline_id,
        "status": t.status,
        "state": t.state,
        "run": run,
        "steps": steps,
        "history": history,
        "pr": db.task_pr(task_id)?,
        "after": db.blockers(task_id)?,
        "start_waits": db.start_waits(task_id)?,
        "messages": messages,
        "questions": questions,
    }))
}

/// The open questions a task's agent waits to have answered (empty when it waits for none).
pub fn open_questions(db: &Db, t: &Task) -> Result<Vec<String>> {
    let Ok(pipeline) = super::pipeline_of(db, t) else {
        return Ok(Vec::new());
    };
    let asking = match super::answer::asking_step(db, t, &pipeline) {
        Ok(a) => a,
        Err(super::EngineError::Store(e)) => return Err(e),
        Err(_) => None,
    };
    Ok(asking
        .map(|s| super::answer::open_questions(&s))
        .unwrap_or_default())
}

/// A history row's guards as a list of `{"guard", "passed", "detail"}` (rows written by
/// older versions kept blocked ones under `{"checked", "blocked_by"}`).
pub fn guard_list(guards: &Value) -> Value {
    match guards.get("checked") {
        Some(checked) => checked.clone(),
        None if guards.is_array() => guards.clone(),
        None => json!([]),
    }
}

/// Log lines one call returns at most.
pub const MAX_LOG_LINES: usize = 2_000;

/// What kind of failure an operation met, for HTTP status codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// No such task, pipeline or step.
    NotFound,
    /// The input is wrong.
    Invalid,
    /// The request does not fit the task's state (no longer at a gate, say).
    Refused,
    /// Something failed inside.
    Internal,
}

/// A failure: the sentence the CLI prints, and its kind.
#[derive(Debug, Clone)]
pub struct OpError {
    pub kind: Kind,
    pub message: String,
}

impl OpError {
    /// An error of a kind.
    pub fn new(kind: Kind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for OpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<StoreError> for OpError {
    fn from(e: StoreError) -> Self {
        let kind = match e {
            StoreError::NoTask(_) => Kind::NotFound,
            _ => Kind::Internal,
        };
        Self::new(kind, e.to_string())
    }
}

/// The result of an operation.
pub type OpResult = std::result::Result<Value, OpError>;

/// A stored log line as JSON (escape sequences removed).
pub fn log_line(l: &crate::store::LogLine) -> Value {
    json!({
        "id": l.id,
        "stream": l.stream,
        "text": crate::ansi::strip(&l.text),
        "at": rfc3339(l.ts),
    })
}
