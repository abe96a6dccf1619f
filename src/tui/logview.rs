//! The log of one step as the UI holds it: a bounded window of lines that follows the tail,
//! pages older lines in from the store when scrolled back, and searches what it holds.

use super::event::{LogAnchor, LogChunk, LogQuery};
use crate::store::LogLine;
use std::collections::VecDeque;

/// Lines fetched per query.
pub const PAGE: i64 = 1_000;
/// Lines held in memory at most.
pub const WINDOW: usize = 5_000;
/// Fetch older lines once the view is this close to the window's first line.
const PREFETCH: usize = 200;

/// The log pane's state.
#[derive(Debug)]
pub struct LogView {
    /// The step run shown.
    pub step_run_id: Option<i64>,
    /// The window of lines held, oldest first.
    pub lines: VecDeque<LogLine>,
    /// Lines the step has logged in all (as of the last fetch).
    pub total: i64,
    /// The window starts at the step's first line.
    pub at_head: bool,
    /// The window ends at the newest line known.
    pub at_tail: bool,
    /// Keep the newest line in view.
    pub follow: bool,
    /// Index in `lines` of the first line shown when not following.
    pub top: usize,
    /// Wrap long lines.
    pub wrap: bool,
    /// The search text (case-insensitive), once entered.
    pub search: Option<String>,
    /// A query is in flight; another event asks for more: fetch again when it lands.
    in_flight: bool,
    again: bool,
}

impl Default for LogView {
    fn default() -> Self {
        Self {
            step_run_id: None,
            lines: VecDeque::new(),
            total: 0,
            at_head: true,
            at_tail: true,
            follow: true,
            top: 0,
            wrap: false,
            search: None,
            in_flight: false,
            again: false,
        }
    }
}

impl LogView {
    /// Shows another step (or none); returns the first query to make.
    pub fn show(&mut self, step_run_id: Option<i64>) -> Option<LogQuery> {
        let wrap = self.wrap;
        *self = Self {
            step_run_id,
            wrap,
            ..Self::default()
        };
        let id = step_run_id?;
        self.in_flight = true;
        Some(LogQuery {
            step_run_id: id,
            anchor: LogAnchor::Tail,
            limit: PAGE,
        })
    }

    fn query(&mut self, anchor: LogAnchor) -> Option<LogQuery> {
        let id = self.step_run_id?;
        if self.in_flight {
            self.again = true;
            return None;
        }
        self.in_flight = true;
        Some(LogQuery {
            step_run_id: id,
            anchor,
            limit: PAGE,
        })
    }

    /// New lines were written for this step; returns a query when the view wants them.
    pub fn appended(&mut self, step_run_id: i64) -> Option<LogQuery> {
        if Some(step_run_id) != self.step_run_id {
            return None;
        }
        if self.follow && self.at_tail {
            let after = self.lines.back().map_or(0, |l| l.id);
            return self.query(LogAnchor::After(after));
        }
        // Not following: the window no longer ends at the tail; fetch when scrolled there.
        self.at_tail = false;
        None
    }

    /// Merges a chunk; returns a follow-up query (catching up, or a request made meanwhile).
    pub fn apply(&mut self, chunk: LogChunk) -> Option<LogQuery> {
        if Some(chunk.query.step_run_id) != self.step_run_id {
            return None;
        }
        self.in_flight = false;
        self.total = chunk.total;
        let full = chunk.lines.len() as i64 >= chunk.query.limit;
        match chunk.query.anchor {
            LogAnchor::Tail => {
                self.lines = chunk.lines.into();
                self.at_head = !full || self.lines.len() as i64 >= self.total;
                self.at_tail = true;
                self.top = self.lines.len().saturating_sub(1);
            }
            LogAnchor::Head => {
                self.lines = chunk.lines.into();
                self.at_head = true;
                self.at_tail = !full;
                self.top = 0;
            }
            LogAnchor::After(_) => {
                let last = self.lines.back().map_or(0, |l| l.id);
                self.lines
                    .extend(chunk.lines.into_iter().filter(|l| l.id > last));
                self.at_tail = !full;
                let excess = self.lines.len().saturating_sub(WINDOW);
                if excess > 0 {
                    self.lines.drain(..excess);
                    self.top = self.top.saturating_sub(excess);
                    self.at_head = false;
                }
                if full && self.follow {
                    // Far behind the writer: jump to the tail rather than page through.
                    return self.query(LogAnchor::Tail);
                }
            }
            LogAnchor::Before(_) => {
                let first = self.lines.front().map_or(i64::MAX, |l| l.id);
                let older: Vec<LogLine> =
                    chunk.lines.into_iter().filter(|l| l.id < first).collect();
                self.at_head = !full;
                self.top += older.len();
                for l in older.into_iter().rev() {
                    self.lines.push_front(l);
                }
                let excess = self.lines.len().saturating_sub(WINDOW);
                if excess > 0 {
                    self.lines.truncate(WINDOW);
                    self.at_tail = false;
                }
            }
        }
        if std::mem::take(&mut self.again) {
            let after = self.lines.back().map_or(0, |l| l.id);
            if self.follow {
                return self.query(LogAnchor::After(after));
            }
        }
        None
    }

    /// The index of the first line shown in a pane of `height` rows (no wrapping).
    pub fn first_shown(&self, height: usize) -> usize {
        if self.follow {
            self.lines.len().saturating_sub(height)
        } else {
            self.top.min(self.lines.len().saturating_sub(1))
        }
    }

    /// Scrolls by `delta` lines (negative: back); may ask for more lines.
    pub fn scroll(&mut self, delta: isize, height: usize) -> Option<LogQuery> {
        let start = self.first_shown(height);
        let max_top = self.lines.len().saturating_sub(height);
        let top = (start as isize + delta).max(0) as usize;
        if delta < 0 {
            self.follow = false;
        }
        if top >= max_top && delta > 0 {
            self.top = max_top;
            if self.at_tail {
                self.follow = true;
                return None;
            }
            let after = self.lines.back().map_or(0, |l| l.id);
            return self.query(LogAnchor::After(after));
        }
        self.top = top.min(max_top);
        if self.top < PREFETCH && !self.at_head {
            let before = self.lines.front().map_or(0, |l| l.id);
            return self.query(LogAnchor::Before(before));
        }
        None
    }

    /// Jumps to the step's first line (reloading the window from there if need be).
    pub fn to_top(&mut self) -> Option<LogQuery> {
        self.follow = false;
        self.top = 0;
        if self.at_head {
            return None;
        }
        self.in_flight = false;
        self.query(LogAnchor::Head)
    }

    /// Jumps to the newest line and follows it.
    pub fn to_bottom(&mut self) -> Option<LogQuery> {
        self.follow = true;
        if self.at_tail {
            return None;
        }
        self.step_run_id.and_then(|id| {
            self.in_flight = false;
            self.show(Some(id))
        })
    }

    /// Indexes of the lines that match the search.
    pub fn matches(&self) -> Vec<usize> {
        let Some(needle) = self.search.as_deref().map(str::to_lowercase) else {
            return Vec::new();
        };
        if needle.is_empty() {
            return Vec::new();
        }
        self.lines
            .iter()
            .enumerate()
            .filter(|(_, l)| plain(&l.text).to_lowercase().contains(&needle))
            .map(|(i, _)| i)
            .collect()
    }

    /// Moves to the next (`forward`) or previous match; returns false when there is none.
    pub fn jump(&mut self, forward: bool, height: usize) -> bool {
        let matches = self.matches();
        let start = self.first_shown(height);
        let anchor = start + height / 2;
        let target = if forward {
            matches.iter().find(|&&i| i > anchor).or(matches.first())
        } else {
            matches
                .iter()
                .rev()
                .find(|&&i| i < anchor)
                .or(matches.last())
        };
        let Some(&i) = target else { return false };
        self.follow = false;
        self.top = i.saturating_sub(height / 2);
        true
    }
}

/// A log line without its ANSI escape sequences.
pub fn plain(s: &str) -> String {
    crate::ansi::strip(s).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Stream;

    fn line(id: i64) -> LogLine {
        LogLine {
            id,
            step_run_id: 7,
            stream: Stream::Stdout,
            ts: 0,
            text: format!("line {id}"),
        }
    }

    fn chunk(q: LogQuery, ids: std::ops::RangeInclusive<i64>, total: i64) -> LogChunk {
        LogChunk {
            query: q,
            lines: ids.map(line).collect(),
            total,
        }
    }

    #[test]
    fn follows_the_tail_and_ignores_duplicate_lines() {
        let mut v = LogView::default();
        let q = v.show(Some(7)).unwrap();
        assert_eq!(q.anchor, LogAnchor::Tail);
        assert!(v.apply(chunk(q, 1..=10, 10)).is_none());
        let q = v.appended(7).unwrap();
        assert_eq!(q.anchor, LogAnchor::After(10));
        // A second event while the first query is in flight waits for it.
        assert!(v.appended(7).is_none());
        let again = v.apply(chunk(q, 5..=12, 12)).unwrap();
        assert_eq!(again.anchor, LogAnchor::After(12));
        let ids: Vec<i64> = v.lines.iter().map(|l| l.id).collect();
        assert_eq!(ids, (1..=12).collect::<Vec<_>>());
        assert!(v.follow);
    }

    #[test]
    fn scrolling_up_pauses_follow_and_pages_older_lines_in() {
        let mut v = LogView::default();
        let q = v.show(Some(7)).unwrap();
        v.apply(chunk(q, 5001..=6000, 6000));
        assert!(!v.at_head);
        let q = v.scroll(-900, 20).expect("near the top: fetch older lines");
        assert!(!v.follow);
        assert_eq!(q.anchor, LogAnchor::Before(5001));
        v.apply(chunk(q, 4001..=5000, 6000));
        assert_eq!(v.lines.front().unwrap().id, 4001);
        assert_eq!(v.lines[v.top].id, 5001 + 80);
        // New lines while paused do not move the view.
        assert!(v.appended(7).is_none());
        assert!(!v.at_tail);
        // Back to the bottom: reload the tail and follow again.
        let q = v.to_bottom().unwrap();
        assert_eq!(q.anchor, LogAnchor::Tail);
        assert!(v.follow);
    }

    #[test]
    fn top_reloads_the_window_from_the_first_line() {
        let mut v = LogView::default();
        let q = v.show(Some(7)).unwrap();
        v.apply(chunk(q, 5001..=6000, 6000));
        let q = v.to_top().unwrap();
        assert_eq!(q.anchor, LogAnchor::Head);
        v.apply(chunk(q, 1..=1000, 6000));
        assert_eq!((v.lines[0].id, v.top, v.follow), (1, 0, false));
        assert!(v.at_head && !v.at_tail);
        // Scrolling to the bottom of this window asks for what follows.
        let q = v.scroll(2000, 20).unwrap();
        assert_eq!(q.anchor, LogAnchor::After(1000));
    }

    #[test]
    fn the_window_stays_bounded() {
        let mut v = LogView::default();
        let q = v.show(Some(7)).unwrap();
        v.apply(chunk(q, 1..=1000, 1000));
        for n in 1..=10 {
            let q = v.appended(7).unwrap();
            let from = n * 1000 + 1;
            let follow_up = v.apply(chunk(
                LogQuery { limit: 2000, ..q },
                from..=from + 999,
                from + 999,
            ));
            assert!(follow_up.is_none());
        }
        assert_eq!(v.lines.len(), WINDOW);
        assert_eq!(v.lines.back().unwrap().id, 11_000);
        assert!(!v.at_head);
    }

    #[test]
    fn search_jumps_between_matches() {
        let mut v = LogView::default();
        let q = v.show(Some(7)).unwrap();
        v.apply(chunk(q, 1..=100, 100));
        v.search = Some("LINE 5".into());
        assert_eq!(v.matches(), vec![4, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58]);
        assert!(v.jump(false, 10));
        assert!(!v.follow);
        assert_eq!(v.top, 58 - 5);
    }

    #[test]
    fn plain_strips_colour_codes() {
        assert_eq!(plain("\x1b[32m   Compiling\x1b[0m x"), "   Compiling x");
        assert_eq!(plain("a\x1b]0;title\x07b"), "ab");
    }
}
