//! A message said to a task reaches its agent even when the agent's templates leave no
//! `{{messages}}` for it: the prompt carries it under its own heading. No agent CLI needed:
//! a `command` agent that writes the prompt it was given to the context folder.

mod common;

use common::Ws;

const PIPELINE: &str = r#"{"id": "one", "statuses": [
    {"id": "todo", "kind": "queue"},
    {"id": "build", "step": {"agent": "echoer"}},
    {"id": "review", "kind": "gate"},
    {"id": "done", "kind": "done"},
    {"id": "failed", "kind": "failed"},
    {"id": "cancelled", "kind": "cancelled"}]}"#;

/// Its prompt (one argv element) goes to `got-N.txt`, one file per run.
const ECHOER: &str = r#"{"id": "echoer", "backend": "command",
  "argv": ["sh", "-c", "n=$(ls \"$BATON_CONTEXT_DIR\" | grep -c '^got-'); printf '%s' \"$0\" > \"$BATON_CONTEXT_DIR/got-$n.txt\"; echo 'OUTCOME: success'", "{{message}}"],
  "prompt_template": "Do {{title}}."}"#;

fn got(ws: &Ws, id: i64, n: usize) -> String {
    let file = ws.root().join(format!(".baton/context/{id}/got-{n}.txt"));
    std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()))
}

#[test]
fn a_message_reaches_an_agent_whose_template_has_no_place_for_it() {
    let ws = Ws::new();
    ws.pipeline("one.json", PIPELINE);
    std::fs::write(ws.root().join(".baton/agents/echoer.json"), ECHOER).unwrap();
    let id = ws.new_task("one", "the thing");
    let said = ws.ok(&["say", &id.to_string(), "Use tabs, not spaces."]);
    assert!(said.contains("queued for its first agent step"), "{said}");
    ws.ok(&["start", &id.to_string()]);
    ws.drain();
    let shown = ws.show(id);
    assert_eq!(shown["status"], "review", "{shown:#}");
    let prompt = got(&ws, id, 0);
    assert!(prompt.starts_with("Do the thing."), "{prompt}");
    assert!(
        prompt.contains("## Messages from people while you worked")
            && prompt.contains("said:\n\nUse tabs, not spaces."),
        "the message never reached the agent: {prompt}"
    );
    let m = &shown["messages"][0];
    assert_eq!(m["state"], "delivered", "{m:#}");
    assert_eq!(m["via"], "next step", "{m:#}");
}

#[test]
fn a_message_whose_new_attempt_never_ran_reaches_the_next_step() {
    let ws = Ws::new();
    ws.pipeline("one.json", PIPELINE);
    std::fs::write(ws.root().join(".baton/agents/echoer.json"), ECHOER).unwrap();
    let id = ws.new_task("one", "the thing");
    ws.ok(&["start", &id.to_string()]);
    ws.drain();
    assert_eq!(ws.show(id)["status"], "review");
    // With no engine running, the new attempt waits; aborting the task drops it unrun.
    let said = ws.ok(&["say", &id.to_string(), "Rename it to Thing."]);
    assert!(said.contains("build"), "{said}");
    ws.ok(&["abort", &id.to_string()]);
    assert_eq!(ws.show(id)["messages"][0]["state"], "queued");
    ws.ok(&["rerun", &id.to_string(), "--from", "build"]);
    ws.drain();
    let shown = ws.show(id);
    assert_eq!(shown["status"], "review", "{shown:#}");
    let prompt = got(&ws, id, 1);
    assert!(
        prompt.contains("said:\n\nRename it to Thing."),
        "the message was dropped: {prompt}"
    );
    assert_eq!(shown["messages"][0]["state"], "delivered", "{shown:#}");
}

#[test]
fn a_step_that_cannot_start_leaves_the_message_queued() {
    let ws = Ws::new();
    ws.pipeline("one.json", PIPELINE);
    std::fs::write(
        ws.root().join(".baton/agents/echoer.json"),
        r#"{"id": "echoer", "backend": "command", "argv": ["baton-no-such-agent-cli", "{{message}}"],
            "prompt_template": "Do {{title}}."}"#,
    )
    .unwrap();
    let id = ws.new_task("one", "the thing");
    ws.ok(&["say", &id.to_string(), "Use tabs, not spaces."]);
    ws.ok(&["start", &id.to_string()]);
    ws.drain();
    let shown = ws.show(id);
    assert_eq!(shown["state"], "failed", "{shown:#}");
    let m = &shown["messages"][0];
    assert_eq!(m["state"], "queued", "a message no agent got: {m:#}");
    assert!(m["delivered_to"].is_null(), "{m:#}");
}
