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
    // Every connection has closed, so the pages are in the file: spoil some in the middle.
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
