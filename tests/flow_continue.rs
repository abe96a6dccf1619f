//! `continue` runs a step only from a breakpoint pause: a task waiting at a step status
//! after its step ran (a blocked transition, the loop limit, a refused merge) is refused,
//! so a succeeded step is never run again that way. And an edit through the engine keeps
//! to the title limit, as `new` does.

mod common;
use baton::engine::actions::apply;
use baton::engine::{Action, Outside, Request};
use baton::store::Store;
use common::Ws;

/// The step succeeds, but nothing comes after it: the task waits at `work`.
const STUCK: &str = r#"{"id": "stuck", "statuses": [
  {"id": "todo", "kind": "queue"},
  {"id": "done", "kind": "done"},
  {"id": "failed", "kind": "failed"},
  {"id": "work", "step": {"run": "echo ran >> trace"}}
],
"transitions": [{"from": "todo", "to": "work", "on": "start"}]
}"#;

fn runs(ws: &Ws) -> usize {
    std::fs::read_to_string(ws.root().join("trace"))
        .unwrap_or_default()
        .lines()
        .count()
}

#[test]
fn continue_refuses_a_task_waiting_after_its_step_ran() {
    let ws = Ws::new();
    ws.pipeline("stuck.json", STUCK);
    let id = ws.new_task("stuck", "blocked after work");
    let sid = id.to_string();
    ws.ok(&["start", &sid]);
    ws.drain();
    let shown = ws.show(id);
    assert_eq!(shown["state"], "waiting", "{shown:#}");
    assert_eq!(shown["status"], "work");
    assert_eq!(shown["steps"][0]["state"], "succeeded");
    assert_eq!(runs(&ws), 1);

    let out = ws.baton(&["continue", &sid]).output().unwrap();
    assert!(!out.status.success(), "continue must refuse");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("not paused at a breakpoint") && err.contains(&format!("baton move {id}")),
        "{err}"
    );
    // Nor can a breakpoint on the status it waits at bring the step back.
    let out = ws.baton(&["break", &sid, "work"]).output().unwrap();
    assert!(
        !out.status.success(),
        "break on a step that ran must refuse"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("already ran"), "{err}");
    assert!(
        !ws.baton(&["continue", &sid])
            .output()
            .unwrap()
            .status
            .success()
    );
    ws.drain();
    let shown = ws.show(id);
    assert_eq!(shown["steps"].as_array().unwrap().len(), 1, "{shown:#}");
    assert_eq!(runs(&ws), 1, "the succeeded step did not run again");
}

#[test]
fn continue_still_runs_the_step_a_breakpoint_paused() {
    let ws = Ws::new();
    ws.pipeline("stuck.json", STUCK);
    let id = ws.new_task("stuck", "paused before work");
    let sid = id.to_string();
    ws.ok(&["break", &sid, "work"]);
    ws.ok(&["start", &sid]);
    ws.drain();
    let shown = ws.show(id);
    assert_eq!(shown["status"], "work", "{shown:#}");
    assert_eq!(shown["state"], "waiting");
    assert_eq!(runs(&ws), 0, "paused before the step");

    ws.ok(&["continue", &sid]);
    ws.drain();
    let shown = ws.show(id);
    assert_eq!(shown["steps"].as_array().unwrap().len(), 1, "{shown:#}");
    assert_eq!(shown["steps"][0]["state"], "succeeded");
    assert_eq!(runs(&ws), 1);
}

#[test]
fn an_edit_through_the_engine_keeps_to_the_title_limit() {
    let ws = Ws::new();
    ws.pipeline("stuck.json", STUCK);
    let id = ws.new_task("stuck", "short title");
    let mut store = Store::open(&ws.root().join(".baton/baton.db")).unwrap();
    let edit = |title: String| Request {
        task_id: id,
        action: Action::Edit {
            title: Some(title),
            prompt: None,
        },
        expected_status: None,
        actor: "tui".into(),
    };
    let long = edit("x".repeat(501));
    let err = store
        .write(|db| apply(db, &long, &Outside::NONE))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("the title is 501 characters long; keep it to 500 at most"),
        "{err}"
    );
    assert_eq!(ws.show(id)["title"], "short title");

    let fits = edit("y".repeat(500));
    store.write(|db| apply(db, &fits, &Outside::NONE)).unwrap();
    assert_eq!(ws.show(id)["title"], "y".repeat(500));
}
