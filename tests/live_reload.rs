//! Live reload: pipeline files edited while an engine runs a task. A valid edit applies to
//! new tasks and triggers while the running task keeps its snapshot; a broken edit is
//! reported and the last good version stays in force.

mod common;
use baton::engine::{Engine, EngineEvent, RunOptions};
use common::Ws;
use std::time::Duration;
use tokio::sync::broadcast::Receiver;

const LIVE_V1: &str = r#"{"id": "live", "statuses": [
  {"id": "todo", "kind": "queue"},
  {"id": "work", "step": {"run": "while [ ! -f go ]; do sleep 0.05; done"}},
  {"id": "done", "kind": "done"},
  {"id": "failed", "kind": "failed"},
  {"id": "cancelled", "kind": "cancelled"}
]}"#;

const LIVE_V2: &str = r#"{"id": "live", "statuses": [
  {"id": "todo", "kind": "queue"},
  {"id": "work", "step": {"run": "true"}},
  {"id": "check", "kind": "gate"},
  {"id": "done", "kind": "done"},
  {"id": "failed", "kind": "failed"},
  {"id": "cancelled", "kind": "cancelled"}
]}"#;

const FOLLOW: &str = r#"{"id": "follow", "statuses": [
  {"id": "todo", "kind": "queue"},
  {"id": "review", "kind": "gate"},
  {"id": "done", "kind": "done"}
]TRIGGERS}"#;

/// Waits for the next reload the engine reports; its problems.
async fn reloaded(events: &mut Receiver<EngineEvent>) -> Vec<String> {
    let wait = async {
        loop {
            match events.recv().await {
                Ok(EngineEvent::Reloaded { problems }) => return problems,
                Ok(_) => {}
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(e) => panic!("the engine's events ended: {e}"),
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(30), wait)
        .await
        .expect("the engine reported a reload")
}

/// Waits until `cond` holds, looking after each task change the engine reports.
async fn until(events: &mut Receiver<EngineEvent>, what: &str, mut cond: impl FnMut() -> bool) {
    let wait = async {
        while !cond() {
            match events.recv().await {
                Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(e) => panic!("the engine's events ended: {e}"),
            }
        }
    };
    if tokio::time::timeout(Duration::from_secs(30), wait)
        .await
        .is_err()
    {
        panic!("timed out waiting for {what}");
    }
}

/// Saves a pipeline file the way editors do: a temporary file renamed over it, so the
/// engine sees one change.
fn save(ws: &Ws, file: &str, text: &str) {
    let dir = ws.root().join(".baton/pipelines");
    let tmp = dir.join(format!(".{file}.tmp"));
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, dir.join(file)).unwrap();
}

fn statuses(ws: &Ws, id: i64) -> Vec<String> {
    let store = baton::store::Store::open(&ws.root().join(".baton/baton.db")).unwrap();
    let p = store.read().pipeline(id).unwrap();
    p.statuses.iter().map(|s| s.id.clone()).collect()
}

#[test]
fn edits_while_a_task_runs_apply_to_new_work_and_a_broken_one_keeps_the_last_good() {
    let ws = Ws::new();
    ws.pipeline("live.json", LIVE_V1);
    ws.pipeline("follow.json", &FOLLOW.replace("TRIGGERS", ""));
    let first = ws.new_task("live", "running through the edits");
    ws.ok(&["start", &first.to_string()]);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let workspace = baton::workspace::Workspace::at(ws.root());
        let engine = Engine::start(&workspace).await.expect("the engine starts");
        let handle = engine.handle();
        let mut events = handle.subscribe();
        let run = tokio::spawn(engine.run(RunOptions::default()));
        until(&mut events, "the step to run", || {
            ws.show(first)["state"] == "running"
        })
        .await;

        // A valid edit: a trigger appears on another pipeline.
        save(
            &ws,
            "follow.json",
            &FOLLOW.replace(
                "TRIGGERS",
                r#", "triggers": [{"task_done": {"pipeline": "live"}, "title": "after {{title}}"}]"#,
            ),
        );
        assert_eq!(reloaded(&mut events).await, Vec::<String>::new());

        // A valid edit of the running task's own pipeline: new tasks get it, the running
        // one keeps its snapshot.
        save(&ws, "live.json", LIVE_V2);
        assert_eq!(reloaded(&mut events).await, Vec::<String>::new());
        let second = ws.new_task("live", "made after the edit");
        assert!(statuses(&ws, second).contains(&"check".to_string()));
        assert!(!statuses(&ws, first).contains(&"check".to_string()));

        // A broken edit: reported, as an event too.
        save(&ws, "live.json", "{\"id\": \"live\", \"statuses\": [");
        let problems = reloaded(&mut events).await;
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].contains("live.json") && problems[0].contains("last good version"),
            "{problems:?}"
        );
        let store = baton::store::Store::open(&ws.root().join(".baton/baton.db")).unwrap();
        let recorded = store.read().workspace_events(10).unwrap();
        let kinds: Vec<&str> = recorded.iter().map(|e| e.kind.as_str()).collect();
        assert_eq!(kinds, ["reload", "reload", "reload.failed"], "{recorded:?}");
        assert!(recorded[2].summary.contains("live.json"));

        // The running task ends by its own snapshot (work → done, no `check`), and the
        // reloaded trigger starts a task for it.
        std::fs::write(ws.root().join("go"), "").unwrap();
        until(&mut events, "the first task to finish and fire", || {
            ws.show(first)["state"] == "done"
                && ws.ok(&["list", "--pipeline", "follow", "--json"]).contains("after running")
        })
        .await;
        let history = ws.show(first)["history"].clone();
        let tos: Vec<&str> = history
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["to"].as_str().unwrap())
            .collect();
        assert_eq!(tos, ["todo", "work", "done"]);
        // config.toml too: a broken setting is reported and the old settings stay.
        let cfg = ws.root().join(".baton/config.toml");
        let tmp = ws.root().join(".baton/config.toml.tmp");
        std::fs::write(&tmp, "max_parallel = \"many\"\n").unwrap();
        std::fs::rename(&tmp, &cfg).unwrap();
        let problems = reloaded(&mut events).await;
        assert!(
            problems.iter().any(|p| p.contains("config.toml")
                && p.contains("max_parallel")
                && p.contains("settings read before stay in force")),
            "{problems:?}"
        );
        handle.shutdown();
        run.await.unwrap().unwrap();
    });
}

const AGENT_PIPELINE: &str = r#"{"id": "ag", "statuses": [
  {"id": "todo", "kind": "queue"},
  {"id": "think", "step": {"agent": "mine"}},
  {"id": "done", "kind": "done"},
  {"id": "failed", "kind": "failed"}
]}"#;

const GOOD_AGENT: &str = r#"{"id": "mine", "backend": "command", "format": "text",
  "argv": ["sh", "-c", "echo from-the-good-profile"]}"#;

#[test]
fn a_broken_agent_profile_keeps_its_last_good_version_for_new_steps() {
    use baton::engine::{Action, Request};
    let ws = Ws::new();
    let agents = ws.root().join(".baton/agents");
    std::fs::create_dir_all(&agents).unwrap();
    std::fs::write(agents.join("mine.json"), GOOD_AGENT).unwrap();
    ws.pipeline("ag.json", AGENT_PIPELINE);
    let id = ws.new_task("ag", "think later");
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let workspace = baton::workspace::Workspace::at(ws.root());
        let engine = Engine::start(&workspace).await.expect("the engine starts");
        let handle = engine.handle();
        let mut events = handle.subscribe();
        let run = tokio::spawn(engine.run(RunOptions::default()));
        let tmp = agents.join(".mine.json.tmp");
        std::fs::write(&tmp, r#"{"id": "mine", "backend": "#).unwrap();
        std::fs::rename(&tmp, agents.join("mine.json")).unwrap();
        let problems = reloaded(&mut events).await;
        assert!(
            problems
                .iter()
                .any(|p| p.contains("mine.json") && p.contains("last good version of agent `mine`")),
            "{problems:?}"
        );
        handle
            .send(Request {
                task_id: id,
                action: Action::Start,
                expected_status: None,
                actor: "test".into(),
            })
            .await
            .expect("start is applied");
        until(&mut events, "the agent step to end", || {
            ws.show(id)["state"] != "running" && ws.show(id)["status"] != "think"
        })
        .await;
        assert_eq!(ws.show(id)["status"], "done", "{:#}", ws.show(id));
        let log = ws.ok(&["logs", &id.to_string()]);
        assert!(log.contains("from-the-good-profile"), "{log}");
        handle.shutdown();
        run.await.unwrap().unwrap();
    });
}

#[test]
fn a_profile_saved_just_before_its_task_starts_is_found() {
    use baton::engine::{Action, Request};
    let ws = Ws::new();
    let agents = ws.root().join(".baton/agents");
    std::fs::create_dir_all(&agents).unwrap();
    ws.pipeline("ag.json", AGENT_PIPELINE);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let workspace = baton::workspace::Workspace::at(ws.root());
        let engine = Engine::start(&workspace).await.expect("the engine starts");
        let handle = engine.handle();
        let mut events = handle.subscribe();
        let run = tokio::spawn(engine.run(RunOptions::default()));
        // The profile appears and its task starts at once, well inside the file watcher's
        // quiet period: the engine's catalog has not reloaded it yet.
        std::fs::write(agents.join("mine.json"), GOOD_AGENT).unwrap();
        let id = ws.new_task("ag", "think now");
        handle
            .send(Request {
                task_id: id,
                action: Action::Start,
                expected_status: None,
                actor: "test".into(),
            })
            .await
            .expect("start is applied");
        until(&mut events, "the agent step to end", || {
            let t = ws.show(id);
            t["state"] != "running" && t["state"] != "queued"
        })
        .await;
        assert_eq!(ws.show(id)["status"], "done", "{:#}", ws.show(id));
        handle.shutdown();
        run.await.unwrap().unwrap();
    });
}
