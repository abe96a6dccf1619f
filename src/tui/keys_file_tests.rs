//! `keys.toml` overrides: remapped keys resolve, conflicts warn, the `?` screen follows.

use super::*;
use crate::tui::keymap::{Ctx, help_sections_for, lookup};
use crossterm::event::KeyEvent;

fn key(ch: char) -> KeyEvent {
    KeyEvent::new(KeyCode::Char(ch), KeyModifiers::NONE)
}

#[test]
fn an_action_gets_its_new_keys_and_loses_the_old_ones() {
    let (table, warnings) = apply(
        BINDINGS,
        "keys.toml",
        "approve = \"P\"\nquit = [\"q\", \"ctrl+q\"]\n",
    );
    assert!(warnings.is_empty(), "{warnings:?}");
    let task = [Ctx::Board, Ctx::Task, Ctx::Global];
    assert_eq!(lookup(&table, &task, &key('P')), Some(Intent::Approve));
    assert_eq!(lookup(&table, &task, &key('a')), None);
    let ctrl_q = KeyEvent::new(KeyCode::Char('q'), KeyModifiers::CONTROL);
    assert_eq!(lookup(&table, &task, &ctrl_q), Some(Intent::Quit));
    // ctrl+c was a default key of quit: replaced.
    let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
    assert_eq!(lookup(&table, &task, &ctrl_c), None);

    // The help screen shows the result.
    let help = help_sections_for(&table);
    let rows = &help.iter().find(|(c, _)| *c == Ctx::Task).unwrap().1;
    assert!(rows.contains(&("P".to_string(), "approve")), "{rows:?}");
    let global = &help.iter().find(|(c, _)| *c == Ctx::Global).unwrap().1;
    assert!(global.iter().any(|(k, _)| k == "q ctrl+q"), "{global:?}");
}

#[test]
fn a_conflict_is_a_warning_and_the_file_wins() {
    // `s` starts a task; taking it for the diff leaves start without that key.
    let (table, warnings) = apply(BINDINGS, "keys.toml", "diff = \"s\"\n");
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("`s` was start in Selected task; it is now `diff`"),
        "{warnings:?}"
    );
    assert_eq!(lookup(&table, &[Ctx::Task], &key('s')), Some(Intent::Diff));
    let help = help_sections_for(&table);
    let rows = &help.iter().find(|(c, _)| *c == Ctx::Task).unwrap().1;
    assert!(
        !rows.iter().any(|(_, d)| *d == "start"),
        "start has no key now: {rows:?}"
    );
}

#[test]
fn mistakes_are_warnings_not_failures() {
    let (table, warnings) = apply(
        BINDINGS,
        "keys.toml",
        "teleport = \"t\"\napprove = \"ctrl+\"\nreject = 3\n",
    );
    assert_eq!(table.len(), BINDINGS.len());
    let all = warnings.join("\n");
    assert!(all.contains("unknown action `teleport`"), "{all}");
    assert!(all.contains("`ctrl+` is not a key"), "{all}");
    assert!(all.contains("`reject` names no usable key"), "{all}");
    let (_, warnings) = apply(BINDINGS, "keys.toml", "approve = ");
    assert!(
        warnings[0].contains("its bindings are ignored"),
        "{warnings:?}"
    );
}

#[test]
fn keys_parse_and_every_action_has_a_name() {
    assert_eq!(parse_key("f2"), Some((KeyCode::F(2), KeyModifiers::NONE)));
    assert_eq!(
        parse_key("enter"),
        Some((KeyCode::Enter, KeyModifiers::NONE))
    );
    assert_eq!(parse_key("f13"), None);
    let names = action_names();
    assert!(
        names
            .iter()
            .any(|(n, a)| n == "new_task" && *a == Intent::NewTask)
    );
    assert!(
        names
            .iter()
            .any(|(n, a)| n == "full_log" && *a == Intent::FullLog)
    );
}
