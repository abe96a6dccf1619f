//! The `notify` hook reaches every attached board: the engine's subscription carries it,
//! the board turns it into the bell plus OSC 777/9, and no escape sequence from a task's
//! title survives into the notification.

mod common;
use baton::engine::wake::{Change, Subscription};
use baton::tui::app::{App, Mode};
use baton::tui::event::{AppEvent, Effect};
use baton::tui::theme::Theme;
use common::{Ws, spawn_engine, stop, wait_for};

const NOTIFY: &str = r#"{"id": "ping", "statuses": [
  {"id": "todo", "kind": "queue"},
  {"id": "review", "kind": "gate"},
  {"id": "done", "kind": "done"},
  {"id": "cancelled", "kind": "cancelled"}
], "transitions": [
  {"from": "todo", "to": "review", "on": "start"},
  {"from": "review", "to": "done", "on": "approve",
   "hooks": [{"notify": {"message": "{{title}} shipped ({{from}} → {{to}})"}}]}
]}"#;

#[test]
fn a_notify_hook_rings_every_attached_board_with_sanitised_text() {
    let ws = Ws::new();
    ws.pipeline("ping.json", NOTIFY);
    let id = ws.new_task("ping", "placeholder");
    // No front end takes such a title now; an older board may hold one.
    ws.store_raw_title(id, "evil\u{1b}]0;PWNED\u{7}title\u{1b}[2J;x");
    ws.ok(&["start", &id.to_string()]);
    let engine = spawn_engine(&ws);
    let dir = ws.root().join(".baton");
    let mut first = None;
    wait_for("the engine to listen", || {
        first = Subscription::connect(&dir);
        first.is_some()
    });
    let mut subs = vec![first.expect("subscribed")];
    // A second board attaches too.
    subs.push(Subscription::connect(&dir).expect("a second subscription"));
    ws.ok(&["approve", &id.to_string()]);
    let mut got = Vec::new();
    for sub in &mut subs {
        let notified = loop {
            match sub
                .next_change()
                .expect("the engine ended the subscription")
            {
                Change::Notify {
                    task_id,
                    title,
                    body,
                } => break (task_id, title, body),
                _ => continue,
            }
        };
        got.push(notified);
    }
    stop(engine);
    for (task_id, title, body) in &got {
        assert_eq!(*task_id, id);
        assert_eq!(title, &format!("baton: task {id}"));
        assert!(
            body.starts_with("evil") && body.ends_with("shipped (review → done)"),
            "{body:?}"
        );
        assert!(!body.chars().any(char::is_control), "{body:?}");
    }

    // What a board does with it: the bell and both notifications, nothing else.
    let (_, title, body) = got.remove(0);
    let mut app = App::new(Theme::from_env(), Mode::Attached, (100, 30));
    app.update(AppEvent::Notified { title, body });
    let effects = app.take_effects();
    let Some(Effect::Notify { title, body }) = effects
        .into_iter()
        .find(|e| matches!(e, Effect::Notify { .. }))
    else {
        panic!("no notification effect");
    };
    let bytes = baton::tui::notify::sequence(&title, &body, false);
    assert!(
        bytes.starts_with('\u{7}'),
        "the bell rings first: {bytes:?}"
    );
    assert!(bytes.contains(&format!("\u{1b}]777;notify;baton: task {id};evil")));
    assert!(bytes.contains(&format!("\u{1b}]9;baton: task {id}: evil")));
    // Exactly the two OSCs' own escapes: none smuggled in by the title.
    assert_eq!(bytes.matches('\u{1b}').count(), 2, "{bytes:?}");
    assert!(
        !bytes.contains("PWNED\u{7}") && !bytes.contains("[2J"),
        "{bytes:?}"
    );
}
