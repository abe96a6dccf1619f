//! `esc` in a form that holds typed text asks before throwing the draft away: a one-line
//! question in the form, answered by `esc` again or `y` (discard) or any other key (back to
//! editing). A form nothing was typed into closes at once.

use super::intent::Intent;
use super::keymap::{BINDINGS, Ctx, lookup};
use super::modal::Outcome;
use crossterm::event::KeyEvent;

/// Whether a form is asking to discard its draft.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Discard {
    asking: bool,
}

impl Discard {
    /// True while the question shows.
    pub fn asking(&self) -> bool {
        self.asking
    }

    /// `esc` in the form: closes it when nothing was `typed`, else asks.
    pub fn esc(&mut self, typed: bool) -> Outcome {
        if typed {
            self.asking = true;
            Outcome::Stay
        } else {
            Outcome::Close
        }
    }

    /// The answer, while asking: `esc` or `y` discards; any other key goes back to editing
    /// and does nothing else (a stray letter is not typed into the draft). `None` when not
    /// asking: the key is the form's.
    pub fn answer(&mut self, key: &KeyEvent) -> Option<Outcome> {
        if !self.asking {
            return None;
        }
        self.asking = false;
        let esc = matches!(lookup(BINDINGS, &[Ctx::Form], key), Some(Intent::Back));
        let yes = matches!(lookup(BINDINGS, &[Ctx::Popup], key), Some(Intent::Yes));
        Some(if esc || yes {
            Outcome::Close
        } else {
            Outcome::Stay
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crossterm::event::KeyCode;

    fn key(code: KeyCode) -> KeyEvent {
        KeyEvent::from(code)
    }

    #[test]
    fn an_untouched_form_closes_at_once() {
        let mut d = Discard::default();
        assert!(matches!(d.esc(false), Outcome::Close));
        assert!(!d.asking());
    }

    #[test]
    fn esc_twice_or_y_discards_and_any_other_key_keeps_editing() {
        for (second, closes) in [
            (KeyCode::Esc, true),
            (KeyCode::Char('y'), true),
            (KeyCode::Char('n'), false),
            (KeyCode::Enter, false),
            (KeyCode::Char('a'), false),
        ] {
            let mut d = Discard::default();
            assert!(matches!(d.esc(true), Outcome::Stay));
            assert!(d.asking());
            let out = d.answer(&key(second));
            assert_eq!(matches!(out, Some(Outcome::Close)), closes, "{second:?}");
            assert!(!d.asking(), "answered: editing again");
            // Not asking any more: keys are the form's again.
            assert!(d.answer(&key(KeyCode::Char('y'))).is_none());
        }
    }
}
