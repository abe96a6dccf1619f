//! The store's one query layer: the same SQL over SQLite or a PostgreSQL connection.
//!
//! A query is written once, with `?N` placeholders, and run through [`Db`]'s four calls:
//! [`Db::exec`] (rows changed), [`Db::one`] (the first row, [`Error::NoRows`] when there is
//! none; `.optional()` from [`Optional`] makes that `None`), [`Db::all`] (every row) and
//! [`Db::insert`] (the new row's `id`). Parameters are a [`params!`] list or an array;
//! columns are read with [`Row::get`]. For PostgreSQL each text is rendered once (`?N` →
//! `$N`, SQLite's `INDEXED BY` hints dropped) and prepared once per connection; SQLite
//! caches its prepared statements as before.
//!
//! ```ignore
//! use super::sql::{Optional, SqlResult, params};
//!
//! impl Db<'_> {
//!     pub fn add_note(&self, task: i64, text: &str) -> Result<i64> {
//!         Ok(self.insert(
//!             "INSERT INTO notes (task_id, text, at) VALUES (?1, ?2, ?3)",
//!             params![task, text, now_ms()],
//!         )?)
//!     }
//!     pub fn note(&self, id: i64) -> Result<Option<String>> {
//!         Ok(self.one("SELECT text FROM notes WHERE id = ?1", [id], |r| r.get(0)).optional()?)
//!     }
//! }
//! ```
//!
//! SQL both stores read alike:
//! - `INSERT … ON CONFLICT DO NOTHING`, never `INSERT OR IGNORE`; ids from [`Db::insert`],
//!   never `last_insert_rowid()`.
//! - A parameter whose type nothing around it fixes gets a cast: `CAST(?1 AS TEXT) IS NULL`,
//!   `SELECT CAST(?1 AS BIGINT)`, `CAST(?2 AS TEXT) || ':'` (PostgreSQL types parameters
//!   when it prepares the statement; SQLite takes anything).
//! - PostgreSQL's `SUM` of an integer column is NUMERIC: `CAST(SUM(x) AS BIGINT)`. `COUNT`
//!   and `MAX` are BIGINT in both; `EXISTS (…)` reads as a `bool`.
//! - `string_agg(x, ', ')`, not `group_concat`; no SQLite-only functions (`ifnull`,
//!   `printf`, `json_*`), no `rowid`.
//! - Where a query must differ, [`Db::dialect`] picks one of two texts kept side by side.

use super::Db;
use super::pg::conn::PgConn;
use std::cell::RefCell;

/// A value going into a query or coming out of a row, borrowed where it can be.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value<'a> {
    Null,
    Int(i64),
    Real(f64),
    Text(&'a str),
    Blob(&'a [u8]),
}

impl Value<'_> {
    /// What it is, for messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Value::Null => "NULL",
            Value::Int(_) => "an integer",
            Value::Real(_) => "a real",
            Value::Text(_) => "text",
            Value::Blob(_) => "a blob",
        }
    }
}

/// What can go wrong running a query.
#[derive(Debug)]
pub enum Error {
    Sqlite(rusqlite::Error),
    Postgres(postgres::Error),
    /// [`Db::one`] found no row.
    NoRows,
    /// A column could not be read as the type asked for.
    Column {
        index: usize,
        detail: String,
    },
    /// PostgreSQL rolled a write transaction back because one of its statements failed.
    RolledBack,
    /// The PostgreSQL connection is broken and could not be made again yet: why.
    Down(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Sqlite(e) => e.fmt(f),
            Error::Postgres(e) => match e.as_db_error() {
                // 55P03: lock_timeout ran out waiting for the board's write lock.
                Some(db) if db.code().code() == "55P03" => f.write_str(
                    "the board stayed busy for 10 s (another engine or command held its write lock, a frozen or paused process perhaps) — try again; a process stopped mid-write is cut off by the server within seconds",
                ),
                Some(db) => write!(f, "{} ({})", db.message(), db.code().code()),
                None => e.fmt(f),
            },
            Error::NoRows => f.write_str("the query returned no row"),
            Error::Column { index, detail } => write!(f, "column {index}: {detail}"),
            Error::RolledBack => {
                f.write_str("the transaction was rolled back: one of its statements had failed")
            }
            Error::Down(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for Error {}

impl From<rusqlite::Error> for Error {
    fn from(e: rusqlite::Error) -> Self {
        match e {
            rusqlite::Error::QueryReturnedNoRows => Error::NoRows,
            e => Error::Sqlite(e),
        }
    }
}

impl From<postgres::Error> for Error {
    fn from(e: postgres::Error) -> Self {
        Error::Postgres(e)
    }
}

/// Result of a query.
pub type SqlResult<T> = std::result::Result<T, Error>;

/// `.optional()`: no row is `None` rather than [`Error::NoRows`].
pub trait Optional<T> {
    fn optional(self) -> SqlResult<Option<T>>;
}

impl<T> Optional<T> for SqlResult<T> {
    fn optional(self) -> SqlResult<Option<T>> {
        match self {
            Ok(v) => Ok(Some(v)),
            Err(Error::NoRows) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// A value a query takes as a parameter.
pub trait Param {
    fn value(&self) -> Value<'_>;
}

macro_rules! int_param {
    ($($t:ty),+) => {$(
        impl Param for $t {
            fn value(&self) -> Value<'_> {
                Value::Int(i64::from(*self))
            }
        }
    )+};
}
int_param!(i32, u32, u16, u8);

impl Param for i64 {
    fn value(&self) -> Value<'_> {
        Value::Int(*self)
    }
}

impl Param for usize {
    fn value(&self) -> Value<'_> {
        Value::Int(i64::try_from(*self).unwrap_or(i64::MAX))
    }
}

impl Param for bool {
    fn value(&self) -> Value<'_> {
        Value::Int(i64::from(*self))
    }
}

impl Param for f64 {
    fn value(&self) -> Value<'_> {
        Value::Real(*self)
    }
}

impl Param for str {
    fn value(&self) -> Value<'_> {
        Value::Text(self)
    }
}

impl Param for String {
    fn value(&self) -> Value<'_> {
        Value::Text(self)
    }
}

impl Param for [u8] {
    fn value(&self) -> Value<'_> {
        Value::Blob(self)
    }
}

impl Param for Vec<u8> {
    fn value(&self) -> Value<'_> {
        Value::Blob(self)
    }
}

impl Param for Value<'_> {
    fn value(&self) -> Value<'_> {
        *self
    }
}

impl<T: Param> Param for Option<T> {
    fn value(&self) -> Value<'_> {
        self.as_ref().map_or(Value::Null, Param::value)
    }
}

impl<T: Param + ?Sized> Param for &T {
    fn value(&self) -> Value<'_> {
        (**self).value()
    }
}

/// A query's parameters, `?1` first: a [`params!`] list, an array (`[id]`, `[]`), or a
/// type of one's own that hands out many without building a list (a batch of rows).
pub trait Params {
    /// How many.
    fn count(&self) -> usize;
    /// Parameter `?{i + 1}`.
    fn at(&self, i: usize) -> Value<'_>;
}

impl Params for &[&dyn Param] {
    fn count(&self) -> usize {
        self.len()
    }
    fn at(&self, i: usize) -> Value<'_> {
        self[i].value()
    }
}

impl Params for [&dyn Param; 0] {
    fn count(&self) -> usize {
        0
    }
    fn at(&self, _: usize) -> Value<'_> {
        Value::Null
    }
}

macro_rules! array_params {
    ($($n:literal)+) => {$(
        impl<T: Param> Params for [T; $n] {
            fn count(&self) -> usize {
                $n
            }
            fn at(&self, i: usize) -> Value<'_> {
                self[i].value()
            }
        }
    )+};
}
array_params!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16);

/// A query's parameters of different types: `params![id, title, state]`, as rusqlite's.
macro_rules! params {
    () => {
        &[] as &[&dyn $crate::store::sql::Param]
    };
    ($($p:expr),+ $(,)?) => {
        &[$(&$p as &dyn $crate::store::sql::Param),+] as &[&dyn $crate::store::sql::Param]
    };
}
pub(crate) use params;

/// A type a column is read as.
pub trait FromValue: Sized {
    /// `Err` says what was found instead.
    fn from_value(v: Value<'_>) -> Result<Self, String>;
}

fn wrong(wanted: &str, v: Value<'_>) -> String {
    format!("expected {wanted}, found {}", v.kind())
}

impl FromValue for i64 {
    fn from_value(v: Value<'_>) -> Result<Self, String> {
        match v {
            Value::Int(i) => Ok(i),
            v => Err(wrong("an integer", v)),
        }
    }
}

macro_rules! small_int {
    ($($t:ty),+) => {$(
        impl FromValue for $t {
            fn from_value(v: Value<'_>) -> Result<Self, String> {
                let i = i64::from_value(v)?;
                <$t>::try_from(i).map_err(|_| format!("{i} is out of range"))
            }
        }
    )+};
}
small_int!(i32, u32, u64, usize);

impl FromValue for bool {
    fn from_value(v: Value<'_>) -> Result<Self, String> {
        Ok(i64::from_value(v)? != 0)
    }
}

impl FromValue for f64 {
    fn from_value(v: Value<'_>) -> Result<Self, String> {
        match v {
            Value::Real(f) => Ok(f),
            Value::Int(i) => Ok(i as f64),
            v => Err(wrong("a real", v)),
        }
    }
}

impl FromValue for String {
    fn from_value(v: Value<'_>) -> Result<Self, String> {
        match v {
            Value::Text(s) => Ok(s.to_string()),
            v => Err(wrong("text", v)),
        }
    }
}

impl FromValue for Vec<u8> {
    fn from_value(v: Value<'_>) -> Result<Self, String> {
        match v {
            Value::Blob(b) => Ok(b.to_vec()),
            Value::Text(s) => Ok(s.as_bytes().to_vec()),
            v => Err(wrong("a blob", v)),
        }
    }
}

impl<T: FromValue> FromValue for Option<T> {
    fn from_value(v: Value<'_>) -> Result<Self, String> {
        match v {
            Value::Null => Ok(None),
            v => T::from_value(v).map(Some),
        }
    }
}

/// One row of a result.
pub struct Row<'r>(RowRef<'r>);

enum RowRef<'r> {
    Sqlite(&'r rusqlite::Row<'r>),
    Postgres(&'r postgres::Row),
}

impl<'r> Row<'r> {
    /// Column `i` (from 0) as `T`.
    pub fn get<T: FromValue>(&self, i: usize) -> SqlResult<T> {
        let v = self.value(i)?;
        T::from_value(v).map_err(|detail| Error::Column { index: i, detail })
    }

    /// Column `i` as it is stored, borrowed from the row.
    pub fn value(&self, i: usize) -> SqlResult<Value<'_>> {
        match self.0 {
            RowRef::Sqlite(r) => {
                use rusqlite::types::ValueRef;
                Ok(match r.get_ref(i)? {
                    ValueRef::Null => Value::Null,
                    ValueRef::Integer(i) => Value::Int(i),
                    ValueRef::Real(f) => Value::Real(f),
                    ValueRef::Text(t) => {
                        Value::Text(std::str::from_utf8(t).map_err(|e| Error::Column {
                            index: i,
                            detail: format!("not UTF-8: {e}"),
                        })?)
                    }
                    ValueRef::Blob(b) => Value::Blob(b),
                })
            }
            RowRef::Postgres(r) => super::pg::conn::value(r, i),
        }
    }
}

impl rusqlite::ToSql for Value<'_> {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::{ToSqlOutput, ValueRef};
        Ok(ToSqlOutput::Borrowed(match *self {
            Value::Null => ValueRef::Null,
            Value::Int(i) => ValueRef::Integer(i),
            Value::Real(f) => ValueRef::Real(f),
            Value::Text(s) => ValueRef::Text(s.as_bytes()),
            Value::Blob(b) => ValueRef::Blob(b),
        }))
    }
}

/// The connection a [`Db`] runs on.
#[derive(Clone, Copy)]
pub(super) enum Conn<'c> {
    Sqlite(&'c rusqlite::Connection),
    Postgres(&'c RefCell<PgConn>),
}

/// Binds `params` to a cached SQLite statement, checking their number as rusqlite does.
fn bind(stmt: &mut rusqlite::Statement<'_>, params: &impl Params) -> SqlResult<()> {
    let (given, wanted) = (params.count(), stmt.parameter_count());
    if given != wanted {
        return Err(Error::Sqlite(rusqlite::Error::InvalidParameterCount(
            given, wanted,
        )));
    }
    for i in 0..given {
        stmt.raw_bind_parameter(i + 1, params.at(i))?;
    }
    Ok(())
}

impl Db<'_> {
    /// Runs a statement; returns how many rows it changed.
    pub(super) fn exec<P: Params>(&self, sql: &str, params: P) -> SqlResult<usize> {
        match self.conn {
            Conn::Sqlite(c) => {
                let mut stmt = c.prepare_cached(sql)?;
                bind(&mut stmt, &params)?;
                Ok(stmt.raw_execute()?)
            }
            Conn::Postgres(pg) => pg.borrow_mut().execute(sql, &params),
        }
    }

    /// Runs an `INSERT` into a table whose key is `id`; returns the new row's id.
    pub(super) fn insert<P: Params>(&self, sql: &str, params: P) -> SqlResult<i64> {
        match self.conn {
            Conn::Sqlite(c) => {
                let mut stmt = c.prepare_cached(sql)?;
                bind(&mut stmt, &params)?;
                stmt.raw_execute()?;
                Ok(c.last_insert_rowid())
            }
            Conn::Postgres(pg) => pg.borrow_mut().insert(sql, &params),
        }
    }

    /// The first row of a query, through `f`; [`Error::NoRows`] when there is none.
    pub(super) fn one<T, P, F>(&self, sql: &str, params: P, f: F) -> SqlResult<T>
    where
        P: Params,
        F: FnOnce(&Row<'_>) -> SqlResult<T>,
    {
        match self.conn {
            Conn::Sqlite(c) => {
                let mut stmt = c.prepare_cached(sql)?;
                bind(&mut stmt, &params)?;
                let mut rows = stmt.raw_query();
                match rows.next()? {
                    Some(r) => f(&Row(RowRef::Sqlite(r))),
                    None => Err(Error::NoRows),
                }
            }
            Conn::Postgres(pg) => {
                let rows = pg.borrow_mut().query(sql, &params)?;
                match rows.first() {
                    Some(r) => f(&Row(RowRef::Postgres(r))),
                    None => Err(Error::NoRows),
                }
            }
        }
    }

    /// Every row of a query, each through `f`.
    pub(super) fn all<T, P, F>(&self, sql: &str, params: P, mut f: F) -> SqlResult<Vec<T>>
    where
        P: Params,
        F: FnMut(&Row<'_>) -> SqlResult<T>,
    {
        match self.conn {
            Conn::Sqlite(c) => {
                let mut stmt = c.prepare_cached(sql)?;
                bind(&mut stmt, &params)?;
                let mut rows = stmt.raw_query();
                let mut out = Vec::new();
                while let Some(r) = rows.next()? {
                    out.push(f(&Row(RowRef::Sqlite(r)))?);
                }
                Ok(out)
            }
            Conn::Postgres(pg) => {
                let rows = pg.borrow_mut().query(sql, &params)?;
                rows.iter().map(|r| f(&Row(RowRef::Postgres(r)))).collect()
            }
        }
    }

    /// The text for this store of a query that must differ: SQLite's, else PostgreSQL's.
    pub(super) fn dialect<'s>(&self, sqlite: &'s str, postgres: &'s str) -> &'s str {
        match self.conn {
            Conn::Sqlite(_) => sqlite,
            Conn::Postgres(_) => postgres,
        }
    }

    /// True on a PostgreSQL board.
    pub fn is_postgres(&self) -> bool {
        matches!(self.conn, Conn::Postgres(_))
    }

    /// A transaction is open and can still commit: false on SQLite once an error rolled
    /// it back, and on PostgreSQL once any statement in it failed (which aborts it).
    pub(super) fn in_transaction(&self) -> bool {
        match self.conn {
            Conn::Sqlite(c) => !c.is_autocommit(),
            Conn::Postgres(p) => p.borrow().in_transaction(),
        }
    }
}
