//! Sessions that carry on, with the real Claude Code and Codex CLIs against the loopback
//! model stubs: a rework loop and a resume after the engine was killed continue the agent's
//! own session (the model sees the earlier turns, and only what is new as the latest user
//! message); a session the CLI cannot find falls back to a fresh one with a warning; and a
//! failing step's log tail reaches the agent that fixes it as `{{failure}}`.

#[path = "support/claude.rs"]
mod claude;
mod common;
mod infra;
mod stubs;

use claude::{Rig, TASK, last_user_text, text_of};
use common::wait_within;
use serde_json::Value;
use std::path::PathBuf;
use std::time::Duration;
use stubs::anthropic::{Gate, Reply};

/// Generous: a loaded two-core machine starts the CLIs slowly.
const LIMIT: Duration = Duration::from_secs(180);

fn new_rig(script: Vec<Reply>) -> Option<Rig> {
    Rig::new(script, LIMIT)
}

impl Rig {
    /// Claude's stored sessions in the rig's HOME (what `--resume` looks up).
    fn transcripts(&self) -> Vec<PathBuf> {
        let mut found = Vec::new();
        let mut dirs = vec![self.home.path().join(".claude/projects")];
        while let Some(d) = dirs.pop() {
            for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                let p = e.path();
                if p.is_dir() {
                    dirs.push(p);
                } else if p.extension().is_some_and(|x| x == "jsonl") {
                    found.push(p);
                }
            }
        }
        found
    }
}

/// The first user message's text: where a conversation started.
fn first_user_text(body: &Value) -> String {
    text_of(&body["messages"][0]["content"])
}

fn steps(shown: &Value) -> Vec<Value> {
    shown["steps"].as_array().cloned().unwrap_or_default()
}

#[test]
fn a_rejected_change_continues_the_coders_claude_session_with_only_the_note() {
    let Some(rig) = new_rig(vec![
        Reply::write("hello.txt", "hello\n"),
        Reply::handoff("success"),
        Reply::write("hello.txt", "HELLO!\n"),
        Reply::handoff("success"),
    ]) else {
        return;
    };
    // The built-in quick_fix: the coder, the project's tests (none here), a review gate.
    let id = rig.new_task(&[]);
    rig.drain();
    assert_eq!(rig.ws.show(id)["status"], "review");
    let first_turns = rig.turns().len();
    rig.ok(&[
        "reject",
        &id.to_string(),
        "--note",
        "Say it louder, please.",
    ]);
    rig.drain();
    let shown = rig.ws.show(id);
    assert_eq!(shown["status"], "review", "{shown:#}");
    let turns = rig.turns();
    let continued = &turns[first_turns];
    // The model got the earlier conversation (the task's prompt and the first answer)…
    assert!(first_user_text(continued).contains(TASK), "{continued:#}");
    assert!(
        continued["messages"]
            .to_string()
            .contains("Wrote hello.txt."),
        "{continued:#}"
    );
    // …and only the note as the new user message, not the whole prompt again.
    let said = last_user_text(continued);
    assert!(said.contains("Say it louder, please."), "{said}");
    assert!(!said.contains(TASK), "{said}");
    let runs = steps(&shown);
    let coder: Vec<&Value> = runs.iter().filter(|s| s["status"] == "fix").collect();
    assert_eq!(coder.len(), 2, "{shown:#}");
    assert_eq!(coder[0]["continued"], false, "{shown:#}");
    assert_eq!(coder[1]["continued"], true, "{shown:#}");
    assert!(coder[0]["session"].is_string(), "{shown:#}");
    assert!(coder[1]["session"].is_string(), "{shown:#}");
}

#[test]
fn a_session_claude_cannot_find_falls_back_to_a_fresh_one_with_a_warning() {
    let Some(rig) = new_rig(vec![
        Reply::write("hello.txt", "hello\n"),
        Reply::handoff("success"),
        Reply::handoff("success"),
    ]) else {
        return;
    };
    let id = rig.new_task(&[]);
    rig.drain();
    // Claude's stored conversations are gone (a cleaned HOME, another machine).
    let stored = rig.transcripts();
    assert!(!stored.is_empty(), "claude stored no session");
    for f in stored {
        std::fs::remove_file(f).unwrap();
    }
    let first_turns = rig.turns().len();
    rig.ok(&["reject", &id.to_string(), "--note", "Once more."]);
    rig.drain();
    let shown = rig.ws.show(id);
    assert_eq!(shown["status"], "review", "{shown:#}");
    let last = steps(&shown).pop().unwrap();
    assert_eq!(last["state"], "succeeded", "{last:#}");
    assert_eq!(last["continued"], false, "{last:#}");
    // The fresh run got the whole prompt, with the note.
    let fresh = &rig.turns()[first_turns];
    let prompt = first_user_text(fresh);
    assert!(
        prompt.contains(TASK) && prompt.contains("Once more."),
        "{prompt}"
    );
    let text = rig.ok(&["show", &id.to_string()]);
    let warning = text
        .lines()
        .find(|l| l.contains("warn") && l.contains("could not find session"))
        .unwrap_or_else(|| panic!("no warning about the lost session in:\n{text}"));
    assert!(warning.contains("starting a fresh one"), "{warning}");
}

/// A build (the built-in coder) and a test step that fails until `fixed.txt` exists,
/// printing the failing test's name on its last lines.
const FIX_LOOP: &str = r#"{"id": "fixloop", "statuses": [
    {"id": "todo", "kind": "queue"},
    {"id": "build", "step": {"agent": "coder", "timeout": "3m"}},
    {"id": "test", "step": {"run": "seq 1 300 | sed 's/^/noise /'; if [ -f fixed.txt ]; then echo ok; else echo 'FAILED: tests::greets_loudly' >&2; exit 3; fi"}},
    {"id": "review", "kind": "gate"},
    {"id": "done", "kind": "done"},
    {"id": "failed", "kind": "failed"},
    {"id": "cancelled", "kind": "cancelled"}],
  "transitions": [
    {"from": "test", "to": "build", "on": "failure", "guards": [{"max_visits": 3}]}]}"#;

#[test]
fn a_failing_test_step_s_tail_reaches_the_continued_coder_as_the_failure() {
    let Some(rig) = new_rig(vec![
        Reply::write("hello.txt", "hello\n"),
        Reply::handoff("success"),
        Reply::write("fixed.txt", "fixed\n"),
        Reply::handoff("success"),
    ]) else {
        return;
    };
    rig.ws.pipeline("fixloop.json", FIX_LOOP);
    let id = rig.new_task(&["--pipeline", "fixloop"]);
    rig.drain();
    let shown = rig.ws.show(id);
    assert_eq!(shown["status"], "review", "{shown:#}");
    let turns = rig.turns();
    let fixing = turns
        .iter()
        .find(|b| last_user_text(b).contains("What failed"))
        .unwrap_or_else(|| panic!("no request carried the failure: {turns:#?}"));
    let said = last_user_text(fixing);
    assert!(said.contains("The step `test` (attempt 1)"), "{said}");
    assert!(said.contains("exit code 3"), "{said}");
    assert!(said.contains("FAILED: tests::greets_loudly"), "{said}");
    // The tail, capped: the last noise lines are there, the first ones are not.
    assert!(said.contains("noise 300"), "{said}");
    assert!(!said.contains("noise 1\n"), "{said}");
    // Only the failure is new: the task's prompt is not sent again.
    assert!(!said.contains(TASK), "{said}");
    assert!(first_user_text(fixing).contains(TASK), "{fixing:#}");
}

#[test]
fn resume_after_the_engine_was_killed_continues_the_interrupted_session() {
    let gate = Gate::new();
    let Some(rig) = new_rig(vec![
        Reply::write("hello.txt", "hello\n"),
        Reply::handoff("success").gated(&gate),
        Reply::handoff("success"),
    ]) else {
        return;
    };
    let mut engine = rig.engine();
    let id = rig.new_task(&[]);
    // The model holds its answer after the file was written; the session id is recorded.
    wait_within("the held request at the stub", LIMIT, || gate.holding());
    wait_within("the step's session id", LIMIT, || {
        steps(&rig.ws.show(id))
            .first()
            .is_some_and(|s| s["session"].is_string())
    });
    engine.kill9();
    let interrupted = steps(&rig.ws.show(id))[0]["session"].clone();
    // The next engine finds the step interrupted; `resume` runs it again.
    rig.drain();
    rig.ok(&["resume", &id.to_string()]);
    let before = rig.turns().len();
    rig.drain();
    let shown = rig.ws.show(id);
    assert_eq!(shown["status"], "review", "{shown:#}");
    let coder: Vec<Value> = steps(&shown)
        .into_iter()
        .filter(|s| s["status"] == "fix")
        .collect();
    assert_eq!(coder.len(), 2, "{shown:#}");
    assert_eq!(coder[0]["state"], "interrupted", "{shown:#}");
    assert_eq!(coder[1]["continued"], true, "{shown:#}");
    assert_eq!(coder[1]["state"], "succeeded", "{shown:#}");
    let turns = rig.turns();
    let resumed = turns[before..]
        .iter()
        .find(|b| last_user_text(b).contains("Carry on"))
        .unwrap_or_else(|| panic!("no request continued the session: {:#?}", &turns[before..]));
    assert!(first_user_text(resumed).contains(TASK), "{resumed:#}");
    assert!(!last_user_text(resumed).contains(TASK));
    assert!(interrupted.is_string(), "{shown:#}");
}
