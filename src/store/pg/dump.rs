//! `baton db export` from and `baton db import` into PostgreSQL: the same JSON lines as
//! SQLite's (see `store::dump`), so a board moves from one store to the other by export
//! then import.

use super::super::dump::{Carried, SEEDED, bad, header, read_header, read_row};
use super::super::{Result, StoreError};
use super::{LOCK_KEY, PgStore, pg_err, tables};
use postgres::types::{ToSql, Type};
use serde_json::{Map, Value, json};
use std::io::{BufRead, Write};

/// A quoted identifier.
fn q(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

impl PgStore {
    /// Writes every row of every table as JSON lines, in one repeatable-read transaction
    /// so the export is one moment of the board.
    pub fn export(&mut self, out: &mut dyn Write) -> Result<Carried> {
        self.require_current()?;
        let target = self.target.clone();
        let e = |e| pg_err(&target, e);
        let io = |e: std::io::Error| StoreError::Io {
            path: "the export".into(),
            source: e,
        };
        let mut tx = self
            .client
            .build_transaction()
            .isolation_level(postgres::IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .map_err(e)?;
        writeln!(out, "{}", header()).map_err(io)?;
        let mut carried = Carried::default();
        for table in tables(&mut tx).map_err(e)? {
            let order = primary_key(&mut tx, &table).map_err(e)?;
            let rows = tx
                .query(
                    &format!("SELECT * FROM {} ORDER BY {order}", q(&table)),
                    &[],
                )
                .map_err(e)?;
            for r in rows {
                let mut row = Map::new();
                for (i, col) in r.columns().iter().enumerate() {
                    row.insert(col.name().to_string(), to_json(&r, i, col.type_(), &table)?);
                }
                writeln!(out, "{}", json!({"table": table, "row": row})).map_err(io)?;
                carried.add(&table);
            }
        }
        tx.commit().map_err(e)?;
        out.flush().map_err(io)?;
        Ok(carried)
    }

    /// Fills an empty board from an export in one transaction: nothing is written unless
    /// every line is taken. Refuses a board that holds rows, and an export of another
    /// schema version.
    pub fn import(&mut self, input: &mut dyn BufRead) -> Result<Carried> {
        self.require_current()?;
        let mut lines = input.lines().enumerate();
        read_header(&mut lines)?;
        let target = self.target.clone();
        let e = |e| pg_err(&target, e);
        let mut tx = self.client.transaction().map_err(e)?;
        // One import at a time, and the emptiness seen is the emptiness filled.
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&LOCK_KEY])
            .map_err(e)?;
        let known = tables(&mut tx).map_err(e)?;
        for table in &known {
            if SEEDED.contains(&table.as_str()) {
                continue;
            }
            let rows: i64 = tx
                .query_one(&format!("SELECT COUNT(*) FROM {}", q(table)), &[])
                .map_err(e)?
                .get(0);
            if rows > 0 {
                return Err(StoreError::Conflict(format!(
                    "the board at {} is not empty ({rows} row(s) in `{table}`); import fills an empty board only — import into a new database",
                    target.shown()
                )));
            }
        }
        // Rows refer to rows of tables later in the file; keys are checked at commit.
        tx.batch_execute("SET CONSTRAINTS ALL DEFERRED")
            .map_err(e)?;
        let mut carried = Carried::default();
        let mut change_seqs = Vec::new();
        let mut seeded: Vec<(usize, String, Map<String, Value>)> = Vec::new();
        for (i, line) in lines {
            let n = i + 1;
            let Some((table, row)) = read_row(n, line)? else {
                continue;
            };
            if !known.contains(&table) {
                return Err(bad(n, format!("this baton has no table `{table}`")));
            }
            if SEEDED.contains(&table.as_str()) {
                seeded.push((n, table, row));
                continue;
            }
            insert(&mut tx, &table, &row)
                .map_err(|why| bad(n, format!("`{table}` refused the row: {why}")))?;
            if table == "tasks"
                && let (Some(id), Some(seq)) = (
                    row.get("id").and_then(Value::as_i64),
                    row.get("change_seq").and_then(Value::as_i64),
                )
            {
                change_seqs.push((id, seq));
            }
            carried.add(&table);
        }
        let mut cleared: Vec<String> = Vec::new();
        for (n, table, row) in &seeded {
            if !cleared.contains(table) {
                tx.execute(&format!("DELETE FROM {}", q(table)), &[])
                    .map_err(e)?;
                cleared.push(table.clone());
            }
            insert(&mut tx, table, row)
                .map_err(|why| bad(*n, format!("`{table}` refused the row: {why}")))?;
            carried.add(table);
        }
        // As in SQLite: give each task its exported change number back, moving it off any
        // number it could equal first so the trigger leaves both updates alone.
        for (id, seq) in change_seqs {
            tx.execute(
                "UPDATE tasks SET change_seq = -1 - $2::bigint WHERE id = $1",
                &[&id, &seq],
            )
            .map_err(e)?;
            tx.execute(
                "UPDATE tasks SET change_seq = $2 WHERE id = $1",
                &[&id, &seq],
            )
            .map_err(e)?;
        }
        // Rows came with their ids: identity columns go on after the largest.
        let identities = tx
            .query(
                "SELECT c.relname::text, a.attname::text FROM pg_attribute a \
                 JOIN pg_class c ON c.oid = a.attrelid \
                 JOIN pg_namespace n ON n.oid = c.relnamespace \
                 WHERE n.nspname = current_schema() AND a.attidentity <> '' AND a.attnum > 0",
                &[],
            )
            .map_err(e)?;
        for r in identities {
            let (table, col): (String, String) = (r.get(0), r.get(1));
            tx.execute(
                &format!(
                    "SELECT setval(pg_get_serial_sequence($1, $2), COALESCE(MAX({c}), 0) + 1, false) FROM {t}",
                    c = q(&col),
                    t = q(&table)
                ),
                &[&q(&table), &col],
            )
            .map_err(e)?;
        }
        tx.commit().map_err(|err| {
            StoreError::Conflict(format!(
                "the export's rows do not fit together ({}) — was the file edited? export it again",
                err.as_db_error()
                    .map_or(err.to_string(), |d| d.message().to_string())
            ))
        })?;
        Ok(carried)
    }
}

/// A table's primary key columns, quoted, text ones in byte order as SQLite sorts them.
fn primary_key(
    tx: &mut postgres::Transaction<'_>,
    table: &str,
) -> std::result::Result<String, postgres::Error> {
    let rows = tx.query(
        "SELECT a.attname::text, t.typcollation <> 0 FROM pg_index i \
         JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) \
         JOIN pg_type t ON t.oid = a.atttypid \
         WHERE i.indrelid = to_regclass($1) AND i.indisprimary \
         ORDER BY array_position(i.indkey::int2[], a.attnum)",
        &[&q(table)],
    )?;
    if rows.is_empty() {
        return Ok("ctid".into());
    }
    Ok(rows
        .iter()
        .map(|r| {
            let collated: bool = r.get(1);
            let name = q(&r.get::<_, String>(0));
            if collated {
                format!("{name} COLLATE \"C\"")
            } else {
                name
            }
        })
        .collect::<Vec<_>>()
        .join(", "))
}

/// One column of a row as export's JSON (the same values SQLite's export writes).
fn to_json(r: &postgres::Row, i: usize, ty: &Type, table: &str) -> Result<Value> {
    let err = |e: postgres::Error| StoreError::Postgres(format!("reading `{table}`: {e}"));
    Ok(match *ty {
        Type::INT8 => json!(r.try_get::<_, Option<i64>>(i).map_err(err)?),
        Type::INT4 => json!(r.try_get::<_, Option<i32>>(i).map_err(err)?),
        Type::INT2 => json!(r.try_get::<_, Option<i16>>(i).map_err(err)?),
        Type::FLOAT8 => json!(r.try_get::<_, Option<f64>>(i).map_err(err)?),
        Type::FLOAT4 => json!(r.try_get::<_, Option<f32>>(i).map_err(err)?.map(f64::from)),
        Type::BOOL => json!(r.try_get::<_, Option<bool>>(i).map_err(err)?.map(i64::from)),
        Type::BYTEA => match r.try_get::<_, Option<Vec<u8>>>(i).map_err(err)? {
            None => Value::Null,
            Some(b) => {
                json!({"blob_hex": b.iter().map(|x| format!("{x:02x}")).collect::<String>()})
            }
        },
        _ => json!(r.try_get::<_, Option<String>>(i).map_err(err)?),
    })
}

/// Inserts one exported row, its columns by name, each value turned into its column's type.
fn insert(
    tx: &mut postgres::Transaction<'_>,
    table: &str,
    row: &Map<String, Value>,
) -> std::result::Result<(), String> {
    let columns: Vec<String> = row.keys().map(|c| q(c)).collect();
    let sql = format!(
        "INSERT INTO {} ({}) VALUES ({})",
        q(table),
        columns.join(", "),
        (1..=columns.len())
            .map(|i| format!("${i}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let why = |e: postgres::Error| {
        e.as_db_error()
            .map_or(e.to_string(), |d| d.message().to_string())
    };
    let stmt = tx.prepare(&sql).map_err(why)?;
    let values: Vec<Box<dyn ToSql + Sync>> = row
        .iter()
        .zip(stmt.params())
        .map(|((name, v), ty)| to_sql(v, ty).map_err(|m| format!("column `{name}`: {m}")))
        .collect::<std::result::Result<_, _>>()?;
    let params: Vec<&(dyn ToSql + Sync)> = values.iter().map(|b| b.as_ref()).collect();
    tx.execute(&stmt, &params).map_err(why)?;
    Ok(())
}

/// An exported value as the column's type wants it.
fn to_sql(v: &Value, ty: &Type) -> std::result::Result<Box<dyn ToSql + Sync>, String> {
    let int = |v: &Value| match v {
        Value::Null => Ok(None),
        Value::Number(n) => n
            .as_i64()
            .map(Some)
            .ok_or(format!("{n} is not a whole number")),
        Value::Bool(b) => Ok(Some(i64::from(*b))),
        Value::String(s) => s
            .parse()
            .map(Some)
            .map_err(|_| format!("`{s}` is not a number")),
        other => Err(format!("{other} is not a number")),
    };
    Ok(match *ty {
        Type::INT8 => Box::new(int(v)?),
        Type::INT4 => Box::new(
            int(v)?
                .map(i32::try_from)
                .transpose()
                .map_err(|_| format!("{v} does not fit a 32-bit column"))?,
        ),
        Type::INT2 => Box::new(
            int(v)?
                .map(i16::try_from)
                .transpose()
                .map_err(|_| format!("{v} does not fit a 16-bit column"))?,
        ),
        Type::BOOL => Box::new(int(v)?.map(|i| i != 0)),
        Type::FLOAT4 => Box::new(match v {
            Value::Null => None,
            Value::Number(n) => n.as_f64().map(|f| f as f32),
            other => return Err(format!("{other} is not a number")),
        }),
        Type::FLOAT8 => Box::new(match v {
            Value::Null => None,
            Value::Number(n) => n.as_f64(),
            other => return Err(format!("{other} is not a number")),
        }),
        Type::BYTEA => Box::new(match v {
            Value::Null => None,
            Value::Object(o) if o.len() == 1 && o.contains_key("blob_hex") => {
                let hex = o.get("blob_hex").and_then(Value::as_str).unwrap_or("");
                let bytes: Option<Vec<u8>> = (hex.len() % 2 == 0)
                    .then(|| {
                        (0..hex.len() / 2)
                            .map(|i| u8::from_str_radix(hex.get(i * 2..i * 2 + 2)?, 16).ok())
                            .collect()
                    })
                    .flatten();
                Some(bytes.ok_or_else(|| {
                    format!("`{hex}` is not hex bytes (an even number of 0-9, a-f digits)")
                })?)
            }
            other => return Err(format!("{other} is not bytes")),
        }),
        _ => Box::new(match v {
            Value::Null => None,
            Value::String(s) => Some(s.clone()),
            other => Some(other.to_string()),
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_that_do_not_fit_their_column_are_refused_not_wrapped() {
        assert!(to_sql(&json!(7), &Type::INT4).is_ok());
        let big = to_sql(&json!(i64::from(i32::MAX) + 1), &Type::INT4).err();
        assert_eq!(
            big.as_deref(),
            Some("2147483648 does not fit a 32-bit column")
        );
        assert!(to_sql(&json!(70000), &Type::INT2).is_err());
        assert!(to_sql(&json!({"blob_hex": "00ff"}), &Type::BYTEA).is_ok());
        for bad in ["0", "zz", "0g"] {
            let e = to_sql(&json!({ "blob_hex": bad }), &Type::BYTEA).err();
            assert!(e.is_some_and(|e| e.contains("is not hex bytes")), "{bad}");
        }
    }
}
