//! The reducer: keys through the keymap and the modal stack, effects it asks for, and
//! notifications — no terminal, no engine.

mod tui_support;

use baton::engine::{Action as EngineAction, Request};
use baton::pipeline::{MoveOption, Trigger};
use baton::store::TaskState;
use baton::tui::app::{Focus, Mode};
use baton::tui::event::{AppEvent, BoardSnapshot, Effect};
use baton::tui::loader::no_diff_reason;
use baton::tui::modal::{Confirm, Modal};
use crossterm::event::KeyCode;
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

#[test]
fn first_board_selects_a_card_and_loads_it() {
    let mut h = Harness::new(100, 30);
    assert!(h.app.loaded);
    assert_eq!(h.app.board.selected, Some(1));
    assert_eq!(h.app.take_effects(), vec![Effect::LoadTask(1)]);
}

#[test]
fn task_keys_send_requests_with_the_status_the_user_saw() {
    let mut h = Harness::new(100, 30);
    h.select(4);
    h.app.take_effects();
    h.key(KeyCode::Char('a'));
    let reqs = sent(&h.app.take_effects());
    assert_eq!(
        reqs,
        vec![Request {
            task_id: 4,
            action: EngineAction::Approve { note: None },
            expected_status: Some("review".into()),
            actor: "tui".into(),
        }]
    );
    h.select(3);
    h.app.take_effects();
    h.key(KeyCode::Char('R'));
    h.key(KeyCode::Char('F'));
    let actions: Vec<_> = sent(&h.app.take_effects())
        .into_iter()
        .map(|r| r.action)
        .collect();
    assert_eq!(actions, vec![EngineAction::Resume, EngineAction::Retry]);
}

#[test]
fn the_top_modal_consumes_keys_and_esc_closes_it() {
    let mut h = Harness::new(100, 30);
    h.select(4);
    h.key(KeyCode::Char('r'));
    assert!(matches!(h.app.modals.last(), Some(Modal::Note(_))));
    h.app.take_effects();
    // `a` and `q` are text in the note, not approve and quit.
    h.chars("aq");
    assert!(!h.app.quit);
    assert!(sent(&h.app.take_effects()).is_empty());
    h.key(KeyCode::Esc);
    assert!(h.app.modals.is_empty());
    // Reject again: ctrl+s sends the note.
    h.key(KeyCode::Char('r'));
    h.chars("needs tests");
    h.ctrl('s');
    assert!(h.app.modals.is_empty());
    let reqs = sent(&h.app.take_effects());
    assert_eq!(
        reqs[0].action,
        EngineAction::Reject {
            note: Some("needs tests".into())
        }
    );
}

#[test]
fn stacked_layers_close_one_at_a_time() {
    let mut h = Harness::new(100, 30);
    let (detail, log) = running_detail();
    h.select(2);
    h.serve(&detail, &log);
    h.key(KeyCode::Char('L'));
    h.key(KeyCode::Char('/'));
    assert_eq!(h.app.modals.len(), 2);
    h.key(KeyCode::Esc);
    assert!(matches!(h.app.modals.last(), Some(Modal::FullLog)));
    h.key(KeyCode::Esc);
    assert!(h.app.modals.is_empty());
}

#[test]
fn new_task_form_submits_with_ctrl_s() {
    let mut h = Harness::new(100, 30);
    h.app.take_effects();
    h.key(KeyCode::Char('n'));
    h.chars("Ship it");
    // Tab goes title → prompt → pipeline.
    h.key(KeyCode::Tab);
    h.chars("line one");
    h.key(KeyCode::Enter);
    h.chars("line two");
    h.key(KeyCode::Tab);
    let Some(Modal::NewTask(form)) = h.app.modals.last() else {
        panic!("the form is open");
    };
    let preselected = form.pipeline;
    // Letters typed on the picker change nothing and say which keys do.
    h.chars("hjkl x");
    let Some(Modal::NewTask(form)) = h.app.modals.last() else {
        panic!("the form is open");
    };
    assert_eq!(form.pipeline, preselected);
    assert!(form.error.as_deref().unwrap_or("").contains("←/→"));
    h.key(KeyCode::Right);
    h.ctrl('s');
    assert!(h.app.modals.is_empty());
    let effects = h.app.take_effects();
    let Some(Effect::Create(new)) = effects.first() else {
        panic!("expected a create effect, got {effects:?}");
    };
    assert_eq!(new.title, "Ship it");
    assert_eq!(new.prompt, "line one\nline two");
    assert_eq!(
        new.pipeline.id,
        pipelines()[(preselected + 1) % pipelines().len()].id
    );
    assert!(new.start);
    // The created task becomes the selection, on its own tab, once the board has it.
    h.event(AppEvent::Created(Ok(8)));
    assert!(h.app.take_effects().contains(&Effect::LoadBoard));
    let mut cards = cards();
    let mut made = card(8, "Ship it", "plan", TaskState::Queued);
    made.pipeline_id = new.pipeline.id.clone();
    made.updated_at = 0;
    cards.insert(0, made);
    h.event(AppEvent::Board(BoardSnapshot {
        pipelines: pipelines(),
        cards,
        home: None,
    }));
    assert_eq!(h.app.board.selected, Some(8));
    assert_eq!(
        h.app.board.pipeline().map(|p| p.id.clone()),
        Some(new.pipeline.id.clone())
    );
}

#[test]
fn an_empty_board_opens_on_the_workspaces_own_pipeline_and_n_preselects_it() {
    let mut h = Harness::new(100, 30);
    let home = pipelines().last().expect("pipelines").id.clone();
    h.app = baton::tui::app::App::new(h.app.theme, Mode::Embedded, (100, 30));
    h.event(AppEvent::Board(BoardSnapshot {
        pipelines: pipelines(),
        cards: Vec::new(),
        home: Some(home.clone()),
    }));
    assert_eq!(
        h.app.board.pipeline().map(|p| p.id.clone()),
        Some(home.clone())
    );
    h.key(KeyCode::Char('n'));
    let Some(Modal::NewTask(form)) = h.app.modals.last() else {
        panic!("the form is open");
    };
    assert_eq!(form.pipelines[form.pipeline].id, home);
}

#[test]
fn quit_asks_only_when_an_embedded_engine_runs_steps() {
    let mut h = Harness::new(100, 30);
    h.key(KeyCode::Char('q'));
    assert_eq!(
        h.app.modals.last().and_then(|m| match m {
            Modal::Confirm(c) => Some(c),
            _ => None,
        }),
        Some(&Confirm::Quit { running: 1 })
    );
    h.key(KeyCode::Char('n'));
    assert!(!h.app.quit && h.app.modals.is_empty());
    h.key(KeyCode::Char('q'));
    h.key(KeyCode::Char('y'));
    assert!(h.app.quit);

    let mut attached = Harness::with_mode(100, 30, Mode::Attached);
    attached.key(KeyCode::Char('q'));
    assert!(attached.app.quit);
}

#[test]
fn abort_needs_confirmation() {
    let mut h = Harness::new(100, 30);
    h.select(2);
    h.app.take_effects();
    h.key(KeyCode::Char('x'));
    assert!(sent(&h.app.take_effects()).is_empty());
    h.key(KeyCode::Char('y'));
    let reqs = sent(&h.app.take_effects());
    assert_eq!(reqs[0].action, EngineAction::Abort { note: None });
    assert_eq!(reqs[0].expected_status.as_deref(), Some("build"));
}

#[test]
fn d_dismisses_an_interrupted_task_through_the_engine_once_confirmed() {
    let mut h = Harness::new(100, 30);
    let (detail, log) = interrupted_detail();
    h.select(3);
    h.serve(&detail, &log);
    assert!(h.app.banner());
    h.app.take_effects();
    // Dismissing is for good: `d` asks first, and `n` sends nothing.
    h.key(KeyCode::Char('d'));
    assert!(h.screen().contains("Dismiss #3?"), "{}", h.screen());
    h.key(KeyCode::Char('n'));
    assert!(sent(&h.app.take_effects()).is_empty());
    h.key(KeyCode::Char('d'));
    h.key(KeyCode::Char('y'));
    let reqs = sent(&h.app.take_effects());
    assert_eq!(reqs[0].action, EngineAction::Dismiss { note: None });
    assert_eq!(reqs[0].expected_status.as_deref(), Some("plan"));
    // Anything but an interrupted task: nothing is sent, and the status line says why.
    h.select(4);
    h.key(KeyCode::Char('d'));
    assert!(sent(&h.app.take_effects()).is_empty());
    assert_eq!(
        h.app.status.clone().map(|s| s.text).as_deref(),
        Some("only an interrupted task can be dismissed")
    );
}

#[test]
fn enter_focuses_the_detail_and_j_k_pick_steps() {
    let mut h = Harness::new(100, 30);
    let (detail, log) = running_detail();
    h.select(2);
    h.serve(&detail, &log);
    assert_eq!(h.app.step, Some(1));
    h.key(KeyCode::Enter);
    assert_eq!(h.app.focus, Focus::Detail);
    h.key(KeyCode::Char('k'));
    assert_eq!(h.app.step, Some(0));
    assert!(h.app.step_pinned);
    let effects = h.app.take_effects();
    assert!(matches!(effects.as_slice(), [Effect::LoadLog(q)] if q.step_run_id == 11));
    h.key(KeyCode::Esc);
    assert_eq!(h.app.focus, Focus::Board);
}

#[test]
fn log_events_for_the_shown_step_fetch_new_lines_others_do_not() {
    let mut h = Harness::new(100, 30);
    let (detail, log) = running_detail();
    h.select(2);
    h.serve(&detail, &log);
    assert!(!h.event(AppEvent::LogAppended { step_run_id: 99 }));
    assert!(h.app.take_effects().is_empty());
    h.event(AppEvent::LogAppended { step_run_id: 12 });
    let effects = h.app.take_effects();
    assert!(matches!(effects.as_slice(), [Effect::LoadLog(q)] if q.step_run_id == 12));
}

#[test]
fn a_task_newly_needing_approval_or_failing_rings_once() {
    let mut h = Harness::new(100, 30);
    h.app.take_effects();
    let mut cards = cards();
    // #2 reaches the review gate, #7 fails.
    for c in &mut cards {
        if c.id == 2 {
            c.status = "review".into();
            c.state = TaskState::Waiting;
        }
        if c.id == 7 {
            c.status = "failed".into();
            c.state = TaskState::Failed;
        }
    }
    let snapshot = BoardSnapshot {
        pipelines: pipelines(),
        cards,
        home: None,
    };
    h.event(AppEvent::Board(snapshot.clone()));
    let notes: Vec<String> = h
        .app
        .take_effects()
        .into_iter()
        .filter_map(|e| match e {
            Effect::Notify { title, .. } => Some(title),
            _ => None,
        })
        .collect();
    assert_eq!(
        notes,
        vec![
            "baton: task 7 failed".to_string(),
            "baton: task 2 needs approval".to_string()
        ]
    );
    // The same board again: nothing new to announce, nothing to redraw.
    assert!(!h.event(AppEvent::Board(snapshot)));
    assert!(
        !h.app
            .take_effects()
            .iter()
            .any(|e| matches!(e, Effect::Notify { .. }))
    );
}

#[test]
fn idle_ticks_do_not_redraw() {
    let mut h = Harness::new(100, 30);
    assert!(h.event(AppEvent::Tick), "a task runs: the spinner moves");
    let mut quiet = cards();
    quiet.retain(|c| c.state != TaskState::Running);
    h.event(AppEvent::Board(BoardSnapshot {
        pipelines: pipelines(),
        cards: quiet,
        home: None,
    }));
    assert!(!h.app.wants_tick());
    assert!(!h.event(AppEvent::Tick));
}

#[test]
fn filter_narrows_cards_and_esc_clears_it() {
    let mut h = Harness::new(100, 30);
    h.key(KeyCode::Char('/'));
    h.chars("flaky");
    assert_eq!(h.app.board.selected, Some(3));
    h.key(KeyCode::Enter);
    assert_eq!(h.app.board.filter, "flaky");
    h.key(KeyCode::Esc);
    assert_eq!(h.app.board.filter, "");
}

#[test]
fn a_too_small_screen_ignores_every_key_but_quit() {
    let mut h = Harness::new(100, 30);
    h.select(2);
    h.app.take_effects();
    h.event(AppEvent::Resize(50, 12));
    // `x` then `y` would abort #2 blind; `l`, `n`, `?` would act unseen.
    for ch in ['x', 'y', 'l', 'n', '?', 'a', 's', 'R'] {
        h.key(KeyCode::Char(ch));
    }
    assert!(h.app.modals.is_empty(), "{:?}", h.app.modals);
    assert!(sent(&h.app.take_effects()).is_empty());
    assert_eq!(h.app.board.selected, Some(2));
    // `q` still asks first while steps run; the question is on the small screen.
    h.key(KeyCode::Char('q'));
    assert!(!h.app.quit);
    assert!(h.screen().contains("Quit?"));
    h.key(KeyCode::Char('n'));
    assert!(!h.app.quit && h.app.modals.is_empty());
    h.ctrl('c');
    h.key(KeyCode::Char('y'));
    assert!(h.app.quit);
}

#[test]
fn log_search_starts_empty_and_esc_clears_it() {
    let mut h = Harness::new(100, 30);
    let (detail, log) = running_detail();
    h.select(2);
    h.key(KeyCode::Enter);
    h.serve(&detail, &log);
    h.key(KeyCode::Char('/'));
    h.chars("module_1");
    h.key(KeyCode::Enter);
    assert_eq!(h.app.log.search.as_deref(), Some("module_1"));
    // A second `/` starts a new query rather than appending to the old one.
    h.key(KeyCode::Char('/'));
    h.chars("warning");
    h.key(KeyCode::Enter);
    assert_eq!(h.app.log.search.as_deref(), Some("warning"));
    assert!(h.screen().contains("/warning (1)"));
    // Esc clears the search (and its mark) before it leaves the pane.
    h.key(KeyCode::Esc);
    assert_eq!(h.app.log.search, None);
    assert_eq!(h.app.focus, Focus::Detail);
    assert!(!h.screen().contains("/warning"));
    h.key(KeyCode::Esc);
    assert_eq!(h.app.focus, Focus::Board);
    // Esc while typing drops the search too.
    h.key(KeyCode::Enter);
    h.key(KeyCode::Char('/'));
    h.chars("load");
    h.key(KeyCode::Esc);
    assert_eq!(h.app.log.search, None);
    // In the full-screen log esc clears the search first, then closes.
    h.key(KeyCode::Char('L'));
    h.key(KeyCode::Char('/'));
    h.chars("x");
    h.key(KeyCode::Enter);
    h.key(KeyCode::Esc);
    assert_eq!(h.app.log.search, None);
    assert!(matches!(h.app.modals.last(), Some(Modal::FullLog)));
    h.key(KeyCode::Esc);
    assert!(h.app.modals.is_empty());
}

fn move_options() -> AppEvent {
    AppEvent::Moves {
        task_id: 4,
        result: Ok(vec![
            MoveOption {
                to: "backlog".into(),
                trigger: Trigger::Manual,
                label: None,
                allowed: false,
                blocked_by: vec!["no_running_step".into()],
            },
            MoveOption {
                to: "build".into(),
                trigger: Trigger::Manual,
                label: None,
                allowed: true,
                blocked_by: vec![],
            },
        ]),
    }
}

#[test]
fn move_says_why_an_option_is_blocked_and_takes_an_optional_note() {
    let mut h = Harness::new(100, 30);
    h.select(4);
    h.key(KeyCode::Char('m'));
    h.event(move_options());
    h.app.take_effects();
    // The cursor starts on the allowed option; go to the blocked one.
    h.key(KeyCode::Char('k'));
    h.key(KeyCode::Enter);
    let status = h.app.status.clone().expect("a message");
    assert!(status.error);
    assert_eq!(
        status.text,
        "cannot move to backlog: blocked by no_running_step"
    );
    assert!(matches!(h.app.modals.last(), Some(Modal::Move(_))));
    // Enter on the allowed option opens the note; enter with no note moves at once.
    h.key(KeyCode::Char('j'));
    h.key(KeyCode::Enter);
    assert!(matches!(h.app.modals.last(), Some(Modal::Note(_))));
    assert!(sent(&h.app.take_effects()).is_empty());
    h.key(KeyCode::Enter);
    assert!(h.app.modals.is_empty());
    let reqs = sent(&h.app.take_effects());
    assert_eq!(
        reqs[0].action,
        EngineAction::Move {
            to: "build".into(),
            note: None
        }
    );
    // With a note (several lines): ctrl+s moves and hands it on.
    h.key(KeyCode::Char('m'));
    h.event(move_options());
    h.key(KeyCode::Enter);
    h.chars("keep the API");
    h.key(KeyCode::Enter);
    h.chars("as it is");
    h.ctrl('s');
    assert!(h.app.modals.is_empty());
    let reqs = sent(&h.app.take_effects());
    assert_eq!(
        reqs[0].action,
        EngineAction::Move {
            to: "build".into(),
            note: Some("keep the API\nas it is".into())
        }
    );
}

#[test]
fn l_past_the_last_open_column_says_z_expands_the_collapsed_ones() {
    let mut h = Harness::new(80, 24);
    for _ in 0..8 {
        h.key(KeyCode::Char('l'));
    }
    let status = h.app.status.clone().expect("a message");
    assert_eq!(
        status.text,
        "Done, Failed, Cancelled: collapsed — z expands them"
    );
    // Once the message is read, the key bar keeps the hint.
    h.key(KeyCode::Esc);
    let screen = h.screen();
    assert!(screen.contains("z expand"), "{screen}");
}

#[test]
fn the_diff_of_a_finished_task_says_where_its_work_went() {
    let mut done = task(5, "Upgrade the HTTP client", "done", TaskState::Done);
    done.branch = Some("baton/5-upgrade".into());
    done.base_branch = Some("main".into());
    done.worktree = None;
    assert_eq!(
        no_diff_reason(&done, true, Some(true)),
        "the worktree was removed when the task ended (done); its work is on branch \
         baton/5-upgrade — `git diff main...baton/5-upgrade` shows it"
    );
    assert_eq!(
        no_diff_reason(&done, true, Some(false)),
        "the worktree was removed when the task ended (done); its branch baton/5-upgrade \
         is gone too (merged into main, or deleted)"
    );
    let fresh = task(1, "t", "backlog", TaskState::Idle);
    assert!(no_diff_reason(&fresh, true, None).starts_with("no worktree for this task yet"));
    assert!(no_diff_reason(&fresh, false, None).contains("not in a git repository"));
}

#[test]
fn esc_typed_fast_before_a_key_is_two_keys_not_alt() {
    let mut h = Harness::new(100, 30);
    h.select(4);
    h.key(KeyCode::Char('r'));
    assert!(matches!(h.app.modals.last(), Some(Modal::Note(_))));
    // tmux and slow links deliver "Esc q" as Alt+q.
    h.event(AppEvent::Key(crossterm::event::KeyEvent::new(
        KeyCode::Char('q'),
        crossterm::event::KeyModifiers::ALT,
    )));
    assert!(
        !matches!(h.app.modals.first(), Some(Modal::Note(_))),
        "esc closed the note form"
    );
    assert!(
        h.app.quit || matches!(h.app.modals.last(), Some(Modal::Confirm(_))),
        "q then quit (or asked to)"
    );
}

/// A task's change reloads its card, not the board: the card is replaced in place, a new
/// task's card takes its place newest first, a deleted task's card goes, and a card that
/// did not change draws nothing.
#[test]
fn a_changed_task_reloads_its_card_not_the_board() {
    let mut h = Harness::new(100, 30);
    h.app.take_effects();
    h.event(AppEvent::TaskChanged(4));
    let effects = h.app.take_effects();
    assert!(effects.contains(&Effect::LoadCard(4)), "{effects:?}");
    assert!(!effects.contains(&Effect::LoadBoard), "{effects:?}");

    let mut moved = card(4, "Speed up the search index", "done", TaskState::Done);
    moved.steps_done = 4;
    assert!(h.event(AppEvent::Card {
        id: 4,
        card: Some(moved.clone())
    }));
    let ids = |h: &Harness| h.app.board.cards.iter().map(|c| c.id).collect::<Vec<_>>();
    assert_eq!(ids(&h), [7, 6, 5, 4, 3, 2, 1]);
    assert_eq!(h.app.board.cards[3], moved);
    // The same card again: nothing to draw.
    assert!(!h.event(AppEvent::Card {
        id: 4,
        card: Some(moved)
    }));

    h.event(AppEvent::Card {
        id: 9,
        card: Some(card(9, "A new one", "backlog", TaskState::Idle)),
    });
    assert_eq!(ids(&h), [9, 7, 6, 5, 4, 3, 2, 1]);
    h.event(AppEvent::Card { id: 6, card: None });
    assert_eq!(ids(&h), [9, 7, 5, 4, 3, 2, 1]);
    assert!(
        !h.app.take_effects().contains(&Effect::LoadBoard),
        "no card event reloads the whole board"
    );
}
