//! Agent steps end to end through the real binary, against loopback stubs: handoffs between
//! two agents, outcomes routing the task, abort stopping a long stream, clear errors for a
//! dead URL, a refused key and a missing CLI.

mod common;
mod stubs;

use common::Ws;
use serde_json::Value;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use stubs::wait_for;

const KEY: &str = "sk-test-secret-0123456789";
const LIMIT: Duration = Duration::from_secs(60);

const PLAN: &str = "Thinking out loud first.\n\n## What Was Done\nPlanned the change.\n\n## Decisions Made\n- Keep it small.\n\n## Next Agent Context\nImplement it in src/x.rs.\n";
const BUILD: &str = "## What Was Done\nImplemented src/x.rs.\n\nOUTCOME: needs_review\n";

/// A two-agent pipeline: plan → build, where build's `needs_review` outcome goes to a gate.
fn two_agents(ws: &Ws, first: &str, second: &str) {
    ws.pipeline(
        "two.json",
        &format!(
            r#"{{"id": "two", "name": "Two agents",
  "statuses": [
    {{"id": "todo", "kind": "queue"}},
    {{"id": "plan", "step": {{"agent": "{first}"}}}},
    {{"id": "build", "step": {{"agent": "{second}"}}}},
    {{"id": "review", "kind": "gate"}},
    {{"id": "done", "kind": "done"}},
    {{"id": "failed", "kind": "failed"}},
    {{"id": "cancelled", "kind": "cancelled"}}
  ],
  "transitions": [
    {{"from": "build", "to": "review", "on": "outcome:needs_review"}},
    {{"from": "build", "to": "done", "on": "success"}}
  ]}}"#
        ),
    );
}

/// A two-agent pipeline whose OpenCode agent never answers until aborted.
fn slow_opencode() -> (Ws, stubs::Server, std::sync::Arc<stubs::OpencodeState>) {
    let (server, stub) = stubs::opencode(&[]);
    let ws = Ws::new();
    two_agents(&ws, "oc", "oc");
    agent(
        &ws,
        "oc",
        &format!(
            r#"{{"id": "oc", "backend": "opencode", "url": "{}", "agent": "slow"}}"#,
            server.url
        ),
    );
    (ws, server, stub)
}

fn agent(ws: &Ws, id: &str, json: &str) {
    let dir = ws.root().join(".baton/agents");
    std::fs::write(dir.join(format!("{id}.json")), json).unwrap();
}

fn openai_agent(ws: &Ws, id: &str, url: &str, model: &str, outcomes: &str) {
    agent(
        ws,
        id,
        &format!(
            r#"{{"id": "{id}", "backend": "openai", "url": "{url}/v1", "model": "{model}",
  "api_key_env": "STUB_KEY", "outcomes": {outcomes},
  "prompt_template": "Task: {{{{title}}}}\n{{{{prompt}}}}\n\n{{{{handoff}}}}"}}"#
        ),
    );
}

fn run(ws: &Ws, pipeline: &str) -> (Option<i32>, Value, String) {
    let out = ws
        .baton(&[
            "run", pipeline, "--title", "Add x", "--prompt", "Make x.", "--wait", "--json",
        ])
        .env("STUB_KEY", KEY)
        .timeout(LIMIT)
        .output()
        .unwrap();
    let shown = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (
        out.status.code(),
        shown,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn events(ws: &Ws, task: i64) -> Vec<String> {
    let store = baton::store::Store::open(&ws.root().join(".baton/baton.db")).unwrap();
    let db = store.read();
    db.events(task)
        .unwrap()
        .into_iter()
        .map(|e| e.kind)
        .collect()
}

#[test]
fn openai_agents_hand_off_and_an_outcome_routes_the_task() {
    let (server, stub) = stubs::openai(&[("planner-m", PLAN), ("builder-m", BUILD)]);
    let ws = Ws::new();
    two_agents(&ws, "p", "b");
    let outcomes = r#"["success", "failure", "needs_review"]"#;
    openai_agent(&ws, "p", &server.url, "planner-m", outcomes);
    openai_agent(&ws, "b", &server.url, "builder-m", outcomes);

    let (code, shown, err) = run(&ws, "two");
    assert_eq!(code, Some(2), "waits at the review gate: {shown} {err}");
    assert_eq!(shown["status"], "review");

    // The second agent got the first one's context header, not its raw output.
    assert_eq!(stub.count(), 2);
    let second = stub.prompt(1);
    assert!(second.starts_with("Task: Add x\nMake x."), "{second}");
    assert!(
        second.contains("## Handoff from previous step (plan)"),
        "{second}"
    );
    assert!(
        second.contains("**Your task**: Implement it in src/x.rs."),
        "{second}"
    );
    assert!(!second.contains("Thinking out loud"), "{second}");
    let reqs = stub.requests.lock().unwrap();
    assert_eq!(reqs[0].0.as_deref(), Some(&*format!("Bearer {KEY}")));
    assert_eq!(reqs[0].1["stream"], true);
    assert_eq!(reqs[0].1["stream_options"]["include_usage"], true);
    drop(reqs);

    let steps = shown["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2);
    assert_eq!(steps[0]["state"], "succeeded");
    assert_eq!(steps[0]["outcome"], "success");
    assert_eq!(steps[0]["handoff"]["content"], PLAN);
    assert_eq!(
        steps[0]["handoff"]["metadata"]["what_was_done"],
        "Planned the change."
    );
    assert_eq!(steps[0]["handoff"]["metadata"]["has_structured_data"], true);
    assert_eq!(steps[0]["usage"]["input_tokens"], 11);
    assert_eq!(steps[0]["usage"]["output_tokens"], 7);
    assert_eq!(steps[1]["outcome"], "needs_review");
    let triggers: Vec<&str> = shown["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["trigger"].as_str().unwrap())
        .collect();
    assert_eq!(
        triggers,
        ["create", "start", "success", "outcome:needs_review"]
    );

    let id = shown["id"].as_i64().unwrap();
    let kinds = events(&ws, id);
    assert_eq!(
        kinds.iter().filter(|k| *k == "handoff_created").count(),
        2,
        "{kinds:?}"
    );
    assert!(
        !kinds.iter().any(|k| k == "handoff_extraction_failed"),
        "{kinds:?}"
    );

    // The handoff is a file in the task's context folder, and the log shows the stream.
    let file = ws
        .root()
        .join(format!(".baton/context/{id}/id_plan_001.md"));
    assert_eq!(std::fs::read_to_string(file).unwrap(), PLAN);
    let log = ws.ok(&["logs", &id.to_string(), "--step", "1"]);
    assert!(log.contains("## Decisions Made"), "{log}");
    // The key never reaches the database or the logs (what the step printed does).
    let board = ws.board_bytes();
    assert!(board.contains("Planned the change."));
    assert!(!board.contains(KEY));
    assert!(!log.contains(KEY));
}

#[test]
fn unstructured_output_passes_raw_and_undeclared_outcomes_fail() {
    let (server, stub) = stubs::openai(&[
        ("prose", "Just some prose without headings."),
        ("odd", "## What Was Done\nStuff.\nOUTCOME: shipped"),
    ]);
    let ws = Ws::new();
    two_agents(&ws, "p", "b");
    openai_agent(&ws, "p", &server.url, "prose", r#"["success"]"#);
    openai_agent(
        &ws,
        "b",
        &server.url,
        "odd",
        r#"["success", "needs_review"]"#,
    );
    let (code, shown, _) = run(&ws, "two");
    assert_eq!(code, Some(1), "{shown}");
    assert_eq!(shown["status"], "failed");
    // Extraction failed: the raw output is the next prompt.
    assert!(stub.prompt(1).contains("Just some prose without headings."));
    let steps = shown["steps"].as_array().unwrap();
    assert_eq!(
        steps[0]["handoff"]["metadata"]["has_structured_data"],
        false
    );
    assert_eq!(steps[1]["state"], "failed");
    let err = steps[1]["error"].as_str().unwrap();
    assert!(
        err.contains("`shipped`") && err.contains("does not declare"),
        "{err}"
    );
    let kinds = events(&ws, shown["id"].as_i64().unwrap());
    assert!(
        kinds.contains(&"handoff_extraction_failed".to_string()),
        "{kinds:?}"
    );
    assert!(
        kinds.contains(&"outcome_undeclared".to_string()),
        "{kinds:?}"
    );
}

#[test]
fn a_dead_url_and_a_refused_key_fail_with_clear_errors() {
    let ws = Ws::new();
    two_agents(&ws, "dead", "dead");
    openai_agent(&ws, "dead", "http://127.0.0.1:1", "m", r#"["success"]"#);
    let (code, shown, _) = run(&ws, "two");
    assert_eq!(code, Some(1), "{shown}");
    assert_eq!(shown["status"], "failed");
    let err = shown["steps"][0]["error"].as_str().unwrap();
    assert!(
        err.contains("agent `dead` (openai backend, http://127.0.0.1:1/v1/chat/completions)"),
        "{err}"
    );
    assert!(
        err.contains("cannot connect") && err.contains("is the server running"),
        "{err}"
    );

    let (server, _stub) = stubs::openai(&[]);
    let ws = Ws::new();
    two_agents(&ws, "bad", "bad");
    openai_agent(&ws, "bad", &server.url, "bad-key", r#"["success"]"#);
    let (code, shown, _) = run(&ws, "two");
    assert_eq!(code, Some(1));
    let err = shown["steps"][0]["error"].as_str().unwrap();
    assert!(
        err.contains("HTTP 401") && err.contains("check that $STUB_KEY holds a valid key"),
        "{err}"
    );
    assert!(!err.contains(KEY), "the echoed key is redacted: {err}");
    let board = ws.board_bytes();
    assert!(board.contains("HTTP 401"));
    assert!(!board.contains(KEY));
}

#[test]
fn transient_errors_are_retried_up_to_the_steps_retries() {
    let (server, stub) = stubs::openai(&[]);
    let ws = Ws::new();
    ws.pipeline(
        "retry.json",
        r#"{"id": "retry", "statuses": [
            {"id": "todo", "kind": "queue"},
            {"id": "plan", "step": {"agent": "flaky", "retries": 1}},
            {"id": "done", "kind": "done"}, {"id": "failed", "kind": "failed"}]}"#,
    );
    openai_agent(&ws, "flaky", &server.url, "boom", r#"["success"]"#);
    let (code, shown, _) = run(&ws, "retry");
    assert_eq!(code, Some(1), "{shown}");
    assert_eq!(stub.count(), 2, "one attempt and one retry");
    let err = shown["steps"][1]["error"].as_str().unwrap();
    assert!(
        err.contains("HTTP 500") && err.contains("transient"),
        "{err}"
    );
}

#[test]
fn abort_stops_a_long_stream_quickly() {
    let (server, stub) = stubs::openai(&[]);
    let ws = Ws::new();
    two_agents(&ws, "slow", "slow");
    openai_agent(&ws, "slow", &server.url, "slow", r#"["success"]"#);
    let mut engine = std::process::Command::new(assert_cmd::cargo::cargo_bin("baton"))
        .current_dir(ws.root())
        .env_remove("BATON_DIR")
        .env("STUB_KEY", KEY)
        .arg("engine")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let id = ws
        .ok(&["new", "long", "--pipeline", "two", "--start"])
        .trim()
        .to_string();
    wait_for("the slow stream to start", LIMIT, || {
        stub.slow_started.load(Ordering::SeqCst)
    });
    let asked = Instant::now();
    ws.ok(&["abort", &id]);
    wait_for("the task to be cancelled", Duration::from_secs(10), || {
        ws.show(id.parse().unwrap())["state"] == "cancelled"
    });
    wait_for("the stream to be dropped", Duration::from_secs(10), || {
        stub.slow_dropped.load(Ordering::SeqCst)
    });
    assert!(
        asked.elapsed() < Duration::from_secs(5),
        "abort took {:?}",
        asked.elapsed()
    );
    let shown = ws.show(id.parse().unwrap());
    assert_eq!(shown["steps"][0]["state"], "cancelled");
    // Said as what it was, by whom (it read "the task moved on").
    let why = shown["steps"][0]["error"].as_str().unwrap_or_default();
    assert!(why.starts_with("aborted by "), "{shown:#}");
    let _ = engine.kill();
    let _ = engine.wait();
}

#[test]
fn opencode_agents_hand_off_record_usage_and_clean_up() {
    let (server, stub) = stubs::opencode(&[("plan", PLAN), ("build", BUILD)]);
    let ws = Ws::new();
    two_agents(&ws, "oc-plan", "oc-build");
    for (id, a) in [("oc-plan", "plan"), ("oc-build", "build")] {
        agent(
            &ws,
            id,
            &format!(
                r#"{{"id": "{id}", "backend": "opencode", "url": "{}", "agent": "{a}", "model": "stub/stub-model",
  "outcomes": ["success", "needs_review"], "prompt_template": "{{{{title}}}}\n\n{{{{handoff}}}}"}}"#,
                server.url
            ),
        );
    }
    let (code, shown, err) = run(&ws, "two");
    assert_eq!(code, Some(2), "{shown} {err}");
    assert_eq!(shown["status"], "review");
    let msgs = stub.messages.lock().unwrap().clone();
    assert_eq!(msgs.len(), 2);
    assert_eq!(msgs[0].1["agent"], "plan");
    assert_eq!(msgs[0].1["model"]["providerID"], "stub");
    assert_eq!(msgs[0].1["model"]["modelID"], "stub-model");
    let second = stub.prompt(1);
    assert!(
        second.contains("## Handoff from previous step (plan)"),
        "{second}"
    );
    assert_eq!(*stub.deleted.lock().unwrap(), ["ses_1", "ses_2"]);
    assert!(stub.directory.lock().unwrap().is_some());

    let steps = shown["steps"].as_array().unwrap();
    assert_eq!(steps[0]["handoff"]["content"], PLAN);
    assert_eq!(steps[0]["usage"]["input_tokens"], 120);
    assert_eq!(steps[0]["usage"]["cache_read_tokens"], 5);
    assert_eq!(steps[1]["outcome"], "needs_review");
    let id = shown["id"].as_i64().unwrap();
    let log = ws.ok(&["logs", &id.to_string(), "--step", "1"]);
    assert!(log.contains("OpenCode session ses_1"), "{log}");
    assert!(log.contains("[tool] read src/lib.rs"), "{log}");
    assert!(log.contains("## Decisions Made"), "{log}");
    assert!(!log.contains("\n{{title}}"), "{log}");
    let store = baton::store::Store::open(&ws.root().join(".baton/baton.db")).unwrap();
    let runs = store.read().step_runs(id).unwrap();
    assert_eq!(runs[0].session_id.as_deref(), Some("ses_1"));
    assert_eq!(runs[0].cost, Some(0.0125));
}

#[test]
fn abort_aborts_and_deletes_the_opencode_session() {
    let (ws, _server, stub) = slow_opencode();
    let mut engine = common::spawn_engine(&ws);
    let id: i64 = ws
        .ok(&["new", "long", "--pipeline", "two", "--start"])
        .trim()
        .parse()
        .unwrap();
    wait_for("the agent to start", LIMIT, || {
        stub.slow_started.load(Ordering::SeqCst)
    });
    ws.ok(&["abort", &id.to_string()]);
    wait_for(
        "the session to be aborted and deleted",
        Duration::from_secs(10),
        || !stub.aborted.lock().unwrap().is_empty() && !stub.deleted.lock().unwrap().is_empty(),
    );
    wait_for("the task to be cancelled", Duration::from_secs(10), || {
        ws.show(id)["state"] == "cancelled"
    });
    assert_eq!(*stub.aborted.lock().unwrap(), ["ses_1"]);
    let _ = engine.kill();
    let _ = engine.wait();
}

#[test]
fn command_agents_read_claude_stream_json_and_missing_clis_are_named() {
    let ws = Ws::new();
    let script = ws.root().join("fake-claude");
    std::fs::write(
        &script,
        r###"#!/bin/sh
# Prints what `claude -p --output-format stream-json --verbose` prints; $1 is the prompt.
printf '%s' "$1" > prompt-seen.txt
case "$1" in *build*) OUT=needs_review ;; *) OUT=success ;; esac
printf '%s\n' '{"type":"system","subtype":"init","session_id":"cl-1","model":"claude-test","tools":[]}'
printf '%s\n' '{"type":"assistant","session_id":"cl-1","message":{"role":"assistant","content":[{"type":"text","text":"Looking."},{"type":"tool_use","id":"t1","name":"Edit","input":{"file_path":"src/x.rs"}}]}}'
printf '%s\n' '{"type":"result","subtype":"success","is_error":false,"num_turns":2,"duration_ms":1500,"result":"## What Was Done\nEdited src/x.rs.\nOUTCOME: '"$OUT"'","session_id":"cl-1","total_cost_usd":0.42,"usage":{"input_tokens":50,"output_tokens":9}}'
"###,
    )
    .unwrap();
    std::process::Command::new("chmod")
        .arg("+x")
        .arg(&script)
        .status()
        .unwrap();
    two_agents(&ws, "cl", "cl");
    agent(
        &ws,
        "cl",
        &format!(
            r#"{{"id": "cl", "backend": "command", "format": "claude-stream-json",
  "argv": ["{}", "{{{{message}}}}"], "outcomes": ["success", "needs_review"],
  "prompt_template": "Do: {{{{title}}}} at {{{{status}}}}; $(touch pwned) `x`"}}"#,
            script.display()
        ),
    );
    let (code, shown, err) = run(&ws, "two");
    assert_eq!(code, Some(2), "{shown} {err}");
    assert_eq!(shown["steps"][0]["outcome"], "success");
    assert_eq!(shown["steps"][1]["outcome"], "needs_review");
    assert_eq!(shown["status"], "review");
    assert_eq!(shown["steps"][1]["usage"]["input_tokens"], 50);
    let seen = std::fs::read_to_string(ws.root().join("prompt-seen.txt")).unwrap();
    assert_eq!(
        seen, "Do: Add x at build; $(touch pwned) `x`",
        "the prompt is one argv element"
    );
    assert!(!ws.root().join("pwned").exists());
    let id = shown["id"].as_i64().unwrap().to_string();
    let log = ws.ok(&["logs", &id, "--step", "1"]);
    assert!(log.contains("[tool] Edit src/x.rs"), "{log}");
    assert!(log.contains("cost $0.4200"), "{log}");

    let ws = Ws::new();
    two_agents(&ws, "gone", "gone");
    agent(
        &ws,
        "gone",
        r#"{"id": "gone", "backend": "command", "argv": ["no-such-agent-cli", "{{message}}"]}"#,
    );
    let (code, shown, _) = run(&ws, "two");
    assert_eq!(code, Some(1));
    let err = shown["steps"][0]["error"].as_str().unwrap();
    assert!(err.contains("`no-such-agent-cli` is not on PATH"), "{err}");
}

#[test]
fn timeouts_stop_streams_and_process_groups() {
    let (server, stub) = stubs::openai(&[]);
    let ws = Ws::new();
    ws.pipeline(
        "t.json",
        r#"{"id": "t", "statuses": [
            {"id": "todo", "kind": "queue"},
            {"id": "ask", "step": {"agent": "slow", "timeout": "1s"}},
            {"id": "cli", "step": {"agent": "sleeper"}},
            {"id": "done", "kind": "done"}, {"id": "failed", "kind": "failed"}],
          "transitions": [{"from": "ask", "to": "cli", "on": "error"}]}"#,
    );
    openai_agent(&ws, "slow", &server.url, "slow", r#"["success"]"#);
    let pidfile = ws.root().join("sleeper.pid");
    agent(
        &ws,
        "sleeper",
        &format!(
            r#"{{"id": "sleeper", "backend": "command", "timeout": "1s",
  "argv": ["sh", "-c", "sleep 30 & echo $! > {}; wait", "{{{{message}}}}"]}}"#,
            pidfile.display()
        ),
    );
    let started = Instant::now();
    let (code, shown, _) = run(&ws, "t");
    assert_eq!(code, Some(1), "{shown}");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    let steps = shown["steps"].as_array().unwrap();
    assert_eq!(steps[0]["state"], "timed_out");
    assert!(
        steps[0]["error"]
            .as_str()
            .unwrap()
            .contains("timed out after 1s"),
        "{shown}"
    );
    assert_eq!(steps[1]["state"], "timed_out");
    wait_for("the stream to be dropped", Duration::from_secs(10), || {
        stub.slow_dropped.load(Ordering::SeqCst)
    });
    // The agent's background child went with its process group.
    let pid = std::fs::read_to_string(&pidfile).unwrap();
    wait_for(
        "the sleeper's group to be gone",
        Duration::from_secs(10),
        || !std::path::Path::new(&format!("/proc/{}", pid.trim())).exists(),
    );
}

#[test]
fn recovery_aborts_the_opencode_session_a_killed_engine_left() {
    let (ws, _server, stub) = slow_opencode();
    let mut engine = common::spawn_engine(&ws);
    let id: i64 = ws
        .ok(&["new", "long", "--pipeline", "two", "--start"])
        .trim()
        .parse()
        .unwrap();
    wait_for("the agent to start", LIMIT, || {
        stub.slow_started.load(Ordering::SeqCst)
    });
    // Wait until the session id is recorded, then kill the engine without warning.
    wait_for("the session id", LIMIT, || {
        baton::store::Store::open(&ws.root().join(".baton/baton.db"))
            .unwrap()
            .read()
            .step_runs(id)
            .unwrap()
            .iter()
            .any(|s| s.session_id.is_some())
    });
    engine.kill().unwrap();
    engine.wait().unwrap();
    assert!(stub.aborted.lock().unwrap().is_empty());
    ws.drain();
    assert_eq!(
        *stub.aborted.lock().unwrap(),
        ["ses_1"],
        "recovery aborted it"
    );
    assert_eq!(ws.show(id)["state"], "interrupted");
}

#[test]
fn an_outcome_spelled_with_a_dash_routes_the_task() {
    let ws = Ws::new();
    ws.pipeline(
        "ask.json",
        r#"{"id": "ask", "statuses": [
            {"id": "todo", "kind": "queue"},
            {"id": "ask", "step": {"agent": "asker"}},
            {"id": "clarify", "kind": "gate"},
            {"id": "done", "kind": "done"},
            {"id": "failed", "kind": "failed"}],
          "transitions": [
            {"from": "ask", "to": "clarify", "on": "outcome:needs-info"},
            {"from": "ask", "to": "done", "on": "success"}]}"#,
    );
    agent(
        &ws,
        "asker",
        r#"{"id": "asker", "backend": "command", "format": "text",
  "argv": ["sh", "-c", "printf '%s\\n' 'Which database?' 'OUTCOME: needs-info'"],
  "outcomes": ["success", "failure", "needs-info"]}"#,
    );
    let (code, shown, err) = run(&ws, "ask");
    assert_eq!(code, Some(2), "waits at the clarify gate: {shown} {err}");
    assert_eq!(shown["status"], "clarify");
    assert_eq!(shown["steps"][0]["state"], "succeeded");
    assert_eq!(shown["steps"][0]["outcome"], "needs_info");
    let last = shown["history"].as_array().unwrap().last().cloned();
    assert_eq!(last.unwrap()["trigger"], "outcome:needs_info");
}

/// A name in both the step's `env` and its agent profile's gets the step's value (the
/// pipeline says what this status needs; the profile what the agent always has), and a
/// profile cannot change the `BATON_*` variables baton gives the step.
#[test]
fn a_steps_env_wins_over_its_profiles_and_a_profile_cannot_change_batons_own() {
    let ws = Ws::new();
    // The program is looked up on the step's PATH too, not on the profile's.
    let path = std::env::var("PATH").unwrap();
    let pipeline = serde_json::json!({"id": "envy", "statuses": [
        {"id": "todo", "kind": "queue"},
        {"id": "work", "step": {"agent": "envy", "env": {"WHO": "step", "PATH": path}}},
        {"id": "done", "kind": "done"},
        {"id": "failed", "kind": "failed"}],
      "transitions": [{"from": "todo", "to": "work", "on": "start"}]});
    ws.pipeline("envy.json", &pipeline.to_string());
    agent(
        &ws,
        "envy",
        r#"{"id": "envy", "backend": "command", "format": "text",
  "env": {"WHO": "profile", "ONLY_PROFILE": "kept", "BATON_STATUS": "forged", "PATH": "/nonexistent"},
  "argv": ["sh", "-c", "printf 'who=%s only=%s status=%s\\n' \"$WHO\" \"$ONLY_PROFILE\" \"$BATON_STATUS\""]}"#,
    );
    let (code, shown, err) = run(&ws, "envy");
    assert_eq!(code, Some(0), "{shown} {err}");
    let id = shown["id"].as_i64().unwrap().to_string();
    let log = ws.ok(&["logs", &id]);
    assert!(log.contains("who=step only=kept status=work"), "{log}");
}
