//! Tasks that wait for tasks on the board: the `⛓` marker on cards and in the detail pane,
//! and the new-task form's After field (Tab order Title → Prompt → Pipeline → After).

mod tui_support;

use baton::store::TaskState;
use baton::tui::event::{AppEvent, BoardSnapshot, Effect, TaskDetail};
use crossterm::event::KeyCode;
use insta::assert_snapshot;
use tui_support::*;

/// The demo board plus two backlog cards that wait: one for tasks still running or queued,
/// one for a task that failed.
fn waiting_board(h: &mut Harness) {
    let mut all = cards();
    let mut ship = card(8, "Ship the release", "backlog", TaskState::Idle);
    ship.after = Some("2, 7".into());
    let mut announce = card(9, "Announce it", "backlog", TaskState::Idle);
    announce.after = Some("6 failed".into());
    all.insert(0, ship);
    all.insert(0, announce);
    h.event(AppEvent::Board(BoardSnapshot {
        pipelines: pipelines(),
        cards: all,
        home: None,
    }));
}

fn ship_detail() -> TaskDetail {
    TaskDetail {
        task: task(8, "Ship the release", "backlog", TaskState::Idle),
        steps: vec![],
        history: history(8, &[(None, "backlog", "create")]),
        notices: vec![],
        messages: vec![],
        questions: vec![],
    }
}

fn board(w: u16, h: u16) -> String {
    let mut harness = Harness::new(w, h);
    waiting_board(&mut harness);
    // The selection stays on the card it was on (#1, the lowest in the backlog): go up
    // first, since the helper walks down a column.
    for _ in 0..3 {
        harness.key(KeyCode::Char('k'));
    }
    harness.select(8);
    harness.serve(&ship_detail(), &[]);
    harness.screen()
}

#[test]
fn waiting_cards_80x24() {
    let screen = board(80, 24);
    assert!(screen.contains("⛓"), "{screen}");
    assert_snapshot!(screen);
}

#[test]
fn waiting_cards_120x36() {
    let screen = board(120, 36);
    assert!(screen.contains("⛓ 2, 7"), "{screen}");
    assert!(screen.contains("⛓ 6 failed"), "{screen}");
    assert!(
        screen.contains("waits for ⛓ 2, 7"),
        "the detail pane: {screen}"
    );
    assert_snapshot!(screen);
}

fn form_at_after(h: &mut Harness) {
    h.key(KeyCode::Char('n'));
    h.chars("Ship the release");
    h.key(KeyCode::Tab); // prompt
    h.key(KeyCode::Tab); // pipeline
    h.key(KeyCode::Tab); // after
    h.chars("2, 7");
}

#[test]
fn new_task_form_after_field_80x24() {
    let mut h = Harness::new(80, 24);
    form_at_after(&mut h);
    let screen = h.screen();
    assert!(screen.contains("› After ⛓"), "{screen}");
    assert!(screen.contains("2, 7"), "{screen}");
    assert_snapshot!(screen);
}

#[test]
fn new_task_form_after_field_120x36() {
    let mut h = Harness::new(120, 36);
    form_at_after(&mut h);
    assert_snapshot!(h.screen());
}

#[test]
fn the_form_sends_the_ids_it_waits_for_and_refuses_words() {
    let mut h = Harness::new(100, 30);
    form_at_after(&mut h);
    h.chars(" #9");
    h.app.take_effects();
    h.ctrl('s');
    let made = h.app.take_effects().into_iter().find_map(|e| match e {
        Effect::Create(new) => Some(new),
        _ => None,
    });
    let made = made.expect("the form made a task");
    assert_eq!(made.after, [2, 7, 9]);
    assert_eq!(made.title, "Ship the release");

    let mut h = Harness::new(100, 30);
    form_at_after(&mut h);
    h.chars(" soon");
    h.app.take_effects();
    h.ctrl('s');
    assert!(
        !h.app
            .take_effects()
            .iter()
            .any(|e| matches!(e, Effect::Create(_))),
        "nothing is made from a word"
    );
    let screen = h.screen();
    assert!(screen.contains("`soon` is not a task id"), "{screen}");
    assert!(
        screen.contains("2, 7 soon"),
        "what was typed stays: {screen}"
    );
}
