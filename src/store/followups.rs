//! Follow-ups of transitions: hooks and worktree clean-ups recorded in the transaction that
//! fired them, run after it commits, and run again by the next engine if one died first.

use super::sql::{Optional, Row, SqlResult, params};
use super::{Db, Result, now_ms};

/// One recorded follow-up.
#[derive(Debug, Clone)]
pub struct FollowupRow {
    pub id: i64,
    pub task_id: i64,
    /// The history row of the transition that fired it.
    pub history_id: i64,
    /// Its place among that transition's follow-ups (they run in this order).
    pub position: i64,
    /// What to do (the engine's own JSON).
    pub body: serde_json::Value,
    /// The idempotency key a receiver can deduplicate on (`hook:<history>:<position>`).
    pub key: String,
    /// `pending`, `running`, `done` or `failed`.
    pub state: String,
    /// How many times it was started (more than one after a crash).
    pub attempts: i64,
}

const COLS: &str = "id, task_id, history_id, position, body_json, key, state, attempts";

fn row(r: &Row) -> SqlResult<FollowupRow> {
    let body: String = r.get(4)?;
    Ok(FollowupRow {
        id: r.get(0)?,
        task_id: r.get(1)?,
        history_id: r.get(2)?,
        position: r.get(3)?,
        body: serde_json::from_str(&body).unwrap_or(serde_json::Value::Null),
        key: r.get(5)?,
        state: r.get(6)?,
        attempts: r.get(7)?,
    })
}

impl Db<'_> {
    /// Records a follow-up of a transition (call in the transition's transaction).
    pub fn insert_followup(
        &self,
        task_id: i64,
        history_id: i64,
        position: i64,
        body: &serde_json::Value,
    ) -> Result<FollowupRow> {
        let key = format!("hook:{history_id}:{position}");
        let id = self.insert(
            "INSERT INTO followups (task_id, history_id, position, body_json, key, created_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![
                task_id,
                history_id,
                position,
                body.to_string(),
                key,
                now_ms()
            ],
        )?;
        Ok(self.one(
            &format!("SELECT {COLS} FROM followups WHERE id = ?1"),
            [id],
            row,
        )?)
    }

    /// Follow-ups not yet finished (pending, or started by an engine that died), in order.
    pub fn open_followups(&self) -> Result<Vec<FollowupRow>> {
        Ok(self.all(
            &format!(
                "SELECT {COLS} FROM followups WHERE state IN ('pending', 'running') ORDER BY id"
            ),
            [],
            row,
        )?)
    }

    /// True while any follow-up is unfinished.
    pub fn any_open_followups(&self) -> Result<bool> {
        Ok(self
            .one(
                "SELECT 1 FROM followups WHERE state IN ('pending', 'running') LIMIT 1",
                [],
                |_| Ok(()),
            )
            .optional()?
            .is_some())
    }

    /// Marks a follow-up started by engine `engine`; returns its attempt number, or None when
    /// it has already finished (another runner got there first) or another engine that is
    /// still live runs it. One left `running` by an engine that is gone (or by this one's
    /// previous incarnation) is started again.
    pub fn start_followup(&self, id: i64, engine: &str) -> Result<Option<i64>> {
        let now = self.engine_clock()?;
        let n = self.exec(
            "UPDATE followups SET state = 'running', attempts = attempts + 1, engine = ?2 \
             WHERE id = ?1 AND (state = 'pending' OR state = 'running' AND \
             (engine IS NULL OR engine = ?2 OR NOT EXISTS (SELECT 1 FROM engines e \
              WHERE e.name = followups.engine AND e.stopped_at IS NULL \
              AND ?3 - e.heartbeat_at < e.lease_ms)))",
            params![id, engine, now],
        )?;
        if n == 0 {
            return Ok(None);
        }
        Ok(Some(self.one(
            "SELECT attempts FROM followups WHERE id = ?1",
            [id],
            |r| r.get(0),
        )?))
    }

    /// Records a follow-up's end: `done` or `failed`, with a one-line result.
    pub fn finish_followup(&self, id: i64, ok: bool, result: &str) -> Result<()> {
        self.exec(
            "UPDATE followups SET state = ?1, result = ?2, finished_at = ?3 WHERE id = ?4",
            params![if ok { "done" } else { "failed" }, result, now_ms(), id],
        )?;
        Ok(())
    }
}
