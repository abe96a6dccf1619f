//! `{{failure}}`: when a failing step sends its task back to an agent, the agent's prompt
//! names the step, how it ended and the tail of its log (capped, secrets masked). No agent
//! CLI needed: a `command` agent whose prompt baton leaves in the context folder.

mod common;

use common::Ws;

const TOKEN: &str = "tok-abcdef1234567890";

/// An agent, then a test step that fails on its first attempt (printing 250 numbered lines,
/// a secret and the failing test), then a gate.
const PIPELINE: &str = r#"{"id": "fixloop", "statuses": [
    {"id": "todo", "kind": "queue"},
    {"id": "build", "step": {"agent": "fixer"}},
    {"id": "test", "step": {"env": {"MY_TOKEN": "tok-abcdef1234567890"}, "script":
      "n=$(cat \"$BATON_CONTEXT_DIR/runs\" 2>/dev/null || echo 0)\necho $((n+1)) > \"$BATON_CONTEXT_DIR/runs\"\nseq 1 250 | sed 's/^/line /'\necho \"token $MY_TOKEN\"\nif [ \"$n\" = 0 ]; then echo 'FAILED: tests::greets' >&2; exit 2; fi"}},
    {"id": "review", "kind": "gate"},
    {"id": "done", "kind": "done"},
    {"id": "failed", "kind": "failed"}],
  "transitions": [{"from": "test", "to": "build", "on": "failure", "guards": [{"max_visits": 3}]}]}"#;

#[test]
fn a_failing_step_s_tail_reaches_the_next_agent_s_prompt() {
    let ws = Ws::new();
    ws.pipeline("fixloop.json", PIPELINE);
    std::fs::write(
        ws.root().join(".baton/agents/fixer.json"),
        r#"{"id": "fixer", "backend": "command", "argv": ["sh", "-c", "echo 'OUTCOME: success'"],
            "prompt_template": "Fix it.\n\n{{failure}}"}"#,
    )
    .unwrap();
    let id: i64 = ws
        .ok(&["new", "Fix", "--pipeline", "fixloop", "--start"])
        .trim()
        .parse()
        .unwrap();
    ws.drain();
    assert_eq!(ws.show(id)["status"], "review", "{:#}", ws.show(id));
    let context = ws.root().join(format!(".baton/context/{id}"));
    let prompt = |seq: u32| {
        std::fs::read_to_string(context.join(format!("id_build_{seq:03}.prompt.md")))
            .unwrap_or_else(|e| panic!("prompt {seq}: {e}"))
    };
    // The first build came from the queue: nothing failed before it.
    assert_eq!(prompt(1), "Fix it.");
    let second = prompt(3);
    assert!(second.contains("## What failed"), "{second}");
    assert!(
        second.contains("The step `test` (attempt 1) failed (exit code 2)"),
        "{second}"
    );
    assert!(second.contains("FAILED: tests::greets"), "{second}");
    // The tail, at most 200 lines: the last numbered lines are there, the first are not.
    assert!(second.contains("line 250\n"), "{second}");
    assert!(!second.contains("line 10\n"), "{second}");
    assert!(second.lines().count() < 215, "{second}");
    assert!(!second.contains(TOKEN), "{second}");
    assert!(second.contains("token [redacted]"), "{second}");
}
