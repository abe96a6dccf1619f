//! The stores the store's tests run on: a SQLite file, and a database of its own in a real
//! PostgreSQL server started once per test binary (with the integration tests' helper),
//! made from a template that already has the schema. Where PostgreSQL is missing the
//! PostgreSQL half of each test says SKIPPED in one line, or fails under
//! `BATON_REQUIRE_INFRA=1`.

#[path = "../../tests/infra/mod.rs"]
mod infra;
#[path = "../../tests/pg_support/mod.rs"]
mod pg_support;

use super::{PgTarget, Reads, Store, StoreHandle, pg::UrlSource};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};

/// The server, stopped when the test binary exits.
static SERVER: Mutex<Option<pg_support::Pg>> = Mutex::new(None);
/// Whether starting it was tried (and its port, when it runs).
static STARTED: std::sync::OnceLock<Option<u16>> = std::sync::OnceLock::new();
/// Databases made so far.
static MADE: AtomicU32 = AtomicU32::new(0);

const TEMPLATE: &str = "baton_template";

unsafe extern "C" {
    fn atexit(f: extern "C" fn()) -> std::os::raw::c_int;
}

extern "C" fn stop_server() {
    // Dropping it stops the server and removes its folder.
    if let Ok(mut server) = SERVER.lock() {
        server.take();
    }
}

/// The target of database `db` on the test server at `port`.
fn target(port: u16, db: &str) -> PgTarget {
    let url = format!(
        "postgres://{}:{}@127.0.0.1:{port}/{db}",
        pg_support::USER,
        pg_support::PASSWORD
    );
    PgTarget::parse(&url, UrlSource::Env).expect("the test server's URL")
}

/// The server's port, starting it (and making the template) on first use.
fn server() -> Option<u16> {
    *STARTED.get_or_init(|| {
        let pg = pg_support::Pg::start()?;
        let port = pg.port;
        pg.create_db(TEMPLATE);
        *SERVER.lock().unwrap_or_else(|e| e.into_inner()) = Some(pg);
        // SAFETY: registers a plain function with the C library, once.
        unsafe {
            atexit(stop_server);
        }
        // Migrated once; every test's database is a copy.
        drop(Store::open_postgres(&target(port, TEMPLATE)).expect("migrate the template"));
        Some(port)
    })
}

/// Where one test's board lives.
pub enum Board {
    Sqlite(tempfile::TempDir),
    Postgres { target: Box<PgTarget>, db: String },
}

impl Board {
    /// A new SQLite file.
    pub fn sqlite() -> Self {
        Board::Sqlite(tempfile::tempdir().expect("tempdir"))
    }

    /// A new PostgreSQL database with the schema; `None` (after saying so) when there is
    /// no PostgreSQL here.
    pub fn postgres() -> Option<Self> {
        // The blocking client cannot run on an async test's thread: on one of its own.
        std::thread::scope(|s| {
            s.spawn(Self::make_postgres)
                .join()
                .expect("make a database")
        })
    }

    fn make_postgres() -> Option<Self> {
        let port = server()?;
        let db = format!(
            "board_{}_{}",
            std::process::id(),
            MADE.fetch_add(1, Ordering::Relaxed)
        );
        let server = SERVER.lock().unwrap_or_else(|e| e.into_inner());
        let pg = server.as_ref().expect("the server runs");
        pg.client("postgres")
            .batch_execute(&format!("CREATE DATABASE {db} TEMPLATE {TEMPLATE}"))
            .expect("create a test database");
        Some(Board::Postgres {
            target: Box::new(target(port, &db)),
            db,
        })
    }

    /// A connection of its own.
    pub fn open(&self) -> Store {
        match self {
            Board::Sqlite(dir) => Store::open(&dir.path().join("t.db")).expect("open"),
            Board::Postgres { target, .. } => Store::open_postgres(target).expect("open"),
        }
    }

    /// A store handle of its own.
    pub fn handle(&self) -> StoreHandle {
        self.handle_with(Reads::Apart)
    }

    /// A store handle of its own, its reads as `reads` says.
    pub fn handle_with(&self, reads: Reads) -> StoreHandle {
        match (self, reads) {
            (Board::Sqlite(dir), Reads::Apart) => {
                StoreHandle::open(&dir.path().join("t.db")).expect("open")
            }
            (Board::Sqlite(_), Reads::OnWriter) => {
                StoreHandle::from_writer(self.open()).expect("open")
            }
            (Board::Postgres { target, .. }, reads) => {
                StoreHandle::open_postgres(target, reads).expect("open")
            }
        }
    }

    /// A plain client of the PostgreSQL database, for a test's own looks.
    pub fn pg_client(&self) -> Option<postgres::Client> {
        let Board::Postgres { db, .. } = self else {
            return None;
        };
        let server = SERVER.lock().unwrap_or_else(|e| e.into_inner());
        Some(server.as_ref()?.client(db))
    }
}

/// Declares a test that runs on each store, as `NAME::sqlite` and `NAME::postgres`:
/// `both!(fn name(board) { … })`, or `both!(async fn …)` for a tokio test.
macro_rules! both {
    (fn $name:ident($board:ident) $body:block) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            #[test]
            fn sqlite() {
                let $board = $crate::store::testdb::Board::sqlite();
                $body
            }
            #[test]
            fn postgres() {
                let Some($board) = $crate::store::testdb::Board::postgres() else {
                    return;
                };
                $body
            }
        }
    };
    (async fn $name:ident($board:ident) $body:block) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            #[tokio::test(flavor = "current_thread")]
            async fn sqlite() {
                let $board = $crate::store::testdb::Board::sqlite();
                $body
            }
            #[tokio::test(flavor = "current_thread")]
            async fn postgres() {
                let Some($board) = $crate::store::testdb::Board::postgres() else {
                    return;
                };
                $body
            }
        }
    };
}
pub(crate) use both;
