//! Cost you can cap: a priced agent's usage becomes each step's cost, and the `budget`
//! guard stops a review ↔ implement loop once the run has spent its limit.

mod common;
use common::Ws;

/// A fake `claude -p --output-format stream-json`: reports usage but no cost.
const FAKE_AGENT: &str = r###"#!/bin/sh
printf '%s\n' '{"type":"system","subtype":"init","session_id":"s1","model":"fake","tools":[]}'
printf '%s\n' '{"type":"result","subtype":"success","is_error":false,"num_turns":1,"duration_ms":10,"result":"## What Was Done\nChanged it.","session_id":"s1","usage":{"input_tokens":100000,"output_tokens":20000}}'
"###;

const LOOP: &str = r#"{"id": "priced", "statuses": [
  {"id": "todo", "kind": "queue"},
  {"id": "implement", "step": {"agent": "coder"}},
  {"id": "review", "step": {"run": "exit 1"}},
  {"id": "done", "kind": "done"},
  {"id": "failed", "kind": "failed"},
  {"id": "cancelled", "kind": "cancelled"}
], "transitions": [
  {"from": "review", "to": "implement", "on": "failure",
   "guards": [{"max_visits": 10}, {"budget": 1.5}]}
]}"#;

#[test]
fn the_budget_guard_stops_a_loop_of_a_priced_agent() {
    let ws = Ws::new();
    let script = ws.root().join("fake-claude");
    std::fs::write(&script, FAKE_AGENT).unwrap();
    std::process::Command::new("chmod")
        .arg("+x")
        .arg(&script)
        .status()
        .unwrap();
    // $3 and $15 per million tokens: 100k in + 20k out is $0.30 + $0.30 a step.
    std::fs::write(
        ws.root().join(".baton/agents/coder.json"),
        format!(
            r#"{{"id": "coder", "backend": "command", "format": "claude-stream-json",
  "argv": ["{}", "{{{{message}}}}"], "price_input": 3, "price_output": 15}}"#,
            script.display()
        ),
    )
    .unwrap();
    ws.pipeline("priced.json", LOOP);
    let id = ws.new_task("priced", "spend");
    ws.ok(&["start", &id.to_string()]);
    ws.drain();

    let shown = ws.show(id);
    assert_eq!(shown["status"], "failed", "{shown:#}");
    let steps = shown["steps"].as_array().unwrap();
    let implements: Vec<_> = steps
        .iter()
        .filter(|s| s["status"] == "implement")
        .collect();
    // $0.60, $1.20 let the loop go on; at $1.80 the budget of $1.50 is spent.
    assert_eq!(implements.len(), 3, "{steps:#?}");
    for s in &implements {
        let cost = s["cost"].as_f64().expect("a cost");
        assert!((cost - 0.6).abs() < 1e-9, "{s:#}");
    }
    let last = shown["history"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["to"], "failed");
    let blocked: Vec<_> = last["guards"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|g| g["passed"] == false)
        .collect();
    assert_eq!(blocked.len(), 1, "{last:#}");
    assert_eq!(blocked[0]["guard"], "budget: 1.5");
    assert_eq!(blocked[0]["detail"], "budget $1.50 reached ($1.80 spent)");

    let text = ws.ok(&["show", &id.to_string()]);
    assert!(text.contains("$0.6000"), "{text}");
    assert!(text.contains("cost $1.8000 this run"), "{text}");
    let log = ws.ok(&["logs", &id.to_string(), "--step", "1"]);
    assert!(
        log.contains("cost $0.6000 (usage at $3 / $15 per million"),
        "{log}"
    );
}

#[test]
fn a_half_given_price_is_a_located_error() {
    let ws = Ws::new();
    std::fs::write(
        ws.root().join(".baton/agents/half.json"),
        r#"{"id": "half", "backend": "command", "argv": ["x"], "price_input": 3}"#,
    )
    .unwrap();
    let out = ws.baton(&["agents", "list"]).output().unwrap();
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        all.contains("give both `price_input` and `price_output`"),
        "{all}"
    );
}
