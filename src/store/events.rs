//! Task events: the timeline of everything notable that happened to a task.

use super::sql::params;
use super::{Db, Event, NewEvent, Result, now_ms};

impl Db<'_> {
    /// Records an event.
    pub fn insert_event(&self, e: &NewEvent) -> Result<i64> {
        Ok(self.insert(
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
        )?)
    }

    /// Notes a webhook delivery id; false when it was noted before. Only the newest `keep`
    /// ids, none older than `max_age_ms`, are kept: replays cannot grow the database.
    pub fn note_delivery(&self, id: &str, keep: i64, max_age_ms: i64) -> Result<bool> {
        let now = now_ms();
        let new = self.exec(
            "INSERT INTO webhook_deliveries (id, at) VALUES (?1, ?2) ON CONFLICT DO NOTHING",
            params![id, now],
        )? == 1;
        if new {
            self.exec(
                "DELETE FROM webhook_deliveries WHERE at < ?1 OR seq <= \
                 (SELECT seq FROM webhook_deliveries ORDER BY seq DESC LIMIT 1 OFFSET ?2)",
                params![now - max_age_ms, keep],
            )?;
        }
        Ok(new)
    }

    /// How many webhook delivery ids are kept.
    pub fn deliveries_kept(&self) -> Result<i64> {
        Ok(self.one("SELECT COUNT(*) FROM webhook_deliveries", [], |r| r.get(0))?)
    }

    /// A task's events, oldest first.
    pub fn events(&self, task_id: i64) -> Result<Vec<Event>> {
        self.events_where("task_id = ?1", [task_id])
    }

    /// A task's newest `limit` events above `info` (warnings, errors), oldest first: what
    /// the board's detail pane shows, read from the newest back rather than all of them.
    pub fn notices(&self, task_id: i64, limit: i64) -> Result<Vec<Event>> {
        let mut out = self.events_where(
            "task_id = ?1 AND id IN (SELECT id FROM events WHERE task_id = ?1 \
             AND level != 'info' ORDER BY id DESC LIMIT ?2)",
            [task_id, limit],
        )?;
        out.sort_by_key(|e| e.id);
        Ok(out)
    }

    /// The newest `limit` events of the workspace itself (reloads, skipped schedules), oldest
    /// first.
    pub fn workspace_events(&self, limit: i64) -> Result<Vec<Event>> {
        let mut out = self.events_where(
            "task_id IS NULL AND id IN (SELECT id FROM events WHERE task_id IS NULL \
             ORDER BY id DESC LIMIT ?1)",
            [limit],
        )?;
        out.sort_by_key(|e| e.id);
        Ok(out)
    }

    /// Up to 200 warnings and errors recorded after event `after`, oldest first: what a
    /// headless engine reports as problems.
    pub fn problems_after(&self, after: i64) -> Result<Vec<Event>> {
        self.events_where(
            "id IN (SELECT id FROM events WHERE id > ?1 AND level IN ('warn', 'error') \
             ORDER BY id LIMIT 200)",
            [after],
        )
    }

    /// The id of the newest event, 0 when there is none.
    pub fn last_event_id(&self) -> Result<i64> {
        Ok(self.one("SELECT COALESCE(MAX(id), 0) FROM events", [], |r| r.get(0))?)
    }

    fn events_where(&self, filter: &str, args: impl super::sql::Params) -> Result<Vec<Event>> {
        let rows = self.all(
            &format!(
                "SELECT id, task_id, category, type, summary, data_json, actor, level, at \
                 FROM events WHERE {filter} ORDER BY id"
            ),
            args,
            |r| {
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
                    r.get::<String>(5)?,
                ))
            },
        )?;
        let mut out = Vec::new();
        for (mut e, data) in rows {
            e.data = serde_json::from_str(&data)?;
            out.push(e);
        }
        Ok(out)
    }
}
