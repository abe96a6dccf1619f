//! `T`, take over, on TestBackend: refused plainly while the task's step runs, otherwise
//! handed to the driver with the task's worktree; when the takeover ends the move menu opens
//! on the task for its next move. Snapshots at 80×24 and 120×36.

mod tui_support;

use baton::pipeline::{MoveOption, Trigger};
use baton::tui::event::{AppEvent, Effect};
use baton::tui::modal::Modal;
use crossterm::event::KeyCode;
use insta::assert_snapshot;
use tui_support::*;

const WT: &str = "/work/trees/4-speed-up-the-search-index";

/// Task 4 waiting at review, its worktree known.
fn review_detail() -> baton::tui::event::TaskDetail {
    let mut detail = gate_detail();
    detail.task.worktree = Some(WT.into());
    detail.task.branch = Some("baton/4-speed-up-the-search-index".into());
    detail
}

/// The board with task 4 selected.
fn at_review(w: u16, h: u16) -> Harness {
    let mut h = Harness::new(w, h);
    h.select(4);
    h.serve(&review_detail(), &[]);
    h
}

fn take_overs(effects: &[Effect]) -> Vec<&Effect> {
    effects
        .iter()
        .filter(|e| matches!(e, Effect::TakeOver { .. }))
        .collect()
}

#[test]
fn t_on_a_running_task_is_refused_plainly_at_80x24() {
    let mut h = Harness::new(80, 24);
    let (mut detail, log) = running_detail();
    detail.task.worktree = Some("/work/trees/2-add-a-dark-mode-toggle".into());
    h.select(2);
    h.serve(&detail, &log);
    h.key(KeyCode::Char('T'));
    assert!(take_overs(&h.app.take_effects()).is_empty());
    let screen = h.screen();
    assert!(
        screen.contains("task 2's step is running; abort it or wait"),
        "{screen}"
    );
    assert_snapshot!(screen);
}

#[test]
fn t_without_a_worktree_says_why() {
    let mut h = Harness::new(120, 36);
    h.select(1);
    h.serve(&backlog_detail(), &[]);
    h.key(KeyCode::Char('T'));
    assert!(take_overs(&h.app.take_effects()).is_empty());
    assert!(h.screen().contains("task 1 has no worktree yet"));
}

/// Presses `T`, checks what the driver is asked, ends the takeover and loads the moves.
fn taken_over(h: &mut Harness) {
    h.key(KeyCode::Char('T'));
    let effects = h.app.take_effects();
    assert_eq!(
        take_overs(&effects),
        [&Effect::TakeOver {
            task_id: 4,
            cwd: WT.into()
        }]
    );
    h.event(AppEvent::TakenOver {
        task_id: 4,
        result: Ok(()),
    });
    let effects = h.app.take_effects();
    assert!(effects.contains(&Effect::LoadMoves(4)), "{effects:?}");
    assert!(effects.contains(&Effect::LoadTask(4)), "{effects:?}");
    assert!(matches!(h.app.modals.last(), Some(Modal::Move(m)) if m.target.task_id == 4));
    // The reloaded task: its history shows who took it over.
    let mut detail = review_detail();
    detail.history = history(
        4,
        &[
            (None, "backlog", "create"),
            (Some("review"), "review", "takeover"),
        ],
    );
    detail.history[1].reason = Some(
        "taken over by alice; its changes were committed to baton/4-speed-up-the-search-index"
            .into(),
    );
    h.event(AppEvent::Task(Box::new(detail)));
    h.event(AppEvent::Moves {
        task_id: 4,
        result: Ok(vec![
            MoveOption {
                to: "done".into(),
                trigger: Trigger::Approve,
                label: Some("Ship it".into()),
                allowed: true,
                blocked_by: vec![],
            },
            MoveOption {
                to: "build".into(),
                trigger: Trigger::Reject,
                label: Some("Changes requested".into()),
                allowed: true,
                blocked_by: vec![],
            },
        ]),
    });
}

#[test]
fn after_a_takeover_the_move_menu_offers_the_next_move_at_120x36() {
    let mut h = at_review(120, 36);
    taken_over(&mut h);
    let screen = h.screen();
    assert!(screen.contains("the takeover ended"), "{screen}");
    assert!(screen.contains("Ship it"), "{screen}");
    assert!(screen.contains("11:59:04 taken over by alice;"), "{screen}");
    assert_snapshot!(screen);
}

#[test]
fn after_a_takeover_the_move_menu_offers_the_next_move_at_80x24() {
    let mut h = at_review(80, 24);
    taken_over(&mut h);
    assert_snapshot!(h.screen());
}

#[test]
fn a_takeover_that_failed_says_so_and_opens_no_menu() {
    let mut h = at_review(80, 24);
    h.event(AppEvent::TakenOver {
        task_id: 4,
        result: Err("task 4: the takeover did not end cleanly".into()),
    });
    assert!(h.app.modals.is_empty());
    assert!(h.screen().contains("did not end cleanly"));
}

#[test]
fn after_the_takeover_of_a_failed_task_resume_and_retry_are_offered_not_a_menu() {
    // Task 6 is failed (its column collapsed; the card is found by its id).
    let mut h = Harness::new(80, 24);
    h.event(AppEvent::TakenOver {
        task_id: 6,
        result: Ok(()),
    });
    assert!(h.app.modals.is_empty());
    assert!(h.screen().contains("R resumes its step, F retries"));
}
