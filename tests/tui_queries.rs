//! The read queries the TUI's loader uses: board cards and backwards log paging.

use baton::engine::create_task;
use baton::pipeline::load_catalog;
use baton::store::{NewLogLine, StepResult, StepState, Store, Stream, TaskState};

fn store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(&dir.path().join("baton.db")).expect("open");
    (dir, store)
}

#[test]
fn task_cards_lists_every_task_newest_first_with_progress() {
    let (_dir, mut store) = store();
    let catalog = load_catalog(None, None);
    let demo = catalog.get("demo").expect("demo pipeline").clone();
    let a = store
        .write(|db| create_task(db, &demo, "first", ""))
        .unwrap();
    let b = store
        .write(|db| create_task(db, &demo, "second", ""))
        .unwrap();
    let cards = store.read().task_cards().unwrap();
    assert_eq!(cards.iter().map(|c| c.id).collect::<Vec<_>>(), vec![b, a]);
    assert_eq!(cards[0].title, "second");
    assert_eq!(cards[0].status, "backlog");
    assert_eq!(cards[0].state, TaskState::Idle);
    assert_eq!(cards[0].steps_done, 0);
    assert_eq!(cards[0].running_since, None);
    assert_eq!(cards[0].cost, None);
}

#[test]
fn log_lines_before_pages_backwards_oldest_first() {
    let (_dir, mut store) = store();
    let catalog = load_catalog(None, None);
    let demo = catalog.get("demo").unwrap().clone();
    let id = store.write(|db| create_task(db, &demo, "t", "")).unwrap();
    let step = store
        .write(|db| {
            let run = db.task(id)?.run_id.unwrap();
            db.insert_step_run(id, run, "plan", None, 0)
        })
        .unwrap();
    let lines: Vec<NewLogLine> = (1..=10)
        .map(|i| NewLogLine {
            step_run_id: step.id,
            stream: Stream::Stdout,
            ts: i,
            text: format!("line {i}"),
        })
        .collect();
    store.write(|db| db.insert_log_lines(&lines)).unwrap();
    let tail = store.read().log_tail(step.id, 3).unwrap();
    assert_eq!(tail[0].text, "line 8");
    let before = store
        .read()
        .log_lines_before(step.id, tail[0].id, 4)
        .unwrap();
    let texts: Vec<_> = before.iter().map(|l| l.text.as_str()).collect();
    assert_eq!(texts, ["line 4", "line 5", "line 6", "line 7"]);
}

#[test]
fn task_cards_progress_and_tests_forget_what_a_rework_will_redo() {
    let (_dir, mut store) = store();
    let demo = load_catalog(None, None).get("demo").unwrap().clone();
    let id = store.write(|db| create_task(db, &demo, "t", "")).unwrap();
    let run = store.read().task(id).unwrap().run_id.unwrap();
    // One step run of `status`, finished with `state` (and test counts when given).
    let step = |store: &mut Store, status: &str, state: Option<StepState>, passed: Option<u64>| {
        store
            .write(|db| {
                let s = db.insert_step_run(id, run, status, None, 0)?;
                if let Some(state) = state {
                    let res = StepResult {
                        tests: passed.map(|p| serde_json::json!({"passed": p, "failed": 0})),
                        ..StepResult::default()
                    };
                    db.claim_step_run(s.id, baton::store::now_ms())?;
                    db.finish_step_run(s.id, state, &res)?;
                }
                Ok::<_, baton::store::StoreError>(())
            })
            .unwrap();
    };
    let card = |store: &Store| {
        let cards = store.read().task_cards().unwrap();
        let c = cards.into_iter().find(|c| c.id == id).unwrap();
        let passed = c.tests.as_ref().and_then(|t| t["passed"].as_u64());
        (c.steps_done, passed)
    };
    let state = |store: &mut Store, state: TaskState| {
        store.write(|db| db.set_task_state(id, state)).unwrap();
    };
    state(&mut store, TaskState::Running);
    step(&mut store, "plan", Some(StepState::Succeeded), None);
    step(&mut store, "build", Some(StepState::Succeeded), None);
    step(&mut store, "test", Some(StepState::Succeeded), Some(12));
    state(&mut store, TaskState::Waiting);
    assert_eq!(
        card(&store),
        (3, Some(12)),
        "first pass, at the review gate"
    );

    // Rejected back to build: build no longer counts, and the test counts are stale.
    state(&mut store, TaskState::Queued);
    step(&mut store, "build", None, None);
    assert_eq!(card(&store), (2, None), "rebuilding after a rejection");
    state(&mut store, TaskState::Running);
    assert_eq!(card(&store), (2, None), "rebuilding after a rejection");
    step(&mut store, "build", Some(StepState::Succeeded), None);
    step(&mut store, "test", None, None);
    assert_eq!(card(&store), (2, None), "retesting");

    // The test step fails with counts: they show; the failed status is not done.
    store
        .write(|db| {
            let s = db.last_step_run(id)?.unwrap();
            let res = StepResult {
                tests: Some(serde_json::json!({"passed": 9, "failed": 3})),
                ..StepResult::default()
            };
            db.claim_step_run(s.id, baton::store::now_ms())?;
            db.finish_step_run(s.id, StepState::Failed, &res)
        })
        .unwrap();
    state(&mut store, TaskState::Failed);
    assert_eq!(card(&store), (2, Some(9)), "the test step failed");
    // Resumed: no counts until the new attempt reports.
    state(&mut store, TaskState::Running);
    step(&mut store, "test", None, None);
    assert_eq!(card(&store), (2, None), "test running again");
}
