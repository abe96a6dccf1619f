//! The mouse wheel (`[board] mouse = true`): it moves through the cards on the board and
//! scrolls the log in the detail pane. Snapshots at 80×24 and 120×36.

mod tui_support;

use baton::tui::event::AppEvent;
use crossterm::event::KeyCode;
use insta::assert_snapshot;
use tui_support::*;

#[test]
fn the_wheel_scrolls_the_log_in_the_detail_pane_80x24() {
    let mut h = Harness::new(80, 24);
    let (detail, log) = running_detail();
    h.select(2);
    h.key(KeyCode::Enter);
    h.serve(&detail, &log);
    assert!(h.app.log.follow);
    h.event(AppEvent::Wheel(-1));
    assert!(!h.app.log.follow, "scrolling up pauses following");
    let screen = h.screen();
    assert!(screen.contains("paused"), "{screen}");
    assert_snapshot!(screen);
}

#[test]
fn the_wheel_moves_through_the_cards_on_the_board_120x36() {
    let mut h = Harness::new(120, 36);
    let mut all = cards();
    all.insert(
        0,
        card(
            8,
            "Plan the release notes",
            "plan",
            baton::store::TaskState::Idle,
        ),
    );
    h.event(AppEvent::Board(baton::tui::event::BoardSnapshot {
        pipelines: pipelines(),
        cards: all,
        home: None,
    }));
    h.select(8);
    h.event(AppEvent::Wheel(1));
    assert_eq!(h.app.board.selected, Some(3), "one card down the column");
    h.event(AppEvent::Wheel(-1));
    assert_eq!(h.app.board.selected, Some(8));
    h.event(AppEvent::Wheel(1));
    assert_snapshot!(h.screen());
}
