//! The board's side of live reload: the loader reads the pipelines again when asked (the
//! file watcher asks), the board's columns follow the new statuses, and a broken edit is
//! reported in the status line while the last good version stays.

mod common;
use baton::tui::event::AppEvent;
use baton::tui::loader::{LoadReq, Loader};
use common::Ws;
use std::time::Duration;

const V1: &str = r#"{"id": "p", "name": "P", "statuses": [
  {"id": "todo", "kind": "queue"}, {"id": "done", "kind": "done"}]}"#;
const V2: &str = r#"{"id": "p", "name": "P", "statuses": [
  {"id": "todo", "kind": "queue"}, {"id": "check", "label": "Check", "kind": "gate"},
  {"id": "done", "kind": "done"}]}"#;

/// The next events up to and including a board; the notices before it and its columns.
fn until_board(
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<AppEvent>,
) -> (Vec<String>, Vec<String>) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let mut notices = Vec::new();
    loop {
        let ev = rt
            .block_on(async { tokio::time::timeout(Duration::from_secs(10), rx.recv()).await })
            .expect("the loader answers")
            .expect("the loader runs");
        match ev {
            AppEvent::Notice(n) => notices.push(n),
            // The engines on the board come with its loads; not what these tests look at.
            AppEvent::Engines(_) => {}
            AppEvent::Board(b) => {
                let p = b
                    .pipelines
                    .iter()
                    .find(|p| p.id == "p")
                    .expect("pipeline p");
                return (notices, p.statuses.iter().map(|s| s.id.clone()).collect());
            }
            other => panic!("unexpected {other:?}"),
        }
    }
}

#[test]
fn the_board_follows_a_pipeline_edit_and_keeps_the_last_good_one() {
    let ws = Ws::new();
    let file = ws.pipeline("p.json", V1);
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let loader = Loader::spawn(baton::workspace::Workspace::at(ws.root()), tx);
    loader.request(LoadReq::Board);
    assert_eq!(until_board(&mut rx).1, ["todo", "done"]);

    std::fs::write(&file, V2).unwrap();
    loader.request(LoadReq::Reload);
    let (notices, columns) = until_board(&mut rx);
    assert_eq!(notices, ["pipelines reloaded"]);
    assert_eq!(columns, ["todo", "check", "done"]);

    std::fs::write(&file, "{\"id\": \"p\",").unwrap();
    loader.request(LoadReq::Reload);
    let (notices, columns) = until_board(&mut rx);
    assert_eq!(notices.len(), 1, "{notices:?}");
    assert!(
        notices[0].contains("p.json") && notices[0].contains("last good version of pipeline `p`"),
        "{notices:?}"
    );
    assert_eq!(columns, ["todo", "check", "done"]);
}

/// Asked for one task's card, the loader reads that card alone (the board's other cards
/// are not read again); a task that left the board answers with no card.
#[test]
fn the_loader_reads_one_changed_card() {
    let ws = Ws::new();
    ws.pipeline("p.json", V1);
    let one = ws.new_task("p", "first");
    let two = ws.new_task("p", "second");
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let loader = Loader::spawn(baton::workspace::Workspace::at(ws.root()), tx);
    loader.request(LoadReq::Card(two));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    // The engines on the board come with its loads; not what this test looks at.
    let mut next = || loop {
        let ev = rt
            .block_on(async { tokio::time::timeout(Duration::from_secs(10), rx.recv()).await })
            .expect("the loader answers")
            .expect("the loader runs");
        if !matches!(ev, AppEvent::Engines(_)) {
            return ev;
        }
    };
    match next() {
        AppEvent::Card { id, card: Some(c) } => {
            assert_eq!((id, c.id, c.title.as_str()), (two, two, "second"));
        }
        other => panic!("expected task {two}'s card, got {other:?}"),
    }
    ws.ok(&["delete", &one.to_string()]);
    loader.request(LoadReq::Card(one));
    match next() {
        AppEvent::Card { id, card: None } => assert_eq!(id, one),
        other => panic!("expected no card for the deleted task {one}, got {other:?}"),
    }
}
