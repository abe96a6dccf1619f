//! The engine core: many tasks at once in a git repository, durable hooks across a kill,
//! `--exit-when-idle` with tasks that hooks create, a read-only database, and wake-ups
//! from other processes.

mod common;
use common::{Ws, git, spawn_engine, stop, wait_for};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const ONE_STEP: &str = r#"{"id": "one", "statuses": [
  {"id": "todo", "kind": "queue"},
  {"id": "work", "step": {"run": "echo \"$BATON_TASK_ID\" > out.txt"}},
  {"id": "done", "kind": "done"},
  {"id": "failed", "kind": "failed"},
  {"id": "cancelled", "kind": "cancelled"}
]}"#;

/// Every task gets its own worktree while up to 32 run at once; git's locks are never
/// raced, so none fails, and every worktree is gone at the end.
#[test]
fn three_hundred_tasks_started_at_once_in_a_git_repository_all_finish() {
    let dir = tempfile::tempdir().unwrap();
    common::git_init(&dir.path().join("repo"));
    let ws = Ws::at(dir, "repo");
    ws.baton(&["init"]).assert().success();
    ws.config("max_parallel = 32\nworktree_root = \"../worktrees\"\n");
    ws.pipeline("one.json", ONE_STEP);
    let n = 300;
    for i in 0..n {
        ws.baton(&["new", &format!("task {i}"), "--pipeline", "one", "--start"])
            .assert()
            .success();
    }
    ws.baton(&["engine", "--exit-when-idle"])
        .timeout(Duration::from_secs(600))
        .assert()
        .success();
    let list: serde_json::Value =
        serde_json::from_str(&ws.ok(&["list", "--json"])).expect("list --json");
    let tasks = list.as_array().unwrap();
    assert_eq!(tasks.len(), n);
    let not_done: Vec<_> = tasks.iter().filter(|t| t["state"] != "done").collect();
    assert!(not_done.is_empty(), "not done: {not_done:#?}");
    let worktrees = git(ws.root(), &["worktree", "list"]);
    assert_eq!(worktrees.lines().count(), 1, "{worktrees}");
    // Each task's work is kept on its own branch; the removed worktree is forgotten.
    let branches = git(ws.root(), &["branch", "--list", "baton/*"]);
    assert_eq!(branches.lines().count(), n, "{branches}");
    let shown = ws.ok(&["show", "1"]);
    assert!(shown.contains("branch baton/1-task-0"), "{shown}");
    assert!(!shown.contains("worktree"), "{shown}");
}

/// The first hook blocks until `go` exists; the engine is killed while it runs, so it was
/// started and not finished, and the second was recorded and never started.
const HOOKS: &str = r#"{"id": "hooks", "statuses": [
  {"id": "todo", "kind": "queue"},
  {"id": "review", "kind": "gate"},
  {"id": "done", "kind": "done"},
  {"id": "failed", "kind": "failed"},
  {"id": "cancelled", "kind": "cancelled"}
], "transitions": [
  {"from": "todo", "to": "review", "on": "start"},
  {"from": "review", "to": "done", "on": "approve", "hooks": [
    {"run": "echo \"$BATON_HOOK_ATTEMPT $BATON_EXECUTION_KEY\" >> hook1.log\nwhile [ ! -f go ]; do sleep 0.05; done\necho first"},
    {"run": "echo \"$BATON_HOOK_ATTEMPT $BATON_EXECUTION_KEY\" >> hook2.log\necho second"}
  ]}
]}"#;

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(String::from)
        .collect()
}

#[test]
fn hooks_recorded_before_a_kill_run_after_the_restart_with_the_same_key() {
    let ws = Ws::new();
    ws.pipeline("hooks.json", HOOKS);
    let id = ws.new_task("hooks", "ship it");
    ws.ok(&["start", &id.to_string()]);
    let mut engine = spawn_engine(&ws);
    let socket = ws.root().join(".baton/engine.sock");
    wait_for("the engine to listen", || socket.exists());
    ws.ok(&["approve", &id.to_string()]);
    wait_for("the first hook to start", || {
        !lines(&ws.root().join("hook1.log")).is_empty()
    });
    engine.kill().unwrap();
    engine.wait().unwrap();
    assert_eq!(ws.show(id)["state"], "done", "the move itself committed");
    assert!(
        lines(&ws.root().join("hook2.log")).is_empty(),
        "the second hook had not run when the engine died"
    );

    let engine = spawn_engine(&ws);
    wait_for("the first hook to run again", || {
        lines(&ws.root().join("hook1.log")).len() == 2
    });
    std::fs::write(ws.root().join("go"), "").unwrap();
    wait_for("the second hook to run", || {
        !lines(&ws.root().join("hook2.log")).is_empty()
    });
    wait_for("the hooks' results to be recorded", || {
        ws.show(id)["history"]
            .as_array()
            .and_then(|h| h.last())
            .is_some_and(|h| {
                h["hooks"]
                    .as_array()
                    .is_some_and(|a| a.len() == 2 && a.iter().all(|x| x["state"] != "pending"))
            })
    });
    stop(engine);

    let first = lines(&ws.root().join("hook1.log"));
    let keys: Vec<&str> = first.iter().map(|l| l.split(' ').nth(1).unwrap()).collect();
    assert_eq!(first[0].split(' ').next(), Some("1"));
    assert_eq!(first[1].split(' ').next(), Some("2"), "{first:?}");
    assert_eq!(
        keys[0], keys[1],
        "one idempotency key across attempts: {first:?}"
    );
    let second = lines(&ws.root().join("hook2.log"));
    assert_eq!(second.len(), 1, "{second:?}");
    assert_ne!(second[0].split(' ').nth(1), Some(keys[0]));
    let history = ws.show(id)["history"].clone();
    let hooks = history.as_array().unwrap().last().unwrap()["hooks"].clone();
    assert_eq!(hooks[0]["state"], "ok", "{hooks:#}");
    assert_eq!(hooks[0]["detail"], "first");
    assert_eq!(hooks[1]["detail"], "second");
}

const PARENT: &str = r#"{"id": "parent", "statuses": [
  {"id": "todo", "kind": "queue"},
  {"id": "build", "step": {"run": "true"}},
  {"id": "done", "kind": "done"},
  {"id": "failed", "kind": "failed"},
  {"id": "cancelled", "kind": "cancelled"}
], "transitions": [
  {"from": "build", "to": "done", "on": "success", "hooks": [
    {"start_task": {"pipeline": "child", "title": "after {{title}}"}}
  ]}
]}"#;

const CHILD: &str = r#"{"id": "child", "statuses": [
  {"id": "todo", "kind": "queue"},
  {"id": "work", "step": {"run": "echo child-ran"}},
  {"id": "done", "kind": "done"},
  {"id": "failed", "kind": "failed"},
  {"id": "cancelled", "kind": "cancelled"}
]}"#;

#[test]
fn exit_when_idle_waits_for_tasks_that_hooks_create() {
    let ws = Ws::new();
    ws.pipeline("parent.json", PARENT);
    ws.pipeline("child.json", CHILD);
    let id = ws.new_task("parent", "release");
    ws.ok(&["start", &id.to_string()]);
    ws.drain();
    let list: serde_json::Value =
        serde_json::from_str(&ws.ok(&["list", "--json"])).expect("list --json");
    let child = list
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["pipeline"] == "child")
        .unwrap_or_else(|| panic!("the hook created no task: {list:#}"));
    assert_eq!(child["title"], "after release");
    assert_eq!(child["state"], "done", "{child:#}");
}

/// A `start_task` hook that starts its own pipeline would create tasks for ever: the chain
/// stops at a fixed depth, and says so.
#[test]
fn a_start_task_chain_stops_at_its_depth_limit() {
    let ws = Ws::new();
    ws.pipeline(
        "loop.json",
        &PARENT
            .replace("\"parent\"", "\"loop\"")
            .replace("\"child\"", "\"loop\""),
    );
    let id = ws.new_task("loop", "{{prompt}} again");
    ws.ok(&["start", &id.to_string()]);
    ws.drain();
    let list: serde_json::Value =
        serde_json::from_str(&ws.ok(&["list", "--json"])).expect("list --json");
    let tasks = list.as_array().unwrap();
    assert_eq!(
        tasks.len(),
        6,
        "the first task and five generations: {list:#}"
    );
    // Titles are filled once: the parent's title is not expanded again.
    assert!(
        tasks
            .iter()
            .all(|t| t["title"].as_str().unwrap().ends_with("{{prompt}} again")),
        "{list:#}"
    );
    let last = tasks
        .iter()
        .map(|t| t["id"].as_i64().unwrap())
        .max()
        .unwrap();
    let shown = ws.ok(&["show", &last.to_string()]);
    assert!(
        shown.contains("chain of start_task hooks"),
        "the refusal is in the last task's events: {shown}"
    );
}

/// Runs `baton ARGS` in the workspace as a user who may not write the database: as root
/// (which ignores permission bits) that is `nobody`.
fn as_other_user(ws: &Ws, args: &[&str]) -> Option<std::process::Output> {
    use std::os::unix::process::CommandExt;
    if !nix::unistd::geteuid().is_root() {
        return None;
    }
    let mut cmd = Command::new(common::baton_for_any_user());
    cmd.current_dir(ws.root())
        .env_remove("BATON_DIR")
        .env("NO_COLOR", "1")
        .args(args)
        .uid(65534)
        .gid(65534);
    Some(cmd.output().unwrap())
}

#[test]
fn an_engine_on_a_read_only_database_stops_at_once_and_says_why() {
    use std::os::unix::fs::PermissionsExt;
    let ws = Ws::new();
    ws.pipeline("one.json", ONE_STEP);
    let id = ws.new_task("one", "queued");
    ws.ok(&["start", &id.to_string()]);
    let baton = ws.root().join(".baton");
    let mode =
        |p: &Path, m: u32| std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
    std::fs::create_dir_all(baton.join("logs")).unwrap();
    std::fs::write(baton.join("engine.lock"), "").unwrap();
    mode(ws.dir.path(), 0o755);
    mode(&baton, 0o777);
    mode(&baton.join("logs"), 0o777);
    mode(&baton.join("engine.lock"), 0o666);
    mode(&baton.join("baton.db"), 0o444);
    let out = match as_other_user(&ws, &["engine", "--exit-when-idle"]) {
        Some(out) => out,
        None => {
            // Not root: take write permission away from ourselves instead.
            ws.baton(&["engine", "--exit-when-idle"])
                .timeout(Duration::from_secs(30))
                .output()
                .unwrap()
        }
    };
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(stderr.contains("read-only"), "{stderr}");
    assert!(stderr.contains("baton.db"), "{stderr}");
    mode(&baton.join("baton.db"), 0o644);
    assert_eq!(ws.show(id)["state"], "queued", "nothing ran");
}

#[test]
fn a_command_from_another_process_is_applied_by_the_running_engine() {
    let ws = Ws::new();
    ws.pipeline("gate.json", common::GATE);
    let id = ws.new_task("gate", "review me");
    let engine = spawn_engine(&ws);
    let socket = ws.root().join(".baton/engine.sock");
    wait_for("the engine to listen", || socket.exists());
    ws.ok(&["start", &id.to_string()]);
    wait_for("the task to reach review", || {
        ws.show(id)["status"] == "review"
    });
    let said = ws.ok(&["approve", &id.to_string()]);
    assert!(said.contains("review → done"), "{said}");
    assert_eq!(ws.show(id)["state"], "done");
    stop(engine);
    assert!(
        !socket.exists(),
        "the engine removes its socket when it stops"
    );
}

/// A full disk is simulated by a trigger that refuses log rows: the step's lines are lost
/// (the log writer's own test checks the marker that counts them), but commands still work.
#[test]
fn abort_still_works_while_log_lines_cannot_be_stored() {
    let ws = Ws::new();
    ws.pipeline(
        "noisy.json",
        r#"{"id": "noisy", "statuses": [
          {"id": "todo", "kind": "queue"},
          {"id": "talk", "step": {"script": "seq 1 50\ntouch printed\nsleep 300"}},
          {"id": "done", "kind": "done"},
          {"id": "failed", "kind": "failed"},
          {"id": "cancelled", "kind": "cancelled"}
        ]}"#,
    );
    let id = ws.new_task("noisy", "full disk");
    let raw = rusqlite::Connection::open(ws.root().join(".baton/baton.db")).unwrap();
    raw.execute_batch(
        "CREATE TRIGGER full BEFORE INSERT ON log_lines \
         BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END;",
    )
    .unwrap();
    let engine = spawn_engine(&ws);
    wait_for("the engine to listen", || {
        ws.root().join(".baton/engine.sock").exists()
    });
    ws.ok(&["start", &id.to_string()]);
    wait_for("the step to print", || ws.root().join("printed").exists());
    let said = ws.ok(&["abort", &id.to_string()]);
    assert!(said.contains("cancelled"), "{said}");
    assert_eq!(ws.show(id)["state"], "cancelled");
    raw.execute_batch("DROP TRIGGER full;").unwrap();
    stop(engine);
}

/// A board runs the engine in its own process and sends requests through its handle: a
/// started task's step runs at once, with nothing else to wake the engine.
#[test]
fn a_request_to_an_embedded_engine_starts_its_step() {
    use baton::engine::{Action, Engine, EngineEvent, Request, RunOptions};
    let ws = Ws::new();
    ws.pipeline("one.json", ONE_STEP);
    let id = ws.new_task("one", "embedded");
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let workspace = baton::workspace::Workspace::at(ws.root());
        let engine = Engine::start(&workspace).await.expect("the engine starts");
        let handle = engine.handle();
        let mut events = handle.subscribe();
        let run = tokio::spawn(engine.run(RunOptions::default()));
        let said = handle
            .send(Request {
                task_id: id,
                action: Action::Start,
                expected_status: None,
                actor: "test".into(),
            })
            .await
            .expect("start is applied");
        assert!(said.contains("todo → work"), "{said}");
        let done = tokio::time::timeout(Duration::from_secs(30), async {
            loop {
                match events.recv().await {
                    Ok(EngineEvent::TaskChanged { .. }) => {
                        let state = ws.show(id)["state"].clone();
                        if state == "done" {
                            return;
                        }
                    }
                    Ok(_) => {}
                    Err(e) => panic!("the engine's events ended: {e}"),
                }
            }
        })
        .await;
        assert!(done.is_ok(), "the step never ran: {:#}", ws.show(id));
        handle.shutdown();
        run.await.unwrap().unwrap();
    });
}

/// A stop that comes before the engine's first look (`run --wait` stopped by a ctrl+c in
/// its first moments) starts no step: the task stays queued for the next engine.
#[test]
fn an_engine_stopped_before_its_first_look_starts_no_step() {
    use baton::engine::Engine;
    let ws = Ws::new();
    ws.pipeline("one.json", ONE_STEP);
    let id = ws.new_task("one", "stopped at once");
    ws.ok(&["start", &id.to_string()]);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let waited = rt.block_on(async {
        let workspace = baton::workspace::Workspace::at(ws.root());
        let engine = Engine::start(&workspace).await.expect("the engine starts");
        engine.shutdown_token().cancel();
        tokio::time::timeout(
            Duration::from_secs(30),
            engine.run_until_settled(id, false, None),
        )
        .await
        .expect("the engine stops")
        .expect("the engine runs")
    });
    assert_eq!(waited.task.status, "work");
    let shown = ws.show(id);
    assert_eq!(shown["state"], "queued", "{shown:#}");
    assert!(!ws.root().join("out.txt").exists(), "the step ran");
    // The next engine runs it.
    ws.drain();
    assert_eq!(ws.show(id)["state"], "done");
}

/// A hook's task whose own start fires a hook: that hook was recorded inside the hook's
/// write, and still runs before `--exit-when-idle` returns.
#[test]
fn hooks_recorded_by_a_hook_made_task_run_before_the_engine_is_idle() {
    let ws = Ws::new();
    ws.pipeline("parent.json", PARENT);
    ws.pipeline(
        "child.json",
        r#"{"id": "child", "statuses": [
          {"id": "todo", "kind": "queue"},
          {"id": "work", "step": {"run": "true"}},
          {"id": "done", "kind": "done"},
          {"id": "failed", "kind": "failed"},
          {"id": "cancelled", "kind": "cancelled"}
        ], "transitions": [
          {"from": "todo", "to": "work", "on": "start", "hooks": [
            {"run": "echo \"$BATON_TASK_ID\" > child-started.txt"}
          ]}
        ]}"#,
    );
    let id = ws.new_task("parent", "release");
    ws.ok(&["start", &id.to_string()]);
    ws.drain();
    let started = std::fs::read_to_string(ws.root().join("child-started.txt"))
        .expect("the child's start hook ran");
    assert_eq!(started.trim(), "2");
    assert_eq!(ws.show(2)["state"], "done");
}
