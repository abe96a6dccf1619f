//! The read queries the TUI's loader uses: board cards and backwards log paging.

use baton::engine::create_task;
use baton::pipeline::load_catalog;
use baton::store::{NewLogLine, Store, Stream, TaskState};

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
