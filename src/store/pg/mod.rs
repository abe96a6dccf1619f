//! The board in PostgreSQL: its schema (`baton db status|migrate`), its rows in and out
//! (`baton db export|import`), its checks (`baton db verify`), and the connection the
//! store's queries run on (`conn`).
//!
//! The crate is `postgres`, the blocking face of `tokio-postgres` (rust-postgres): the
//! store's model is one thread owning its connection and running each transaction as a
//! closure, and rusqlite is blocking too, so the query layer can be one set of blocking
//! calls over either backend. Queries are built at run time (tables and columns are read
//! from the database), which `tokio-postgres` takes as plain strings with typed
//! parameters. Its async side gives LISTEN/NOTIFY (`AsyncMessage::Notification`) on a
//! connection of its own when several engines share a board; a pool (deadpool-postgres)
//! waits until more than the store's own threads need connections. It is far lighter than
//! sqlx (no macros, no second SQLite driver next to rusqlite). No TLS yet.

pub(super) mod conn;
pub(super) mod ddl;
mod dump;
pub mod listen;
mod open;
pub mod target;
mod value;

use super::{Result, StoreError, schema};
pub use target::{PgTarget, UrlSource};

/// The table that records the schema version (SQLite keeps it in `PRAGMA user_version`).
const VERSION_TABLE: &str = "baton_schema";

/// Serialises migrations and imports from several processes (an advisory lock's key).
const LOCK_KEY: i64 = 0x6261_746f_6e00;

/// One connection to a PostgreSQL board.
pub struct PgStore {
    client: postgres::Client,
    target: PgTarget,
}

/// A failure talking to PostgreSQL, as a sentence that names the (redacted) URL.
fn pg_err(target: &PgTarget, e: postgres::Error) -> StoreError {
    let detail = match e.as_db_error() {
        Some(db) => format!("{} ({})", db.message(), db.code().code()),
        None => e.to_string(),
    };
    StoreError::Postgres(format!("PostgreSQL at {}: {detail}", target.shown()))
}

impl PgStore {
    /// Connects; changes nothing.
    pub fn connect(target: &PgTarget) -> Result<Self> {
        let client = target.connect().map_err(StoreError::Postgres)?;
        Ok(Self {
            client,
            target: target.clone(),
        })
    }

    /// The connection, for the store's queries.
    pub(super) fn into_client(self) -> postgres::Client {
        self.client
    }

    /// The URL, password redacted.
    pub fn shown(&self) -> &str {
        self.target.shown()
    }

    /// The schema version the board is at; `None` when baton has made no schema there.
    pub fn schema_version(&mut self) -> Result<Option<i64>> {
        let target = self.target.clone();
        let exists = self
            .client
            .query_one("SELECT to_regclass($1) IS NOT NULL", &[&VERSION_TABLE])
            .map_err(|e| pg_err(&target, e))?
            .get::<_, bool>(0);
        if !exists {
            return Ok(None);
        }
        let row = self
            .client
            .query_opt(&format!("SELECT version FROM {VERSION_TABLE}"), &[])
            .map_err(|e| pg_err(&target, e))?;
        Ok(Some(row.map_or(0, |r| r.get(0))))
    }

    /// Applies the missing migrations, each in one transaction under an advisory lock, and
    /// returns the version found before.
    pub fn migrate(&mut self) -> Result<Option<i64>> {
        let before = self.schema_version()?;
        if let Some(v) = before
            && v > schema::SCHEMA_VERSION
        {
            return Err(StoreError::Postgres(format!(
                "the board at {} was written by a newer baton (schema {v}, this one knows {}) — upgrade baton",
                self.shown(),
                schema::SCHEMA_VERSION
            )));
        }
        let target = self.target.clone();
        let e = |e| pg_err(&target, e);
        for i in 0..schema::MIGRATIONS.len() {
            let sql = schema::for_postgres(i).map_err(StoreError::Postgres)?;
            let mut tx = self.client.transaction().map_err(e)?;
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&LOCK_KEY])
                .map_err(e)?;
            tx.batch_execute(&format!(
                "CREATE TABLE IF NOT EXISTS {VERSION_TABLE} (version BIGINT NOT NULL)"
            ))
            .map_err(e)?;
            let now: i64 = tx
                .query_opt(&format!("SELECT version FROM {VERSION_TABLE}"), &[])
                .map_err(e)?
                .map_or(0, |r| r.get(0));
            if now > i as i64 {
                continue;
            }
            tx.batch_execute(&sql).map_err(|err| {
                StoreError::Postgres(format!(
                    "PostgreSQL at {}: migration {} failed: {} — nothing of it was applied",
                    target.shown(),
                    i + 1,
                    err.as_db_error()
                        .map_or(err.to_string(), |d| d.message().to_string())
                ))
            })?;
            tx.execute(&format!("DELETE FROM {VERSION_TABLE}"), &[])
                .map_err(e)?;
            tx.execute(
                &format!("INSERT INTO {VERSION_TABLE} (version) VALUES ($1)"),
                &[&(i as i64 + 1)],
            )
            .map_err(e)?;
            tx.commit().map_err(e)?;
        }
        Ok(before)
    }

    /// Refuses a board that is not at this baton's schema, for commands that read rows.
    fn require_current(&mut self) -> Result<()> {
        match self.schema_version()? {
            Some(v) if v == schema::SCHEMA_VERSION => Ok(()),
            Some(v) if v > schema::SCHEMA_VERSION => Err(StoreError::Postgres(format!(
                "the board at {} was written by a newer baton (schema {v}, this one knows {}) — upgrade baton",
                self.shown(),
                schema::SCHEMA_VERSION
            ))),
            found => Err(StoreError::Postgres(format!(
                "the board at {} is at schema {}, and this baton writes {} — run `baton db migrate`",
                self.shown(),
                found.unwrap_or(0),
                schema::SCHEMA_VERSION
            ))),
        }
    }

    /// What `baton db verify` finds: rows that point at nothing or do not fit together.
    /// PostgreSQL enforces the foreign keys itself and checks its own pages, so what is
    /// left are the links no key covers and the execution keys.
    pub fn verify(&mut self) -> Result<Vec<String>> {
        self.require_current()?;
        let target = self.target.clone();
        let mut found = Vec::new();
        for (sql, what) in super::verify::UNLINKED {
            let rows = self
                .client
                .query(*sql, &[])
                .map_err(|e| pg_err(&target, e))?;
            for r in rows {
                found.push(what.replace("{}", &r.get::<_, i64>(0).to_string()));
            }
        }
        Ok(found)
    }
}

/// The board's tables in the order they were made (the schema version's own left out).
fn tables(
    tx: &mut impl postgres::GenericClient,
) -> std::result::Result<Vec<String>, postgres::Error> {
    let rows = tx.query(
        "SELECT c.relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
         WHERE n.nspname = current_schema() AND c.relkind = 'r' AND c.relname <> $1 \
         ORDER BY c.oid",
        &[&VERSION_TABLE],
    )?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

/// Where a board lives: a SQLite file (the default) or a PostgreSQL database.
#[derive(Debug, Clone)]
pub enum Location {
    /// `.baton/baton.db`, or another file.
    Sqlite(std::path::PathBuf),
    /// `[store] store = "postgres://…"` or `BATON_DATABASE_URL`.
    Postgres(Box<PgTarget>),
}

impl Location {
    /// Where the board is: `BATON_DATABASE_URL` wins over the config's `[store] store`
    /// (`setting`, with the file it came from); with neither, the SQLite file `db`.
    pub fn resolve(
        db: &std::path::Path,
        env: Option<&str>,
        setting: Option<(&str, &std::path::Path)>,
    ) -> std::result::Result<Self, String> {
        match (env.filter(|e| !e.trim().is_empty()), setting) {
            (Some(url), _) => Ok(Self::Postgres(Box::new(PgTarget::parse(
                url,
                UrlSource::Env,
            )?))),
            (None, Some((url, file))) => Ok(Self::Postgres(Box::new(PgTarget::parse(
                url,
                UrlSource::File(file),
            )?))),
            (None, None) => Ok(Self::Sqlite(db.to_path_buf())),
        }
    }
}
