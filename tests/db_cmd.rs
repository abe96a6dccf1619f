//! `baton db`: a board exported and imported comes back the same, an import fills only an
//! empty board and writes nothing when a line is bad, `verify` finds orphan rows and
//! foreign execution keys, and `backup` copies a board in use.

mod common;

use common::{GATE, Ws, spawn_engine, stop, wait_for};
use std::path::Path;

/// A board with history: tasks through a script step to the gate, one approved, one
/// rejected back and run again, one left in its backlog.
fn board_with_history() -> Ws {
    let ws = Ws::new();
    ws.pipeline("gate.json", GATE);
    let ids: Vec<i64> = (1..=3)
        .map(|n| ws.new_task("gate", &format!("task {n}")))
        .collect();
    ws.ok(&["start", &ids[0].to_string()]);
    ws.ok(&["start", &ids[1].to_string()]);
    ws.drain();
    ws.ok(&["approve", &ids[0].to_string()]);
    ws.ok(&["reject", &ids[1].to_string(), "--note", "once more"]);
    ws.drain();
    ws
}

fn export(ws: &Ws) -> String {
    ws.ok(&["db", "export"])
}

fn fresh() -> Ws {
    Ws::new()
}

fn import(ws: &Ws, file: &Path) -> std::process::Output {
    ws.baton(&["db", "import", file.to_str().unwrap()])
        .output()
        .unwrap()
}

#[test]
fn a_board_exported_and_imported_is_the_same_board() {
    let from = board_with_history();
    let text = export(&from);
    assert!(text.lines().count() > 20, "{text}");
    let file = from.root().join("board.jsonl");
    std::fs::write(&file, &text).unwrap();
    let to = fresh();
    to.pipeline("gate.json", GATE);
    let out = import(&to, &file);
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("imported 3 task(s)"),
        "{out:?}"
    );
    assert_eq!(to.ok(&["list", "--json"]), from.ok(&["list", "--json"]));
    for id in ["1", "2", "3"] {
        assert_eq!(
            to.ok(&["show", id, "--json"]),
            from.ok(&["show", id, "--json"])
        );
    }
    for id in ["1", "2"] {
        assert_eq!(to.ok(&["logs", id]), from.ok(&["logs", id]));
    }
    // Every row, counters and change numbers included, comes back as it was.
    assert_eq!(export(&to), text);
    assert!(to.ok(&["db", "verify"]).contains("sound"));
    // The imported board goes on working: the task left in its backlog runs.
    to.ok(&["start", "3"]);
    to.drain();
    assert_eq!(to.show(3)["status"], "review");
}

#[test]
fn an_import_fills_only_an_empty_board() {
    let from = board_with_history();
    let file = from.root().join("board.jsonl");
    std::fs::write(&file, export(&from)).unwrap();
    let before = from.ok(&["list", "--json"]);
    let out = import(&from, &file);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("is not empty") && err.contains("--to"),
        "{err}"
    );
    assert_eq!(from.ok(&["list", "--json"]), before);
}

#[test]
fn a_bad_line_leaves_the_board_empty_and_is_named() {
    let from = board_with_history();
    let text = export(&from);
    let mut lines: Vec<&str> = text.lines().collect();
    let last = lines.len() - 1;
    lines[last] = "{\"table\": \"tasks\", \"row\": {\"id\": 99}}";
    let file = from.root().join("cut.jsonl");
    std::fs::write(&file, lines.join("\n")).unwrap();
    let to = fresh();
    let out = import(&to, &file);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("line {}", last + 1)) && err.contains("`tasks` refused the row"),
        "{err}"
    );
    assert_eq!(to.ok(&["list", "--json"]).trim(), "[]");
    // A hand-edited row without its id is taken or refused, never a crash.
    let header = text.lines().next().unwrap();
    let file = from.root().join("no-id.jsonl");
    std::fs::write(
        &file,
        format!("{header}\n{{\"table\": \"tasks\", \"row\": {{\"title\": \"x\"}}}}\n"),
    )
    .unwrap();
    let out = import(&fresh(), &file);
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("panicked"),
        "{out:?}"
    );
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    // Not an export at all.
    let file = from.root().join("other.jsonl");
    std::fs::write(&file, "{\"id\": 1}\n").unwrap();
    let out = import(&to, &file);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a baton export"));
}

#[test]
fn an_import_waits_for_no_engine() {
    let to = fresh();
    let file = to.root().join("board.jsonl");
    std::fs::write(&file, export(&board_with_history())).unwrap();
    let engine = spawn_engine(&to);
    wait_for("the engine to listen", || {
        to.root().join(".baton/engine.sock").exists()
    });
    let out = import(&to, &file);
    stop(engine);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("an engine runs on this board"),
        "{out:?}"
    );
    assert_eq!(to.ok(&["list", "--json"]).trim(), "[]");
    // Stopped, the engine's row on the board does not make the board a full one.
    let out = import(&to, &file);
    assert!(out.status.success(), "{out:?}");
    assert_ne!(to.ok(&["list", "--json"]).trim(), "[]");
}

#[test]
fn verify_names_orphan_rows_and_foreign_execution_keys() {
    let ws = board_with_history();
    assert!(ws.ok(&["db", "verify"]).contains("sound"));
    let db = rusqlite::Connection::open(ws.root().join(".baton/baton.db")).unwrap();
    db.execute_batch(
        "PRAGMA foreign_keys = OFF;
         INSERT INTO log_lines (step_run_id, stream, ts, line) VALUES (9999, 'stdout', 0, 'x');
         UPDATE step_runs SET execution_key = '77:build:1' WHERE id = 1;",
    )
    .unwrap();
    drop(db);
    let out = ws.baton(&["db", "verify"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("of `log_lines` points at a row of `step_runs` that is gone"),
        "{said}"
    );
    assert!(
        said.contains("step run 1 carries an execution key"),
        "{said}"
    );
}

#[test]
fn a_backup_is_a_board_of_its_own() {
    let ws = board_with_history();
    let engine = spawn_engine(&ws);
    wait_for("the engine to listen", || {
        ws.root().join(".baton/engine.sock").exists()
    });
    let copy = ws.dir.path().join("copy.db");
    ws.ok(&["db", "backup", copy.to_str().unwrap()]);
    stop(engine);
    let again = ws
        .baton(&["db", "backup", copy.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&again.stderr).contains("exists"));
    let other = fresh();
    other.pipeline("gate.json", GATE);
    std::fs::copy(&copy, other.root().join(".baton/baton.db")).unwrap();
    assert_eq!(other.ok(&["list", "--json"]), ws.ok(&["list", "--json"]));
    assert!(other.ok(&["db", "verify"]).contains("sound"));
}

#[test]
fn status_and_migrate_name_the_schema() {
    let ws = fresh();
    let said = ws.ok(&["db", "status"]);
    assert!(
        said.contains("no database yet") || said.contains("(current)"),
        "{said}"
    );
    ws.ok(&["db", "migrate"]);
    assert!(ws.ok(&["db", "status"]).contains("(current)"));
    assert!(ws.ok(&["db", "migrate"]).contains("already current"));
}
