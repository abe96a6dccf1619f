//! Named engines, with the real binary in separate processes: `baton engine --name` registers
//! on the board, a second engine asking for a name a running one holds is refused in one
//! sentence naming the holder, and the name is taken again once its engine was killed and
//! its heartbeat went stale. The heartbeat advances while an engine runs. A step that
//! requires a label stays queued, saying why, until an engine with that label runs it.

mod common;
use common::{Ws, alive, stop, wait_for, wait_within};
use serde_json::Value;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Heartbeats every 2 s, so an engine counts as gone 6 s after its last one.
const FAST: &str = "[engine]\nheartbeat = \"2s\"\n";

fn engine(ws: &Ws, args: &[&str]) -> Child {
    Command::new(assert_cmd::cargo::cargo_bin("baton"))
        .current_dir(ws.root())
        .env_remove("BATON_DIR")
        .env("XDG_CONFIG_HOME", ws.dir.path().join("xdg"))
        .arg("engine")
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("engine starts")
}

/// `baton engines --json`: the row named `name`, if any.
fn row(ws: &Ws, name: &str) -> Option<Value> {
    let list: Value = serde_json::from_str(&ws.ok(&["engines", "--json"])).expect("json");
    list.as_array()?.iter().find(|e| e["name"] == name).cloned()
}

fn state_of(ws: &Ws, name: &str) -> String {
    row(ws, name).map_or(String::new(), |r| r["state"].as_str().unwrap_or("").into())
}

fn running_as(ws: &Ws, name: &str, pid: u32) -> bool {
    row(ws, name).is_some_and(|r| r["state"] == "running" && r["pid"] == pid)
}

#[test]
fn a_name_held_by_a_running_engine_is_refused_until_its_engine_is_gone() {
    let ws = Ws::new();
    ws.config(FAST);
    let mut first = engine(&ws, &["--name", "x", "--labels", "gpu"]);
    wait_for("the first engine to register", || {
        running_as(&ws, "x", first.id())
    });
    let r = row(&ws, "x").unwrap();
    assert_eq!(r["labels"], serde_json::json!(["gpu"]));
    assert_eq!(r["version"], env!("CARGO_PKG_VERSION"));

    let out = ws
        .baton(&["engine", "--name", "x"])
        .timeout(Duration::from_secs(30))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a second engine named x ran: {err}");
    assert!(
        err.contains(&format!(
            "an engine named x is already running on {} (pid {})",
            r["host"].as_str().unwrap(),
            first.id()
        )) && err.contains("one engine runs per workspace"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "one sentence: {err}");

    // Killed, it cannot say it stopped; its heartbeat still looks fresh, but its process
    // is gone from this machine, so the board says so at once rather than after the lease.
    first.kill().unwrap();
    first.wait().unwrap();
    assert_eq!(
        state_of(&ws, "x"),
        "gone",
        "a killed engine on this machine still shown running"
    );
    let second = engine(&ws, &["--name", "x"]);
    wait_for("the second engine to take the name", || {
        running_as(&ws, "x", second.id())
    });
    assert_eq!(row(&ws, "x").unwrap()["labels"], serde_json::json!([]));
    let pid = second.id();
    stop(second);
    assert!(!alive(pid as i32));
    assert_eq!(state_of(&ws, "x"), "stopped", "a clean stop is recorded");
}

#[test]
fn the_heartbeat_advances_while_an_engine_runs() {
    let ws = Ws::new();
    ws.config(FAST);
    let child = engine(&ws, &["--name", "beats"]);
    wait_for("the engine to register", || {
        running_as(&ws, "beats", child.id())
    });
    let first = row(&ws, "beats").unwrap()["heartbeat_at"].clone();
    wait_within("a heartbeat", Duration::from_secs(10), || {
        row(&ws, "beats").unwrap()["heartbeat_at"] != first
    });
    assert_eq!(state_of(&ws, "beats"), "running");
    stop(child);
}

/// A step that needs a GPU, and one that runs anywhere.
const LABELLED: &str = r#"{"id": "lab", "name": "Labelled",
  "statuses": [
    {"id": "todo", "kind": "queue"},
    {"id": "train", "step": {"run": "true", "requires": ["gpu"]}},
    {"id": "done", "kind": "done"},
    {"id": "failed", "kind": "failed"},
    {"id": "cancelled", "kind": "cancelled"}
  ]
}"#;

#[test]
fn a_step_waits_for_an_engine_with_its_labels() {
    let ws = Ws::new();
    ws.config(FAST);
    ws.pipeline("lab.json", LABELLED);
    ws.pipeline("gate.json", common::GATE);
    let gpu_task = ws.new_task("lab", "train it");
    ws.ok(&["start", &gpu_task.to_string()]);
    let plain = ws.new_task("gate", "anywhere");
    ws.ok(&["start", &plain.to_string()]);

    // No engine of this board has the label yet: a warning, not an error.
    let warned = |ws: &Ws| {
        let out = ws.baton(&["pipelines", "validate"]).output().unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stderr).contains(
            "lab.json: warning: status `train` requires label `gpu`, which no engine of this board has had yet",
        )
    };
    assert!(warned(&ws));

    // An engine without the label runs the other task, and leaves this one queued: with
    // nothing else it may run, it counts as idle.
    ws.baton(&["engine", "--name", "cpu-only", "--exit-when-idle"])
        .timeout(Duration::from_secs(60))
        .assert()
        .success();
    assert_eq!(ws.show(plain)["status"], "review");
    assert_eq!(ws.show(gpu_task)["state"], "queued");
    let shown = ws.ok(&["show", &gpu_task.to_string()]);
    assert!(
        shown.contains("waits for an engine labelled gpu — `baton engine --labels gpu` starts one"),
        "{shown}"
    );

    let child = engine(&ws, &["--name", "gpu-1", "--labels", "gpu,big"]);
    wait_for("the labelled step to run", || {
        ws.show(gpu_task)["state"] == "done"
    });
    let shown = ws.ok(&["show", &gpu_task.to_string()]);
    assert!(!shown.contains("waits for an engine"), "{shown}");
    stop(child);
    assert!(!warned(&ws), "an engine with the label has run");
    // Each step run names the engine that started it.
    let db = rusqlite::Connection::open(ws.root().join(".baton/baton.db")).unwrap();
    let ran_on = |task: i64, status: &str| -> String {
        db.query_row(
            "SELECT engine FROM step_runs WHERE task_id = ?1 AND status = ?2",
            rusqlite::params![task, status],
            |r| r.get(0),
        )
        .unwrap()
    };
    assert_eq!(ran_on(gpu_task, "train"), "gpu-1");
    assert_eq!(ran_on(plain, "build"), "cpu-only");
}

#[test]
fn bad_names_and_labels_are_refused_in_one_sentence() {
    let ws = Ws::new();
    for (args, want) in [
        (
            &["engine", "--labels", "GPU"][..],
            "--labels: label `GPU` is not a lowercase word",
        ),
        (
            &["engine", "--name", "a b"][..],
            "--name: `a b` cannot name an engine",
        ),
    ] {
        let out = ws.baton(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains(want),
            "{args:?}: {err}"
        );
    }
    let bad = r#"{"id": "bad", "name": "Bad",
  "statuses": [
    {"id": "todo", "kind": "queue"},
    {"id": "train", "step": {"run": "true",
      "requires": ["Gpu"]}},
    {"id": "done", "kind": "done"},
    {"id": "failed", "kind": "failed"}
  ]
}"#;
    let path = ws.pipeline("bad.json", bad);
    let out = ws
        .baton(&["pipelines", "validate", path.to_str().unwrap()])
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.status.success(), "{text}");
    assert!(
        text.contains("bad.json:5:20")
            && text.contains("requires: label `Gpu` is not a lowercase word"),
        "{text}"
    );
}
