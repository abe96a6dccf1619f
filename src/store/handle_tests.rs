//! The store handle: ordered writes, rollback, and the write-ahead log cut back when idle.

use super::*;
use crate::store::testdb::both;

/// The size of the database's write-ahead log file (0 when there is none).
fn wal_size(db: &Path) -> u64 {
    let mut name = db.as_os_str().to_owned();
    name.push("-wal");
    std::fs::metadata(PathBuf::from(name)).map_or(0, |m| m.len())
}

#[tokio::test(flavor = "current_thread")]
async fn the_write_ahead_log_is_cut_back_once_writes_stop() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    let h = StoreHandle::open(&path).unwrap();
    // A reader that stays on one snapshot (a long query, another process) holds every
    // checkpoint back while thousands of writes go by: the log grows.
    let pin = rusqlite::Connection::open(&path).unwrap();
    pin.execute_batch("BEGIN; SELECT count(*) FROM sqlite_master;")
        .unwrap();
    let blob = "x".repeat(4000);
    for i in 0..2000 {
        let blob = blob.clone();
        h.write(move |db| db.set_meta(&format!("k{i}"), &blob))
            .await
            .unwrap();
    }
    let grown = wal_size(&path);
    assert!(grown > 8 << 20, "the log grew to {grown} bytes");
    pin.execute_batch("COMMIT").unwrap();
    drop(pin);
    h.write(|db| db.set_meta("last", "1")).await.unwrap();
    // Then nothing is written: the idle checkpoint cuts the log to nothing.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while wal_size(&path) > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the log is still {} bytes after the writes stopped",
            wal_size(&path)
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(
        h.read(|db| db.meta("last")).await.unwrap().as_deref(),
        Some("1")
    );
}

both!(async fn reads_on_the_writer_see_the_writes_queued_before_them_on_one_connection(board) {
    let h = board.handle_with(Reads::OnWriter);
    for i in 0..20 {
        h.write_detached("meta", move |db| db.set_meta("k", &i.to_string()));
    }
    // Queued behind the detached writes on the one thread, a read sees them all.
    let (seen, thread) = h
        .read(|db| Ok((db.meta("k")?, std::thread::current().name().map(str::to_owned))))
        .await
        .unwrap();
    assert_eq!(seen.as_deref(), Some("19"));
    assert_eq!(thread.as_deref(), Some("baton-store-w"), "the read's thread");
    assert_eq!(
        h.write(|db| db.meta("k")).await.unwrap().as_deref(),
        Some("19")
    );
    // On PostgreSQL the handle holds one server process, the writer's. (The blocking
    // client cannot run on an async test's thread: on one of its own.)
    let others = std::thread::scope(|s| {
        s.spawn(|| {
            let mut pg = board.pg_client()?;
            let sql = "SELECT COUNT(*) FROM pg_stat_activity \
                       WHERE datname = current_database() AND pid <> pg_backend_pid() \
                       AND backend_type = 'client backend'";
            Some(pg.query_one(sql, &[]).unwrap().get::<_, i64>(0))
        })
        .join()
        .unwrap()
    });
    if let Some(others) = others {
        assert_eq!(others, 1, "the handle's connections to the board");
    }
});

both!(async fn writes_are_seen_by_later_reads_and_run_in_order(board) {
    let h = board.handle();
    for i in 0..20 {
        h.write_detached("meta", move |db| db.set_meta("k", &i.to_string()));
    }
    let last = h
        .write(|db| db.meta("k").map(|v| v.unwrap_or_default()))
        .await
        .unwrap();
    assert_eq!(last, "19", "detached writes run before a later write");
    let read = h.read(|db| db.meta("k")).await.unwrap();
    assert_eq!(read.as_deref(), Some("19"));
});

both!(async fn a_failed_write_rolls_back_and_a_panicking_job_does_not_stop_the_store(board) {
    let h = board.handle();
    let failed: Result<()> = h
        .write(|db| {
            db.set_meta("k", "v")?;
            Err(StoreError::Conflict("no".into()))
        })
        .await;
    assert!(failed.is_err());
    let panicked: Result<()> = h.write(|_| panic!("boom")).await;
    assert!(matches!(panicked, Err(StoreError::Closed)));
    assert_eq!(h.read(|db| db.meta("k")).await.unwrap(), None);
    h.write(|db| db.set_meta("k", "w")).await.unwrap();
    assert_eq!(
        h.read(|db| db.meta("k")).await.unwrap().as_deref(),
        Some("w")
    );
});

/// A reader whose connection cannot be opened answers each read with why, naming the
/// database, rather than only that the store has stopped.
#[tokio::test(flavor = "current_thread")]
async fn a_reader_that_cannot_open_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let writer = Store::open(&dir.path().join("t.db")).unwrap();
    let missing = dir.path().join("gone/t.db");
    let h =
        StoreHandle::with_reader(writer, Some(Conn::Soon(missing, Store::open_existing))).unwrap();
    for _ in 0..2 {
        let e = h.read(|db| db.meta("k")).await.unwrap_err().to_string();
        assert!(e.contains("gone/t.db"), "{e}");
    }
    // Writes go on through the writer's own connection.
    h.write(|db| db.set_meta("k", "1")).await.unwrap();
}
