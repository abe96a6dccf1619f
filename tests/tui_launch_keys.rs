//! The keys from a card to its code, on TestBackend: what `o`, `E`, `y`, `Y` and the
//! number keys ask the driver for, what the status line says, and `D` handing a diff to
//! the pager. Snapshots at 80×24 and 120×36.

mod tui_support;

use baton::tui::event::{AppEvent, Diff, Effect};
use baton::tui::launch::Launch;
use baton::tui::modal::Modal;
use crossterm::event::KeyCode;
use insta::assert_snapshot;
use tui_support::*;

const WT: &str = "/work/trees/2-add-a-dark-mode-toggle";

/// The board with task 2 selected, its detail loaded and given a worktree and branch.
fn with_worktree(w: u16, h: u16) -> Harness {
    let mut h = Harness::new(w, h);
    let (mut detail, log) = running_detail();
    detail.task.worktree = Some(WT.into());
    detail.task.branch = Some("baton/2-add-a-dark-mode-toggle".into());
    h.select(2);
    h.serve(&detail, &log);
    h
}

#[test]
fn o_and_e_launch_in_the_worktree_and_y_copies_the_branch() {
    let mut h = with_worktree(120, 36);
    h.key(KeyCode::Char('o'));
    let effects = h.app.take_effects();
    let launch = effects
        .iter()
        .find_map(|e| match e {
            Effect::Launch(l) => Some(l.clone()),
            _ => None,
        })
        .expect("o launches");
    assert_eq!(launch.cwd, std::path::PathBuf::from(WT));
    assert!(
        launch.window,
        "a shell goes to a tmux window when there is one"
    );

    h.key(KeyCode::Char('E'));
    let effects = h.app.take_effects();
    assert!(
        effects.iter().any(|e| matches!(
            e,
            Effect::Launch(Launch { window: false, argv, .. }) if argv.last().map(String::as_str) == Some(".")
        )),
        "{effects:?}"
    );

    h.key(KeyCode::Char('y'));
    assert!(
        h.app
            .take_effects()
            .contains(&Effect::Copy("baton/2-add-a-dark-mode-toggle".into()))
    );
    assert_snapshot!(h.screen());
}

#[test]
fn a_task_without_a_worktree_says_why_at_80x24() {
    let mut h = Harness::new(80, 24);
    h.select(1);
    h.serve(&backlog_detail(), &[]);
    h.key(KeyCode::Char('o'));
    assert!(
        !h.app
            .take_effects()
            .iter()
            .any(|e| matches!(e, Effect::Launch(_))),
        "nothing to launch in"
    );
    assert_snapshot!(h.screen());
}

#[test]
fn y_path_copies_the_worktree_at_80x24() {
    let mut h = with_worktree(80, 24);
    h.key(KeyCode::Char('Y'));
    assert!(h.app.take_effects().contains(&Effect::Copy(WT.into())));
    assert_snapshot!(h.screen());
}

#[test]
fn number_keys_jump_to_tabs_and_say_when_there_is_none() {
    let mut h = Harness::new(120, 36);
    h.key(KeyCode::Char('2'));
    assert_eq!(h.app.board.tab, 1);
    h.key(KeyCode::Char('1'));
    assert_eq!(h.app.board.tab, 0);
    h.key(KeyCode::Char('9'));
    assert_eq!(h.app.board.tab, 0, "no ninth tab: stays");
    assert_snapshot!(h.screen());
}

#[test]
fn d_hands_the_diff_to_the_pager_and_keeps_a_reason_in_the_popup() {
    let mut h = with_worktree(80, 24);
    h.app.settings.pager = Some("delta".into());
    h.key(KeyCode::Char('D'));
    h.app.take_effects();
    h.event(AppEvent::Diff {
        task_id: 2,
        result: Ok(Diff::Text("+dark\n".into())),
    });
    assert!(h.app.modals.is_empty(), "the popup made way for the pager");
    assert!(
        h.app
            .take_effects()
            .contains(&Effect::Page("+dark\n".into()))
    );

    // No changes: the sentence stays in the popup.
    h.key(KeyCode::Char('D'));
    h.event(AppEvent::Diff {
        task_id: 2,
        result: Ok(Diff::Absent("no changes against main".into())),
    });
    assert!(matches!(h.app.modals.last(), Some(Modal::Diff(_))));

    // `[board] diff = "popup"` keeps the popup for a diff too.
    h.app.modals.clear();
    h.app.settings.diff_popup = true;
    h.key(KeyCode::Char('D'));
    h.app.take_effects();
    h.event(AppEvent::Diff {
        task_id: 2,
        result: Ok(Diff::Text("+dark\n".into())),
    });
    assert!(matches!(h.app.modals.last(), Some(Modal::Diff(_))));
    assert!(
        !h.app
            .take_effects()
            .iter()
            .any(|e| matches!(e, Effect::Page(_)))
    );
}

#[test]
fn help_lists_the_new_keys_at_80x24() {
    let mut h = Harness::new(80, 24);
    h.key(KeyCode::Char('?'));
    for _ in 0..34 {
        h.key(KeyCode::Char('j'));
    }
    let screen = h.screen();
    assert!(screen.contains("copy the task's branch"), "{screen}");
    assert_snapshot!(screen);
}

#[test]
fn help_at_120x36() {
    let mut h = Harness::new(120, 36);
    h.key(KeyCode::Char('?'));
    assert_snapshot!(h.screen());
}
