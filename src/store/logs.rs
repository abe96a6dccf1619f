//! Log lines: batched inserts and windowed reads.

use super::{Db, LogLine, NewLogLine, Result};
use rusqlite::params;

fn log_row(r: &rusqlite::Row) -> rusqlite::Result<LogLine> {
    Ok(LogLine {
        id: r.get(0)?,
        step_run_id: r.get(1)?,
        stream: r.get(2)?,
        ts: r.get(3)?,
        text: r.get(4)?,
    })
}

impl Db<'_> {
    /// Appends a batch of log lines (call inside one write transaction).
    pub fn insert_log_lines(&self, lines: &[NewLogLine]) -> Result<()> {
        let mut stmt = self.conn.prepare_cached(
            "INSERT INTO log_lines (step_run_id, stream, ts, line) VALUES (?1, ?2, ?3, ?4)",
        )?;
        for l in lines {
            stmt.execute(params![l.step_run_id, l.stream, l.ts, l.text])?;
        }
        Ok(())
    }

    /// Up to `limit` lines of a step run with id greater than `after`, oldest first.
    pub fn log_lines(&self, step_run_id: i64, after: i64, limit: i64) -> Result<Vec<LogLine>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT id, step_run_id, stream, ts, line FROM log_lines \
             WHERE step_run_id = ?1 AND id > ?2 ORDER BY id LIMIT ?3",
        )?;
        let rows = stmt.query_map(params![step_run_id, after, limit], log_row)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// Up to `limit` lines of a step run with id less than `before`, oldest first (for a
    /// viewer scrolling back through a long log).
    pub fn log_lines_before(
        &self,
        step_run_id: i64,
        before: i64,
        limit: i64,
    ) -> Result<Vec<LogLine>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT id, step_run_id, stream, ts, line FROM log_lines \
             WHERE step_run_id = ?1 AND id < ?2 ORDER BY id DESC LIMIT ?3",
        )?;
        let rows = stmt.query_map(params![step_run_id, before, limit], log_row)?;
        let mut out: Vec<LogLine> = rows.collect::<rusqlite::Result<_>>()?;
        out.reverse();
        Ok(out)
    }

    /// The last `limit` lines of a step run, oldest first (the tail a viewer opens on).
    pub fn log_tail(&self, step_run_id: i64, limit: i64) -> Result<Vec<LogLine>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT id, step_run_id, stream, ts, line FROM log_lines \
             WHERE step_run_id = ?1 ORDER BY id DESC LIMIT ?2",
        )?;
        let rows = stmt.query_map(params![step_run_id, limit], log_row)?;
        let mut out: Vec<LogLine> = rows.collect::<rusqlite::Result<_>>()?;
        out.reverse();
        Ok(out)
    }

    /// How many lines a step run has logged.
    pub fn log_count(&self, step_run_id: i64) -> Result<i64> {
        Ok(self.one(
            "SELECT COUNT(*) FROM log_lines WHERE step_run_id = ?1",
            [step_run_id],
            |r| r.get(0),
        )?)
    }
}
