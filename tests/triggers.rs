//! Pipeline triggers: schedules, pushes and task_done create and start tasks, once each.

mod common;
use common::{Ws, spawn_engine, stop, wait_for};
use std::process::Command;
use std::time::Instant;

fn tasks(ws: &Ws) -> Vec<serde_json::Value> {
    let list: serde_json::Value = serde_json::from_str(&ws.ok(&["list", "--json"])).unwrap();
    list.as_array().unwrap().clone()
}

#[test]
fn a_schedule_creates_started_tasks_and_task_done_chains() {
    let ws = Ws::new();
    ws.pipeline(
        "nightly.json",
        r#"{"id": "nightly", "name": "Nightly",
  "statuses": [
    {"id": "todo", "kind": "queue"},
    {"id": "work", "step": {"run": "true"}},
    {"id": "done", "kind": "done"},
    {"id": "failed", "kind": "failed"}
  ],
  "triggers": [{"schedule": "* * * * * *", "title": "tick {{date}}"}]
}"#,
    );
    ws.pipeline(
        "after.json",
        r#"{"id": "after", "name": "After",
  "statuses": [
    {"id": "todo", "kind": "queue"},
    {"id": "review", "kind": "gate"},
    {"id": "done", "kind": "done"}
  ],
  "triggers": [{"task_done": {"pipeline": "nightly"}, "title": "check {{title}} (#{{id}})"}]
}"#,
    );
    let started = Instant::now();
    let engine = spawn_engine(&ws);
    wait_for("a scheduled task to finish and chain", || {
        tasks(&ws).iter().any(|t| t["pipeline"] == "after")
    });
    stop(engine);
    let seconds = started.elapsed().as_secs() as usize;
    let all = tasks(&ws);
    let ticks: Vec<_> = all.iter().filter(|t| t["pipeline"] == "nightly").collect();
    assert!(!ticks.is_empty());
    assert!(
        ticks
            .iter()
            .all(|t| t["title"].as_str().unwrap().starts_with("tick 20"))
    );
    assert!(
        ticks.len() <= seconds + 1,
        "at most one firing a second: {} in {seconds} s",
        ticks.len()
    );
    let chained = all.iter().find(|t| t["pipeline"] == "after").unwrap();
    assert!(chained["title"].as_str().unwrap().starts_with("check tick"));
    assert_eq!(chained["status"], "review", "the chained task was started");
}

#[test]
fn a_push_to_a_matching_branch_creates_one_task_per_commit() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("repo");
    std::fs::create_dir(&root).unwrap();
    let git = |args: &[&str]| {
        let ok = Command::new("git")
            .arg("-C")
            .arg(&root)
            .args(args)
            .output()
            .unwrap();
        assert!(
            ok.status.success(),
            "{}",
            String::from_utf8_lossy(&ok.stderr)
        );
    };
    git(&["init", "-q", "-b", "main"]);
    git(&["config", "user.name", "T"]);
    git(&["config", "user.email", "t@example.com"]);
    git(&["commit", "-q", "--allow-empty", "-m", "one"]);
    let ws = Ws::at(dir, "repo");
    ws.baton(&["init"]).assert().success();
    ws.pipeline(
        "ci.json",
        r#"{"id": "ci", "name": "CI",
  "statuses": [
    {"id": "todo", "kind": "queue"},
    {"id": "review", "kind": "gate"},
    {"id": "done", "kind": "done"}
  ],
  "triggers": [{"push": {"branches": ["main", "release/*"]}, "title": "build {{branch}} {{sha}}"}]
}"#,
    );
    let engine = spawn_engine(&ws);
    // The engine first records the heads it sees; wait until it has looked once.
    let seen = || {
        baton::store::Store::open(&ws.root().join(".baton/baton.db"))
            .unwrap()
            .read()
            .meta("push-seen:ci:0:main")
            .unwrap()
            .is_some()
    };
    wait_for("the first look at branch heads", seen);
    assert!(tasks(&ws).is_empty(), "existing commits do not fire");
    git(&["commit", "-q", "--allow-empty", "-m", "two"]);
    git(&["branch", "feature/x"]);
    wait_for("a task for the push", || !tasks(&ws).is_empty());
    stop(engine);
    let all = tasks(&ws);
    assert_eq!(all.len(), 1, "{all:?}");
    assert!(all[0]["title"].as_str().unwrap().starts_with("build main "));
    // A restart does not fire the same commit again.
    ws.drain();
    assert_eq!(tasks(&ws).len(), 1);
}

#[test]
fn bad_triggers_are_reported_by_validate() {
    let ws = Ws::new();
    ws.pipeline(
        "bad.json",
        r#"{"id": "bad", "name": "Bad",
  "statuses": [{"id": "todo", "kind": "queue"}, {"id": "done", "kind": "done"}],
  "triggers": [{"schedule": "every tuesday"}]
}"#,
    );
    let out = ws.baton(&["pipelines", "validate"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    // Located like every other pipeline error, and explained by its fields.
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.json:3:29: error: trigger 1: schedule `every tuesday`: it has 2 fields"),
        "{err}"
    );
}
