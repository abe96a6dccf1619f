//! One step's log is capped (`max_step_log`): past the cap its lines are dropped from the
//! database and the context folder's log file, with one marker line and one warning event,
//! and the step runs on to its end.

mod common;
use common::Ws;

#[test]
fn a_step_printing_past_its_log_cap_keeps_one_marker_and_runs_on() {
    let ws = Ws::new();
    ws.config("max_step_log = \"64KiB\"\n");
    // About 1.1 MB of output, then the step leaves a file to show it was not stopped.
    let json = serde_json::json!({
        "id": "loud",
        "statuses": [
            {"id": "todo", "kind": "queue"},
            {"id": "work", "step": {"run": "i=0; while [ $i -lt 10000 ]; do echo \"line $i $(printf '%0100d' 0)\"; i=$((i+1)); done; echo done > finished.txt"}},
            {"id": "done", "kind": "done"},
            {"id": "failed", "kind": "failed"}
        ]
    });
    ws.pipeline("loud.json", &json.to_string());
    let out = ws
        .baton(&["run", "loud", "--title", "t", "--wait"])
        .timeout(std::time::Duration::from_secs(120))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(
        ws.root().join("finished.txt").exists(),
        "the step ran to its end"
    );

    let logs = ws.ok(&["logs", "1"]);
    assert!(logs.contains("line 0 "), "the start is kept");
    assert!(!logs.contains("line 9999 "), "past the cap: {}", logs.len());
    assert_eq!(logs.matches("reached its cap of 64 KiB").count(), 1);
    let db = rusqlite::Connection::open(ws.root().join(".baton/baton.db")).unwrap();
    let stored: i64 = db
        .query_row(
            "SELECT COALESCE(SUM(LENGTH(line) + 1), 0) FROM log_lines WHERE stream != 'system'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(stored <= 64 * 1024, "{stored} bytes of output stored");
    let warnings: i64 = db
        .query_row(
            "SELECT COUNT(*) FROM events WHERE type = 'step.log_capped' AND level = 'warn'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(warnings, 1, "one warning event");
    let file = std::fs::metadata(ws.root().join(".baton/context/1/id_work_001.log"))
        .unwrap()
        .len();
    assert!(file <= 65 * 1024, "the context log is {file} bytes");
}

#[test]
fn a_zero_or_unreadable_cap_is_refused_with_its_line() {
    let ws = Ws::new();
    for (toml, says) in [
        ("max_step_log = 0\n", "max_step_log must be more than zero"),
        ("max_step_log = \"lots\"\n", "is not a size"),
    ] {
        ws.config(toml);
        let out = ws.baton(&["config", "show"]).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(says), "{toml}: {err}");
    }
}
