//! Recovery looks for a step on the executor it was started on, whatever the configuration
//! says by the restart, and never interrupts (or starts again) a step whose executor does
//! not answer: it may still be running there.
//!
//! The docker tests need a daemon (`.ci/run` starts one) and say so on stderr where none
//! answers; the others need none.

mod common;
mod docker_support;
mod infra;
mod support_kube;

use baton::store::{Store, TaskState};
use common::{Ws, alive, spawn_engine, wait_for, wait_within};
use docker_support::{Cleanup, IMAGE, containers, image, pipeline, pipeline_of};
use std::process::{Command, Stdio};
use std::time::Duration;

/// One step that records its pid and sleeps.
const SLOW: &str = r#"{
  "id": "slow", "name": "Slow",
  "statuses": [
    {"id": "todo", "kind": "queue"},
    {"id": "work", "step": {"script": "echo $$ > step.pid\nsleep 300"}},
    {"id": "done", "kind": "done"},
    {"id": "failed", "kind": "failed"},
    {"id": "cancelled", "kind": "cancelled"}
  ]
}"#;

const NO_DAEMON: &str = "unix:///nonexistent/docker.sock";

/// `baton engine` as a child process with extra environment.
fn engine_with(ws: &Ws, env: &[(&str, &str)]) -> std::process::Child {
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("baton"));
    cmd.current_dir(ws.root())
        .env_remove("BATON_DIR")
        .arg("engine")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.spawn().expect("engine starts")
}

/// Runs an engine until idle, with extra environment.
fn drain_with(ws: &Ws, env: &[(&str, &str)]) {
    let mut cmd = ws.baton(&["engine", "--exit-when-idle"]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.timeout(Duration::from_secs(60)).assert().success();
}

#[test]
fn a_local_step_is_ended_after_the_default_executor_changed_to_docker() {
    let ws = Ws::new();
    ws.pipeline("slow.json", SLOW);
    ws.config("kill_grace = \"2s\"\n");
    let id = ws.new_task("slow", "started locally");
    // Without its guard the step outlives the engine, as when the guard itself is killed.
    let mut engine = engine_with(&ws, &[("BATON_STEP_GUARD", "off")]);
    ws.ok(&["start", &id.to_string()]);
    let pid = || {
        std::fs::read_to_string(ws.root().join("step.pid"))
            .ok()
            .and_then(|s| s.trim().parse::<i32>().ok())
    };
    wait_within("the step to start", Duration::from_secs(30), || {
        pid().is_some()
    });
    let orphan = pid().unwrap();
    engine.kill().unwrap();
    engine.wait().unwrap();
    assert!(alive(orphan), "the step outlives a SIGKILLed engine");

    // The workspace now sends steps to docker; this step ran locally all the same.
    ws.config(&format!(
        "kill_grace = \"2s\"\n[executor]\ndefault = \"docker\"\n[executor.docker]\nimage = \"{IMAGE}\"\n"
    ));
    drain_with(&ws, &[("DOCKER_HOST", NO_DAEMON)]);
    assert!(
        !alive(orphan),
        "recovery ended the step's local process group"
    );
    let shown = ws.show(id);
    assert_eq!(shown["state"], "interrupted", "{shown:#}");
    assert_eq!(shown["steps"][0]["state"], "interrupted");
    let text = ws.ok(&["show", &id.to_string()]);
    assert!(
        !text.contains("could not look"),
        "docker was not asked: {text}"
    );
}

/// A step that marks its start, waits for the test's `go` file, then marks its end.
const GATED: &str = "echo started >> started.txt; while [ ! -e go ]; do sleep 0.1; done; echo finished >> finished.txt";

/// Starts the task's docker step, kills its engine and waits for the container to be
/// seen running without it.
fn crash_with_a_running_container(ws: &Ws, title: &str) -> i64 {
    let mut engine = spawn_engine(ws);
    let id = ws.new_task("d", title);
    ws.ok(&["start", &id.to_string()]);
    wait_for("the step to start", || {
        ws.root().join("started.txt").exists()
    });
    engine.kill().unwrap();
    engine.wait().unwrap();
    wait_for("the container to outlive its engine", || {
        containers(ws, id, true).len() == 1
    });
    id
}

/// Lets the gated step end and checks it ran exactly once, as one step run.
fn finishes_once(ws: &Ws, id: i64) {
    std::fs::write(ws.root().join("go"), "").unwrap();
    wait_for("the step to end", || ws.show(id)["status"] == "review");
    let shown = ws.show(id);
    assert_eq!(shown["steps"].as_array().unwrap().len(), 1, "{shown:#}");
    assert_eq!(shown["steps"][0]["state"], "succeeded");
    let read = |f: &str| std::fs::read_to_string(ws.root().join(f)).unwrap();
    assert_eq!(read("started.txt"), "started\n", "started once");
    assert_eq!(read("finished.txt"), "finished\n", "finished once");
}

#[test]
fn an_unreachable_docker_daemon_at_restart_neither_interrupts_nor_resumes() {
    let Some(_) = image() else { return };
    let ws = Ws::new();
    ws.pipeline("d.json", &pipeline(GATED, ""));
    ws.config("auto_resume = true\n");
    let _cleanup = Cleanup(ws.root().to_path_buf());
    let id = crash_with_a_running_container(&ws, "daemon away at restart");

    let blind = engine_with(&ws, &[("DOCKER_HOST", NO_DAEMON)]);
    wait_for("the engine to say it could not look", || {
        ws.ok(&["show", &id.to_string()])
            .contains("could not look for the step on docker")
    });
    common::stop(blind);
    let shown = ws.show(id);
    assert_eq!(shown["state"], "running", "not interrupted: {shown:#}");
    assert_eq!(shown["steps"].as_array().unwrap().len(), 1, "not resumed");
    assert_eq!(shown["steps"][0]["state"], "running");
    assert_eq!(containers(&ws, id, true).len(), 1, "the container runs on");

    // The daemon back: the next engine finds the container and follows it to its end.
    let engine = spawn_engine(&ws);
    wait_for("the engine to find the container", || {
        ws.ok(&["logs", &id.to_string()])
            .contains("reattaching to docker")
    });
    finishes_once(&ws, id);
    common::stop(engine);
}

#[test]
fn a_docker_step_is_found_after_the_default_executor_changed_to_local() {
    let Some(_) = image() else { return };
    let ws = Ws::new();
    ws.pipeline(
        "d.json",
        &pipeline_of(serde_json::json!({ "run": GATED }), ""),
    );
    ws.config(&format!(
        "[executor]\ndefault = \"docker\"\n[executor.docker]\nimage = \"{IMAGE}\"\nnetwork = \"none\"\n"
    ));
    let _cleanup = Cleanup(ws.root().to_path_buf());
    let id = crash_with_a_running_container(&ws, "started in docker");

    // The workspace now runs steps locally; the step still runs in its container.
    ws.config("auto_resume = true\n");
    let engine = spawn_engine(&ws);
    wait_for("the engine to find the container", || {
        ws.ok(&["logs", &id.to_string()])
            .contains("reattaching to docker")
    });
    finishes_once(&ws, id);
    common::stop(engine);
    assert!(
        containers(&ws, id, false).is_empty(),
        "removed once recorded"
    );
}

/// A kubeconfig whose API server refuses connections.
fn dead_kubeconfig(dir: &std::path::Path) -> std::path::PathBuf {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let path = dir.join("dead-kubeconfig");
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: dead\n  cluster:\n    server: http://127.0.0.1:{port}\nusers:\n- name: u\n  user:\n    token: t\ncontexts:\n- name: c\n  context:\n    cluster: dead\n    user: u\n    namespace: team\ncurrent-context: c\n"
        ),
    )
    .unwrap();
    path
}

#[tokio::test(flavor = "multi_thread")]
async fn a_kubernetes_step_stays_running_while_the_api_does_not_answer() {
    let stub = support_kube::Stub::start(&["team"]).await;
    let ws = Ws::new();
    ws.pipeline(
        "k.json",
        r#"{"id": "k", "statuses": [
            {"id": "todo", "kind": "queue"},
            {"id": "build", "step": {"script": "true",
                "executor": {"kubernetes": {"image": "team/ci:1", "namespace": "team"}}}},
            {"id": "done", "kind": "done"}, {"id": "failed", "kind": "failed"}],
          "transitions": []}"#,
    );
    let id = ws.new_task("k", "a Job of a dead engine");
    // The task started without an engine: its step is queued. Make it what an engine
    // that died while the step ran on the cluster leaves behind.
    ws.ok(&["start", &id.to_string()]);
    let db = ws.root().join(".baton/baton.db");
    {
        let mut store = Store::open(&db).unwrap();
        store
            .write(|db| {
                let step = db.open_step_runs(id)?.remove(0);
                assert!(db.claim_step_run(step.id, baton::store::now_ms())?);
                db.set_task_state(id, TaskState::Running)?;
                db.set_step_executor(
                    step.id,
                    r#"{"kubernetes":{"image":"team/ci:1","namespace":"team"}}"#,
                )
            })
            .unwrap();
    }
    ws.config("auto_resume = true\n");
    let dead = dead_kubeconfig(ws.root());
    // The body blocks on child processes: the stub serves from the runtime's workers.
    let blind = engine_with(&ws, &[("KUBECONFIG", dead.to_str().unwrap())]);
    wait_for("the engine to say it could not look", || {
        ws.ok(&["show", &id.to_string()])
            .contains("could not look for the step on kubernetes")
    });
    let text = ws.ok(&["show", &id.to_string()]);
    assert!(text.contains("stays running"), "{text}");
    common::stop(blind);
    let shown = ws.show(id);
    assert_eq!(shown["state"], "running", "not interrupted: {shown:#}");
    assert_eq!(shown["steps"].as_array().unwrap().len(), 1, "not resumed");

    // The API answers again and has no such Job: now the step is known to be gone.
    ws.config("");
    let live = stub.kubeconfig(ws.root(), "team");
    drain_with(&ws, &[("KUBECONFIG", live.to_str().unwrap())]);
    let shown = ws.show(id);
    assert_eq!(shown["state"], "interrupted", "{shown:#}");
    assert_eq!(shown["steps"].as_array().unwrap().len(), 1);
    let text = ws.ok(&["show", &id.to_string()]);
    assert!(text.contains("its Kubernetes Job"), "{text}");
}
