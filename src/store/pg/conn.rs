//! A PostgreSQL connection as the store's threads use it: each query text rendered from
//! the store's `?N` dialect and prepared once, write transactions that take turns as
//! SQLite's `BEGIN IMMEDIATE` ones do, and values turned into and out of the server's types.

use crate::store::sql::{Error, Params, SqlResult, Value};
use postgres::types::{IsNull, ToSql, Type, private::BytesMut};
use std::collections::HashMap;

/// The advisory lock every write transaction takes first (see [`PgConn::begin`]).
const WRITE_LOCK: i64 = 0x6261_746f_6e01;

/// Prepared statements kept per connection, past which the cache starts over.
const CACHE: usize = 512;

/// One connection of a store's thread.
pub struct PgConn {
    client: postgres::Client,
    /// Prepared statements by the store's text.
    plain: HashMap<String, postgres::Statement>,
    /// The same for [`PgConn::insert`], whose text gains `RETURNING id`.
    returning: HashMap<String, postgres::Statement>,
    /// A write transaction is open.
    in_tx: bool,
    /// A statement failed in the open transaction since it began (or since the last
    /// rollback to a savepoint): PostgreSQL will commit nothing of it.
    failed: bool,
    /// A rollback to a savepoint failed: the transaction is lost.
    lost: bool,
}

impl PgConn {
    pub fn new(client: postgres::Client) -> Self {
        Self {
            client,
            plain: HashMap::new(),
            returning: HashMap::new(),
            in_tx: false,
            failed: false,
            lost: false,
        }
    }

    /// Notes a failure inside a transaction (PostgreSQL then refuses its other statements).
    fn seen<T>(&mut self, r: Result<T, postgres::Error>) -> SqlResult<T> {
        if r.is_err() && self.in_tx {
            self.failed = true;
        }
        r.map_err(Error::from)
    }

    /// The prepared statement for the store's text `sql`, rendered and prepared on first use.
    fn prepared(&mut self, sql: &str, returning: bool) -> SqlResult<postgres::Statement> {
        let cache = if returning {
            &mut self.returning
        } else {
            &mut self.plain
        };
        if let Some(s) = cache.get(sql) {
            return Ok(s.clone());
        }
        let mut text = render(sql);
        if returning {
            text.push_str(" RETURNING id");
        }
        let made = self.client.prepare(&text);
        let stmt = self.seen(made)?;
        let cache = if returning {
            &mut self.returning
        } else {
            &mut self.plain
        };
        if cache.len() >= CACHE {
            cache.clear();
        }
        cache.insert(sql.to_string(), stmt.clone());
        Ok(stmt)
    }

    /// Runs a statement; how many rows it changed.
    pub fn execute(&mut self, sql: &str, params: &impl Params) -> SqlResult<usize> {
        let stmt = self.prepared(sql, false)?;
        let values = values(params);
        let r = self.client.execute(&stmt, &refs(&values));
        Ok(self.seen(r)? as usize)
    }

    /// Runs an insert with `RETURNING id`; the id.
    pub fn insert(&mut self, sql: &str, params: &impl Params) -> SqlResult<i64> {
        let stmt = self.prepared(sql, true)?;
        let values = values(params);
        let r = self.client.query_one(&stmt, &refs(&values));
        let row = self.seen(r)?;
        Ok(row.try_get(0)?)
    }

    /// Every row of a query.
    pub fn query(&mut self, sql: &str, params: &impl Params) -> SqlResult<Vec<postgres::Row>> {
        let stmt = self.prepared(sql, false)?;
        let values = values(params);
        let r = self.client.query(&stmt, &refs(&values));
        self.seen(r)
    }

    fn batch(&mut self, sql: &str) -> SqlResult<()> {
        let r = self.client.batch_execute(sql);
        self.seen(r)
    }

    /// Opens a write transaction. Writers take turns on one advisory lock, held to the
    /// commit, as SQLite's `BEGIN IMMEDIATE` makes them; at READ COMMITTED every statement
    /// after it sees every commit made before the lock was granted. So a transaction that
    /// reads a row and changes it on what it read (`transition()`'s compare-and-set: two
    /// racing approvals of one task) cannot be overtaken between the read and the write:
    /// the second approval reads the task as the first left it, and is refused.
    pub fn begin(&mut self) -> SqlResult<()> {
        self.failed = false;
        self.lost = false;
        self.in_tx = true;
        let r = self.client.batch_execute(&format!(
            "BEGIN ISOLATION LEVEL READ COMMITTED; SELECT pg_advisory_xact_lock({WRITE_LOCK})"
        ));
        if r.is_err() {
            self.rollback();
        }
        r.map_err(Error::from)
    }

    /// Commits, unless a statement failed inside (then rolls back and says so).
    pub fn commit(&mut self) -> SqlResult<()> {
        if self.failed || self.lost {
            self.rollback();
            return Err(Error::RolledBack);
        }
        let r = self.client.batch_execute("COMMIT");
        if r.is_ok() {
            self.in_tx = false;
        }
        r.map_err(Error::from)
    }

    /// Rolls the open transaction back, if there is one.
    pub fn rollback(&mut self) {
        if self.in_tx {
            if let Err(e) = self.client.batch_execute("ROLLBACK") {
                tracing::warn!("rolling a PostgreSQL transaction back failed: {e}");
            }
            self.in_tx = false;
        }
    }

    pub fn savepoint(&mut self) -> SqlResult<()> {
        self.batch("SAVEPOINT baton_sp")
    }

    /// Keeps what was done since the savepoint.
    pub fn release(&mut self) -> SqlResult<()> {
        if self.failed {
            return Err(Error::RolledBack);
        }
        self.batch("RELEASE SAVEPOINT baton_sp")
    }

    /// Undoes what was done since the savepoint; the transaction goes on.
    pub fn rollback_to(&mut self) -> SqlResult<()> {
        let r = self
            .client
            .batch_execute("ROLLBACK TO SAVEPOINT baton_sp; RELEASE SAVEPOINT baton_sp");
        match r {
            Ok(()) => {
                self.failed = false;
                Ok(())
            }
            Err(e) => {
                self.lost = true;
                Err(e.into())
            }
        }
    }

    /// A write transaction is open and can still commit something.
    pub fn in_transaction(&self) -> bool {
        self.in_tx && !self.lost && !self.client.is_closed()
    }
}

/// The parameters as values.
fn values(params: &impl Params) -> Vec<Value<'_>> {
    (0..params.count()).map(|i| params.at(i)).collect()
}

fn refs<'a>(values: &'a [Value<'a>]) -> Vec<&'a (dyn ToSql + Sync)> {
    values.iter().map(|v| v as &(dyn ToSql + Sync)).collect()
}

/// The store's text for PostgreSQL: `?N` is `$N` (a bare `?` the next number, as SQLite
/// counts), and SQLite's `INDEXED BY name` hints are left out. String literals, quoted
/// names and comments are copied as they are.
pub fn render(sql: &str) -> String {
    let b = sql.as_bytes();
    let mut out = String::with_capacity(sql.len() + 8);
    let (mut i, mut copied, mut max) = (0, 0, 0u32);
    let word_end = |from: usize| {
        let mut j = from;
        while j < b.len() && (b[j].is_ascii_alphanumeric() || b[j] == b'_') {
            j += 1;
        }
        j
    };
    let space_end = |from: usize| {
        let mut j = from;
        while j < b.len() && b[j].is_ascii_whitespace() {
            j += 1;
        }
        j
    };
    while i < b.len() {
        match b[i] {
            q @ (b'\'' | b'"') => {
                i += 1;
                while i < b.len() {
                    if b[i] == q {
                        if b.get(i + 1) == Some(&q) {
                            i += 2;
                            continue;
                        }
                        break;
                    }
                    i += 1;
                }
                i += 1;
            }
            b'-' if b.get(i + 1) == Some(&b'-') => {
                i = sql[i..].find('\n').map_or(b.len(), |n| i + n);
            }
            b'?' => {
                out.push_str(&sql[copied..i]);
                let end = {
                    let mut j = i + 1;
                    while j < b.len() && b[j].is_ascii_digit() {
                        j += 1;
                    }
                    j
                };
                let n = sql[i + 1..end].parse().unwrap_or(max + 1);
                max = max.max(n);
                out.push('$');
                out.push_str(&n.to_string());
                i = end;
                copied = i;
            }
            c if c.is_ascii_alphabetic() || c == b'_' => {
                let end = word_end(i);
                let by = space_end(end);
                let by_end = word_end(by);
                let name = space_end(by_end);
                if sql[i..end].eq_ignore_ascii_case("INDEXED")
                    && sql[by..by_end].eq_ignore_ascii_case("BY")
                    && name > by_end
                    && word_end(name) > name
                {
                    out.push_str(&sql[copied..i]);
                    i = word_end(name);
                    copied = i;
                } else {
                    i = end;
                }
            }
            _ => i += 1,
        }
    }
    out.push_str(&sql[copied.min(sql.len())..]);
    out
}

/// Column `i` of a row as a [`Value`], borrowed from the row.
pub fn value(row: &postgres::Row, i: usize) -> SqlResult<Value<'_>> {
    let ty = match row.columns().get(i) {
        Some(c) => c.type_(),
        None => {
            return Err(Error::Column {
                index: i,
                detail: format!("the row has {} columns", row.len()),
            });
        }
    };
    let v = if *ty == Type::INT8 {
        row.try_get::<_, Option<i64>>(i)?.map(Value::Int)
    } else if *ty == Type::INT4 {
        row.try_get::<_, Option<i32>>(i)?
            .map(|v| Value::Int(v.into()))
    } else if *ty == Type::INT2 {
        row.try_get::<_, Option<i16>>(i)?
            .map(|v| Value::Int(v.into()))
    } else if *ty == Type::BOOL {
        row.try_get::<_, Option<bool>>(i)?
            .map(|v| Value::Int(v.into()))
    } else if *ty == Type::FLOAT8 {
        row.try_get::<_, Option<f64>>(i)?.map(Value::Real)
    } else if *ty == Type::FLOAT4 {
        row.try_get::<_, Option<f32>>(i)?
            .map(|v| Value::Real(v.into()))
    } else if is_text(ty) {
        row.try_get::<_, Option<&str>>(i)?.map(Value::Text)
    } else if *ty == Type::BYTEA {
        row.try_get::<_, Option<&[u8]>>(i)?.map(Value::Blob)
    } else {
        return Err(Error::Column {
            index: i,
            detail: format!(
                "PostgreSQL's type {ty} is not one the store reads — cast it in the query (BIGINT, DOUBLE PRECISION or TEXT)"
            ),
        });
    };
    Ok(v.unwrap_or(Value::Null))
}

fn is_text(ty: &Type) -> bool {
    [
        Type::TEXT,
        Type::VARCHAR,
        Type::BPCHAR,
        Type::NAME,
        Type::UNKNOWN,
    ]
    .contains(ty)
}

/// A value goes into whatever type PostgreSQL gave its parameter when it prepared the
/// statement, where that type holds it (an integer into INT4 or TEXT too).
impl ToSql for Value<'_> {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        match *self {
            Value::Null => Ok(IsNull::Yes),
            Value::Int(i) if *ty == Type::INT8 => i.to_sql(ty, out),
            Value::Int(i) if *ty == Type::INT4 => i32::try_from(i)?.to_sql(ty, out),
            Value::Int(i) if *ty == Type::INT2 => i16::try_from(i)?.to_sql(ty, out),
            Value::Int(i) if *ty == Type::BOOL => (i != 0).to_sql(ty, out),
            Value::Int(i) if *ty == Type::FLOAT8 => (i as f64).to_sql(ty, out),
            Value::Int(i) if is_text(ty) => i.to_string().as_str().to_sql(ty, out),
            Value::Real(f) if *ty == Type::FLOAT8 => f.to_sql(ty, out),
            Value::Real(f) if *ty == Type::FLOAT4 => (f as f32).to_sql(ty, out),
            Value::Text(s) if is_text(ty) => s.to_sql(ty, out),
            Value::Blob(b) if *ty == Type::BYTEA => b.to_sql(ty, out),
            v => Err(format!(
                "{} cannot go into a parameter of PostgreSQL's type {ty} — cast the parameter in the query",
                v.kind()
            )
            .into()),
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    postgres::types::to_sql_checked!();
}

#[cfg(test)]
mod tests {
    use super::render;

    #[test]
    fn placeholders_become_numbered_and_hints_go() {
        assert_eq!(
            render("SELECT a FROM t INDEXED BY t_x WHERE a = ?1 AND b = ?12 OR c = ?"),
            "SELECT a FROM t  WHERE a = $1 AND b = $12 OR c = $13"
        );
        assert_eq!(
            render("SELECT '?1 INDEXED BY x', \"q?\" -- ?3\nFROM t WHERE x = ?2 || '✓'"),
            "SELECT '?1 INDEXED BY x', \"q?\" -- ?3\nFROM t WHERE x = $2 || '✓'"
        );
        assert_eq!(render("SELECT indexed_by, ?"), "SELECT indexed_by, $1");
    }
}
