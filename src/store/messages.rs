//! Messages said to a task's agent: queued until an agent step takes them, then marked
//! delivered to that step run, with how they went (`live` into a running step, the `next
//! step`, or a `new attempt` made for them).

use super::sql::{Row, SqlResult, params};
use super::{Db, Result, now_ms};
use serde::Serialize;

/// One message said to a task's agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Message {
    pub id: i64,
    #[serde(skip)]
    pub task_id: i64,
    /// What was said.
    pub text: String,
    /// Who said it (`user`, `api`, `mcp`, `tui`).
    pub actor: String,
    /// When, in ms since the epoch.
    pub at: i64,
    /// `queued` or `delivered`.
    pub state: String,
    /// The step run it reached.
    pub delivered_to: Option<i64>,
    /// `live`, `next step` or `new attempt`.
    pub via: String,
    /// When it reached the step, in ms since the epoch.
    pub delivered_at: Option<i64>,
}

const COLS: &str = "id, task_id, text, actor, created_at, state, delivered_to, via, delivered_at";

fn row(r: &Row) -> SqlResult<Message> {
    Ok(Message {
        id: r.get(0)?,
        task_id: r.get(1)?,
        text: r.get(2)?,
        actor: r.get(3)?,
        at: r.get(4)?,
        state: r.get(5)?,
        delivered_to: r.get(6)?,
        via: r.get(7)?,
        delivered_at: r.get(8)?,
    })
}

impl Db<'_> {
    /// Queues a message for a task's agent; `via` says how it is meant to go. Its id.
    pub fn insert_message(&self, task_id: i64, text: &str, actor: &str, via: &str) -> Result<i64> {
        let id = self.insert(
            "INSERT INTO messages (task_id, text, actor, created_at, state, via)
             VALUES (?1, ?2, ?3, ?4, 'queued', ?5)",
            params![task_id, text, actor, now_ms(), via],
        )?;
        // The board redraws a card when its task changes.
        self.exec(
            "UPDATE tasks SET updated_at = updated_at WHERE id = ?1",
            params![task_id],
        )?;
        Ok(id)
    }

    /// A task's messages, oldest first.
    pub fn messages(&self, task_id: i64) -> Result<Vec<Message>> {
        Ok(self.all(
            &format!("SELECT {COLS} FROM messages WHERE task_id = ?1 ORDER BY id"),
            [task_id],
            row,
        )?)
    }

    /// A task's messages no step has taken yet, oldest first.
    pub fn queued_messages(&self, task_id: i64) -> Result<Vec<Message>> {
        Ok(self.all(
            &format!(
                "SELECT {COLS} FROM messages WHERE task_id = ?1 AND state = 'queued' ORDER BY id"
            ),
            [task_id],
            row,
        )?)
    }

    /// Marks messages delivered to `step_run`; `via` replaces how they were meant to go when
    /// given. Only queued ones change (a message is delivered once).
    pub fn deliver_messages(&self, ids: &[i64], step_run: i64, via: Option<&str>) -> Result<()> {
        let now = now_ms();
        for id in ids {
            self.exec(
                "UPDATE messages SET state = 'delivered', delivered_to = ?2,
                     via = COALESCE(?3, via), delivered_at = ?4
                 WHERE id = ?1 AND state = 'queued'",
                params![id, step_run, via, now],
            )?;
        }
        Ok(())
    }
}
