//! Task events: the timeline of everything notable that happened to a task.

use super::{Db, Event, NewEvent, Result, now_ms};
use rusqlite::params;

impl Db<'_> {
    /// Records an event.
    pub fn insert_event(&self, e: &NewEvent) -> Result<i64> {
        self.exec(
            "INSERT INTO events (task_id, category, type, summary, data_json, actor, level, at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            params![
                e.task_id,
                e.category,
                e.kind,
                e.summary,
                e.data.to_string(),
                e.actor,
                e.level,
                now_ms()
            ],
        )?;
        Ok(self.conn.last_insert_rowid())
    }

    /// A task's events, oldest first.
    pub fn events(&self, task_id: i64) -> Result<Vec<Event>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT id, task_id, category, type, summary, data_json, actor, level, at \
             FROM events WHERE task_id = ?1 ORDER BY id",
        )?;
        let rows = stmt.query_map([task_id], |r| {
            Ok((
                Event {
                    id: r.get(0)?,
                    task_id: r.get(1)?,
                    category: r.get(2)?,
                    kind: r.get(3)?,
                    summary: r.get(4)?,
                    data: serde_json::Value::Null,
                    actor: r.get(6)?,
                    level: r.get(7)?,
                    at: r.get(8)?,
                },
                r.get::<_, String>(5)?,
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (mut e, data) = row?;
            e.data = serde_json::from_str(&data)?;
            out.push(e);
        }
        Ok(out)
    }
}
