//! A real PostgreSQL server for the `pg` rows, started by the bench itself: `initdb` in a
//! temp dir and `pg_ctl` on a free port of 127.0.0.1, password (SCRAM) logins over TCP, as
//! a team's server would have them. PostgreSQL refuses to run as root, so under root the
//! server runs as `nobody`. The binaries come from `BATON_PG_BIN`, else the newest
//! `/usr/lib/postgresql/*/bin` (Debian's `postgresql`), else `PATH`, as for the tests
//! (tests/pg_support/mod.rs, which panics where a row must say why, and runs with
//! `fsync=off`, where the bench wants a server's default durability).
//!
//! Unlike the tests' server this one keeps PostgreSQL's defaults (`fsync`, `synchronous_commit`
//! on): each commit waits for its WAL to reach the disk, as it would on a team's server.
//! `BATON_BENCH_PG_OPTS` adds server options (`-c synchronous_commit=off`, say) to see what
//! a setting is worth. `pg_stat_statements` is loaded where the server has it, to count the
//! statements baton sends.
//!
//! Each measured run gets a database of its own, copied from a template that
//! `baton db migrate` filled once, so rows never see each other's tasks.

use crate::proc;
use crate::workspace::Ws;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The login the server is made with.
const USER: &str = "baton";
/// Its password (handed to baton through `PGPASSWORD` only, never in the URL).
const PASSWORD: &str = "pg-bench-s3cret";
/// The database every measured one is copied from.
const TEMPLATE: &str = "board_template";
/// initdb, pg_ctl and psql-free setup commands get this long each.
const SETUP: Duration = Duration::from_secs(120);

/// A running server, stopped when dropped.
pub struct Server {
    dir: tempfile::TempDir,
    bin: PathBuf,
    port: u16,
    /// `pg_stat_statements` is loaded.
    statements: bool,
    /// Databases made so far (their names are numbered).
    made: std::cell::Cell<usize>,
}

#[path = "../../tests/pg_support/server.rs"]
mod server;
use server::{as_owner, bin_dir};

fn free_port() -> Result<u16, String> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("no free port on 127.0.0.1: {e}"))
}

/// `pg_stat_statements` is among the server's libraries (`pkglibdir`, beside `bin`).
fn has_pg_stat_statements(bin: &Path) -> bool {
    let lib = Command::new(bin.join("pg_config"))
        .arg("--pkglibdir")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| PathBuf::from(s.trim()))
        .or_else(|| bin.parent().map(|p| p.join("lib")));
    lib.is_some_and(|l| l.join("pg_stat_statements.so").exists())
}

impl Server {
    /// Makes and starts a server with a migrated template board; `Ok(None)` when PostgreSQL
    /// is not installed here (the rows are then not measured), an error when it is but does
    /// not start.
    pub fn start(bin: &Path) -> Result<Option<Self>, String> {
        let Some(pg_bin) = bin_dir() else {
            return Ok(None);
        };
        let mut dir = tempfile::Builder::new()
            .prefix("baton-bench-pg-")
            .tempdir()
            .map_err(|e| format!("cannot make a temp dir: {e}"))?;
        if std::env::var_os("BATON_BENCH_KEEP").is_some() {
            eprintln!("  keeping {}", dir.path().display());
            dir.disable_cleanup(true);
        }
        if nix::unistd::geteuid().is_root() {
            nix::unistd::chown(
                dir.path(),
                Some(nix::unistd::Uid::from_raw(65534)),
                Some(nix::unistd::Gid::from_raw(65534)),
            )
            .map_err(|e| format!("cannot give {} to nobody: {e}", dir.path().display()))?;
        }
        let pwfile = dir.path().join("pw");
        std::fs::write(&pwfile, PASSWORD).map_err(|e| format!("cannot write {pwfile:?}: {e}"))?;
        let data = dir.path().join("data");
        let what = format!("{}", pg_bin.join("initdb").display());
        proc::run(
            as_owner(Command::new(pg_bin.join("initdb")).args([
                "-D".as_ref(),
                data.as_os_str(),
                "-U".as_ref(),
                USER.as_ref(),
                "--pwfile".as_ref(),
                pwfile.as_os_str(),
                "--auth-local=trust".as_ref(),
                "--auth-host=scram-sha-256".as_ref(),
                "-E".as_ref(),
                "UTF8".as_ref(),
                "--locale=C".as_ref(),
                // The cluster's files need not be synced now: the rows measure commits.
                "--no-sync".as_ref(),
            ])),
            SETUP,
            &what,
        )?
        .ok(&what)?;
        let mut server = Self {
            statements: has_pg_stat_statements(&pg_bin),
            dir,
            bin: pg_bin,
            port: 0,
            made: std::cell::Cell::new(0),
        };
        server.listen()?;
        server.template(bin)?;
        Ok(Some(server))
    }

    /// `pg_ctl start` on a free port; another process may take the port between asking
    /// and starting, so up to five tries.
    fn listen(&mut self) -> Result<(), String> {
        let log = self.dir.path().join("log");
        let extra = std::env::var("BATON_BENCH_PG_OPTS").unwrap_or_default();
        let preload = if self.statements {
            " -c shared_preload_libraries=pg_stat_statements"
        } else {
            ""
        };
        for _ in 0..5 {
            let port = free_port()?;
            let opts = format!(
                "-p {port} -k {} -c listen_addresses=127.0.0.1{preload} {extra}",
                self.dir.path().display()
            );
            let what = "pg_ctl start";
            let done = proc::run(
                as_owner(
                    Command::new(self.bin.join("pg_ctl"))
                        .arg("-D")
                        .arg(self.dir.path().join("data"))
                        .arg("-l")
                        .arg(&log)
                        .args(["-w", "-t", "60", "-o", &opts, "start"]),
                ),
                SETUP,
                what,
            )?;
            if done.status.success() {
                self.port = port;
                return Ok(());
            }
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            if !text.contains("could not bind") {
                let last = text.lines().last().unwrap_or("(empty log)");
                return Err(format!("PostgreSQL did not start: {last}"));
            }
        }
        Err("no free port for PostgreSQL after five tries".into())
    }

    /// The template board: an empty database brought to baton's schema by `baton db
    /// migrate` (run by the measured binary itself), then copied for each run.
    fn template(&self, bin: &Path) -> Result<(), String> {
        self.sql("postgres", &format!("CREATE DATABASE {TEMPLATE}"))?;
        if self.statements {
            self.sql(
                "postgres",
                "CREATE EXTENSION IF NOT EXISTS pg_stat_statements",
            )?;
        }
        let ws = Ws::with_env(bin, self.env(TEMPLATE))?;
        ws.cli(&["db", "migrate"])?;
        Ok(())
    }

    /// The URL of database `db`, without the password.
    fn url(&self, db: &str) -> String {
        format!("postgres://{USER}@127.0.0.1:{}/{db}", self.port)
    }

    /// What every `baton` command on database `db` gets in its environment.
    pub fn env(&self, db: &str) -> Vec<(String, String)> {
        vec![
            ("BATON_DATABASE_URL".into(), self.url(db)),
            ("PGPASSWORD".into(), PASSWORD.into()),
        ]
    }

    /// A client of database `db`, for the bench's own setup and looks.
    pub fn client(&self, db: &str) -> Result<postgres::Client, String> {
        postgres::Config::new()
            .host("127.0.0.1")
            .port(self.port)
            .user(USER)
            .password(PASSWORD)
            .dbname(db)
            .connect(postgres::NoTls)
            .map_err(|e| format!("cannot connect to the bench's PostgreSQL: {e}"))
    }

    fn sql(&self, db: &str, sql: &str) -> Result<(), String> {
        self.client(db)?
            .batch_execute(sql)
            .map_err(|e| format!("PostgreSQL refused `{sql}`: {e}"))
    }

    /// A fresh board: a new database copied from the template. Its name.
    pub fn fresh(&self) -> Result<String, String> {
        let n = self.made.get() + 1;
        self.made.set(n);
        let db = format!("board_{n}");
        // CREATE DATABASE waits up to 5 s for the template's last connections to close.
        self.sql(
            "postgres",
            &format!("CREATE DATABASE {db} TEMPLATE {TEMPLATE}"),
        )?;
        Ok(db)
    }

    /// A plain workspace on a fresh board. Its database's name too.
    pub fn workspace(&self, bin: &Path) -> Result<(Ws, String), String> {
        let db = self.fresh()?;
        Ok((Ws::with_env(bin, self.env(&db))?, db))
    }

    /// What the server did for database `db` so far, once every connection to it has
    /// closed (a backend's counts reach the statistics as it exits).
    pub fn work(&self, db: &str) -> Result<Work, String> {
        let mut c = self.client("postgres")?;
        let e = |e: postgres::Error| format!("reading PostgreSQL's statistics: {e}");
        let until = Instant::now() + Duration::from_secs(10);
        while c
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = $1",
                &[&db],
            )
            .map_err(e)?
            .get::<_, i64>(0)
            > 0
            && Instant::now() < until
        {
            std::thread::sleep(Duration::from_millis(50));
        }
        std::thread::sleep(Duration::from_millis(300));
        // `sessions` and `pg_stat_wal` are PostgreSQL 14's.
        let version: i32 = c
            .query_one("SELECT current_setting('server_version_num')::int", &[])
            .map_err(e)?
            .get(0);
        let (sessions, flushes): (Option<i64>, Option<i64>) = if version >= 140_000 {
            let r = c
                .query_one(
                    "SELECT (SELECT sessions FROM pg_stat_database WHERE datname = $1), \
                     (SELECT wal_sync FROM pg_stat_wal)",
                    &[&db],
                )
                .map_err(e)?;
            (r.get(0), r.get(1))
        } else {
            (None, None)
        };
        // Every write transaction of baton's begins `BEGIN ISOLATION LEVEL READ COMMITTED`.
        let (writes, statements): (Option<i64>, Option<i64>) = if self.statements {
            let r = c
                .query_one(
                    "SELECT sum(calls) FILTER (WHERE query LIKE 'BEGIN%')::bigint, \
                     sum(calls)::bigint FROM pg_stat_statements s \
                     JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = $1",
                    &[&db],
                )
                .map_err(e)?;
            (
                Some(r.get::<_, Option<i64>>(0).unwrap_or(0)),
                Some(r.get::<_, Option<i64>>(1).unwrap_or(0)),
            )
        } else {
            (None, None)
        };
        let n = |v: Option<i64>| v.map(|v| v as u64);
        Ok(Work {
            writes: n(writes),
            statements: n(statements),
            sessions: n(sessions),
            flushes: n(flushes),
        })
    }
}

/// What the server did for one database, where it can count it: baton's write
/// transactions and statements (with `pg_stat_statements`), connections opened, and WAL
/// flushes (`pg_stat_wal`, the whole server's: the bench runs one thing at a time).
pub struct Work {
    pub writes: Option<u64>,
    pub statements: Option<u64>,
    pub sessions: Option<u64>,
    pub flushes: Option<u64>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = as_owner(
            Command::new(self.bin.join("pg_ctl"))
                .arg("-D")
                .arg(self.dir.path().join("data"))
                .args(["-m", "immediate", "-w", "stop"]),
        )
        .output();
    }
}

/// Why the rows are not measured here, in one sentence.
pub const MISSING: &str = "PostgreSQL is not installed here (no initdb and pg_ctl in BATON_PG_BIN, /usr/lib/postgresql/*/bin or PATH): install Debian's postgresql to measure these rows";
