//! Talking to a running OpenCode step. With the real OpenCode server baton starts, its model
//! the loopback OpenAI stub holding its first answer: a message said while the step runs
//! goes to the step's own session at once, the model sees it in a later request of that
//! session, and the step ends as usual with the message delivered, not kept for the next
//! step. And with the OpenCode-API stub: a message OpenCode does not take (a session it no
//! longer has) is kept, and the task's next agent step gets it; one said while the step's
//! session is still being opened reaches that session once it is.

mod common;
mod infra;
#[path = "support/opencode.rs"]
mod opencode;
mod stubs;

use common::{Ws, wait_within};
use opencode::{Rig, user_texts};
use serde_json::Value;
use std::time::Duration;
use stubs::Gate;

/// Generous: a loaded two-core machine starts OpenCode slowly.
const LIMIT: Duration = Duration::from_secs(180);
const PLAN: &str = "## What Was Done\nPlanned it.\n\n## Next Agent Context\nWrite hello.txt.\n";
const TASK: &str = "Write hello.txt with a greeting.";
const SAID: &str = "Also greet the reviewer.";

/// Two OpenCode steps in a row, each in a fresh session.
const PIPELINE: &str = r#"{"id": "real", "statuses": [
    {"id": "todo", "kind": "queue"},
    {"id": "plan", "step": {"agent": "oc", "timeout": "2m"}},
    {"id": "build", "step": {"agent": "oc", "timeout": "2m"}},
    {"id": "done", "kind": "done"}, {"id": "failed", "kind": "failed"}]}"#;

fn messages(shown: &Value) -> Vec<Value> {
    shown["messages"].as_array().cloned().unwrap_or_default()
}

fn steps_at(shown: &Value, status: &str) -> Vec<Value> {
    shown["steps"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|s| s["status"] == status)
        .cloned()
        .collect()
}

/// A workspace whose agent `oc` is the OpenCode-API stub at `url`, its engine, and a task
/// started on the two-step pipeline.
fn started_on_stub(url: &str) -> (Ws, opencode::Engine, i64) {
    let ws = Ws::new();
    ws.pipeline("real.json", PIPELINE);
    std::fs::write(
        ws.root().join(".baton/agents/oc.json"),
        format!(
            r#"{{"id": "oc", "backend": "opencode", "url": "{url}", "agent": "build",
  "prompt_template": "{{{{prompt}}}}\n\n{{{{messages}}}}"}}"#
        ),
    )
    .unwrap();
    let engine = opencode::Engine::of(common::spawn_engine(&ws));
    let id: i64 = ws
        .ok(&[
            "new",
            "Hello",
            "--pipeline",
            "real",
            "--prompt",
            TASK,
            "--start",
        ])
        .trim()
        .parse()
        .unwrap();
    (ws, engine, id)
}

#[test]
fn a_message_said_while_an_opencode_step_runs_joins_its_session() {
    let Some(rig) = Rig::new(PLAN, LIMIT) else {
        return;
    };
    rig.ws.pipeline("real.json", PIPELINE);
    rig.agent(
        "oc",
        r#"{"id": "oc", "backend": "opencode", "serve": true, "agent": "build",
  "model": "stub/stub-model", "session": "fresh",
  "prompt_template": "{{title}}\n\n{{prompt}}\n\n{{messages}}"}"#,
    );
    let gate = Gate::new();
    *rig.stub.gate.lock().unwrap() = Some(gate.clone());
    let _engine = rig.engine();
    let id: i64 = rig
        .ok(&[
            "new",
            "Hello",
            "--pipeline",
            "real",
            "--prompt",
            TASK,
            "--start",
        ])
        .trim()
        .parse()
        .unwrap();
    // The model holds its first answer: the plan step's turn runs.
    wait_within("the held request at the model stub", LIMIT, || {
        gate.holding()
    });
    let said = rig.ok(&["say", &id.to_string(), SAID]);
    assert!(
        said.contains("said to the running agent `oc` (its step at `plan`)"),
        "{said}"
    );
    let m = &messages(&rig.ws.show(id))[0];
    assert_eq!(m["state"], "delivered", "{m:#}");
    assert_eq!(m["via"], "live", "{m:#}");
    assert_eq!(m["delivered_to"], "plan#1", "{m:#}");
    gate.open();
    wait_within("the task done", LIMIT, || {
        rig.ws.show(id)["status"] == "done"
    });
    let shown = rig.ws.show(id);
    let plan = steps_at(&shown, "plan");
    assert_eq!(plan.len(), 1, "{shown:#}");
    assert_eq!(plan[0]["state"], "succeeded", "{shown:#}");
    let turns = rig.turns();
    // The plan session's next request carries the prompt, then the message.
    let heard = turns
        .iter()
        .map(user_texts)
        .find(|u| u.last().is_some_and(|l| l.contains(SAID)))
        .unwrap_or_else(|| panic!("no request of the session carried the message: {turns:#?}"));
    assert!(heard[0].contains(TASK), "{heard:#?}");
    assert!(!heard[0].contains(SAID), "{heard:#?}");
    // Delivered once, live: the build step's prompt (the first request of its fresh
    // session, after the plan session's first) does not carry it again.
    let build = turns
        .iter()
        .map(user_texts)
        .filter(|u| u.len() == 1)
        .nth(1)
        .unwrap_or_else(|| panic!("no request of the build step: {turns:#?}"));
    assert!(build[0].contains(TASK), "{build:#?}");
    assert!(!build[0].contains(SAID), "{build:#?}");
    let m = &messages(&shown)[0];
    assert_eq!(m["state"], "delivered", "{m:#}");
    assert_eq!(m["via"], "live", "{m:#}");
    assert_eq!(m["delivered_to"], "plan#1", "{m:#}");
    let log = rig.ok(&["logs", &id.to_string(), "--step", "1"]);
    assert!(log.contains(&format!("said to the agent: {SAID}")), "{log}");
}

#[test]
fn a_message_opencode_does_not_take_stays_queued_for_the_next_step() {
    let (server, stub) = stubs::opencode(&[("build", PLAN)]);
    let gate = Gate::new();
    *stub.gate.lock().unwrap() = Some(gate.clone());
    let (ws, engine, id) = started_on_stub(&server.url);
    wait_within("the held message at the OpenCode stub", LIMIT, || {
        gate.holding()
    });
    let said = ws.ok(&["say", &id.to_string(), SAID]);
    assert!(
        said.contains("not said to the running agent `oc` (its step at `plan`): the OpenCode server answered HTTP 404 Not Found: Session not found: ses_1; it is kept for the task's next agent step"),
        "{said}"
    );
    assert_eq!(stub.said.lock().unwrap().len(), 1, "OpenCode was asked");
    let m = &messages(&ws.show(id))[0];
    assert_eq!(m["state"], "queued", "{m:#}");
    gate.open();
    wait_within("the task done", LIMIT, || ws.show(id)["status"] == "done");
    drop(engine);
    // The plan step's prompt did not carry it; the build step's did.
    let prompts: Vec<String> = (0..2).map(|i| stub.prompt(i)).collect();
    assert!(!prompts[0].contains(SAID), "{prompts:#?}");
    assert!(prompts[1].contains(SAID), "{prompts:#?}");
    let m = &messages(&ws.show(id))[0];
    assert_eq!(m["state"], "delivered", "{m:#}");
    assert_eq!(m["via"], "next step", "{m:#}");
    assert_eq!(m["delivered_to"], "build#1", "{m:#}");
}

#[test]
fn a_message_said_while_an_opencode_step_starts_reaches_its_session_once_open() {
    let (server, stub) = stubs::opencode(&[("build", PLAN)]);
    let (opening, answering) = (Gate::new(), Gate::new());
    *stub.opening.lock().unwrap() = Some(opening.clone());
    *stub.gate.lock().unwrap() = Some(answering.clone());
    stub.takes_said
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let (ws, engine, id) = started_on_stub(&server.url);
    // The step runs, but its session is not open yet.
    wait_within("the held session creation", LIMIT, || opening.holding());
    let said = ws.ok(&["say", &id.to_string(), SAID]);
    assert!(
        said.contains("handed to the agent `oc`, whose step at `plan` is starting: it gets the message once its session is open"),
        "{said}"
    );
    assert_eq!(messages(&ws.show(id))[0]["state"], "queued");
    opening.open();
    wait_within("the message delivered to the open session", LIMIT, || {
        messages(&ws.show(id))[0]["state"] == "delivered"
    });
    let posted = stub.said.lock().unwrap().clone();
    assert_eq!(posted.len(), 1, "{posted:#?}");
    assert_eq!(posted[0].0, "ses_1");
    assert_eq!(posted[0].1["parts"][0]["text"], SAID);
    assert_eq!(posted[0].1["agent"], "build");
    answering.open();
    wait_within("the task done", LIMIT, || ws.show(id)["status"] == "done");
    drop(engine);
    let m = &messages(&ws.show(id))[0];
    assert_eq!(m["via"], "live", "{m:#}");
    assert_eq!(m["delivered_to"], "plan#1", "{m:#}");
    assert!(
        !stub.prompt(1).contains(SAID),
        "given once: {}",
        stub.prompt(1)
    );
}
