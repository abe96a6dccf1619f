//! Who runs the engine, on the board: the header names the process a board is attached to,
//! and a board that took the engine over says so in a banner that counts what quitting
//! interrupts and that `esc` hides.

mod tui_support;

use baton::engine::wake::{Owner, Role};
use baton::store::TaskState;
use baton::tui::app::Mode;
use baton::tui::event::{AppEvent, BoardSnapshot};
use crossterm::event::KeyCode;
use insta::assert_snapshot;
use tui_support::*;

fn took_over(h: &mut Harness) {
    h.event(AppEvent::EngineNow {
        mode: Mode::Embedded,
        owner: None,
        took_over: true,
    });
    h.app.take_effects();
}

fn attached_to_headless(h: &mut Harness) {
    h.event(AppEvent::EngineNow {
        mode: Mode::Attached,
        owner: Some(Owner {
            pid: 4242,
            role: Role::Headless,
        }),
        took_over: false,
    });
    h.app.take_effects();
}

/// The demo board with a second card running.
fn two_running() -> BoardSnapshot {
    let mut cards = cards();
    for c in cards.iter_mut().filter(|c| c.id == 7) {
        c.state = TaskState::Running;
    }
    BoardSnapshot {
        pipelines: pipelines(),
        cards,
        home: None,
    }
}

#[test]
fn took_over_banner_80x24() {
    let mut h = Harness::with_mode(80, 24, Mode::Attached);
    took_over(&mut h);
    assert_snapshot!(h.screen());
}

#[test]
fn took_over_banner_120x36() {
    let mut h = Harness::with_mode(120, 36, Mode::Attached);
    took_over(&mut h);
    h.event(AppEvent::Board(two_running()));
    assert_snapshot!(h.screen());
}

#[test]
fn attached_to_baton_engine_header_80x24() {
    let mut h = Harness::new(80, 24);
    attached_to_headless(&mut h);
    assert_snapshot!(h.screen());
}

#[test]
fn attached_to_baton_engine_header_120x36() {
    let mut h = Harness::new(120, 36);
    attached_to_headless(&mut h);
    let screen = h.screen();
    assert!(
        screen.contains("engine: baton engine (pid 4242)"),
        "{screen}"
    );
    assert_snapshot!(screen);
}

/// The banner counts the running steps as they start and end.
#[test]
fn the_banner_counts_what_quitting_interrupts_as_steps_start_and_end() {
    let mut h = Harness::with_mode(120, 36, Mode::Attached);
    took_over(&mut h);
    assert!(
        h.screen()
            .contains("quitting interrupts 1 step (R resumes it)")
    );
    h.event(AppEvent::Board(two_running()));
    assert!(
        h.screen()
            .contains("quitting interrupts 2 steps (R resumes them)")
    );
    let mut idle = cards();
    idle.retain(|c| c.state != TaskState::Running);
    h.event(AppEvent::Board(BoardSnapshot {
        pipelines: pipelines(),
        cards: idle,
        home: None,
    }));
    assert!(
        h.screen()
            .contains("this board now runs the engine; quitting stops it (nothing runs now)")
    );
}

/// `esc` on the board hides the banner; the board is one row taller again.
#[test]
fn esc_hides_the_banner() {
    let mut h = Harness::new(100, 30);
    let before = h.screen();
    took_over(&mut h);
    assert!(h.screen().contains("this board now runs the engine"));
    h.key(KeyCode::Esc);
    let after = h.screen();
    assert!(!after.contains("this board now runs the engine"), "{after}");
    assert_eq!(after, before, "the layout is the one before the banner");
}

/// Attached to another engine, or running it from the start, the board shows no banner.
#[test]
fn no_banner_unless_the_board_took_over() {
    let mut h = Harness::new(100, 30);
    attached_to_headless(&mut h);
    h.event(AppEvent::EngineNow {
        mode: Mode::Embedded,
        owner: None,
        took_over: false,
    });
    let screen = h.screen();
    assert!(!screen.contains("now runs the engine"), "{screen}");
    assert!(!h.app.engine_banner());
}
