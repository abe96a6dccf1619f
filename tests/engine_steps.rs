//! Step execution through a running engine: abort, timeouts, parallelism, queued commands.

mod common;
use common::{Ws, alive, spawn_engine, stop, wait_for};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const LONG: &str = r#"{
  "id": "long", "name": "Long",
  "statuses": [
    {"id": "todo", "kind": "queue"},
    {"id": "work", "step": {"script": "sleep 300 &\necho $! > child.pid\necho $$ > shell.pid\nwait"}},
    {"id": "done", "kind": "done"},
    {"id": "failed", "kind": "failed"},
    {"id": "cancelled", "kind": "cancelled"}
  ]
}"#;

#[test]
fn abort_ends_the_whole_process_group_and_cancels_the_task() {
    let ws = Ws::new();
    ws.pipeline("long.json", LONG);
    ws.config("kill_grace = \"2s\"\n");
    let engine = spawn_engine(&ws);
    let id = ws.new_task("long", "forever");
    ws.ok(&["start", &id.to_string()]);
    wait_for("the step to start", || ws.root().join("child.pid").exists());
    let read = |f: &str| -> i32 {
        std::fs::read_to_string(ws.root().join(f))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    wait_for("pids", || {
        std::fs::read_to_string(ws.root().join("shell.pid")).is_ok_and(|s| !s.trim().is_empty())
    });
    let (child, shell) = (read("child.pid"), read("shell.pid"));
    assert!(alive(child) && alive(shell));

    let out = ws.ok(&["abort", &id.to_string()]);
    assert!(out.contains("cancelled"), "{out}");
    wait_for("the group to die", || !alive(child) && !alive(shell));
    let shown = ws.show(id);
    assert_eq!(shown["state"], "cancelled");
    assert_eq!(shown["steps"][0]["state"], "cancelled");
    stop(engine);
}

#[test]
fn a_step_past_its_timeout_is_stopped_and_fails_with_an_error() {
    let ws = Ws::new();
    ws.pipeline(
        "slow.json",
        r#"{"id": "slow", "name": "Slow",
  "statuses": [
    {"id": "todo", "kind": "queue"},
    {"id": "work", "step": {"run": "sleep 300", "timeout": "300ms"}},
    {"id": "done", "kind": "done"},
    {"id": "failed", "kind": "failed"}
  ]}"#,
    );
    ws.config("kill_grace = \"1s\"\n");
    let out = ws
        .baton(&["run", "slow", "--title", "t", "--wait", "--json"])
        .timeout(Duration::from_secs(30))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let shown: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(shown["status"], "failed");
    assert_eq!(shown["steps"][0]["state"], "timed_out");
    assert!(
        shown["steps"][0]["error"]
            .as_str()
            .unwrap()
            .contains("timed out")
    );
}

#[test]
fn failure_routes_to_failed_and_error_retries_first() {
    let ws = Ws::new();
    ws.pipeline(
        "flaky.json",
        r#"{"id": "flaky", "name": "Flaky",
  "statuses": [
    {"id": "todo", "kind": "queue"},
    {"id": "work", "step": {"run": "echo attempt $BATON_ATTEMPT >> attempts; kill -9 $$", "retries": 1}},
    {"id": "done", "kind": "done"},
    {"id": "failed", "kind": "failed"}
  ]}"#,
    );
    let out = ws
        .baton(&["run", "flaky", "--title", "t", "--wait", "--json"])
        .timeout(Duration::from_secs(30))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let shown: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(shown["status"], "failed");
    let steps = shown["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2, "one retry after an error: {shown:#}");
    assert_eq!(steps[1]["attempt"], 2);
    let attempts = std::fs::read_to_string(ws.root().join("attempts")).unwrap();
    assert_eq!(attempts, "attempt 1\nattempt 2\n");
}

#[test]
fn max_parallel_bounds_concurrent_steps() {
    let ws = Ws::new();
    ws.pipeline(
        "p.json",
        r#"{"id": "p", "name": "P",
  "statuses": [
    {"id": "todo", "kind": "queue"},
    {"id": "work", "step": {"script": "mkdir running.lock 2>/dev/null || echo OVERLAP >> overlaps\nsleep 0.2\nrmdir running.lock\necho ran >> ran"}},
    {"id": "done", "kind": "done"},
    {"id": "failed", "kind": "failed"}
  ]}"#,
    );
    ws.config("max_parallel = 1\n");
    for i in 0..3 {
        let id = ws.new_task("p", &format!("t{i}"));
        ws.ok(&["start", &id.to_string()]);
    }
    ws.drain();
    let ran = std::fs::read_to_string(ws.root().join("ran")).unwrap();
    assert_eq!(ran.lines().count(), 3);
    assert!(
        !ws.root().join("overlaps").exists(),
        "steps overlapped with max_parallel = 1"
    );
}

#[test]
fn commands_reach_a_running_engine_and_races_still_move_once() {
    let ws = Ws::new();
    ws.pipeline("gate.json", common::GATE);
    let engine = spawn_engine(&ws);
    let id = ws.new_task("gate", "through the engine");
    ws.ok(&["start", &id.to_string()]);
    wait_for("the gate", || ws.show(id)["state"] == "waiting");
    let spawn = || {
        Command::new(assert_cmd::cargo::cargo_bin("baton"))
            .current_dir(ws.root())
            .args(["approve", &id.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn(), spawn());
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    assert_eq!(
        [&a, &b].iter().filter(|o| o.status.success()).count(),
        1,
        "{a:?} {b:?}"
    );
    let loser = if a.status.success() { &b } else { &a };
    assert!(String::from_utf8_lossy(&loser.stderr).contains("no longer at review"));
    assert_eq!(ws.show(id)["state"], "done");
    stop(engine);
}

#[test]
fn a_second_engine_is_refused() {
    let ws = Ws::new();
    let engine = spawn_engine(&ws);
    wait_for("the first engine to hold the lock", || {
        baton::workspace::EngineLock::is_held(&baton::workspace::Workspace::at(ws.root()))
    });
    let out = ws
        .baton(&["engine"])
        .timeout(Duration::from_secs(10))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("another baton engine is running"));
    stop(engine);
}

#[test]
fn parallel_run_waits_share_one_engine_and_all_finish() {
    let ws = Ws::new();
    ws.pipeline("gate.json", common::GATE);
    let spawn = |i: usize| {
        Command::new(assert_cmd::cargo::cargo_bin("baton"))
            .current_dir(ws.root())
            .args(["run", "gate", "--title", &format!("parallel {i}"), "--wait"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let children: Vec<Child> = (0..4).map(spawn).collect();
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(2),
            "each waits at the gate: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// The engine's own first and last lines of a step are stored with the step's claim and
/// its result, not through the log writer: around the step's output when it prints, alone
/// when it is silent, and counted in the step run's kept line count. The silent step reads
/// its input: it must see it empty, not the pipe its guard watches (it would then hang).
#[test]
fn each_steps_log_opens_and_closes_around_its_output() {
    let ws = Ws::new();
    ws.pipeline(
        "two.json",
        r#"{"id": "two", "name": "Two",
  "statuses": [
    {"id": "todo", "kind": "queue"},
    {"id": "say", "step": {"run": "echo hello; echo oops >&2"}},
    {"id": "quiet", "step": {"run": "cat", "timeout": "20s"}},
    {"id": "done", "kind": "done"},
    {"id": "failed", "kind": "failed"}
  ]}"#,
    );
    let out = ws
        .baton(&["run", "two", "--title", "t", "--wait", "--json"])
        .timeout(Duration::from_secs(30))
        .output()
        .unwrap();
    let shown: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(shown["status"], "done", "{shown:#}");
    let id = shown["id"].as_i64().unwrap();
    let store = baton::store::Store::open(&ws.root().join(".baton/baton.db")).unwrap();
    let db = store.read();
    let steps = db.step_runs(id).unwrap();
    assert_eq!(steps.len(), 2, "{shown:#}");
    let mut logs = Vec::new();
    for s in &steps {
        let lines: Vec<String> = db
            .log_lines(s.id, 0, i64::MAX)
            .unwrap()
            .into_iter()
            .map(|l| l.text)
            .collect();
        assert_eq!(db.log_count(s.id).unwrap(), lines.len() as i64, "{lines:?}");
        logs.push(lines);
    }
    let (say, quiet) = (&logs[0], &logs[1]);
    assert_eq!(say.len(), 4, "{say:?}");
    assert!(say[0].starts_with("▶ say · attempt 1 · "), "{say:?}");
    let mut output = vec![say[1].clone(), say[2].clone()];
    output.sort();
    assert_eq!(output, ["hello", "oops"], "{say:?}");
    assert!(say[3].starts_with("■ exited 0 after "), "{say:?}");
    assert_eq!(quiet.len(), 2, "{quiet:?}");
    assert!(quiet[0].starts_with("▶ quiet · attempt 1 · "), "{quiet:?}");
    assert!(quiet[1].starts_with("■ exited 0 after "), "{quiet:?}");
}
