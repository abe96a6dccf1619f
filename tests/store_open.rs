//! Opening the board's database: a damaged file is refused with a way out and never written
//! to; a read-only workspace can still be read.

mod common;
use common::Ws;
use std::path::Path;

fn db(ws: &Ws) -> std::path::PathBuf {
    ws.root().join(".baton/baton.db")
}

fn stderr_of(ws: &Ws, args: &[&str]) -> String {
    let out = ws
        .baton(args)
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "baton {args:?} should refuse: {out:?}"
    );
    String::from_utf8(out.stderr).unwrap()
}

#[test]
fn an_empty_database_file_is_damaged_not_a_new_board() {
    let ws = Ws::new();
    ws.new_task("demo", "kept");
    std::fs::write(db(&ws), b"").unwrap();
    for args in [
        &["list"][..],
        &["new", "x"],
        &["engine", "--exit-when-idle"],
    ] {
        let err = stderr_of(&ws, args);
        assert!(err.contains("is damaged (the file is empty)"), "{err}");
        assert!(
            err.contains("restore it from a backup, or move it aside"),
            "{err}"
        );
        assert_eq!(
            std::fs::metadata(db(&ws)).unwrap().len(),
            0,
            "written by {args:?}"
        );
    }
    // Moved aside with its -wal and -shm, as the message says, a new board starts.
    for end in ["", "-wal", "-shm"] {
        let from = ws.root().join(format!(".baton/baton.db{end}"));
        if from.exists() {
            std::fs::rename(&from, ws.root().join(format!(".baton/damaged.db{end}"))).unwrap();
        }
    }
    assert!(ws.ok(&["list"]).contains("no tasks"));
}

#[test]
fn an_engine_refuses_a_database_with_corrupt_pages_and_leaves_it_as_it_was() {
    let ws = Ws::new();
    let prompt = "p".repeat(3000);
    for i in 0..40 {
        ws.ok(&["new", &format!("task {i}"), "--prompt", &prompt]);
    }
    // Every page in the file (a command may leave its last writes in the -wal), then spoil
    // some in the middle.
    let conn = rusqlite::Connection::open(db(&ws)).unwrap();
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
        r.get::<_, i64>(0)
    })
    .unwrap();
    drop(conn);
    let mut bytes = std::fs::read(db(&ws)).unwrap();
    assert!(bytes.len() > 50 * 4096, "{}", bytes.len());
    bytes[20 * 4096..30 * 4096].fill(0xa5);
    std::fs::write(db(&ws), &bytes).unwrap();
    // Found by the check at start, or by the first read of a spoilt page when the last
    // engine closed the board cleanly (the check then runs only after an unclean end).
    let err = stderr_of(&ws, &["engine", "--exit-when-idle"]);
    assert!(
        err.contains("is damaged (quick_check: ")
            || err.contains("is damaged (database disk image is malformed)"),
        "{err}"
    );
    assert!(err.contains("baton has not written to it"), "{err}");
    assert_eq!(std::fs::read(db(&ws)).unwrap(), bytes, "the file changed");
}

/// True when the board's database carries the mark an engine's clean close leaves (its
/// next start then skips the whole-file check).
fn marked(ws: &Ws) -> bool {
    let conn = rusqlite::Connection::open(db(ws)).unwrap();
    conn.query_row(
        "SELECT count(*) FROM meta WHERE key = 'store.closed_cleanly'",
        [],
        |r| r.get::<_, i64>(0),
    )
    .unwrap()
        == 1
}

#[test]
fn an_engine_on_a_store_opened_before_it_checks_it_as_its_own() {
    let ws = Ws::new();
    let prompt = "p".repeat(3000);
    for i in 0..40 {
        ws.ok(&["new", &format!("task {i}"), "--prompt", &prompt]);
    }
    // An engine that closes cleanly leaves the mark.
    ws.ok(&["engine", "--exit-when-idle"]);
    assert!(marked(&ws), "no mark after a clean close");
    let workspace = baton::workspace::Workspace::at(ws.root());
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        // An API server's handle, adopted by the engine it starts: the mark is taken away
        // while that engine runs, so a kill now makes the next start check the file.
        let store = baton::store::StoreHandle::open(&db(&ws)).unwrap();
        let engine = baton::engine::Engine::start_on(&workspace, Some(store)).await;
        assert!(engine.is_ok(), "the engine did not start");
        assert!(!marked(&ws), "marked closed while the engine runs");
    });
    drop(rt);
    assert!(
        marked(&ws),
        "the adopting engine's clean close left no mark"
    );
    // Every connection has closed, so the pages are in the file: spoil some in the middle.
    // The mark is still there; an engine killed after taking it away would leave none.
    let conn = rusqlite::Connection::open(db(&ws)).unwrap();
    conn.execute("DELETE FROM meta WHERE key = 'store.closed_cleanly'", [])
        .unwrap();
    drop(conn);
    let mut bytes = std::fs::read(db(&ws)).unwrap();
    bytes[20 * 4096..30 * 4096].fill(0xa5);
    std::fs::write(db(&ws), &bytes).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let store = baton::store::StoreHandle::open(&db(&ws)).expect("opening reads no page");
        match baton::engine::Engine::start_on(&workspace, Some(store)).await {
            Ok(_) => panic!("an engine started on a damaged store"),
            Err(e) => assert!(e.to_string().contains("quick_check: "), "{e}"),
        }
    });
}

#[test]
fn an_api_server_following_another_processs_engine_leaves_no_mark() {
    let ws = Ws::new();
    ws.ok(&["new", "a task"]);
    ws.ok(&["engine", "--exit-when-idle"]);
    assert!(marked(&ws), "no mark after a clean close");
    let engine = common::spawn_engine(&ws);
    // The mark goes once that engine has opened its store.
    common::wait_for("the engine to open its store", || !marked(&ws));
    let workspace = baton::workspace::Workspace::at(ws.root());
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let ops = baton::api::ops::Ops::open(&workspace).await.unwrap();
        assert!(
            ops.list_tasks(None, None).await.is_ok(),
            "the server reads the board"
        );
        assert!(
            !marked(&ws),
            "the server marked the store closed while it runs"
        );
        ops.shutdown().await;
    });
    // `baton serve` exits while the engine it followed runs on.
    drop(rt);
    assert!(
        !marked(&ws),
        "the server marked the store closed while the engine runs"
    );
    // That engine is killed: nothing says the store closed cleanly.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(engine.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let mut engine = engine;
    engine.wait().unwrap();
    assert!(!marked(&ws), "marked after the engine was killed");
}

#[test]
fn threads_creating_one_new_database_at_once_all_open_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("baton.db");
    let opened: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|_| s.spawn(|| baton::store::Store::open(&path).map(|_| ())))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for r in opened {
        r.expect("every opener gets the board");
    }
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.contains(".new-"))
        .collect();
    assert!(left.is_empty(), "temporary files left: {left:?}");
}

/// Runs `baton ARGS` in the workspace as someone who may read but not write it: as root
/// (which ignores permission bits) that is `nobody`; otherwise this user, with write
/// permission taken away.
fn as_reader(ws: &Ws, args: &[&str]) -> std::process::Output {
    use std::os::unix::process::CommandExt;
    let mut cmd = std::process::Command::new(common::baton_for_any_user());
    cmd.current_dir(ws.root())
        .env_remove("BATON_DIR")
        .env("NO_COLOR", "1")
        .args(args);
    if nix::unistd::geteuid().is_root() {
        cmd.uid(65534).gid(65534);
    }
    cmd.output().unwrap()
}

fn read_only(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    for entry in std::fs::read_dir(path).unwrap() {
        let p = entry.unwrap().path();
        let mode = if p.is_dir() { 0o555 } else { 0o444 };
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o555)).unwrap();
}

#[test]
fn a_read_only_workspace_can_be_listed_and_shown() {
    use std::os::unix::fs::PermissionsExt;
    let ws = Ws::new();
    ws.pipeline("gate.json", common::GATE);
    let out = ws
        .baton(&["run", "gate", "--title", "readable", "--wait"])
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    // `nobody` must be able to reach the workspace at all.
    std::fs::set_permissions(ws.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    read_only(&ws.root().join(".baton"));
    let before: Vec<_> = std::fs::read_dir(ws.root().join(".baton"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    for (args, want) in [
        (&["list"][..], "readable"),
        (&["show", "1"], "#1 readable"),
        (&["logs", "1"], "out-line"),
    ] {
        let out = as_reader(&ws, args);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains(want),
            "baton {args:?}: {out:?}"
        );
    }
    let after: Vec<_> = std::fs::read_dir(ws.root().join(".baton"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(before, after, "reading created files");
    // Writing still needs a writable workspace, and says so.
    let out = as_reader(&ws, &["new", "x"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    // Let the temporary folder be removed.
    std::fs::set_permissions(
        ws.root().join(".baton"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
}

/// A write-ahead log with commits in it is read, even when SQLite's shared memory beside
/// it is gone (a copy that left it out): the board is not shown as it was before them.
#[test]
fn a_log_whose_shared_memory_is_gone_is_still_read() {
    let ws = Ws::new();
    ws.pipeline("gate.json", common::GATE);
    ws.new_task("gate", "only in the log");
    let baton = ws.root().join(".baton");
    let wal = std::fs::metadata(baton.join("baton.db-wal")).unwrap();
    assert!(wal.len() > 0, "the task is not in the log");
    std::fs::remove_file(baton.join("baton.db-shm")).unwrap();
    let listed = ws.ok(&["list"]);
    assert!(listed.contains("only in the log"), "{listed}");
}
