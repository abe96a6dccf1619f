//! The engines on the board: the header names the running engines with the steps each runs
//! (counted instead where the width is short), and a queued card whose step requires a
//! label no running engine has says so, on the card and in the detail pane's title.

mod tui_support;

use baton::store::{EngineRow, EngineView, TaskState};
use baton::tui::event::{AppEvent, BoardSnapshot};
use crossterm::event::KeyCode;
use insta::assert_snapshot;
use tui_support::*;

fn engine(name: &str, labels: &[&str], live: bool, running: i64) -> EngineView {
    EngineView {
        row: EngineRow {
            name: name.into(),
            host: name.into(),
            pid: 100,
            labels: labels.iter().map(|l| l.to_string()).collect(),
            version: "0.1.0".into(),
            started_at: NOW - 60_000,
            heartbeat_at: NOW - 1_000,
            lease_ms: 15_000,
            stopped_at: (!live).then_some(NOW - 30_000),
        },
        live,
        running,
        seen_ago_ms: 1_000,
    }
}

/// The demo board, its `test` step requiring an `ssd` engine; two engines run and one has
/// stopped.
fn board(h: &mut Harness) {
    let mut pipelines = pipelines();
    for p in pipelines.iter_mut().filter(|p| p.id == "demo") {
        for s in p.statuses.iter_mut().filter(|s| s.id == "test") {
            s.step.as_mut().expect("a step").requires = vec!["ssd".into()];
        }
    }
    let mut cards = cards();
    for c in cards.iter_mut().filter(|c| c.id == 7) {
        c.state = TaskState::Queued;
    }
    h.event(AppEvent::Board(BoardSnapshot {
        pipelines,
        cards,
        home: None,
    }));
    let redraw = h.event(AppEvent::Engines(vec![
        engine("devbox", &[], true, 2),
        engine("gpu-1", &["gpu"], true, 1),
        engine("old-box", &["ssd"], false, 0),
    ]));
    assert!(redraw, "new engines redraw the board");
}

#[test]
fn engines_in_the_header_120x36() {
    let mut h = Harness::new(120, 36);
    board(&mut h);
    h.select(7);
    h.key(KeyCode::Enter);
    h.serve(&queued_detail(), &[]);
    let screen = h.screen();
    assert!(
        screen.contains("engines: devbox ▸2 · gpu-1 ▸1 · here"),
        "{screen}"
    );
    assert!(!screen.contains("old-box"), "a stopped engine is left out");
    assert!(screen.contains("… needs ssd"), "{screen}");
    assert!(
        screen.contains("waits for an engine labelled ssd"),
        "{screen}"
    );
    assert_snapshot!(screen);
}

#[test]
fn engines_in_the_header_80x24() {
    let mut h = Harness::new(80, 24);
    board(&mut h);
    let screen = h.screen();
    assert!(
        screen.lines().next().unwrap().contains("2 engines ▸3"),
        "{screen}"
    );
    assert_snapshot!(screen);
    // Once an engine with the label runs, the card is only queued.
    h.event(AppEvent::Engines(vec![engine("ssd-1", &["ssd"], true, 0)]));
    let screen = h.screen();
    assert!(!screen.contains("needs ssd"), "{screen}");
    assert!(
        screen.lines().next().unwrap().contains("engine: ssd-1"),
        "{screen}"
    );
}

/// Task 7 queued at `test`.
fn queued_detail() -> baton::tui::event::TaskDetail {
    baton::tui::event::TaskDetail {
        task: task(7, "Rename the config keys", "test", TaskState::Queued),
        steps: vec![],
        history: history(7, &[(Some("build"), "test", "success")]),
        notices: vec![],
        messages: vec![],
        questions: vec![],
    }
}
