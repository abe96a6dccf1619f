//! `/` filters the cards fuzzily: the typed letters in order, words each matching.
//! Snapshots at 80×24 and 120×36.

mod tui_support;

use crossterm::event::KeyCode;
use insta::assert_snapshot;
use tui_support::*;

fn filtered(w: u16, h: u16, text: &str) -> Harness {
    let mut h = Harness::new(w, h);
    h.key(KeyCode::Char('/'));
    h.chars(text);
    h
}

fn shown(h: &Harness) -> Vec<i64> {
    let b = &h.app.board;
    let mut ids: Vec<i64> = (0..b.column_count())
        .flat_map(|c| b.column(c).map(|card| card.id))
        .collect();
    ids.sort();
    ids
}

#[test]
fn letters_in_order_find_a_card_120x36() {
    let mut h = filtered(120, 36, "drkmd");
    assert_eq!(shown(&h), vec![2], "dark mode toggle");
    assert_snapshot!(h.screen());
}

#[test]
fn each_word_must_match_80x24() {
    let mut h = filtered(80, 24, "fix tst");
    assert_eq!(shown(&h), vec![3], "Fix the flaky login test");
    assert_snapshot!(h.screen());
}
