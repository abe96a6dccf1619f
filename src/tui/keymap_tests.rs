//! Tests of the key table: lookups by context, key names, hints and help sections.

use super::*;

fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

#[test]
fn board_keys_resolve_to_actions() {
    let ctxs = [Board, Task, Global];
    let cases = [
        (key(KeyCode::Char('h')), A::Left),
        (key(KeyCode::Left), A::Left),
        (key(KeyCode::Char('j')), A::Down),
        (key(KeyCode::Enter), A::Open),
        (key(KeyCode::Char('/')), A::Filter),
        (key(KeyCode::Char('a')), A::Approve),
        (key(KeyCode::Char('R')), A::Resume),
        (
            KeyEvent::new(KeyCode::Char('R'), KeyModifiers::SHIFT),
            A::Resume,
        ),
        (key(KeyCode::Char('q')), A::Quit),
        (
            KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL),
            A::Quit,
        ),
        (key(KeyCode::Char('z')), A::ToggleCollapse),
        (key(KeyCode::Char('c')), A::Continue),
        (key(KeyCode::Char(']')), A::NextTab),
    ];
    for (k, want) in cases {
        assert_eq!(lookup(BINDINGS, &ctxs, &k), Some(want), "{k:?}");
    }
    assert_eq!(lookup(BINDINGS, &ctxs, &key(KeyCode::Char('Z'))), None);
}

#[test]
fn context_order_decides_shared_keys() {
    // `/` filters on the board but searches in the log.
    let slash = key(KeyCode::Char('/'));
    assert_eq!(lookup(BINDINGS, &[Board, Global], &slash), Some(A::Filter));
    assert_eq!(
        lookup(BINDINGS, &[Log, Detail, Global], &slash),
        Some(A::Search)
    );
    // j moves cards on the board, steps in the detail pane.
    let j = key(KeyCode::Char('j'));
    assert_eq!(lookup(BINDINGS, &[Detail, Global], &j), Some(A::Down));
    assert_eq!(lookup(FULL_LOG, &[Log], &j), Some(A::ScrollDown));
    // n is a new task globally but "no" in a confirmation.
    let n = key(KeyCode::Char('n'));
    assert_eq!(lookup(BINDINGS, &[Popup], &n), Some(A::No));
    assert_eq!(lookup(BINDINGS, &[Board, Global], &n), Some(A::NewTask));
}

#[test]
fn ctrl_s_submits_forms_and_help_lists_every_action() {
    let ctrl_s = KeyEvent::new(KeyCode::Char('s'), KeyModifiers::CONTROL);
    assert_eq!(lookup(BINDINGS, &[Form], &ctrl_s), Some(A::Submit));
    assert_eq!(lookup(BINDINGS, &[Task], &ctrl_s), None);
    let help = help_sections();
    for b in BINDINGS {
        let (_, rows) = help.iter().find(|(c, _)| *c == b.ctx).expect("section");
        let listed = rows.iter().any(|(keys, _)| {
            keys.split(' ').any(|k| k == key_name(b))
                || (matches!(b.action, A::Tab(_)) && keys == "1…9")
        });
        assert!(listed, "{} ({:?}) missing from help", key_name(b), b.ctx);
    }
    let board = &help.iter().find(|(c, _)| *c == Board).unwrap().1;
    assert!(board.contains(&("h ←".to_string(), "column left")));
}

#[test]
fn hint_bars_name_the_keys_the_keymap_binds() {
    let keys = |bar: Bar, label: &str| {
        bar.rows()
            .into_iter()
            .find(|(_, h)| h.label == label)
            .map(|(k, _)| k)
    };
    // In the detail pane j/k pick steps and J/K scroll; in L plain j/k scroll.
    assert_eq!(keys(Bar::Detail, "step").as_deref(), Some("j/k"));
    assert_eq!(keys(Bar::Detail, "scroll").as_deref(), Some("J/K"));
    assert_eq!(keys(Bar::FullLog, "scroll").as_deref(), Some("j/k"));
    assert_eq!(keys(Bar::FullLog, "match").as_deref(), Some("n/N"));
    assert_eq!(keys(Bar::FullLog, "close").as_deref(), Some("esc"));
    assert_eq!(keys(Bar::FullLog, "search").as_deref(), Some("/"));
    assert_eq!(keys(Bar::Board, "open").as_deref(), Some("enter"));
    assert_eq!(keys(Bar::Detail, "board").as_deref(), Some("esc"));
    // Every hint of every bar names a key.
    for bar in [
        Bar::Board,
        Bar::Interrupted,
        Bar::Paused,
        Bar::Finished,
        Bar::Detail,
        Bar::FullLog,
    ] {
        assert_eq!(bar.rows().len(), bar.hints().len(), "{bar:?}");
    }
}
