//! OpenCode sessions that carry on: a real OpenCode server, started by baton for a
//! `"serve": true` profile with `"session": "continue"`, its model the loopback OpenAI stub.
//! A rejected change goes back to the same OpenCode session (kept across the two engines and
//! their two servers), and the model sees the earlier turn with only the note as new.

mod common;
mod infra;
#[path = "support/opencode.rs"]
mod opencode;
mod stubs;

use opencode::{Rig, user_texts};
use std::time::Duration;

const PLAN: &str = "## What Was Done\nPlanned it.\n\n## Next Agent Context\nWrite hello.txt.\n";
const TASK: &str = "Write hello.txt with a greeting.";

#[test]
fn a_rejected_change_continues_the_same_opencode_session_with_only_the_note() {
    let Some(rig) = Rig::new(PLAN, Duration::from_secs(180)) else {
        return;
    };
    let ws = &rig.ws;
    ws.pipeline(
        "real.json",
        r#"{"id": "real", "statuses": [
            {"id": "todo", "kind": "queue"},
            {"id": "build", "step": {"agent": "oc", "timeout": "2m"}},
            {"id": "check", "kind": "gate"},
            {"id": "done", "kind": "done"}, {"id": "failed", "kind": "failed"}],
          "transitions": [{"from": "check", "to": "build", "on": "reject"}]}"#,
    );
    rig.agent(
        "oc",
        r#"{"id": "oc", "backend": "opencode", "serve": true, "agent": "build",
  "model": "stub/stub-model", "session": "continue",
  "prompt_template": "{{title}}\n\n{{prompt}}\n\n{{note}}"}"#,
    );
    let baton = |args: &[&str]| rig.ok(args);
    let id = baton(&[
        "new",
        "Hello",
        "--pipeline",
        "real",
        "--prompt",
        TASK,
        "--start",
    ]);
    let id = id.trim();
    // Each engine starts its own OpenCode server and stops it when it exits.
    let drain = || baton(&["engine", "--exit-when-idle"]);
    drain();
    assert_eq!(ws.show(id.parse().unwrap())["status"], "check");
    let first = rig.stub.requests.lock().unwrap().len();
    baton(&["reject", id, "--note", "Louder, please."]);
    drain();
    let shown = ws.show(id.parse().unwrap());
    assert_eq!(shown["status"], "check", "{shown:#}");
    let steps = shown["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2, "{shown:#}");
    assert_eq!(steps[1]["continued"], true, "{shown:#}");
    assert_eq!(steps[0]["session"], steps[1]["session"], "{shown:#}");
    let requests = rig.stub.requests.lock().unwrap().clone();
    let continued = requests[first..]
        .iter()
        .map(|(_, body)| user_texts(body))
        .find(|said| said.last().is_some_and(|l| l.contains("Louder, please.")))
        .unwrap_or_else(|| panic!("no chat request ended with the note: {requests:#?}"));
    assert!(continued.iter().any(|m| m.contains(TASK)), "{continued:#?}");
    assert!(!continued.last().unwrap().contains(TASK), "{continued:#?}");
}
