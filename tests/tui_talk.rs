//! Talking to the agent on the board, at 80×24 and 120×36: `i` opens the message input and
//! sends `say`; the detail pane's conversation section shows what was said, when and where
//! it went; `I` opens one answer field per open question and sends `answer`.

mod tui_support;

use baton::engine::Action;
use baton::store::{Message, StepState, TaskState};
use baton::tui::event::{Effect, TaskDetail};
use crossterm::event::KeyCode;
use insta::assert_snapshot;
use tui_support::*;

fn message(id: i64, text: &str, delivered_to: Option<i64>, via: &str) -> Message {
    Message {
        id,
        task_id: 2,
        text: text.into(),
        actor: "tui".into(),
        at: NOW - 60_000 + id * 1000,
        state: if delivered_to.is_some() {
            "delivered"
        } else {
            "queued"
        }
        .into(),
        delivered_to,
        via: via.into(),
        delivered_at: delivered_to.map(|_| NOW - 30_000),
    }
}

/// The running task #2, told two things: one its build heard, one kept for the next step.
fn talked_to() -> (TaskDetail, Vec<baton::store::LogLine>) {
    let (mut d, log) = running_detail();
    d.messages = vec![
        message(1, "Use the system theme by default.", Some(12), "live"),
        message(
            2,
            "And \x1b[31mremember\x1b[0m the docs.",
            None,
            "next step",
        ),
    ];
    (d, log)
}

fn said_screen(w: u16, h: u16) -> String {
    let mut hs = Harness::new(w, h);
    let (d, log) = running_detail();
    hs.select(2);
    hs.serve(&d, &log);
    hs.key(KeyCode::Char('i'));
    hs.chars("Also test the toggle.");
    let screen = hs.screen();
    hs.ctrl('s');
    let sent: Vec<Effect> = hs.app.take_effects();
    assert!(
        sent.iter()
            .any(|e| matches!(e, Effect::Send(r) if r.task_id == 2
            && r.action == Action::Say { text: "Also test the toggle.".into() })),
        "{sent:?}"
    );
    screen
}

#[test]
fn i_opens_the_message_input_and_sends_say_80x24() {
    let screen = said_screen(80, 24);
    assert!(screen.contains("Say to #2"), "{screen}");
    assert!(screen.contains("Also test the toggle."), "{screen}");
    assert_snapshot!(screen);
}

#[test]
fn i_opens_the_message_input_and_sends_say_120x36() {
    let screen = said_screen(120, 36);
    assert!(screen.contains("Message for the agent:"), "{screen}");
    assert_snapshot!(screen);
}

fn conversation(w: u16, h: u16) -> String {
    let mut hs = Harness::new(w, h);
    let (d, log) = talked_to();
    hs.select(2);
    hs.key(KeyCode::Enter);
    hs.serve(&d, &log);
    hs.screen()
}

#[test]
fn the_conversation_shows_what_was_said_and_where_it_went_120x36() {
    let screen = conversation(120, 36);
    assert!(screen.contains("Conversation"), "{screen}");
    assert!(screen.contains("→ build#1 (live)"), "{screen}");
    assert!(screen.contains("queued"), "{screen}");
    // Text from people reaches the terminal through the sanitiser.
    assert!(!screen.contains('\x1b'), "{screen}");
    assert_snapshot!(screen);
}

#[test]
fn the_conversation_fits_80x24() {
    let screen = conversation(80, 24);
    assert!(screen.contains("Conversation"), "{screen}");
    assert_snapshot!(screen);
}

/// Task #1 back in its backlog: its planner needs information and asked two things.
fn asking() -> TaskDetail {
    let mut d = backlog_detail();
    let mut plan = step(41, 1, "plan", StepState::Succeeded, 3);
    plan.outcome = Some("needs_info".into());
    d.steps = vec![plan];
    d.task.state = TaskState::Idle;
    d.questions = vec![
        "Which settings move to the new page?".into(),
        "Keep the old URLs working?".into(),
    ];
    d
}

fn answer_screen(w: u16, h: u16) -> String {
    let mut hs = Harness::new(w, h);
    let d = asking();
    hs.select(1);
    hs.serve(&d, &[]);
    hs.key(KeyCode::Char('I'));
    hs.chars("Only the theme ones.");
    hs.key(KeyCode::Tab);
    hs.chars("Yes, redirect them.");
    let screen = hs.screen();
    hs.ctrl('s');
    let sent = hs.app.take_effects();
    let want = Action::Answer {
        answers: vec!["Only the theme ones.".into(), "Yes, redirect them.".into()],
    };
    assert!(
        sent.iter()
            .any(|e| matches!(e, Effect::Send(r) if r.task_id == 1 && r.action == want)),
        "{sent:?}"
    );
    screen
}

#[test]
fn capital_i_answers_each_open_question_80x24() {
    let screen = answer_screen(80, 24);
    assert!(screen.contains("Answer #1"), "{screen}");
    assert!(screen.contains("2. Keep the old URLs working?"), "{screen}");
    assert_snapshot!(screen);
}

#[test]
fn capital_i_answers_each_open_question_120x36() {
    let screen = answer_screen(120, 36);
    assert!(screen.contains("Yes, redirect them."), "{screen}");
    assert_snapshot!(screen);
}

#[test]
fn capital_i_without_questions_says_so() {
    let mut hs = Harness::new(120, 36);
    hs.select(1);
    hs.serve(&backlog_detail(), &[]);
    hs.key(KeyCode::Char('I'));
    let screen = hs.screen();
    assert!(screen.contains("its agent asks nothing"), "{screen}");
}
