//! The headless CLI end to end: gates, approvals, logs, task text safety, races, validation.

mod common;
use common::{GATE, Ws};

#[test]
fn gate_pipeline_waits_and_approve_finishes_it() {
    let ws = Ws::new();
    ws.pipeline("gate.json", GATE);
    let out = ws
        .baton(&["run", "gate", "--title", "first", "--wait", "--json"])
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "waits at a gate: {out:?}");
    let shown: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(shown["status"], "review");
    assert_eq!(shown["state"], "waiting");
    assert_eq!(shown["steps"][0]["state"], "succeeded");
    assert_eq!(shown["steps"][0]["exit_code"], 0);
    let id = shown["id"].as_i64().unwrap();

    ws.ok(&["approve", &id.to_string()]);
    let shown = ws.show(id);
    assert_eq!(shown["status"], "done");
    assert_eq!(shown["state"], "done");
    let triggers: Vec<&str> = shown["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["trigger"].as_str().unwrap())
        .collect();
    assert_eq!(triggers, ["create", "start", "success", "approve"]);
}

#[test]
fn logs_hold_stdout_and_stderr() {
    let ws = Ws::new();
    ws.pipeline("gate.json", GATE);
    let out = ws
        .baton(&["run", "gate", "--title", "logs", "--wait"])
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let logs = ws.ok(&["logs", "1"]);
    assert!(logs.contains("out-line"), "{logs}");
    assert!(logs.contains("err-line"), "{logs}");
}

#[test]
fn hostile_title_reaches_the_step_intact_and_runs_nothing() {
    let ws = Ws::new();
    ws.pipeline("gate.json", GATE);
    let title = r#"x"; touch pwned; echo '$(touch pwned2)' `touch pwned3`"#;
    let out = ws
        .baton(&["run", "gate", "--title", title, "--wait"])
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let written = std::fs::read_to_string(ws.root().join("title.txt")).unwrap();
    assert_eq!(written, title);
    for f in ["pwned", "pwned2", "pwned3"] {
        assert!(!ws.root().join(f).exists(), "{f} was created");
    }
}

#[test]
fn reject_note_reaches_the_next_step() {
    let ws = Ws::new();
    ws.pipeline("gate.json", GATE);
    let out = ws
        .baton(&["run", "gate", "--title", "t", "--wait"])
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    ws.ok(&["reject", "1", "--note", "use smaller functions"]);
    ws.drain();
    let note = std::fs::read_to_string(ws.root().join("note.txt")).unwrap();
    assert_eq!(note, "use smaller functions");
    let shown = ws.show(1);
    assert_eq!(shown["status"], "review");
    assert_eq!(shown["steps"].as_array().unwrap().len(), 2);
    assert_eq!(shown["steps"][1]["attempt"], 2);
}

#[test]
fn racing_approvals_move_the_task_once() {
    let ws = Ws::new();
    ws.pipeline("gate.json", GATE);
    for round in 0..5 {
        let out = ws
            .baton(&["run", "gate", "--title", "race", "--wait"])
            .timeout(std::time::Duration::from_secs(60))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
        let id = (round + 1).to_string();
        let spawn = || {
            let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("baton"));
            cmd.current_dir(ws.root())
                .args(["approve", &id])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped());
            cmd.spawn().unwrap()
        };
        let (a, b) = (spawn(), spawn());
        let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
        let wins = [&a, &b].iter().filter(|o| o.status.success()).count();
        assert_eq!(wins, 1, "exactly one approval wins: {a:?} {b:?}");
        let loser = if a.status.success() { &b } else { &a };
        let err = String::from_utf8_lossy(&loser.stderr);
        assert!(err.contains("is no longer at review"), "{err}");
        let approvals = ws.show(round + 1)["history"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|h| h["trigger"] == "approve")
            .count();
        assert_eq!(approvals, 1);
    }
}

#[test]
fn malformed_pipeline_gets_a_located_error() {
    let ws = Ws::new();
    let path = ws.pipeline("broken.json", "{\n  \"id\": \"x\",\n  \"statuses\": [\n    {\"id\": \"a\" \"kind\": \"queue\"}\n  ]\n}\n");
    let out = ws.baton(&["pipelines", "validate"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("{}:4:", path.display())), "{err}");
}

#[test]
fn semantic_errors_are_all_reported() {
    let ws = Ws::new();
    ws.pipeline(
        "bad.json",
        r#"{"id": "bad", "name": "Bad",
  "statuses": [
    {"id": "a", "kind": "queue"},
    {"id": "a", "kind": "gate"},
    {"id": "s", "step": {"python": "x"}}
  ],
  "transitions": [{"from": "a", "to": "nowhere", "on": "finish"}]
}"#,
    );
    let out = ws.baton(&["pipelines", "validate"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    for needle in ["duplicate", "nowhere", "finish", "python", "terminal"] {
        assert!(err.contains(needle), "missing {needle}: {err}");
    }
}

#[test]
fn unknown_task_and_no_workspace_get_plain_answers() {
    let ws = Ws::new();
    let out = ws.baton(&["show", "42"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("task 42 does not exist"), "{err}");

    let empty = tempfile::tempdir().unwrap();
    let out = assert_cmd::Command::cargo_bin("baton")
        .unwrap()
        .current_dir(empty.path())
        .env_remove("BATON_DIR")
        .args(["list"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("baton init"));
}

#[test]
fn list_json_has_the_contract_shape() {
    let ws = Ws::new();
    ws.pipeline("gate.json", GATE);
    let a = ws.new_task("gate", "older");
    let b = ws.new_task("gate", "newer");
    let list: serde_json::Value = serde_json::from_str(&ws.ok(&["list", "--json"])).unwrap();
    let items = list.as_array().unwrap();
    assert_eq!(items.len(), 2);
    assert_eq!(items[0]["id"], b);
    assert_eq!(items[1]["id"], a);
    let mut keys: Vec<_> = items[0].as_object().unwrap().keys().cloned().collect();
    keys.sort();
    assert_eq!(keys, ["id", "pipeline", "state", "status", "title", "updated_at"]);
    assert_eq!(items[0]["state"], "idle");
}
