//! The cost of a step's end, counted in SQL statements.

use super::*;
use crate::exec::{Finish, StepEnv};
use crate::pipeline::parse_pipeline;
use crate::store::{StepState, Store, StoreError};
use std::time::Duration;

const P: &str = r#"{
  "id": "p", "name": "P",
  "statuses": [
    {"id": "todo", "kind": "queue"},
    {"id": "build", "step": {"run": "make"}},
    {"id": "test", "step": {"run": "make test"}},
    {"id": "done", "kind": "done"},
    {"id": "failed", "kind": "failed"}
  ]
}"#;

/// A step's end is one transaction of a fixed few statements, whatever the board holds:
/// its closing log line, its result, the task's move (history and event rows), the next
/// step run made and claimed with its opening log line. They are counted here so that any
/// that creep back in fail this test.
#[test]
fn a_steps_end_through_the_next_steps_claim_takes_a_fixed_few_statements() {
    let (pipeline, _) = parse_pipeline("p", P, None);
    let json = serde_json::to_string(&pipeline.expect("parses")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&dir.path().join("t.db")).unwrap();
    let step = store
        .write(|db| {
            let id = db.insert_task("t", "", "p", &json, "build", TaskState::Running)?;
            let run = db.task(id)?.run_id.unwrap();
            // The snapshot is parsed once per connection, not per step: warm it.
            db.pipeline(id)?;
            let step = db.insert_step_run(id, run, "build", None, 0)?;
            db.claim_step_run(step.id, now_ms())?;
            Ok::<_, StoreError>(step.id)
        })
        .unwrap();
    let env = StepEnv {
        vars: vec![],
        workdir: std::path::PathBuf::new(),
        timeout: Duration::ZERO,
        kill_grace: Duration::ZERO,
    };
    let mut report = runner::report_for(&Finish::Exited(0), &env);
    report.closing = Some(runner::closing_line("exited 0", Duration::ZERO));
    let me: Claimant = std::sync::Arc::new(crate::engine::engines::Identity {
        name: "here".into(),
        labels: vec![],
        heartbeat: Duration::from_secs(5),
        takeover_after: Duration::from_secs(30),
    });
    let held = Held {
        fence: None,
        moved_here: false,
        lost_known: false,
    };
    let (ended, statements) = store.count_statements(|db| {
        step_end(
            db,
            step,
            &report,
            &Outside::NONE,
            End::Report,
            held,
            (4, &me),
        )
    });
    let (applied, claimed, due) = ended.unwrap();
    let moved = applied.and_then(|a| a.moved).expect("the task moved");
    assert_eq!((moved.from.as_str(), moved.to.as_str()), ("build", "test"));
    assert_eq!(due, None);
    assert_eq!(claimed.len(), 1, "the next step is claimed at once");
    let next = &claimed[0];
    assert_eq!(next.step.status, "test");
    assert_eq!(next.step.state, StepState::Running);
    assert!(next.announced, "its opening line is stored with the claim");
    let db = store.read();
    assert_eq!(db.log_count(step).unwrap(), 1, "the closing line");
    assert_eq!(db.log_count(next.step.id).unwrap(), 1, "the opening line");
    assert_eq!(db.task(next.task.id).unwrap().state, TaskState::Running);
    // BEGIN and COMMIT (two); the closing line and its count (two); `finish_step`: the
    // step and its task read, the step's end, one visit count, the open steps, the task's
    // move (its change-number trigger: three more), the run's state, history, event and
    // the new step run (thirteen); the claim (three: the due rows read, a fence taken, the
    // row claimed); the claimed task read and set running (with its trigger, five); the last
    // handoff (one); the opening line and its count (two).
    assert!(
        statements.len() <= 28,
        "a step's end took {} statements: {statements:#?}",
        statements.len()
    );
}
