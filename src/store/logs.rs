//! Log lines: batched inserts and windowed reads.

use super::sql::{Optional, Params, Row, SqlResult, Value, params};
use super::{Db, LogLine, NewLogLine, Result};

fn log_row(r: &Row) -> SqlResult<LogLine> {
    Ok(LogLine {
        id: r.get(0)?,
        step_run_id: r.get(1)?,
        stream: r.get(2)?,
        ts: r.get(3)?,
        text: r.get(4)?,
    })
}

/// Log rows inserted by one statement.
const ROWS_PER_INSERT: usize = 32;

fn multi_insert_sql() -> String {
    let values: Vec<String> = (0..ROWS_PER_INSERT)
        .map(|i| {
            let b = i * 4;
            format!("(?{}, ?{}, ?{}, ?{})", b + 1, b + 2, b + 3, b + 4)
        })
        .collect();
    format!(
        "INSERT INTO log_lines (step_run_id, stream, ts, line) VALUES {}",
        values.join(", ")
    )
}

/// A chunk of lines as the parameters of one insert, four a line, without a list built.
struct Rows<'a>(&'a [NewLogLine]);

impl Params for Rows<'_> {
    fn count(&self) -> usize {
        self.0.len() * 4
    }
    fn at(&self, i: usize) -> Value<'_> {
        let l = &self.0[i / 4];
        match i % 4 {
            0 => Value::Int(l.step_run_id),
            1 => Value::Text(l.stream.as_str()),
            2 => Value::Int(l.ts),
            _ => Value::Text(&l.text),
        }
    }
}

/// The multi-row insert's text, made once.
fn multi_insert() -> &'static str {
    static SQL: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    SQL.get_or_init(multi_insert_sql)
}

impl Db<'_> {
    /// Appends a batch of log lines (call inside one write transaction). Rows go in
    /// statements of [`ROWS_PER_INSERT`], which halves the per-row cost of a long log.
    pub fn insert_log_lines(&self, lines: &[NewLogLine]) -> Result<()> {
        let mut chunks = lines.chunks_exact(ROWS_PER_INSERT);
        for chunk in chunks.by_ref() {
            self.exec(multi_insert(), Rows(chunk))?;
        }
        for l in chunks.remainder() {
            self.exec(
                "INSERT INTO log_lines (step_run_id, stream, ts, line) VALUES (?1, ?2, ?3, ?4)",
                Rows(std::slice::from_ref(l)),
            )?;
        }
        // Each step run's count goes up with its lines, in the same transaction. A batch
        // holds runs of lines of one step run (nearly always one run in all).
        let mut start = 0;
        while let Some(first) = lines.get(start) {
            let n = lines[start..]
                .iter()
                .take_while(|l| l.step_run_id == first.step_run_id)
                .count();
            self.exec(
                "UPDATE step_runs SET log_count = log_count + ?1 WHERE id = ?2",
                params![n as i64, first.step_run_id],
            )?;
            start += n;
        }
        Ok(())
    }

    /// [`Db::insert_log_lines`] for the engine's own lines written inside a larger
    /// transaction (a step's claim, its result): lines the database refuses (a full disk
    /// refusing rows) are left out and the transaction goes on; false then. An error that
    /// rolled the whole transaction back is returned.
    pub fn insert_log_lines_or_skip(&self, lines: &[NewLogLine]) -> Result<bool> {
        match self.insert_log_lines(lines) {
            Ok(()) => Ok(true),
            Err(e) if !self.in_transaction() => Err(e),
            Err(e) => {
                tracing::warn!(
                    "{} line(s) of the engine's own were not stored: {e}",
                    lines.len()
                );
                Ok(false)
            }
        }
    }

    /// Up to `limit` lines of a step run with id greater than `after`, oldest first.
    pub fn log_lines(&self, step_run_id: i64, after: i64, limit: i64) -> Result<Vec<LogLine>> {
        let rows = self.all(
            "SELECT id, step_run_id, stream, ts, line FROM log_lines \
             WHERE step_run_id = ?1 AND id > ?2 ORDER BY id LIMIT ?3",
            params![step_run_id, after, limit],
            log_row,
        )?;
        Ok(rows)
    }

    /// Up to `limit` lines of a step run with id less than `before`, oldest first (for a
    /// viewer scrolling back through a long log).
    pub fn log_lines_before(
        &self,
        step_run_id: i64,
        before: i64,
        limit: i64,
    ) -> Result<Vec<LogLine>> {
        let rows = self.all(
            "SELECT id, step_run_id, stream, ts, line FROM log_lines \
             WHERE step_run_id = ?1 AND id < ?2 ORDER BY id DESC LIMIT ?3",
            params![step_run_id, before, limit],
            log_row,
        )?;
        let mut out: Vec<LogLine> = rows;
        out.reverse();
        Ok(out)
    }

    /// The last `limit` lines of a step run, oldest first (the tail a viewer opens on).
    pub fn log_tail(&self, step_run_id: i64, limit: i64) -> Result<Vec<LogLine>> {
        let rows = self.all(
            "SELECT id, step_run_id, stream, ts, line FROM log_lines \
             WHERE step_run_id = ?1 ORDER BY id DESC LIMIT ?2",
            params![step_run_id, limit],
            log_row,
        )?;
        let mut out: Vec<LogLine> = rows;
        out.reverse();
        Ok(out)
    }

    /// How many lines a step run has logged: the count kept as they were written, so
    /// asking costs the same for a long log as for a short one.
    pub fn log_count(&self, step_run_id: i64) -> Result<i64> {
        Ok(self
            .one(
                "SELECT log_count FROM step_runs WHERE id = ?1",
                [step_run_id],
                |r| r.get(0),
            )
            .optional()?
            .unwrap_or(0))
    }
}
