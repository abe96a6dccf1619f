//! A PostgreSQL connection as the store's threads use it: each query text rendered from
//! the store's `?N` dialect and prepared once, write transactions that take turns as
//! SQLite's `BEGIN IMMEDIATE` ones do, and values turned into and out of the server's types.
//! A write transaction that changed something sends `NOTIFY baton` before it commits (see
//! [`super::listen`]). A connection that breaks (the server restarted, the network cut) is
//! made again, with backoff, at the next statement outside a transaction.

pub use super::value::value;
use crate::store::sql::{Error, Params, SqlResult, Value};
use postgres::types::ToSql;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// The advisory lock every write transaction takes first (see [`PgConn::begin`]).
const WRITE_LOCK: i64 = 0x6261_746f_6e01;

/// Prepared statements kept per connection, past which the cache starts over.
const CACHE: usize = 512;

/// Set on every store connection, so a stuck peer cannot hold the board's write lock (or a
/// row lock) for good: a wait for a lock gives up after 10 s, a transaction left open and
/// idle (a process frozen halfway) is ended by the server after 10 s, which frees its locks
/// before the other engines' leases run out (15 s by default), and no statement runs past five minutes. The store runs nothing slow inside a
/// transaction, so none of these is reached in normal work.
const SESSION: &str = "SET lock_timeout = '10s'; \
     SET idle_in_transaction_session_timeout = '10s'; SET statement_timeout = '300s'";

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
    /// The open transaction changed rows: its commit notifies listeners.
    changed: bool,
    /// Some of its changes are more than log lines and heartbeats (see [`quiet`]).
    loud: bool,
    /// Where to connect again when the connection breaks (None: it is not made again).
    target: Option<super::PgTarget>,
    /// The connection broke: the next try at connecting, and the wait after that one.
    broken: Option<(Instant, Duration)>,
}

impl PgConn {
    /// A store connection on `client`; made again from `target` when it breaks.
    pub fn new(mut client: postgres::Client, target: Option<super::PgTarget>) -> Self {
        if let Err(e) = client.batch_execute(SESSION) {
            tracing::warn!("setting PostgreSQL's timeouts failed: {e}");
        }
        Self {
            client,
            plain: HashMap::new(),
            returning: HashMap::new(),
            in_tx: false,
            failed: false,
            lost: false,
            changed: false,
            loud: false,
            target,
            broken: None,
        }
    }

    /// Notes a failure inside a transaction (PostgreSQL then refuses its other statements),
    /// and a broken connection.
    fn seen<T>(&mut self, r: Result<T, postgres::Error>) -> SqlResult<T> {
        if let Err(e) = &r {
            if self.in_tx {
                self.failed = true;
            }
            if broken(e) {
                self.broke(&e.to_string());
            }
        }
        r.map_err(Error::from)
    }

    /// Notes that the connection broke: it is made again at the next statement outside a
    /// transaction (said once per outage).
    fn broke(&mut self, why: &str) {
        if self.broken.is_none() {
            let shown = self.target.as_ref().map_or("", |t| t.shown());
            tracing::error!(
                "lost the connection to PostgreSQL {shown}: {why} — connecting again in the background; what cannot be written meanwhile fails"
            );
            self.broken = Some((Instant::now(), super::listen::BACKOFF.0));
        }
    }

    /// Connects again when the connection has broken and the backoff allows a try; an
    /// error when it is still down.
    fn alive(&mut self) -> SqlResult<()> {
        if self.broken.is_none() && self.client.is_closed() {
            self.broke("the connection closed");
        }
        let Some((at, wait)) = self.broken else {
            return Ok(());
        };
        let Some(target) = self.target.clone() else {
            return Err(Error::Down("the connection closed".into()));
        };
        if Instant::now() < at {
            return Err(Error::Down(format!(
                "PostgreSQL at {} cannot be reached; trying again",
                target.shown()
            )));
        }
        // The blocking client cannot connect on a thread that drives a runtime; the
        // store's threads drive none.
        match target.connect() {
            Ok(client) => {
                *self = Self::new(client, Some(target.clone()));
                tracing::info!("PostgreSQL at {} can be reached again", target.shown());
                Ok(())
            }
            Err(e) => {
                let next = (wait * 2).min(super::listen::BACKOFF.1);
                self.broken = Some((Instant::now() + wait, next));
                Err(Error::Down(e))
            }
        }
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

    /// Notes a change by statement `sql`, and whether it is more than a quiet one.
    fn note_change(&mut self, sql: &str) {
        self.changed = true;
        self.loud |= !quiet(sql);
    }

    /// Outside a transaction: the connection made again first if it broke.
    fn ready(&mut self) -> SqlResult<()> {
        if self.in_tx { Ok(()) } else { self.alive() }
    }

    /// Runs a statement; how many rows it changed.
    pub fn execute(&mut self, sql: &str, params: &impl Params) -> SqlResult<usize> {
        self.ready()?;
        let stmt = self.prepared(sql, false)?;
        let values = values(params);
        let r = self.client.execute(&stmt, &refs(&values));
        let n = self.seen(r)? as usize;
        if n > 0 {
            self.note_change(sql);
        }
        Ok(n)
    }

    /// Runs an insert with `RETURNING id`; the id.
    pub fn insert(&mut self, sql: &str, params: &impl Params) -> SqlResult<i64> {
        self.ready()?;
        let stmt = self.prepared(sql, true)?;
        let values = values(params);
        let r = self.client.query_one(&stmt, &refs(&values));
        let row = self.seen(r)?;
        self.note_change(sql);
        Ok(row.try_get(0)?)
    }

    /// Every row of a query. Outside a transaction a query the broken connection lost is
    /// asked again once on a new one (a read; it changed nothing).
    pub fn query(&mut self, sql: &str, params: &impl Params) -> SqlResult<Vec<postgres::Row>> {
        self.ready()?;
        match self.query_once(sql, params) {
            Err(Error::Postgres(e)) if !self.in_tx && broken(&e) => {
                self.broken = self.broken.map(|(_, w)| (Instant::now(), w));
                self.alive()?;
                self.query_once(sql, params)
            }
            other => other,
        }
    }

    fn query_once(&mut self, sql: &str, params: &impl Params) -> SqlResult<Vec<postgres::Row>> {
        let stmt = self.prepared(sql, false)?;
        let values = values(params);
        let r = self.client.query(&stmt, &refs(&values));
        let rows = self.seen(r)?;
        // A statement that changes rows and returns some (`UPDATE … RETURNING`).
        if self.in_tx
            && !rows.is_empty()
            && !sql
                .trim_start()
                .get(..6)
                .is_some_and(|w| w.eq_ignore_ascii_case("SELECT"))
        {
            self.note_change(sql);
        }
        Ok(rows)
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
    /// A connection found broken here is made again (nothing was done on it yet), so the
    /// first write after the database is back succeeds: a write tries at once, whatever
    /// the backoff (reads wait for it).
    pub fn begin(&mut self) -> SqlResult<()> {
        self.broken = self.broken.map(|(_, w)| (Instant::now(), w));
        self.alive()?;
        match self.begin_once() {
            Err(Error::Postgres(e)) if broken(&e) => {
                self.broken = self.broken.map(|(_, w)| (Instant::now(), w));
                self.alive()?;
                self.begin_once()
            }
            other => other,
        }
    }

    fn begin_once(&mut self) -> SqlResult<()> {
        self.failed = false;
        self.lost = false;
        self.changed = false;
        self.loud = false;
        self.in_tx = true;
        let r = self.client.batch_execute(&format!(
            "BEGIN ISOLATION LEVEL READ COMMITTED; SELECT pg_advisory_xact_lock({WRITE_LOCK})"
        ));
        if let Err(e) = &r {
            if broken(e) {
                self.broke(&e.to_string());
            }
            self.rollback();
        }
        r.map_err(Error::from)
    }

    /// Commits, unless a statement failed inside (then rolls back and says so). A
    /// transaction that changed rows notifies listeners; PostgreSQL delivers the
    /// notification only if the commit happens.
    pub fn commit(&mut self) -> SqlResult<()> {
        if self.failed || self.lost {
            self.rollback();
            return Err(Error::RolledBack);
        }
        if self.changed {
            let mark = super::listen::sender_mark();
            let payload = match self.loud {
                true => mark.to_string(),
                false => format!("{mark} {}", super::listen::QUIET),
            };
            let r = self.client.execute(
                "SELECT pg_notify($1, $2)",
                &[&super::listen::CHANNEL, &payload],
            );
            if let Err(e) = r {
                let e = self.seen::<()>(Err(e)).unwrap_err();
                self.rollback();
                return Err(e);
            }
        }
        let r = self.client.batch_execute("COMMIT");
        match r {
            Ok(()) => {
                self.in_tx = false;
                Ok(())
            }
            Err(e) => {
                let e = self.seen::<()>(Err(e)).unwrap_err();
                if self.client.is_closed() {
                    self.in_tx = false;
                }
                Err(e)
            }
        }
    }

    /// Rolls the open transaction back, if there is one.
    pub fn rollback(&mut self) {
        if self.in_tx {
            if self.client.is_closed() {
                // The server ended the transaction with the connection.
            } else if let Err(e) = self.client.batch_execute("ROLLBACK") {
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

/// Changes that give an engine nothing to do (a running step's log lines, an engine's
/// heartbeat): their notification says so, and engines pass over it, so steps running
/// elsewhere do not wake every engine ten times a second.
fn quiet(sql: &str) -> bool {
    let sql = sql.trim_start();
    [
        "INSERT INTO log_lines",
        "UPDATE step_runs SET log_count",
        "UPDATE engines SET heartbeat_at = ?1 ",
        "UPDATE step_runs SET lease_until = ?1 ",
    ]
    .iter()
    .any(|q| sql.starts_with(q))
}

/// True when `e` says the connection is gone: closed, a socket error, or the server
/// shutting down or refusing the connection (SQLSTATE classes 57P and 08).
fn broken(e: &postgres::Error) -> bool {
    if e.is_closed() {
        return true;
    }
    if let Some(db) = e.as_db_error() {
        let code = db.code().code();
        return code.starts_with("57P") || code.starts_with("08");
    }
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        if c.is::<std::io::Error>() {
            return true;
        }
        cause = c.source();
    }
    false
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

#[cfg(test)]
mod tests {
    use super::{quiet, render};

    #[test]
    fn log_lines_and_heartbeats_are_quiet_changes_and_the_rest_are_not() {
        assert!(quiet(
            "INSERT INTO log_lines (step_run_id, stream, ts, line) VALUES (?1)"
        ));
        assert!(quiet(
            "  UPDATE step_runs SET log_count = log_count + ?1 WHERE id = ?2"
        ));
        assert!(quiet(
            "UPDATE engines SET heartbeat_at = ?1 WHERE name = ?2"
        ));
        assert!(!quiet(
            "UPDATE engines SET stopped_at = ?1, heartbeat_at = ?1 WHERE name = ?2"
        ));
        assert!(!quiet(
            "UPDATE step_runs SET state = 'running' WHERE id = ?1"
        ));
        assert!(!quiet(
            "INSERT INTO commands (task_id, body) VALUES (?1, ?2)"
        ));
    }

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
