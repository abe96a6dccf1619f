//! `baton pipelines graph ID`: Graphviz with every id and label escaped, and `--text`, the
//! board's drawing.

mod common;
use common::Ws;

const QUOTED: &str = r#"{"id": "q-1", "name": "Quotes \"and\" \\ slashes", "statuses": [
  {"id": "todo", "label": "To \"do\"", "kind": "queue"},
  {"id": "check", "label": "back\\slash\nnew line", "kind": "gate"},
  {"id": "done", "kind": "done"}
], "transitions": [
  {"from": "check", "to": "todo", "on": "reject", "guards": [{"max_visits": 2}], "hooks": [{"notify": {}}]}
]}"#;

#[test]
fn graphviz_output_escapes_ids_and_labels() {
    let ws = Ws::new();
    ws.pipeline("q.json", QUOTED);
    let dot = ws.ok(&["pipelines", "graph", "q-1"]);
    assert!(dot.starts_with("digraph \"q-1\" {\n"), "{dot}");
    assert!(
        dot.contains("\"todo\" [label=\"To \\\"do\\\"\", shape=ellipse];"),
        "{dot}"
    );
    assert!(
        dot.contains("\"check\" [label=\"back\\\\slash\\nnew line\", shape=diamond];"),
        "{dot}"
    );
    assert!(
        dot.contains("\"check\" -> \"todo\" [label=\"reject\"];"),
        "{dot}"
    );
    // Every quote in the output is either a delimiter or escaped: the quotes balance.
    for line in dot.lines() {
        let unescaped = line.replace("\\\\", "").replace("\\\"", "");
        assert_eq!(unescaped.matches('"').count() % 2, 0, "{line}");
    }
}

#[test]
fn text_draws_the_statuses_and_transitions() {
    let ws = Ws::new();
    ws.pipeline("q.json", QUOTED);
    let text = ws.ok(&["pipelines", "graph", "q-1", "--text"]);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "Quotes \"and\" \\ slashes (q-1)");
    assert!(lines[1].starts_with("  ○ todo  To \"do\""), "{text}");
    assert!(
        text.contains("◆ check back\\slash new l"),
        "a label stays on one line: {text}"
    );
    assert!(
        text.contains("├─ reject  ─▶ todo [max_visits: 2] ⚑ notify"),
        "{text}"
    );
    let builtin = ws.ok(&["pipelines", "graph", "feature", "--text"]);
    assert!(
        builtin.contains("├─ failure        ─▶ build “Fix the failing tests” [max_visits: 3]"),
        "{builtin}"
    );
    // A guarded failure can be blocked, so its default stays drawn as the fallback.
    assert!(
        builtin.contains("└─ failure, error ─▶ failed (default)"),
        "{builtin}"
    );
    assert!(!builtin.contains('\u{1b}'));
}
