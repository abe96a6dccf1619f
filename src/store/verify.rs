//! `baton db verify`: what is wrong with a board's database, one sentence a finding.

use super::{Result, Store};

impl Store {
    /// Checks the file's integrity, rows that point at rows that are gone, and the execution
    /// keys steps run under. An empty list means the board is sound.
    pub fn verify(&self) -> Result<Vec<String>> {
        let mut found = Vec::new();
        let conn = self.lite()?;
        let mut stmt = conn.prepare("PRAGMA integrity_check")?;
        let damage: Vec<String> = stmt
            .query_map([], |r| r.get::<_, String>(0))?
            .collect::<rusqlite::Result<_>>()?;
        if damage != ["ok"] {
            for d in damage.iter().take(20) {
                found.push(format!(
                    "the file is damaged: {d} — restore it from `baton db backup`, or export what is readable and import it into a new file"
                ));
            }
            // Nothing further can be trusted on a damaged file.
            return Ok(found);
        }
        let mut stmt = conn.prepare("PRAGMA foreign_key_check")?;
        let orphans: Vec<(String, Option<i64>, String)> = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
            .collect::<rusqlite::Result<_>>()?;
        for (table, row, parent) in orphans {
            let rowid = row.map_or_else(|| "…".into(), |r| r.to_string());
            let row = row.map_or_else(|| "a row".into(), |r| format!("row {r}"));
            found.push(format!(
                "{row} of `{table}` points at a row of `{parent}` that is gone — it belongs to nothing; with the engine stopped, delete it (`sqlite3 .baton/baton.db 'DELETE FROM {table} WHERE rowid = {rowid}'`) or restore a backup"
            ));
        }
        for (sql, what) in UNLINKED {
            let mut stmt = conn.prepare(sql)?;
            let ids: Vec<i64> = stmt
                .query_map([], |r| r.get(0))?
                .collect::<rusqlite::Result<_>>()?;
            for id in ids {
                found.push(what.replace("{}", &id.to_string()));
            }
        }
        Ok(found)
    }
}

/// Rows that point at nothing or do not fit together, beyond the foreign keys: a query for
/// their ids and the finding, `{}` standing for the id. Plain SQL both stores read alike.
pub(super) const UNLINKED: &[(&str, &str)] = &[
    (
        "SELECT id FROM tasks WHERE run_id IS NOT NULL \
         AND run_id NOT IN (SELECT id FROM runs)",
        "task {} names a run that is gone",
    ),
    (
        "SELECT id FROM commands WHERE task_id IS NOT NULL AND state = 'pending' \
         AND task_id NOT IN (SELECT id FROM tasks)",
        "pending command {} is for a task that is gone (the engine will refuse it)",
    ),
    (
        "SELECT s.id FROM step_runs s JOIN runs r ON r.id = s.run_id \
         WHERE r.task_id <> s.task_id",
        "step run {} belongs to another task's run",
    ),
    (
        "SELECT id FROM step_runs \
         WHERE execution_key <> run_id || ':' || status || ':' || attempt",
        "step run {} carries an execution key that is not its run, status and attempt",
    ),
    (
        "SELECT id FROM tasks WHERE change_seq > (SELECT seq FROM change_counter)",
        "task {} carries a change number past the counter; event streams may skip its next change",
    ),
];

/// The schema version written in the database file at `path`, read without changing the
/// file (no migration, no `-wal` created).
pub fn schema_of(path: &std::path::Path) -> Result<i64> {
    let conn = rusqlite::Connection::open_with_flags(
        path,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| super::StoreError::Open {
        path: path.to_path_buf(),
        source: e,
    })?;
    Ok(conn.query_row("PRAGMA user_version", [], |r| r.get(0))?)
}
