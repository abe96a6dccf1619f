//! Table tests for `on_result`: retries with backoff, the pipeline's transition, the visit
//! cap and the cases where the task waits.

use super::*;
use crate::exec::agent::AgentEvent;
use crate::pipeline::parse_pipeline;
use crate::store::{StepResult, StepState};
use std::collections::HashMap;

const P: &str = r#"{
  "id": "p", "name": "P",
  "statuses": [
    {"id": "todo", "kind": "queue"},
    {"id": "build", "step": {"run": "make", "retries": 2}},
    {"id": "test", "step": {"run": "make test"}},
    {"id": "review", "kind": "gate"},
    {"id": "done", "kind": "done"},
    {"id": "failed", "kind": "failed"},
    {"id": "cancelled", "kind": "cancelled"}
  ],
  "transitions": [
    {"from": "test", "to": "build", "on": "failure", "guards": [{"max_visits": 3}]},
    {"from": "build", "to": "review", "on": "outcome:quick"}
  ]
}"#;

fn report(trigger: &str, retryable: bool) -> StepReport {
    StepReport {
        state: StepState::Failed,
        trigger: Trigger::parse(trigger).expect("a trigger"),
        result: StepResult::default(),
        events: Vec::<AgentEvent>::new(),
        retryable,
        closing: None,
    }
}

enum Want {
    Retry(i64, i64),
    Move(&'static str),
    Limit(&'static str),
    Wait,
}

/// status, trigger, retryable, attempts so far, visits, expected.
type Case = (
    &'static str,
    &'static str,
    bool,
    i64,
    &'static [(&'static str, u32)],
    Want,
);

#[test]
fn step_results_table() {
    let (pipeline, diags) = parse_pipeline("p", P, None);
    assert!(diags.iter().all(|d| !d.is_error()), "{diags:?}");
    let pipeline = pipeline.expect("parses");
    #[rustfmt::skip]
    let cases: &[Case] = &[
        ("build", "success", true, 1, &[], Want::Move("test")),
        ("build", "failure", true, 1, &[], Want::Move("failed")),
        // An error is retried within the step's `retries`, waiting 1 s, 2 s, …
        ("build", "error", true, 1, &[], Want::Retry(1_000, 1)),
        ("build", "error", true, 2, &[], Want::Retry(2_000, 2)),
        ("build", "error", true, 3, &[], Want::Move("failed")),
        // …unless a retry cannot help (a bad key, a bad profile).
        ("build", "error", false, 1, &[], Want::Move("failed")),
        // A step without `retries` fails at once.
        ("test", "error", true, 1, &[], Want::Move("failed")),
        ("build", "outcome:quick", true, 1, &[], Want::Move("review")),
        // An outcome no transition names has no default: the task waits for a person.
        ("build", "outcome:other", true, 1, &[], Want::Wait),
        // The guarded loop goes back while under its limit, then the default applies.
        ("test", "failure", true, 1, &[("build", 2)], Want::Move("build")),
        ("test", "failure", true, 1, &[("build", 3)], Want::Move("failed")),
        // An unguarded loop is stopped before its 101st entry.
        ("test", "success", true, 1, &[("review", 100)], Want::Limit("review")),
        ("test", "success", true, 1, &[("review", 99)], Want::Move("review")),
    ];
    for (status, trigger, retryable, attempts, visits, want) in cases {
        let visits: HashMap<String, u32> =
            visits.iter().map(|(s, n)| (s.to_string(), *n)).collect();
        let count = |to: &str| visits.get(to).copied().unwrap_or(0);
        let facts = ResultFacts {
            pipeline: &pipeline,
            status,
            guards: Facts {
                visits: &visits,
                step_running: false,
                handoff_fields: &[],
                worktree_clean: None,
                run_cost: 0.0,
                forge: false,
            },
            attempts: *attempts,
            visits: &count,
        };
        let got = on_result(&facts, &report(trigger, *retryable));
        let case = format!("{status} on {trigger} (attempts {attempts}, visits {visits:?})");
        match (want, &got) {
            (
                Want::Retry(delay, used),
                ResultDecision::Retry {
                    delay_ms,
                    used: u,
                    retries,
                },
            ) => {
                assert_eq!((delay, used, 2), (delay_ms, u, *retries), "{case}");
            }
            (Want::Move(to), ResultDecision::Move(d)) => assert_eq!(d.to, *to, "{case}"),
            (Want::Limit(to), ResultDecision::LoopLimit { to: t }) => assert_eq!(t, to, "{case}"),
            (Want::Wait, ResultDecision::Wait(_)) => {}
            _ => panic!("{case}: got {got:?}"),
        }
    }
}

/// A step's end is recorded in the same handful of statements whatever the board holds:
/// the step's row, the task's move, its history and event rows, the next step run.
#[test]
fn a_steps_end_and_move_to_the_next_step_take_a_fixed_few_statements() {
    let (pipeline, _) = parse_pipeline("p", P, None);
    let json = serde_json::to_string(&pipeline.expect("parses")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut store = crate::store::Store::open(&dir.path().join("t.db")).unwrap();
    let step = store
        .write(|db| {
            let id = db.insert_task("t", "", "p", &json, "build", TaskState::Running)?;
            let run = db.task(id)?.run_id.unwrap();
            // The snapshot is parsed once per connection, not per step: warm it.
            db.pipeline(id)?;
            let step = db.insert_step_run(id, run, "build", None, 0)?;
            db.claim_step_run(step.id, now_ms())?;
            Ok::<_, crate::store::StoreError>(step.id)
        })
        .unwrap();
    let mut done = report("success", true);
    done.state = StepState::Succeeded;
    let (applied, statements) =
        store.count_statements(|db| finish_step(db, step, &done, &Outside::NONE));
    let moved = applied
        .unwrap()
        .and_then(|a| a.moved)
        .expect("the task moved");
    assert_eq!((moved.from.as_str(), moved.to.as_str()), ("build", "test"));
    assert!(moved.step_run.is_some(), "the next step run was made");
    // BEGIN and COMMIT; reading the step and the task; finishing the step; one visit
    // count; the open steps ended; the task's move and its change-number trigger (three);
    // the run's state; history, event and the new step run (one statement each).
    assert!(
        statements.len() <= 15,
        "a step's end took {} statements: {statements:#?}",
        statements.len()
    );
}
