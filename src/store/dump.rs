//! A board as JSON lines, and back: `baton db export` and `baton db import`.
//!
//! The first line is a header (`{"baton_export": 1, "schema": N}`); every other line is one
//! row, `{"table": "...", "row": {"column": value, …}}`. Tables and columns are read from the
//! database itself, so a table a later migration adds is carried without a change here. The
//! format names nothing SQLite-specific, so the same file can fill another store.

use super::{Result, Store, StoreError, schema};
use rusqlite::types::{Value as Sql, ValueRef};
use serde_json::{Map, Value, json};
use std::io::{BufRead, Write};

/// The export format's version, in its header line.
const FORMAT: i64 = 1;

/// Tables a new database fills itself, or any engine that ever ran on it (`engines`): they
/// are replaced, not counted as a board's content.
pub(super) const SEEDED: &[&str] = &["change_counter", "meta", "engines"];

/// How many rows an export or import carried, per table, in the order they came.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Carried {
    pub tables: Vec<(String, u64)>,
}

impl Carried {
    pub(super) fn add(&mut self, table: &str) {
        match self.tables.iter_mut().find(|(t, _)| t == table) {
            Some((_, n)) => *n += 1,
            None => self.tables.push((table.to_string(), 1)),
        }
    }

    /// Rows carried in all.
    pub fn rows(&self) -> u64 {
        self.tables.iter().map(|(_, n)| n).sum()
    }

    /// Tasks carried.
    pub fn tasks(&self) -> u64 {
        self.tables
            .iter()
            .find(|(t, _)| t == "tasks")
            .map_or(0, |(_, n)| *n)
    }
}

impl Store {
    /// Writes every row of every table to `out` as JSON lines, inside one read transaction
    /// so the export is one consistent moment of the board.
    pub fn export(&mut self, out: &mut dyn Write) -> Result<Carried> {
        let path = std::path::PathBuf::from("the export");
        let io = |e: std::io::Error| StoreError::Io {
            path: path.clone(),
            source: e,
        };
        let tx = self.lite_mut()?.transaction()?;
        writeln!(out, "{}", header()).map_err(io)?;
        let mut carried = Carried::default();
        for table in tables(&tx)? {
            // By primary key, which both stores have, so an export reads the same from either.
            let order = primary_key(&tx, &table)?;
            let mut stmt = tx.prepare(&format!("SELECT * FROM \"{table}\" ORDER BY {order}"))?;
            let names: Vec<String> = stmt.column_names().map(str::to_string).collect();
            let mut rows = stmt.query([])?;
            while let Some(r) = rows.next()? {
                let mut row = Map::new();
                for (i, name) in names.iter().enumerate() {
                    row.insert(name.clone(), to_json(r.get_ref(i)?));
                }
                let line = json!({"table": table, "row": row});
                writeln!(out, "{line}").map_err(io)?;
                carried.add(&table);
            }
        }
        tx.commit()?;
        out.flush().map_err(io)?;
        Ok(carried)
    }

    /// Fills this store from an export, all in one transaction: nothing is written unless
    /// every line is taken. Refuses a store that already holds a task, and an export of
    /// another schema version.
    pub fn import(&mut self, input: &mut dyn BufRead) -> Result<Carried> {
        let mut lines = input.lines().enumerate();
        read_header(&mut lines)?;
        let path = self.path.clone();
        let conn = self.lite_mut()?;
        for table in tables(conn)? {
            if SEEDED.contains(&table.as_str()) {
                continue;
            }
            let rows: i64 =
                conn.query_row(&format!("SELECT COUNT(*) FROM \"{table}\""), [], |r| {
                    r.get(0)
                })?;
            if rows > 0 {
                return Err(StoreError::Conflict(format!(
                    "{} is not empty ({rows} row(s) in `{table}`); import fills an empty board only — import with --to into a new file, or move this one aside (with its -wal and -shm)",
                    path.display()
                )));
            }
        }
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        // Rows refer to rows of tables that come later in the file (a task to its
        // snapshot); the keys are checked once, at commit.
        tx.execute_batch("PRAGMA defer_foreign_keys = ON")?;
        let known = tables(&tx)?;
        let mut carried = Carried::default();
        let mut change_seqs = Vec::new();
        // Rows of the tables a new database seeds go in last, in place of the seeds: the
        // triggers that number task changes use the counter while the tasks go in.
        let mut seeded: Vec<(usize, String, Map<String, Value>)> = Vec::new();
        for (i, line) in lines {
            let n = i + 1;
            let Some((table, row)) = read_row(n, line)? else {
                continue;
            };
            let (table, row) = (table.as_str(), &row);
            if !known.iter().any(|t| t == table) {
                return Err(bad(n, format!("this baton has no table `{table}`")));
            }
            if SEEDED.contains(&table) {
                seeded.push((n, table.to_string(), row.clone()));
                continue;
            }
            insert(&tx, table, row)
                .map_err(|e| bad(n, format!("`{table}` refused the row: {e}")))?;
            if table == "tasks"
                && let (Some(id), Some(seq)) = (
                    row.get("id").and_then(Value::as_i64),
                    row.get("change_seq").and_then(Value::as_i64),
                )
            {
                change_seqs.push((id, seq));
            }
            carried.add(table);
        }
        let mut cleared = Vec::new();
        for (n, table, row) in &seeded {
            if !cleared.contains(table) {
                tx.execute(&format!("DELETE FROM \"{table}\""), [])?;
                cleared.push(table.clone());
            }
            insert(&tx, table, row)
                .map_err(|e| bad(*n, format!("`{table}` refused the row: {e}")))?;
            carried.add(table);
        }
        // A task's insert takes a new change number; give each its exported one back. The
        // first update moves it off any number it could equal, so the update trigger (which
        // numbers only updates that leave the number alone) stays out of it.
        for (id, seq) in change_seqs {
            tx.execute(
                "UPDATE tasks SET change_seq = -1 - ?2 WHERE id = ?1",
                [id, seq],
            )?;
            tx.execute("UPDATE tasks SET change_seq = ?2 WHERE id = ?1", [id, seq])?;
        }
        tx.commit().map_err(|e| {
            StoreError::Conflict(format!(
                "the export's rows do not fit together ({e}) — was the file edited? export it again"
            ))
        })?;
        Ok(carried)
    }

    /// Copies the database to `to` while others may read and write it (SQLite's online
    /// backup). Refuses a `to` that exists.
    pub fn backup_to(&self, to: &std::path::Path) -> Result<()> {
        if to.exists() {
            return Err(StoreError::Conflict(format!(
                "{} exists — give a new file to back up into",
                to.display()
            )));
        }
        let mut dst = rusqlite::Connection::open(to).map_err(|e| StoreError::Open {
            path: to.to_path_buf(),
            source: e,
        })?;
        let backup = rusqlite::backup::Backup::new(self.lite()?, &mut dst)?;
        backup.run_to_completion(256, std::time::Duration::from_millis(5), None)?;
        Ok(())
    }
}

/// A line of the export that is wrong: its number and why.
pub(super) fn bad(n: usize, why: String) -> StoreError {
    StoreError::Conflict(format!("line {n} of the export: {why}"))
}

/// The export's first line.
pub(super) fn header() -> Value {
    json!({"baton_export": FORMAT, "schema": schema::SCHEMA_VERSION})
}

/// Reads and checks the header line: a baton export of this schema version.
pub(super) fn read_header(
    lines: &mut impl Iterator<Item = (usize, std::io::Result<String>)>,
) -> Result<()> {
    let header: Value = match lines.next() {
        Some((_, Ok(l))) => serde_json::from_str(&l).map_err(|e| {
            bad(
                1,
                format!("not JSON ({e}) — give a file `baton db export` wrote"),
            )
        })?,
        Some((_, Err(e))) => {
            return Err(bad(
                1,
                format!("{e} — give a file `baton db export` wrote (JSON lines, UTF-8)"),
            ));
        }
        None => {
            return Err(bad(
                1,
                "the file is empty — give a file `baton db export` wrote".into(),
            ));
        }
    };
    if header["baton_export"] != json!(FORMAT) {
        return Err(bad(1, "this is not a baton export (no `baton_export` header) — give a file `baton db export` wrote".into()));
    }
    let schema_of_file = header["schema"].as_i64().unwrap_or(0);
    if schema_of_file != schema::SCHEMA_VERSION {
        return Err(StoreError::Conflict(format!(
            "the export is of schema {schema_of_file} and this baton writes schema {} — import it with the baton version that exported it, then upgrade",
            schema::SCHEMA_VERSION
        )));
    }
    Ok(())
}

/// One row line of the export, line `n`: its table and row; `None` for a blank line.
pub(super) fn read_row(
    n: usize,
    line: std::io::Result<String>,
) -> Result<Option<(String, Map<String, Value>)>> {
    let line = line.map_err(|e| {
        bad(
            n,
            format!("{e} — give a file `baton db export` wrote (JSON lines, UTF-8)"),
        )
    })?;
    if line.trim().is_empty() {
        return Ok(None);
    }
    let mut item: Value = serde_json::from_str(&line)
        .map_err(|e| bad(n, format!("not JSON ({e}) — was the file cut or edited?")))?;
    let table = item["table"].as_str().map(str::to_string);
    match (table, item.get_mut("row").map(Value::take)) {
        (Some(table), Some(Value::Object(row))) => Ok(Some((table, row))),
        _ => Err(bad(n, "a row line is {\"table\": …, \"row\": {…}}".into())),
    }
}

/// Inserts one exported row, its columns by name.
fn insert(
    tx: &rusqlite::Connection,
    table: &str,
    row: &Map<String, Value>,
) -> rusqlite::Result<usize> {
    let columns: Vec<String> = row
        .keys()
        .map(|c| format!("\"{}\"", c.replace('"', "\"\"")))
        .collect();
    let sql = format!(
        "INSERT INTO \"{table}\" ({}) VALUES ({})",
        columns.join(", "),
        (1..=columns.len())
            .map(|i| format!("?{i}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let values: Vec<Sql> = row.values().map(to_sql).collect();
    tx.execute(&sql, rusqlite::params_from_iter(values))
}

/// The board's tables, in creation order (SQLite's own bookkeeping left out but for the
/// AUTOINCREMENT counters, which an insert with explicit ids keeps right by itself).
fn tables(conn: &rusqlite::Connection) -> Result<Vec<String>> {
    let mut stmt = conn.prepare(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' \
         ORDER BY rowid",
    )?;
    let names = stmt.query_map([], |r| r.get::<_, String>(0))?;
    Ok(names.collect::<rusqlite::Result<_>>()?)
}

/// A table's primary key columns, quoted and comma-separated (`rowid` where it has none).
fn primary_key(conn: &rusqlite::Connection, table: &str) -> Result<String> {
    let mut stmt =
        conn.prepare("SELECT name FROM pragma_table_info(?1) WHERE pk > 0 ORDER BY pk")?;
    let cols: Vec<String> = stmt
        .query_map([table], |r| r.get::<_, String>(0))?
        .collect::<rusqlite::Result<_>>()?;
    if cols.is_empty() {
        return Ok("rowid".into());
    }
    Ok(cols
        .iter()
        .map(|c| format!("\"{}\"", c.replace('"', "\"\"")))
        .collect::<Vec<_>>()
        .join(", "))
}

fn to_json(v: ValueRef<'_>) -> Value {
    match v {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(i) => json!(i),
        ValueRef::Real(f) => json!(f),
        ValueRef::Text(t) => Value::String(String::from_utf8_lossy(t).into_owned()),
        // baton stores no blobs; should one appear it travels as hex under a marker.
        ValueRef::Blob(b) => {
            json!({"blob_hex": b.iter().map(|x| format!("{x:02x}")).collect::<String>()})
        }
    }
}

fn to_sql(v: &Value) -> Sql {
    match v {
        Value::Null => Sql::Null,
        Value::Bool(b) => Sql::Integer(i64::from(*b)),
        Value::Number(n) => match n.as_i64() {
            Some(i) => Sql::Integer(i),
            None => Sql::Real(n.as_f64().unwrap_or(0.0)),
        },
        Value::String(s) => Sql::Text(s.clone()),
        Value::Object(o) if o.len() == 1 && o.contains_key("blob_hex") => {
            let hex = o["blob_hex"].as_str().unwrap_or("");
            Sql::Blob(
                (0..hex.len() / 2)
                    .filter_map(|i| u8::from_str_radix(hex.get(i * 2..i * 2 + 2)?, 16).ok())
                    .collect(),
            )
        }
        other => Sql::Text(other.to_string()),
    }
}
