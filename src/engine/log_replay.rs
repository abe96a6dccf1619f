//! Not storing a step's log twice when the engine picks a running step back up after a
//! restart. An executor that reattaches reads the step's output again from its start (a
//! container's logs, a remote log file), and an agent step must re-parse all of it, so the
//! lines the first engine already stored arrive again. They are recognised by comparing
//! the arriving lines, in order, with the stored ones, and dropped.
//!
//! Docker's `since` cannot do this: it counts in whole seconds, so lines printed in the
//! second of the restart would be lost or repeated.

use crate::store::{StoreHandle, Stream};

/// How many of the engine's own lines (`▶ …`, `reattaching to …`, stored between the
/// step's output lines) a repeated line may be found past.
const LOOKAHEAD: usize = 8;

/// The stored lines of a step run that the arriving lines are matched against.
#[derive(Debug, Default)]
pub struct Replayed {
    stored: Vec<(Stream, String)>,
    next: usize,
}

impl Replayed {
    /// Matches against `stored`, oldest first.
    pub fn new(stored: Vec<(Stream, String)>) -> Self {
        Self { stored, next: 0 }
    }

    /// Reads what a step run has stored so far (nothing when the store fails: lines are
    /// then stored twice rather than lost).
    pub async fn load(store: &StoreHandle, step_run_id: i64) -> Self {
        let lines = store
            .read(move |db| {
                let mut all = Vec::new();
                let mut after = 0;
                loop {
                    let page = db.log_lines(step_run_id, after, 10_000)?;
                    let Some(last) = page.last() else { break };
                    after = last.id;
                    all.extend(page.into_iter().map(|l| (l.stream, l.text)));
                }
                Ok(all)
            })
            .await
            .unwrap_or_default();
        Self::new(lines)
    }

    /// Whether an arriving line (as it would be stored) repeats the next stored one; if so
    /// it is consumed. Once the stored lines are used up, nothing repeats.
    pub fn repeats(&mut self, stream: Stream, text: &str) -> bool {
        // Only the engine's own lines are passed over: the step's output must repeat in
        // order, so a step that prints new lines only is never mistaken for a replay
        // beyond its first line.
        let mut found = None;
        let window = self.stored.iter().skip(self.next).take(LOOKAHEAD);
        for (i, (s, t)) in window.enumerate() {
            if *s == stream && t == text {
                found = Some(i);
                break;
            }
            if *s != Stream::System {
                break;
            }
        }
        match found {
            Some(i) => {
                self.next += i + 1;
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(s: Stream, t: &str) -> (Stream, String) {
        (s, t.to_string())
    }

    #[test]
    fn replayed_lines_are_dropped_and_new_ones_kept() {
        let mut r = Replayed::new(vec![
            line(Stream::System, "▶ build · attempt 1 · run"),
            line(Stream::Stdout, "tick"),
            line(Stream::Stdout, "tick"),
            line(Stream::Stderr, "warn"),
            line(Stream::System, "▶ build · attempt 1 · run"),
            line(Stream::System, "reattaching to docker"),
        ]);
        assert!(!r.repeats(Stream::System, "following sh (container 1)"));
        assert!(r.repeats(Stream::Stdout, "tick"));
        assert!(r.repeats(Stream::Stdout, "tick"));
        assert!(r.repeats(Stream::Stderr, "warn"));
        // Past what was stored: the same text again is new output.
        assert!(!r.repeats(Stream::Stdout, "tick"));
        assert!(!r.repeats(Stream::Stdout, "tock"));
    }

    #[test]
    fn output_lines_are_never_passed_over() {
        let mut r = Replayed::new(vec![
            line(Stream::Stdout, "one"),
            line(Stream::Stdout, "two"),
        ]);
        // An executor that sends only new output: its lines are kept.
        assert!(!r.repeats(Stream::Stdout, "two"));
        assert!(r.repeats(Stream::Stdout, "one"));
    }

    #[test]
    fn nothing_stored_drops_nothing() {
        let mut r = Replayed::default();
        assert!(!r.repeats(Stream::Stdout, "x"));
    }
}
