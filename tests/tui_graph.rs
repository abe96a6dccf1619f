//! The graph view (`g`), the tab keys landing on a card, and times in the detail pane's
//! events: whole-app snapshots on TestBackend.

mod tui_support;

use baton::pipeline::graph::TaskPath;
use baton::store::{Event, TaskState};
use baton::tui::event::{AppEvent, BoardSnapshot, Effect};
use baton::tui::graph_view::GraphData;
use baton::tui::modal::Modal;
use crossterm::event::KeyCode;
use insta::assert_snapshot;
use tui_support::*;

/// Task #4's path: through review once, sent back, and at review again.
fn path() -> TaskPath {
    let moves = [
        (None, "backlog", "create"),
        (Some("backlog"), "plan", "start"),
        (Some("plan"), "build", "success"),
        (Some("build"), "test", "success"),
        (Some("test"), "review", "success"),
        (Some("review"), "build", "reject"),
        (Some("build"), "test", "success"),
        (Some("test"), "review", "success"),
    ];
    TaskPath {
        current: Some("review".into()),
        moves: moves
            .iter()
            .map(|(f, t, tr)| (f.map(String::from), t.to_string(), tr.to_string()))
            .collect(),
    }
}

fn open_graph(h: &mut Harness) {
    h.select(4);
    h.serve(&gate_detail(), &[]);
    h.key(KeyCode::Char('g'));
    let effects = h.app.take_effects();
    assert!(effects.contains(&Effect::LoadGraph(4)), "{effects:?}");
    let pipeline = pipelines().into_iter().find(|p| p.id == "demo").unwrap();
    h.event(AppEvent::Graph {
        task_id: 4,
        result: Ok(GraphData {
            pipeline,
            path: path(),
        }),
    });
}

#[test]
fn graph_of_a_task_at_80x24() {
    let mut h = Harness::new(80, 24);
    open_graph(&mut h);
    assert_snapshot!(h.screen());
}

#[test]
fn graph_scrolls_and_any_other_key_closes_it() {
    let mut h = Harness::new(80, 24);
    open_graph(&mut h);
    for _ in 0..40 {
        h.key(KeyCode::Char('j'));
    }
    assert_snapshot!(h.screen());
    h.key(KeyCode::Esc);
    assert!(h.app.modals.is_empty());
}

#[test]
fn graph_while_loading_and_when_the_load_failed() {
    let mut h = Harness::new(80, 24);
    h.select(4);
    h.key(KeyCode::Char('g'));
    assert!(h.screen().contains("loading…"));
    h.event(AppEvent::Graph {
        task_id: 4,
        result: Err("task 4 is gone".into()),
    });
    assert!(h.screen().contains("task 4 is gone"));
    assert!(matches!(h.app.modals.last(), Some(Modal::Graph(_))));
}

#[test]
fn next_tab_lands_on_a_column_with_cards() {
    let mut h = Harness::new(120, 36);
    let mut cards = cards();
    let mut late = card(9, "A feature at review", "review", TaskState::Waiting);
    late.pipeline_id = "feature".into();
    cards.push(late);
    h.event(AppEvent::Board(BoardSnapshot {
        pipelines: pipelines(),
        cards,
        home: None,
    }));
    for _ in 0..3 {
        if h.app.board.pipeline().is_some_and(|p| p.id == "feature") {
            break;
        }
        h.key(KeyCode::Char(']'));
    }
    assert_eq!(h.app.board.pipeline().unwrap().id, "feature");
    let review = h.app.board.pipeline().unwrap().index_of("review").unwrap();
    assert_eq!(h.app.board.col, review);
    assert_eq!(h.app.board.selected, Some(9));
    // And back: `[` lands on a card of the demo board, not on its empty first column.
    h.key(KeyCode::Char('['));
    h.key(KeyCode::Char('['));
    assert!(h.app.board.selected.is_some());
}

#[test]
fn events_in_the_detail_pane_show_their_time() {
    let mut h = Harness::new(100, 30);
    let mut detail = gate_detail();
    detail.notices = vec![Event {
        id: 1,
        task_id: Some(4),
        category: "hook".into(),
        kind: "hook.failed".into(),
        summary: "hook webhook: 502 from the server".into(),
        data: serde_json::Value::Null,
        actor: "hook".into(),
        level: "error".into(),
        at: NOW - 5_000,
    }];
    h.select(4);
    h.serve(&detail, &[]);
    let screen = h.screen();
    let line = screen
        .lines()
        .find(|l| l.contains("! hook webhook"))
        .unwrap_or_else(|| panic!("{screen}"));
    assert!(line.contains("11:59:55 ! hook webhook"), "{line}");
}

#[test]
fn next_tab_shows_collapsed_columns_when_its_only_cards_are_there() {
    let mut h = Harness::new(80, 24);
    let mut cards = cards();
    let mut finished = card(9, "A finished feature", "done", TaskState::Done);
    finished.pipeline_id = "feature".into();
    cards.push(finished);
    h.event(AppEvent::Board(BoardSnapshot {
        pipelines: pipelines(),
        cards,
        home: None,
    }));
    assert!(
        h.app.board.collapsed(80),
        "terminal columns collapse at 80 columns"
    );
    while h.app.board.pipeline().is_some_and(|p| p.id != "feature") {
        h.key(KeyCode::Char(']'));
    }
    assert_eq!(h.app.board.selected, Some(9));
    let done = h.app.board.pipeline().unwrap().index_of("done").unwrap();
    assert_eq!(h.app.board.col, done);
    assert!(!h.app.board.collapsed(80));
}
