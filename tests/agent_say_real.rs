//! Talking to an agent, with the real Claude Code CLI against the loopback model stub: a
//! message said while the coder runs reaches it mid-run (its stdin takes stream-json user
//! messages); one said to a task waiting at a gate continues the coder's session as a new
//! attempt; one said to an agent that takes no input waits for the next agent step's
//! `{{messages}}`; and answers to the agent's open questions reach it as question and
//! answer pairs, the task back at the status that asked.

#[path = "support/claude.rs"]
mod claude;
mod common;
mod infra;
mod stubs;

use claude::{Rig, TASK, last_user_text, user_texts};
use common::wait_within;
use serde_json::Value;
use std::time::Duration;
use stubs::anthropic::{Gate, Reply};

/// Generous: a loaded two-core machine starts the CLIs slowly.
const LIMIT: Duration = Duration::from_secs(180);

fn new_rig(script: Vec<Reply>) -> Option<Rig> {
    Rig::new(script, LIMIT)
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

fn messages(shown: &Value) -> Vec<Value> {
    shown["messages"].as_array().cloned().unwrap_or_default()
}

#[test]
fn a_message_said_while_the_coder_runs_reaches_it_mid_run() {
    let gate = Gate::new();
    let Some(rig) = new_rig(vec![
        Reply::handoff("success").gated(&gate),
        Reply::handoff("success"),
    ]) else {
        return;
    };
    let _engine = rig.engine();
    let id = rig.new_task(&[]);
    // The model holds its first answer: the step is running.
    wait_within("the held request at the stub", LIMIT, || gate.holding());
    let said = rig.ok(&["say", &id.to_string(), "Also greet the reviewer."]);
    assert!(said.contains("said to the running agent `coder`"), "{said}");
    wait_within("the message written to the running step", LIMIT, || {
        messages(&rig.ws.show(id))
            .first()
            .is_some_and(|m| m["state"] == "delivered")
    });
    gate.open();
    wait_within("the task at review", LIMIT, || {
        rig.ws.show(id)["status"] == "review"
    });
    let shown = rig.ws.show(id);
    // One step run heard both: the prompt, then the message, in the same conversation.
    let coder = steps_at(&shown, "fix");
    assert_eq!(coder.len(), 1, "{shown:#}");
    assert_eq!(coder[0]["state"], "succeeded", "{shown:#}");
    let turns = rig.turns();
    let heard = turns
        .iter()
        .find(|b| last_user_text(b).contains("Also greet the reviewer."))
        .unwrap_or_else(|| panic!("no request carried the message: {turns:#?}"));
    assert!(user_texts(heard)[0].contains(TASK), "{heard:#}");
    let m = &messages(&shown)[0];
    assert_eq!(m["via"], "live", "{m:#}");
    assert_eq!(m["delivered_to"], "fix#1", "{m:#}");
    assert_eq!(m["text"], "Also greet the reviewer.", "{m:#}");
}

#[test]
fn a_message_to_a_task_at_a_gate_continues_the_coders_session_as_a_new_attempt() {
    let Some(rig) = new_rig(vec![
        Reply::write("hello.txt", "hello\n"),
        Reply::handoff("success"),
        Reply::handoff("success"),
    ]) else {
        return;
    };
    let id = rig.new_task(&[]);
    rig.drain();
    assert_eq!(rig.ws.show(id)["status"], "review");
    let before = rig.turns().len();
    let said = rig.ok(&["say", &id.to_string(), "Make it louder."]);
    assert!(said.contains("review → fix (say)"), "{said}");
    rig.drain();
    let shown = rig.ws.show(id);
    assert_eq!(shown["status"], "review", "{shown:#}");
    let coder = steps_at(&shown, "fix");
    assert_eq!(coder.len(), 2, "{shown:#}");
    assert_eq!(coder[1]["continued"], true, "{shown:#}");
    let turns = rig.turns();
    let next = &turns[before];
    // The earlier conversation came along; only the message is new.
    assert!(user_texts(next)[0].contains(TASK), "{next:#}");
    let last = last_user_text(next);
    assert!(last.contains("Make it louder."), "{last}");
    assert!(!last.contains(TASK), "{last}");
    let said = shown["history"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["trigger"] == "say")
        .unwrap_or_else(|| panic!("no `say` in the history: {shown:#}"));
    assert_eq!(said["reason"], "Make it louder.");
    let m = &messages(&shown)[0];
    assert_eq!(m["via"], "new attempt", "{m:#}");
    assert_eq!(m["delivered_to"], "fix#2", "{m:#}");
}

/// Claude as an agent that takes no input while it runs, asked twice in a row.
const PLAIN: &str = r#"{"id": "plain", "backend": "command", "format": "claude-stream-json",
  "prompt_via": "stdin",
  "argv": ["claude", "-p", "--output-format", "stream-json", "--verbose", "--permission-mode", "acceptEdits"],
  "prompt_template": "{{prompt}}\n\n{{messages}}", "outcomes": ["success", "failure"]}"#;

const TWO_STEPS: &str = r#"{"id": "twice", "statuses": [
    {"id": "todo", "kind": "queue"},
    {"id": "draft", "step": {"agent": "plain", "timeout": "3m"}},
    {"id": "polish", "step": {"agent": "plain", "timeout": "3m"}},
    {"id": "review", "kind": "gate"},
    {"id": "done", "kind": "done"},
    {"id": "failed", "kind": "failed"},
    {"id": "cancelled", "kind": "cancelled"}]}"#;

#[test]
fn a_message_to_an_agent_that_takes_no_input_reaches_the_next_step() {
    let gate = Gate::new();
    let Some(rig) = new_rig(vec![
        Reply::handoff("success").gated(&gate),
        Reply::handoff("success"),
    ]) else {
        return;
    };
    std::fs::write(rig.ws.root().join(".baton/agents/plain.json"), PLAIN).unwrap();
    rig.ws.pipeline("twice.json", TWO_STEPS);
    let _engine = rig.engine();
    let id = rig.new_task(&["--pipeline", "twice"]);
    wait_within("the held request at the stub", LIMIT, || gate.holding());
    let said = rig.ok(&["say", &id.to_string(), "Use British spelling."]);
    assert!(
        said.contains("queued for the next step: `plain` takes no input while it runs"),
        "{said}"
    );
    assert_eq!(messages(&rig.ws.show(id))[0]["state"], "queued");
    gate.open();
    wait_within("the task at review", LIMIT, || {
        rig.ws.show(id)["status"] == "review"
    });
    let turns = rig.turns();
    assert!(
        !user_texts(&turns[0]).concat().contains("British"),
        "the running step got it: {:#}",
        turns[0]
    );
    let polish = turns
        .iter()
        .find(|b| user_texts(b)[0].contains("Use British spelling."))
        .unwrap_or_else(|| panic!("no step's prompt carried the message: {turns:#?}"));
    assert!(user_texts(polish)[0].contains(TASK), "{polish:#}");
    let m = &messages(&rig.ws.show(id))[0];
    assert_eq!(m["state"], "delivered", "{m:#}");
    assert_eq!(m["via"], "next step", "{m:#}");
    assert_eq!(m["delivered_to"], "polish#1", "{m:#}");
}

#[test]
fn answers_to_the_agents_questions_reach_it_and_the_task_goes_back_to_the_asking_status() {
    let Some(rig) = new_rig(vec![
        Reply::handoff("needs_info"),
        Reply::handoff("success"),
    ]) else {
        return;
    };
    let id = rig.new_task(&[]);
    rig.drain();
    let shown = rig.ws.show(id);
    // quick_fix sends a coder that needs information back to its backlog.
    assert_eq!(shown["status"], "todo", "{shown:#}");
    assert_eq!(
        shown["questions"],
        serde_json::json!(["Should it say more?"])
    );
    let before = rig.turns().len();
    let out = rig.ok(&[
        "answer",
        &id.to_string(),
        "--json",
        r#"{"answers": ["Yes: add a second line."]}"#,
    ]);
    assert!(out.contains("todo → fix (answer)"), "{out}");
    rig.drain();
    let shown = rig.ws.show(id);
    assert_eq!(shown["status"], "review", "{shown:#}");
    assert_eq!(shown["questions"], serde_json::json!([]), "{shown:#}");
    let coder = steps_at(&shown, "fix");
    assert_eq!(coder.len(), 2, "{shown:#}");
    assert_eq!(coder[1]["continued"], true, "{shown:#}");
    let next = &rig.turns()[before];
    let last = last_user_text(next);
    assert!(last.contains("Q1: Should it say more?"), "{last}");
    assert!(last.contains("A1: Yes: add a second line."), "{last}");
    assert!(user_texts(next)[0].contains(TASK), "{next:#}");
    assert!(
        shown["history"]
            .as_array()
            .unwrap()
            .iter()
            .any(|h| h["trigger"] == "answer" && h["from"] == "todo" && h["to"] == "fix"),
        "{shown:#}"
    );
}
