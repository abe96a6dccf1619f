//! Why a task moved: the guards each history row checked (naming the one that blocked) and
//! the hooks it ran, in `show --json` and `show`.

mod common;
use common::Ws;

/// review fails every time and loops back to implement at most three times.
const LOOP: &str = r#"{"id": "loop", "statuses": [
  {"id": "todo", "kind": "queue"},
  {"id": "implement", "step": {"run": "echo implementing"}},
  {"id": "review", "step": {"run": "echo 'changes requested'; exit 1"}},
  {"id": "done", "kind": "done"},
  {"id": "failed", "kind": "failed"},
  {"id": "cancelled", "kind": "cancelled"}
], "transitions": [
  {"from": "review", "to": "implement", "on": "failure", "guards": [{"max_visits": 3}],
   "hooks": [{"run": "echo looped"}]}
]}"#;

#[test]
fn a_loop_stopped_by_max_visits_says_so_in_the_history() {
    let ws = Ws::new();
    ws.pipeline("loop.json", LOOP);
    let id = ws.new_task("loop", "loop me");
    ws.ok(&["start", &id.to_string()]);
    ws.drain();

    let shown = ws.show(id);
    assert_eq!(shown["status"], "failed", "{shown:#}");
    let history = shown["history"].as_array().unwrap();
    let last = history.last().unwrap();
    assert_eq!(last["from"], "review");
    assert_eq!(last["to"], "failed");
    assert_eq!(
        last["guards"],
        serde_json::json!([{"guard": "max_visits: 3", "passed": false, "detail": "max_visits 3 reached"}]),
        "{last:#}"
    );
    // The loops that were let through say how far they had come, and ran their hook.
    let loops: Vec<_> = history
        .iter()
        .filter(|h| h["from"] == "review" && h["to"] == "implement")
        .collect();
    assert_eq!(loops.len(), 2, "{history:#?}");
    assert_eq!(
        loops[0]["guards"][0]["detail"],
        "implement entered 1 of 3 times"
    );
    assert_eq!(
        loops[1]["guards"][0]["detail"],
        "implement entered 2 of 3 times"
    );
    for l in &loops {
        assert_eq!(l["hooks"][0]["hook"], "run", "{l:#}");
        assert_eq!(l["hooks"][0]["state"], "ok", "{l:#}");
        assert_eq!(l["hooks"][0]["detail"], "looped", "{l:#}");
    }

    let text = ws.ok(&["show", &id.to_string()]);
    assert!(
        text.contains("review → failed (failure, engine)\n      guard max_visits: 3: blocked — max_visits 3 reached"),
        "{text}"
    );
    assert!(text.contains("hook run: ok — looped"), "{text}");
}
