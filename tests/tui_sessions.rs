//! The detail pane says which agent session a step ran in and whether it continued an
//! earlier one, at 80×24 and 120×36.

mod tui_support;

use crossterm::event::KeyCode;
use insta::assert_snapshot;
use tui_support::*;

/// Task #2 whose build ran twice: fresh, then continuing the first run's session.
fn reworked() -> (baton::tui::event::TaskDetail, Vec<baton::store::LogLine>) {
    let (mut detail, log) = running_detail();
    let mut first = step(13, 2, "build", baton::store::StepState::Succeeded, 4);
    first.session_id = Some("2f0c1a7e-claude-session".into());
    let mut again = detail.steps.pop().unwrap();
    again.attempt = 2;
    again.session_id = Some("2f0c1a7e-claude-session".into());
    again.continued_from = Some("2f0c1a7e-claude-session".into());
    detail.steps.extend([first, again]);
    (detail, log)
}

fn shown(w: u16, h: u16, older: bool) -> String {
    let mut harness = Harness::new(w, h);
    let (detail, log) = reworked();
    harness.select(2);
    harness.key(KeyCode::Enter);
    harness.serve(&detail, &log);
    if older {
        harness.key(KeyCode::Char('k'));
        harness.serve(&detail, &log);
    }
    harness.screen()
}

#[test]
fn the_detail_pane_shows_a_continued_session_at_120x36() {
    let screen = shown(120, 36, false);
    assert!(
        screen.contains("continued session 2f0c1a7e-claude"),
        "{screen}"
    );
    assert_snapshot!(screen);
}

#[test]
fn the_detail_pane_shows_a_fresh_session_at_80x24() {
    let screen = shown(80, 24, true);
    assert!(screen.contains("fresh session 2f0c1a7e"), "{screen}");
    assert_snapshot!(screen);
}
