//! Tasks that wait for tasks on the board: the `⛓` marker on cards and in the detail pane,
//! the new-task form's After field (Tab order Title → Prompt → Pipeline → After), and what
//! the form does with the engine's answer.

mod tui_support;

use baton::store::TaskState;
use baton::tui::event::{AppEvent, BoardSnapshot, Effect, TaskDetail};
use baton::tui::modal::Modal;
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

#[test]
fn a_creation_the_engine_refuses_reopens_the_form_with_what_was_typed_and_why() {
    let mut h = Harness::new(120, 36);
    h.key(KeyCode::Char('n'));
    h.chars("Ship the release");
    h.key(KeyCode::Tab); // prompt
    h.chars("tag and publish");
    h.key(KeyCode::Tab); // pipeline
    h.key(KeyCode::Tab); // after
    h.chars("999");
    h.app.take_effects();
    h.ctrl('s');
    assert!(
        h.app
            .take_effects()
            .iter()
            .any(|e| matches!(e, Effect::Create(_))),
        "the form asks the engine"
    );
    h.event(AppEvent::Created(Err(
        "`after`: there is no task 999".into()
    )));
    let Some(Modal::NewTask(form)) = h.app.modals.last() else {
        panic!("the form is open again");
    };
    assert_eq!(form.title.lines().join(""), "Ship the release");
    assert_eq!(form.prompt.lines().join("\n"), "tag and publish");
    assert_eq!(form.after.lines().join(""), "999");
    assert!(
        form.error
            .as_deref()
            .is_some_and(|e| e.contains("there is no task 999")),
        "{:?}",
        form.error
    );
    let screen = h.screen();
    assert!(screen.contains("there is no task 999"), "{screen}");
    assert!(screen.contains("tag and publish"), "{screen}");

    // Fixed and sent again, the form goes and a later answer finds nothing to reopen.
    h.key(KeyCode::Backspace);
    h.key(KeyCode::Backspace);
    h.key(KeyCode::Backspace);
    h.chars("2");
    h.ctrl('s');
    let made = h.app.take_effects().into_iter().find_map(|e| match e {
        Effect::Create(new) => Some(new),
        _ => None,
    });
    assert_eq!(made.expect("sent again").after, [2]);
    assert!(h.app.modals.is_empty());
    h.event(AppEvent::Created(Ok(10)));
    assert!(h.app.modals.is_empty(), "a made task closes the form");
}

/// Submits the form for `title`, on the pipeline the board shows or (`other`) the next one;
/// returns the pipeline's id.
fn create(h: &mut Harness, title: &str, other: bool) -> String {
    h.key(KeyCode::Char('n'));
    h.chars(title);
    if other {
        h.key(KeyCode::Tab); // prompt
        h.key(KeyCode::Tab); // pipeline
        h.key(KeyCode::Right);
    }
    h.app.take_effects();
    h.ctrl('s');
    let made = h.app.take_effects().into_iter().find_map(|e| match e {
        Effect::Create(new) => Some(new),
        _ => None,
    });
    made.expect("the form made a task").pipeline.id
}

#[test]
fn a_task_made_on_a_board_with_cards_is_selected_whichever_answer_comes_first() {
    // The card's change can arrive before the engine's answer, or after it; the task can
    // be on the pipeline shown or on another one.
    for (card_first, other) in [(true, false), (false, false), (true, true), (false, true)] {
        let mut h = Harness::new(120, 36);
        let before = h.app.board.selected;
        assert!(before.is_some() && before != Some(10));
        let shown = h.app.board.pipeline().map(|p| p.id.clone());
        let pipeline = create(&mut h, "Ship the release", other);
        assert_eq!(shown.as_ref() != Some(&pipeline), other);
        let first = pipelines()
            .into_iter()
            .find(|p| p.id == pipeline)
            .map(|p| p.statuses[0].id.clone())
            .expect("the pipeline");
        let mut made = card(10, "Ship the release", &first, TaskState::Idle);
        made.pipeline_id = pipeline.clone();
        let arrives = AppEvent::Card {
            id: 10,
            card: Some(made.clone()),
        };
        if card_first {
            h.event(AppEvent::TaskChanged(10));
            h.event(arrives);
            h.event(AppEvent::Created(Ok(10)));
            // The reload it asks for finds the board as it is.
            let mut all = cards();
            all.insert(0, made);
            h.event(AppEvent::Board(BoardSnapshot {
                pipelines: pipelines(),
                cards: all,
                home: None,
            }));
        } else {
            h.event(AppEvent::Created(Ok(10)));
            h.event(AppEvent::TaskChanged(10));
            h.event(arrives);
        }
        assert_eq!(h.app.board.selected, Some(10), "card first: {card_first}");
        assert_eq!(
            h.app.board.pipeline().map(|p| p.id.clone()),
            Some(pipeline),
            "its tab is shown"
        );
        assert!(
            h.app.take_effects().contains(&Effect::LoadTask(10)),
            "its detail is loaded (card first: {card_first})"
        );
    }
}
