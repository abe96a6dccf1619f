//! The store's costs that must not grow with what it holds: a log's line count, an
//! engine's start on a big board, the statements of a step run's creation.

use super::testdb::both;
use super::*;

/// A task with one run and `n` step runs on it; their ids.
pub(super) fn task_with_steps(db: &Db, n: usize) -> Vec<i64> {
    let id = db
        .insert_task("t", "", "p", "{}", "s", TaskState::Running)
        .unwrap();
    let run = db.task(id).unwrap().run_id.unwrap();
    (0..n)
        .map(|_| db.insert_step_run(id, run, "s", None, 0).unwrap().id)
        .collect()
}

pub(super) fn lines(step_run_id: i64, n: usize) -> Vec<NewLogLine> {
    (0..n)
        .map(|i| NewLogLine {
            step_run_id,
            stream: Stream::Stdout,
            ts: 0,
            text: format!("line {i:060}"),
        })
        .collect()
}

both!(fn a_step_runs_line_count_is_kept_as_lines_are_written(board) {
    let mut store = board.open();
    let steps = store
        .write(|db| Ok::<_, StoreError>(task_with_steps(db, 2)))
        .unwrap();
    let (a, b) = (steps[0], steps[1]);
    // Batches mixing both steps, through both insert paths (32 rows a statement, and one).
    let mut batch = lines(a, 40);
    batch.extend(lines(b, 3));
    batch.extend(lines(a, 2));
    store.write(|db| db.insert_log_lines(&batch)).unwrap();
    store.write(|db| db.insert_log_lines(&lines(b, 1))).unwrap();
    let db = store.read();
    assert_eq!(db.log_count(a).unwrap(), 42);
    assert_eq!(db.log_count(b).unwrap(), 4);
    assert_eq!(db.log_count(a + b + 100).unwrap(), 0, "no such step run");
});

#[test]
fn counting_a_long_logs_lines_does_not_read_them() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    let step = {
        let mut store = Store::open(&path).unwrap();
        let step = store
            .write(|db| Ok::<_, StoreError>(task_with_steps(db, 1)[0]))
            .unwrap();
        for _ in 0..50 {
            store
                .write(|db| db.insert_log_lines(&lines(step, 1000)))
                .unwrap();
        }
        step
    };
    // A fresh connection has nothing cached: every page it needs is read from the file.
    let store = Store::open(&path).unwrap();
    let before = store.pages_read();
    assert_eq!(store.read().log_count(step).unwrap(), 50_000);
    let read = store.pages_read() - before;
    // Counting 50,000 index entries reads a few hundred pages; a step run's row, a few.
    assert!(read <= 8, "counting the lines read {read} pages");
}

/// A headless engine asks for the problems recorded after the last one it printed, at
/// every step: with thousands of ordinary events since, the answer reads a few pages, not
/// every event of the run.
#[test]
fn finding_new_problems_does_not_read_every_event_since() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    let (warned, failed) = {
        let mut store = Store::open(&path).unwrap();
        let event = |level: &'static str| NewEvent {
            task_id: None,
            category: "c",
            kind: "k",
            summary: format!("a {level} event"),
            data: serde_json::json!({}),
            actor: "engine",
            level,
        };
        let warned = store.write(|db| db.insert_event(&event("warn"))).unwrap();
        for _ in 0..20 {
            store
                .write(|db| {
                    for _ in 0..1000 {
                        db.insert_event(&event("info"))?;
                    }
                    Ok::<_, StoreError>(())
                })
                .unwrap();
        }
        let failed = store.write(|db| db.insert_event(&event("error"))).unwrap();
        (warned, failed)
    };
    // A fresh connection has nothing cached: every page it needs is read from the file.
    let store = Store::open(&path).unwrap();
    let before = store.pages_read();
    let found: Vec<i64> = store
        .read()
        .problems_after(warned)
        .unwrap()
        .iter()
        .map(|e| e.id)
        .collect();
    assert_eq!(found, [failed]);
    let read = store.pages_read() - before;
    // 20,000 events fill hundreds of pages; the problems' index and one row, a few.
    assert!(read <= 10, "finding one problem read {read} pages");
}

#[test]
fn a_database_from_before_the_count_gets_its_logs_counted_when_upgraded() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    {
        let mut conn = rusqlite::Connection::open(&path).unwrap();
        let tx = conn.transaction().unwrap();
        for sql in &schema::MIGRATIONS[..6] {
            tx.execute_batch(sql).unwrap();
        }
        tx.execute_batch(
            "PRAGMA user_version = 6;
             INSERT INTO snapshots (id, fingerprint, json) VALUES (1, 'f', '{}');
             INSERT INTO tasks (id, title, pipeline_id, snapshot_id, status, state, created_at, updated_at)
                 VALUES (1, 't', 'p', 1, 's', 'running', 0, 0);
             INSERT INTO runs (id, task_id, number, state, started_at) VALUES (1, 1, 1, 'running', 0);
             INSERT INTO step_runs (id, task_id, run_id, status, attempt, execution_key, state, created_at)
                 VALUES (1, 1, 1, 's', 1, '1:s:1', 'succeeded', 0),
                        (2, 1, 1, 's', 2, '1:s:2', 'running', 0),
                        (3, 1, 1, 's', 3, '1:s:3', 'pending', 0);
             INSERT INTO log_lines (step_run_id, stream, ts, line)
                 VALUES (1, 'stdout', 0, 'a'), (1, 'stdout', 0, 'b'), (2, 'stdout', 0, 'c');",
        )
        .unwrap();
        tx.commit().unwrap();
    }
    let store = Store::open(&path).unwrap();
    let db = store.read();
    let counts: Vec<i64> = (1..=3).map(|s| db.log_count(s).unwrap()).collect();
    assert_eq!(counts, [2, 1, 0]);
}

/// Whole-file checks run on `path` so far, on any thread.
fn checks(path: &Path) -> usize {
    let seen = QUICK_CHECKS.lock().unwrap_or_else(|e| e.into_inner());
    seen.iter().filter(|p| *p == path).count()
}

/// True when the store at `path` carries the closed-cleanly mark.
fn marked(path: &Path) -> bool {
    closed_cleanly(Store::open(path).unwrap().lite().unwrap())
}

/// An engine's store as the engine opens it: checked, then armed under its lock.
fn engines(path: &Path) -> StoreHandle {
    engines_reading(path, Reads::Apart)
}

/// [`engines`], its reads as `reads` says (a command's engine reads through its writer).
fn engines_reading(path: &Path, reads: Reads) -> StoreHandle {
    let h = StoreHandle::open_checked(path, reads).unwrap();
    h.arm_clean_close();
    h
}

#[test]
fn an_engines_store_is_checked_again_only_after_it_did_not_close_cleanly() {
    for reads in [Reads::Apart, Reads::OnWriter] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        Store::open(&path).unwrap();
        // Never opened by an engine: checked.
        let h = engines_reading(&path, reads);
        assert_eq!(checks(&path), 1);
        drop(h);
        // Closed cleanly: the next start reads no more than it needs.
        let h = engines_reading(&path, reads);
        assert_eq!(
            checks(&path),
            1,
            "a clean close should spare the next start the whole-file check ({reads:?})"
        );
        // An engine that dies never closes its store (its threads go with the process).
        std::mem::forget(h);
        engines_reading(&path, reads);
        assert_eq!(
            checks(&path),
            2,
            "an unclean end should make the next start check the whole file ({reads:?})"
        );
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_handle_no_engine_armed_leaves_no_mark_when_it_closes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    drop(engines(&path));
    assert!(
        marked(&path),
        "an engine's clean close should leave the mark"
    );
    // An API server's handle, following an engine that runs elsewhere: the engine took the
    // mark away at its start, and this handle closing must not put it back.
    let engine = engines(&path);
    for h in [
        StoreHandle::open(&path).unwrap(),
        StoreHandle::open_checked(&path, Reads::Apart).unwrap(),
    ] {
        h.write(|db| db.set_meta("k", "v")).await.unwrap();
        drop(h);
        assert!(
            !marked(&path),
            "a handle no engine armed marked the store closed while an engine runs"
        );
    }
    // That engine is killed: the next start checks the whole file.
    std::mem::forget(engine);
    let before = checks(&path);
    engines(&path);
    assert_eq!(
        checks(&path),
        before + 1,
        "an unclean end should make the next start check the whole file"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_store_an_engine_adopts_is_checked_after_an_unclean_end_and_unmarked() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    // An API server opened the store while an engine ran elsewhere; that engine is killed.
    std::mem::forget(engines(&path));
    let h = StoreHandle::open(&path).unwrap();
    let before = checks(&path);
    h.check_after_unclean_end().await.unwrap();
    assert_eq!(
        checks(&path),
        before + 1,
        "an unclean end should make the next start check the whole file"
    );
    drop(h);
    // After a clean close: not checked, and the mark is gone while the adopter runs.
    drop(engines(&path));
    let h = StoreHandle::open(&path).unwrap();
    let before = checks(&path);
    h.check_after_unclean_end().await.unwrap();
    assert_eq!(
        checks(&path),
        before,
        "a clean close should spare the next start the whole-file check"
    );
    assert!(
        !marked(&path),
        "the mark should be gone while an engine runs"
    );
    h.arm_clean_close();
    drop(h);
    assert!(
        marked(&path),
        "the adopting engine's clean close should leave the mark"
    );
}

#[test]
fn a_step_run_is_created_by_one_statement() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&dir.path().join("t.db")).unwrap();
    let (task, run) = store
        .write(|db| {
            let id = db.insert_task("t", "", "p", "{}", "s", TaskState::Running)?;
            db.insert_step_run(id, db.task(id)?.run_id.unwrap(), "s", None, 0)?;
            Ok::<_, StoreError>((id, db.task(id)?.run_id.unwrap()))
        })
        .unwrap();
    let (made, statements) =
        store.count_statements(|db| db.insert_step_run(task, run, "s", Some("n"), 5));
    let made = made.unwrap();
    // BEGIN, the insert, COMMIT.
    assert_eq!(statements.len(), 3, "{statements:#?}");
    let stored = store.read().step_run(made.id).unwrap();
    assert_eq!((made.attempt, made.seq), (2, 2));
    assert_eq!(made.execution_key, format!("{run}:s:2"));
    assert_eq!(
        (
            stored.attempt,
            stored.seq,
            stored.execution_key,
            stored.not_before
        ),
        (2, 2, made.execution_key.clone(), 5)
    );
    assert_eq!(stored.note.as_deref(), Some("n"));
}

/// An engine coming up looks for held tasks through their index, not by reading every
/// task on the board.
#[test]
fn held_tasks_are_found_without_reading_the_board() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("t.db")).unwrap();
    let conn = store.lite().unwrap();
    let plan: Vec<String> = conn
        .prepare(&format!(
            "EXPLAIN QUERY PLAN {}",
            super::deps::RELEASED_WAITING
        ))
        .unwrap()
        .query_map([], |r| r.get(3))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    // The outer table is read through the partial index (covering or not), never whole.
    let outer = plan
        .iter()
        .find(|p| p.starts_with("SCAN t") || p.starts_with("SEARCH t"));
    assert!(
        outer.is_some_and(|p| p.contains("INDEX tasks_start_waits")),
        "{plan:?}"
    );
}

#[test]
fn a_write_kept_out_past_the_busy_timeout_is_said_plainly() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    let mut store = Store::open(&path).unwrap();
    store
        .lite()
        .unwrap()
        .busy_timeout(std::time::Duration::from_millis(20))
        .unwrap();
    // Another program holding a write (a `sqlite3` shell inside a transaction).
    let other = rusqlite::Connection::open(&path).unwrap();
    other.execute_batch("BEGIN IMMEDIATE").unwrap();
    let err = store.write(|db| db.set_meta("k", "v")).unwrap_err();
    assert!(matches!(err, StoreError::Busy), "{err:?}");
    assert!(
        err.to_string().contains("another program has held a write"),
        "{err}"
    );
    other.execute_batch("ROLLBACK").unwrap();
    store.write(|db| db.set_meta("k", "v")).unwrap();
}
