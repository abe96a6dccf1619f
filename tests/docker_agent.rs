//! Command agents and workspace defaults on the docker executor, against a real daemon: a
//! fake CLI agent baked into an image runs sandboxed, and `[executor]` in config.toml puts
//! plain steps in containers. Skipped, with a message, where no daemon answers.

mod infra;
mod common;
mod docker_support;
use common::Ws;
use docker_support::{AGENT_IMAGE, IMAGE, agent_image, image, pipeline_of, run_wait};
use std::time::Duration;

#[test]
fn a_command_agent_runs_sandboxed_in_its_image() {
    let Some(_) = agent_image() else { return };
    let ws = Ws::new();
    std::fs::write(
        ws.root().join(".baton/agents/boxed.json"),
        format!(
            r#"{{"id": "boxed", "backend": "command", "format": "text",
  "argv": ["fake-agent", "{{{{message}}}}"],
  "executor": {{"docker": {{"image": "{AGENT_IMAGE}", "network": "none"}}}}}}"#
        ),
    )
    .unwrap();
    ws.pipeline(
        "a.json",
        r#"{"id": "a", "name": "Agent", "statuses": [
            {"id": "todo", "kind": "queue"},
            {"id": "code", "step": {"agent": "boxed"}},
            {"id": "review", "kind": "gate"},
            {"id": "done", "kind": "done"},
            {"id": "failed", "kind": "failed"}]}"#,
    );
    let out = ws
        .baton(&[
            "run",
            "a",
            "--title",
            "sandboxed \"work\"",
            "--wait",
            "--json",
        ])
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    let shown: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(shown["status"], "review", "{shown}");
    let handoff = shown["steps"][0]["handoff"].to_string();
    let uid = nix::unistd::getuid();
    assert!(
        handoff.contains(&format!("agent in /workspace as {uid}")),
        "{handoff}"
    );
    assert!(handoff.contains("sees only its sandbox"), "{handoff}");
    assert!(
        handoff.contains("sandboxed \\\"work\\\""),
        "the prompt arrived: {handoff}"
    );
    assert_eq!(
        std::fs::read_to_string(ws.root().join("AGENT_NOTES.md")).unwrap(),
        "notes by the sandboxed agent\n"
    );
    let log = ws.ok(&["logs", "1"]);
    assert!(log.contains("on docker baton-test-agent:1"), "{log}");
    assert!(log.contains("started fake-agent (container "), "{log}");
}

#[test]
fn the_workspace_default_puts_plain_steps_in_containers() {
    let Some(_) = image() else { return };
    let ws = Ws::new();
    ws.config(&format!(
        "[executor]\ndefault = \"docker\"\n[executor.docker]\nimage = \"{IMAGE}\"\nnetwork = \"none\"\n"
    ));
    ws.pipeline(
        "d.json",
        &pipeline_of(serde_json::json!({"run": "pwd > where.txt"}), ""),
    );
    let (code, shown) = run_wait(&ws, "default");
    assert_eq!(code, Some(2), "{shown}");
    assert_eq!(
        std::fs::read_to_string(ws.root().join("where.txt")).unwrap(),
        "/workspace\n"
    );
}
