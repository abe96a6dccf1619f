//! Fixing tasks up from the board: breakpoints set and continued from keys, re-run from a
//! chosen status, edit, archive, dismiss, and the history timeline with guards and hooks.

mod tui_support;

use baton::engine::{Action as EngineAction, Request};
use baton::store::{Event, StepState, TaskState};
use baton::tui::event::{Effect, TaskDetail};
use crossterm::event::KeyCode;
use insta::assert_snapshot;
use tui_support::*;

fn sent(effects: &[Effect]) -> Vec<Request> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Send(r) => Some(r.clone()),
            _ => None,
        })
        .collect()
}

/// Task #7, queued at test with a breakpoint before it: paused there.
fn paused_detail() -> TaskDetail {
    let mut t = task(7, "Rename the config keys", "test", TaskState::Waiting);
    t.breakpoint = Some("test".into());
    t.worktree = Some("/work/.repo.baton-worktrees/7-rename-the-config-keys".into());
    TaskDetail {
        task: t,
        steps: vec![
            step(71, 7, "plan", StepState::Succeeded, 3),
            step(72, 7, "build", StepState::Succeeded, 4),
        ],
        history: history(
            7,
            &[
                (None, "backlog", "create"),
                (Some("backlog"), "plan", "start"),
                (Some("plan"), "build", "success"),
                (Some("build"), "test", "success"),
            ],
        ),
        notices: vec![],
        messages: vec![],
        questions: vec![],
    }
}

#[test]
fn b_sets_a_breakpoint_from_a_list_and_c_continues() {
    let mut h = Harness::new(100, 30);
    h.select(2);
    let (detail, log) = running_detail();
    h.serve(&detail, &log);
    h.app.take_effects();
    h.key(KeyCode::Char('b'));
    // The demo pipeline's step statuses, in order.
    assert_snapshot!("breakpoint_menu", h.screen());
    h.key(KeyCode::Char('j'));
    h.key(KeyCode::Char('j'));
    h.key(KeyCode::Enter);
    let reqs = sent(&h.app.take_effects());
    assert_eq!(
        reqs[0].action,
        EngineAction::Break {
            status: "test".into()
        }
    );
    assert_eq!(reqs[0].expected_status.as_deref(), Some("build"));

    // Paused at test: the banner says where to look, the key bar how to go on.
    h.select(7);
    h.serve(&paused_detail(), &[]);
    assert!(h.app.banner());
    assert_snapshot!("paused_at_breakpoint", h.screen());
    h.app.take_effects();
    h.key(KeyCode::Char('c'));
    let reqs = sent(&h.app.take_effects());
    assert_eq!(reqs[0].action, EngineAction::Continue);
    assert_eq!(reqs[0].task_id, 7);

    // b on a task with a breakpoint offers to clear it first.
    h.key(KeyCode::Char('b'));
    h.key(KeyCode::Enter);
    let reqs = sent(&h.app.take_effects());
    assert_eq!(reqs[0].action, EngineAction::Continue);
}

#[test]
fn f_reruns_a_finished_task_from_a_chosen_status() {
    let mut h = Harness::new(100, 30);
    h.select(2);
    h.app.take_effects();
    h.key(KeyCode::Char('f'));
    assert!(sent(&h.app.take_effects()).is_empty());
    assert!(h.app.modals.is_empty(), "a running task is not re-run");
    h.key(KeyCode::Char('z'));
    h.select(6);
    h.key(KeyCode::Char('f'));
    // backlog, plan, build, test, review: choose build.
    h.key(KeyCode::Down);
    h.key(KeyCode::Down);
    h.key(KeyCode::Enter);
    let reqs = sent(&h.app.take_effects());
    assert_eq!(
        reqs[0].action,
        EngineAction::Rerun {
            from: "build".into(),
            brk: None
        }
    );
    assert_eq!(reqs[0].expected_status.as_deref(), Some("failed"));
}

#[test]
fn e_edits_title_and_prompt_and_capital_a_archives() {
    let mut h = Harness::new(100, 30);
    h.select(4);
    let mut detail = gate_detail();
    detail.task.prompt = "make it fast".into();
    h.serve(&detail, &[]);
    h.app.take_effects();
    h.key(KeyCode::Char('e'));
    for _ in 0..6 {
        h.key(KeyCode::Backspace);
    }
    h.key(KeyCode::Char('!'));
    h.key(KeyCode::Tab);
    h.key(KeyCode::Char('x'));
    h.ctrl('s');
    let reqs = sent(&h.app.take_effects());
    assert_eq!(
        reqs[0].action,
        EngineAction::Edit {
            title: Some("Speed up the search!".into()),
            prompt: Some("xmake it fast".into()),
        }
    );
    // Unchanged: nothing is sent.
    h.key(KeyCode::Char('e'));
    h.ctrl('s');
    assert!(sent(&h.app.take_effects()).is_empty());

    h.key(KeyCode::Char('z'));
    h.select(5);
    h.key(KeyCode::Char('A'));
    let reqs = sent(&h.app.take_effects());
    assert_eq!(reqs[0].action, EngineAction::Archive);
    assert_eq!(reqs[0].task_id, 5);
}

#[test]
fn interrupted_task_key_bar_names_the_decisions() {
    let mut h = Harness::new(100, 30);
    let (detail, log) = interrupted_detail();
    h.select(3);
    h.serve(&detail, &log);
    let screen = h.screen();
    let bar = screen.lines().last().unwrap();
    assert!(
        bar.contains("R resume")
            && bar.contains("F retry from scratch")
            && bar.contains("d dismiss"),
        "{bar}"
    );
}

/// A review ↔ build loop stopped by its limit: the history shows each move with the guard
/// it passed or the one that blocked, the hook runs, and the errors in between.
#[test]
fn history_shows_guards_hooks_and_events_on_one_timeline() {
    let mut h = Harness::new(120, 36);
    h.key(KeyCode::Char('z'));
    h.select(6);
    let mut d = TaskDetail {
        task: task(6, "Write the onboarding guide", "failed", TaskState::Failed),
        steps: vec![
            step(61, 6, "build", StepState::Succeeded, 3),
            step(62, 6, "test", StepState::Failed, 2),
        ],
        history: history(
            6,
            &[
                (None, "backlog", "create"),
                (Some("test"), "build", "failure"),
                (Some("test"), "failed", "failure"),
            ],
        ),
        notices: vec![],
        messages: vec![],
        questions: vec![],
    };
    d.history[1].guards = serde_json::json!([
        {"guard": "max_visits: 3", "passed": true, "detail": "build entered 2 of 3 times"}
    ]);
    d.history[1].hooks = serde_json::json!([
        {"hook": "run", "state": "failed", "detail": "exited 1", "at": "2025-01-01T11:59:06.000Z"}
    ]);
    d.history[2].guards = serde_json::json!([
        {"guard": "max_visits: 3", "passed": false, "detail": "max_visits 3 reached"}
    ]);
    d.notices.push(Event {
        id: 1,
        task_id: Some(6),
        category: "hook".into(),
        kind: "hook.failed".into(),
        summary: "hook run: exited 1".into(),
        data: serde_json::json!({}),
        actor: "hook".into(),
        level: "error".into(),
        at: d.history[1].at + 500,
    });
    h.serve(&d, &[]);
    let screen = h.screen();
    assert!(screen.contains("⊘ max_visits 3 reached"), "{screen}");
    assert!(screen.contains("↳ run failed: exited 1"), "{screen}");
    assert_snapshot!("history_timeline", screen);
}
