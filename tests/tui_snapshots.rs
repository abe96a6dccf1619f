//! Whole-app snapshots on ratatui's TestBackend: state and engine events injected, keys
//! pressed, the screen compared with a reviewed `.snap` file.

mod tui_support;

use baton::pipeline::{MoveOption, Trigger};
use baton::tui::app::Mode;
use baton::tui::event::{AppEvent, Effect};
use crossterm::event::KeyCode;
use insta::assert_snapshot;
use tui_support::*;

#[test]
fn board_100x30() {
    let mut h = Harness::new(100, 30);
    h.serve(&backlog_detail(), &[]);
    assert_snapshot!(h.screen());
}

#[test]
fn board_80x24_with_terminal_columns_expanded() {
    let mut h = Harness::new(80, 24);
    h.key(KeyCode::Char('z'));
    h.serve(&backlog_detail(), &[]);
    assert_snapshot!(h.screen());
}

#[test]
fn board_120x36_filtered() {
    let mut h = Harness::new(120, 36);
    h.key(KeyCode::Char('/'));
    h.chars("dark");
    let (detail, log) = running_detail();
    h.serve(&detail, &log);
    assert_snapshot!(h.screen());
}

#[test]
fn detail_pane_with_live_log() {
    let mut h = Harness::new(100, 30);
    let (detail, log) = running_detail();
    h.select(2);
    h.key(KeyCode::Enter);
    h.serve(&detail, &log);
    assert_snapshot!(h.screen());
}

#[test]
fn detail_pane_80x24_after_a_step_change_shows_the_older_step() {
    let mut h = Harness::new(80, 24);
    let (detail, log) = running_detail();
    h.select(2);
    h.key(KeyCode::Enter);
    h.serve(&detail, &log);
    h.key(KeyCode::Char('k'));
    h.serve(&detail, &log);
    assert_snapshot!(h.screen());
}

#[test]
fn full_screen_log_with_search() {
    let mut h = Harness::new(100, 30);
    let (detail, log) = running_detail();
    h.select(2);
    h.serve(&detail, &log);
    h.key(KeyCode::Char('L'));
    h.key(KeyCode::Char('/'));
    h.chars("module_1");
    h.key(KeyCode::Enter);
    assert_snapshot!(h.screen());
}

#[test]
fn interrupted_banner() {
    let mut h = Harness::new(100, 30);
    let (detail, log) = interrupted_detail();
    h.select(3);
    h.serve(&detail, &log);
    assert_snapshot!(h.screen());
}

#[test]
fn new_task_form() {
    let mut h = Harness::new(100, 30);
    h.key(KeyCode::Char('n'));
    h.chars("Fix the login redirect");
    h.key(KeyCode::Tab);
    h.chars("Users land on /home.");
    h.key(KeyCode::Enter);
    h.chars("They should land where they were.");
    // Then the pipeline picker, which shows its focus and its keys.
    h.key(KeyCode::Tab);
    assert_snapshot!(h.screen());
}

#[test]
fn new_task_form_80x24_without_a_title() {
    let mut h = Harness::new(80, 24);
    h.key(KeyCode::Char('n'));
    h.ctrl('s');
    assert_snapshot!(h.screen());
}

/// A title over the limit keeps the form and what was typed, like a blank one.
#[test]
fn new_task_form_keeps_a_title_too_long() {
    let mut h = Harness::new(80, 24);
    h.key(KeyCode::Char('n'));
    h.chars(&"x".repeat(501));
    h.ctrl('s');
    let screen = h.screen();
    assert!(screen.contains("New task"), "{screen}");
    assert!(
        screen.contains("the title is 501 characters long"),
        "{screen}"
    );
    // The whole sentence shows, over two lines.
    assert!(screen.contains("details in the prompt"), "{screen}");
}

#[test]
fn reject_note_form() {
    let mut h = Harness::new(100, 30);
    h.select(4);
    h.serve(&gate_detail(), &[]);
    h.key(KeyCode::Char('r'));
    h.chars("Add a benchmark first.");
    assert_snapshot!(h.screen());
}

#[test]
fn move_menu_with_a_blocked_option() {
    let mut h = Harness::new(100, 30);
    h.select(2);
    h.key(KeyCode::Char('m'));
    h.event(AppEvent::Moves {
        task_id: 2,
        result: Ok(vec![
            MoveOption {
                to: "backlog".into(),
                trigger: Trigger::Manual,
                label: Some("Back to backlog".into()),
                allowed: false,
                blocked_by: vec!["no_running_step".into()],
            },
            MoveOption {
                to: "cancelled".into(),
                trigger: Trigger::Manual,
                label: Some("Drop it".into()),
                allowed: true,
                blocked_by: vec![],
            },
        ]),
    });
    assert_snapshot!(h.screen());
}

#[test]
fn abort_confirm() {
    let mut h = Harness::new(100, 30);
    h.select(2);
    h.key(KeyCode::Char('x'));
    assert_snapshot!(h.screen());
}

#[test]
fn quit_confirm_when_steps_run_in_the_embedded_engine() {
    let mut h = Harness::new(80, 24);
    h.key(KeyCode::Char('q'));
    assert!(!h.app.quit);
    assert_snapshot!(h.screen());
}

#[test]
fn help_screen() {
    let mut h = Harness::new(100, 30);
    h.key(KeyCode::Char('?'));
    assert_snapshot!(h.screen());
}

#[test]
fn diff_shows_the_message_of_task_diff() {
    let mut h = Harness::new(80, 24);
    h.select(2);
    h.key(KeyCode::Char('D'));
    h.event(AppEvent::Diff {
        task_id: 2,
        result: Err("diffs are not available in this build yet".into()),
    });
    assert_snapshot!(h.screen());
}

#[test]
fn attached_header_and_request_error_in_the_status_line() {
    let mut h = Harness::with_mode(100, 30, Mode::Attached);
    h.serve(&backlog_detail(), &[]);
    h.event(AppEvent::Replied(Err(
        "task 4 is no longer at review — bob approved it 2 s ago (it is at done) — `baton show 4` has its history".into(),
    )));
    assert_snapshot!(h.screen());
}

#[test]
fn too_small() {
    let mut h = Harness::new(50, 12);
    assert_snapshot!(h.screen());
}

#[test]
fn board_80x24_collapsed_with_short_badges_and_counts() {
    let mut h = Harness::with_mode(80, 24, Mode::Attached);
    h.serve(&backlog_detail(), &[]);
    assert_snapshot!(h.screen());
}

#[test]
fn interrupted_banner_80x24() {
    let mut h = Harness::new(80, 24);
    let (detail, log) = interrupted_detail();
    h.select(3);
    h.serve(&detail, &log);
    assert_snapshot!(h.screen());
}

#[test]
fn detail_pane_scrolls_the_steps_of_a_long_loop_to_the_shown_one() {
    let mut h = Harness::new(100, 30);
    let (mut detail, log) = running_detail();
    // A loop: 600 runs of build, the last one running.
    let mut steps = Vec::new();
    for i in 0..600 {
        let state = if i == 599 {
            baton::store::StepState::Running
        } else {
            baton::store::StepState::Succeeded
        };
        let mut s = step(100 + i, 2, "build", state, 2);
        s.attempt = i + 1;
        steps.push(s);
    }
    detail.steps = steps;
    h.select(2);
    h.key(KeyCode::Enter);
    h.serve(&detail, &log);
    // Back to attempt #523.
    for _ in 0..(600 - 523) {
        h.key(KeyCode::Char('k'));
    }
    h.serve(&detail, &log);
    let screen = h.screen();
    assert!(screen.contains("Log · build #523"), "{screen}");
    assert!(screen.contains("build #523 "), "{screen}");
    assert!(screen.contains("History"), "{screen}");
    assert_snapshot!(screen);
}

#[test]
fn move_note_form() {
    let mut h = Harness::new(100, 30);
    h.select(4);
    h.key(KeyCode::Char('m'));
    h.event(AppEvent::Moves {
        task_id: 4,
        result: Ok(vec![MoveOption {
            to: "build".into(),
            trigger: Trigger::Manual,
            label: Some("Back to build".into()),
            allowed: true,
            blocked_by: vec![],
        }]),
    });
    h.key(KeyCode::Enter);
    h.chars("Keep the old index as a fallback.");
    assert_snapshot!(h.screen());
}

/// The new task form's title and prompt, as typed so far; `None` once it is closed.
fn new_task_draft(h: &Harness) -> Option<(String, String)> {
    h.app.modals.iter().find_map(|m| match m {
        baton::tui::modal::Modal::NewTask(f) => {
            Some((f.title.lines().join("\n"), f.prompt.lines().join("\n")))
        }
        _ => None,
    })
}

/// `esc` in a new task that holds a draft asks first; any other key goes back to the draft,
/// `esc` again throws it away.
#[test]
fn esc_in_a_typed_new_task_asks_before_discarding_at_80x24() {
    let mut h = Harness::new(80, 24);
    h.key(KeyCode::Char('n'));
    h.chars("Cache the search index");
    h.key(KeyCode::Tab);
    h.chars("Keep it in memory.");
    h.key(KeyCode::Enter);
    h.chars("Drop it when a file changes.");
    let draft = new_task_draft(&h);
    h.key(KeyCode::Esc);
    let screen = h.screen();
    assert!(
        screen.contains("Discard this new task? y/esc discard"),
        "{screen}"
    );
    assert_eq!(new_task_draft(&h), draft, "still open, the draft intact");
    assert_snapshot!(screen);
    // `n` answers the question: back to editing, and it is not typed into the prompt.
    h.key(KeyCode::Char('n'));
    assert_eq!(new_task_draft(&h), draft);
    assert!(!h.screen().contains("Discard this new task?"));
    h.key(KeyCode::Esc);
    h.key(KeyCode::Esc);
    assert!(new_task_draft(&h).is_none(), "esc twice discards");
    let created = h
        .app
        .take_effects()
        .into_iter()
        .any(|e| matches!(e, Effect::Create(_)));
    assert!(!created, "nothing was created");
}

#[test]
fn esc_in_an_untouched_new_task_closes_it_and_y_discards_a_draft() {
    let mut h = Harness::new(80, 24);
    h.key(KeyCode::Char('n'));
    h.key(KeyCode::Esc);
    assert!(
        new_task_draft(&h).is_none(),
        "nothing typed: closes at once"
    );
    h.key(KeyCode::Char('n'));
    h.chars("x");
    h.key(KeyCode::Esc);
    h.key(KeyCode::Char('y'));
    assert!(new_task_draft(&h).is_none());
}

/// The edit form asks only when its title or prompt differs from the task's.
#[test]
fn esc_in_a_changed_edit_asks_before_discarding_at_80x24() {
    let mut h = Harness::new(80, 24);
    h.select(4);
    let mut detail = gate_detail();
    detail.task.prompt = "make it fast\nand small".into();
    h.serve(&detail, &[]);
    let editing = |h: &Harness| {
        h.app
            .modals
            .iter()
            .any(|m| matches!(m, baton::tui::modal::Modal::Edit(_)))
    };
    // Opened and closed untouched; typed and then undone is untouched too.
    h.key(KeyCode::Char('e'));
    h.key(KeyCode::Esc);
    assert!(!editing(&h));
    h.key(KeyCode::Char('e'));
    h.chars("!");
    h.key(KeyCode::Backspace);
    h.key(KeyCode::Esc);
    assert!(!editing(&h));
    // Changed: esc asks, any other key keeps editing, y discards.
    h.key(KeyCode::Char('e'));
    h.key(KeyCode::Tab);
    h.chars("x");
    h.key(KeyCode::Esc);
    let screen = h.screen();
    assert!(editing(&h));
    assert!(
        screen.contains("Discard your changes? y/esc discard"),
        "{screen}"
    );
    assert_snapshot!(screen);
    h.key(KeyCode::Enter);
    assert!(editing(&h));
    assert!(!h.screen().contains("Discard your changes?"));
    h.key(KeyCode::Esc);
    h.key(KeyCode::Char('y'));
    assert!(!editing(&h));
    let sent = h
        .app
        .take_effects()
        .into_iter()
        .any(|e| matches!(e, Effect::Send(_)));
    assert!(!sent, "nothing was sent");
}

/// A board whose third pipeline has a longer name, on its tab: at 60 columns the tabs and
/// the counts do not all fit.
fn long_tab_board(w: u16, h: u16) -> Harness {
    let mut h = Harness::new(w, h);
    let mut pipelines = pipelines();
    pipelines[2].name = "Slow release train".into();
    h.event(AppEvent::Board(baton::tui::event::BoardSnapshot {
        pipelines,
        cards: cards(),
        home: None,
    }));
    h.key(KeyCode::Char(']'));
    h.key(KeyCode::Char(']'));
    h
}

#[test]
fn the_current_tab_stays_in_view_when_the_tabs_do_not_fit_at_60x16() {
    let mut h = long_tab_board(60, 16);
    let screen = h.screen();
    let top = screen.lines().next().unwrap_or_default();
    assert!(top.contains(" Slow release train "), "{top}");
    assert_snapshot!(screen);
}

#[test]
fn every_tab_and_the_counts_show_where_they_fit_at_120x36() {
    let mut h = long_tab_board(120, 36);
    let screen = h.screen();
    let top = screen.lines().next().unwrap_or_default();
    for tab in [
        " Demo ",
        " Quick fix ",
        " Slow release train ",
        "● 1 running",
    ] {
        assert!(top.contains(tab), "{tab}: {top}");
    }
}

#[test]
fn a_current_tab_too_long_to_share_the_line_hides_the_counts_at_60x16() {
    let mut h = long_tab_board(60, 16);
    let mut pipelines = pipelines();
    pipelines[2].name = "Nightly dependency upgrades".into();
    h.event(AppEvent::Board(baton::tui::event::BoardSnapshot {
        pipelines,
        cards: cards(),
        home: None,
    }));
    let screen = h.screen();
    let top = screen.lines().next().unwrap_or_default();
    assert!(top.contains(" Nightly dependency upgrades "), "{top}");
    assert!(!top.contains("here"), "{top}");
}
