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

#[test]
fn a_bad_after_on_a_trigger_is_located() {
    let ws = Ws::new();
    ws.pipeline(
        "bad.json",
        r#"{"id": "bad", "name": "Bad",
  "statuses": [{"id": "todo", "kind": "queue"}, {"id": "done", "kind": "done"}],
  "triggers": [{"schedule": "0 3 * * *", "after": "previous"},
    {"schedule": "0 4 * * *", "after": "x"},
    {"schedule": "0 5 * * *", "aftr": "previous"}]
}"#,
    );
    let out = ws.baton(&["pipelines", "validate"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "bad.json:4:40: error: trigger 2: after takes \"previous\" (wait for the task this trigger made last), not \"x\""
        ),
        "{err}"
    );
    assert!(
        err.contains(
            "bad.json:5:31: error: trigger 3: unknown field `aftr` — did you mean `after`?"
        ),
        "{err}"
    );
    assert!(!err.contains("trigger 1"), "`previous` is fine: {err}");
}

/// A push to `main` fires both triggers: `ci`'s tasks wait for the one before, `free`'s
/// start at once.
#[test]
fn a_trigger_with_after_previous_waits_for_the_task_it_made_before() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("repo");
    common::git_init(&root);
    let ws = Ws::at(dir, "repo");
    ws.baton(&["init"]).assert().success();
    let pipeline = |id: &str, after: &str| {
        format!(
            r#"{{"id": "{id}", "name": "{id}",
  "statuses": [
    {{"id": "todo", "kind": "queue"}},
    {{"id": "review", "kind": "gate"}},
    {{"id": "done", "kind": "done"}}
  ],
  "triggers": [{{"push": {{"branches": ["main"]}}, "title": "build {{{{sha}}}}"{after}}}]
}}"#
        )
    };
    ws.pipeline("ci.json", &pipeline("ci", r#", "after": "previous""#));
    ws.pipeline("free.json", &pipeline("free", ""));
    let of = |p: &str| -> Vec<serde_json::Value> {
        let mut all: Vec<_> = tasks(&ws)
            .into_iter()
            .filter(|t| t["pipeline"] == p)
            .collect();
        all.sort_by_key(|t| t["id"].as_i64());
        all
    };
    let engine = spawn_engine(&ws);
    let seen = || {
        baton::store::Store::open(&ws.root().join(".baton/baton.db"))
            .unwrap()
            .read()
            .meta("push-seen:free:0:main")
            .unwrap()
            .is_some()
    };
    wait_for("the first look at branch heads", seen);
    common::git(&root, &["commit", "-q", "--allow-empty", "-m", "two"]);
    wait_for("the first push's tasks", || {
        of("ci").len() == 1 && of("free").len() == 1
    });
    let first = of("ci")[0]["id"].as_i64().unwrap();
    assert_eq!(ws.show(first)["status"], "review", "nothing before it");
    common::git(&root, &["commit", "-q", "--allow-empty", "-m", "three"]);
    wait_for("the second push's tasks", || {
        of("ci").len() == 2 && of("free").len() == 2
    });
    // Without `after` both start at once.
    assert!(of("free").iter().all(|t| t["status"] == "review"));
    // With it the second waits for the first.
    let second = of("ci")[1]["id"].as_i64().unwrap();
    let shown = ws.show(second);
    assert_eq!(shown["status"], "todo", "{shown}");
    assert_eq!(shown["start_waits"], true, "{shown}");
    let after: Vec<i64> = shown["after"]
        .as_array()
        .expect("`after` is a list")
        .iter()
        .map(|b| b["id"].as_i64().unwrap())
        .collect();
    assert_eq!(after, [first]);
    // Done with the first: the second starts by itself.
    ws.ok(&["approve", &first.to_string()]);
    wait_for("the second to start", || {
        ws.show(second)["status"] == "review"
    });
    stop(engine);
    assert_eq!(ws.show(first)["status"], "done");
    assert_eq!(ws.show(second)["start_waits"], false);
}

#[test]
fn a_task_done_trigger_on_its_own_pipeline_stops_after_a_few_generations() {
    let ws = Ws::new();
    ws.pipeline(
        "again.json",
        r#"{"id": "again", "name": "Again",
  "statuses": [
    {"id": "todo", "kind": "queue"},
    {"id": "work", "step": {"run": "true"}},
    {"id": "done", "kind": "done"},
    {"id": "failed", "kind": "failed"}
  ],
  "triggers": [{"task_done": {"pipeline": "again"}}]
}"#,
    );
    let seed = ws.new_task("again", "seed");
    ws.ok(&["start", &seed.to_string()]);
    let out = ws
        .baton(&["engine", "--exit-when-idle"])
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    // The seed and five generations after it; the sixth is refused, and said.
    let all = tasks(&ws);
    assert_eq!(all.len(), 6, "{all:#?}");
    assert!(all.iter().all(|t| t["state"] == "done"), "{all:#?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("5 tasks deep in a chain of tasks that tasks made (at most 5)"),
        "{err}"
    );
    // The last one says so where `show` finds it.
    let last = all.iter().map(|t| t["id"].as_i64().unwrap()).max().unwrap();
    let shown = ws.ok(&["show", &last.to_string()]);
    assert!(shown.contains("did not start a task"), "{shown}");
}

/// A push trigger on baton's own task branches: each task's commit on its branch makes a
/// task, whose commit makes the next. Each is the child of the task whose branch it came
/// from, so the chain stops after five generations, said on the last one.
#[test]
fn a_push_trigger_on_task_branches_stops_after_a_few_generations() {
    let dir = tempfile::tempdir().unwrap();
    common::git_init(&dir.path().join("repo"));
    let ws = Ws::at(dir, "repo");
    ws.baton(&["init"]).assert().success();
    // The gate holds each task until the engine has seen its new branch: a head already
    // there at first sight does not fire, so the commit must come after that look.
    ws.pipeline(
        "loop.json",
        r#"{"id": "loop", "name": "Loop",
  "statuses": [
    {"id": "todo", "kind": "queue"},
    {"id": "branch", "step": {"run": "true"}},
    {"id": "ready", "kind": "gate"},
    {"id": "work", "step": {"script": "echo \"$BATON_TASK_ID\" > work.txt\ngit add work.txt\ngit commit -qm work"}},
    {"id": "done", "kind": "done"},
    {"id": "failed", "kind": "failed"}
  ],
  "triggers": [{"push": {"branches": ["baton/*"]}, "title": "after {{sha}}"}]
}"#,
    );
    let seed = ws.new_task("loop", "seed");
    ws.ok(&["start", &seed.to_string()]);
    let db = ws.root().join(".baton/baton.db");
    let store = || baton::store::Store::open(&db).unwrap();
    let engine = Command::new(assert_cmd::cargo::cargo_bin("baton"))
        .current_dir(ws.root())
        .env_remove("BATON_DIR")
        .env("BATON_PUSH_POLL_MS", "100")
        .arg("engine")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("engine starts");
    let mut approved = std::collections::HashSet::new();
    let refused = |id: i64| {
        let events = store().read().events(id).unwrap();
        events
            .into_iter()
            .find(|e| e.kind == "trigger.refused")
            .map(|e| e.summary)
    };
    let mut said = None;
    common::wait_within(
        "the chain to stop",
        std::time::Duration::from_secs(60),
        || {
            for t in tasks(&ws) {
                let id = t["id"].as_i64().unwrap();
                if t["status"] != "ready" || approved.contains(&id) {
                    continue;
                }
                let branch = store().read().task(id).unwrap().branch.unwrap();
                let memo = format!("push-seen:loop:0:{branch}");
                if store().read().meta(&memo).unwrap().is_some() {
                    ws.ok(&["approve", &id.to_string()]);
                    approved.insert(id);
                }
            }
            said = approved.iter().find_map(|&id| refused(id).map(|s| (id, s)));
            said.is_some() && tasks(&ws).iter().all(|t| t["state"] == "done")
        },
    );
    stop(engine);
    // The seed and five generations after it; the sixth is refused on the last.
    let all = tasks(&ws);
    assert_eq!(all.len(), 6, "{all:#?}");
    assert!(all.iter().all(|t| t["state"] == "done"), "{all:#?}");
    let last = all.iter().map(|t| t["id"].as_i64().unwrap()).max().unwrap();
    assert_eq!(store().read().task_depth(last).unwrap(), 5);
    let (on, why) = said.unwrap();
    assert_eq!(on, last);
    assert!(
        why.contains("5 tasks deep in a chain of tasks that tasks made (at most 5)")
            && why.contains("`baton/*`"),
        "{why}"
    );
    let shown = ws.ok(&["show", &last.to_string()]);
    assert!(shown.contains("did not start a task"), "{shown}");
}
