//! The board, the detail pane and the log show task and step text sanitised: an escape
//! sequence's payload (a window title, a clipboard write) never shows as text, and a
//! progress bar redrawn with carriage returns shows its last state.

mod tui_support;

use baton::store::TaskState;
use crossterm::event::KeyCode;
use tui_support::*;

#[test]
fn hostile_titles_and_log_lines_show_only_their_text() {
    let mut h = Harness::new(100, 30);
    let mut cards = cards();
    let hostile = "Add \x1b]0;PWNED\x07dark\u{9b}2J mode";
    for c in &mut cards {
        if c.id == 2 {
            c.title = hostile.into();
        }
    }
    h.event(baton::tui::event::AppEvent::Board(
        baton::tui::event::BoardSnapshot {
            pipelines: pipelines(),
            cards,
            home: None,
        },
    ));
    let (mut detail, mut log) = running_detail();
    detail.task = task(2, hostile, "build", TaskState::Running);
    for (id, text) in [
        (100, "copy \x1b]52;c;ZXZpbA==\x07me \x1b[2Jnow"),
        (101, "progress 10%\r50%\rprogress 100%"),
    ] {
        log.push(baton::store::LogLine {
            id,
            text: text.into(),
            ..log[0].clone()
        });
    }
    h.select(2);
    h.key(KeyCode::Enter);
    h.serve(&detail, &log);
    let screen = h.screen();
    for bad in ["PWNED", "]52", "ZXZpbA", "2J", "10%", "50%"] {
        assert!(!screen.contains(bad), "{bad:?} shows:\n{screen}");
    }
    assert!(screen.contains("Add dark mode"), "{screen}");
    assert!(screen.contains("copy me now"), "{screen}");
    assert!(screen.contains("progress 100%"), "{screen}");
}
