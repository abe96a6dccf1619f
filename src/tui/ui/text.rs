//! Small text helpers shared by the views.

use ratatui::text::Span;

/// `s` as one line for the screen: sanitised (task and step text may hold escape sequences),
/// line breaks and tabs as spaces, cut to `width` columns with `…` when cut.
pub fn truncate(s: &str, width: usize) -> String {
    let s = one_line(s);
    let s = s.as_str();
    if Span::raw(s).width() <= width {
        return s.to_string();
    }
    let mut out = String::new();
    let mut used = 0;
    for ch in s.chars() {
        let w = Span::raw(ch.to_string()).width();
        if used + w + 1 > width {
            break;
        }
        out.push(ch);
        used += w;
    }
    if width > 0 {
        out.push('…');
    }
    out
}

/// `s` as rows of at most `width` columns, broken between words, at most `max` of them; when
/// text is left over, the last row ends in `…`. A `quoted command` that fits on a row is kept
/// on one; a word wider than a row is cut across rows. For sentences that tell the user what
/// to do, where a word cut in half is a command nobody can copy.
pub fn wrap_words(s: &str, width: usize, max: usize) -> Vec<String> {
    let s = one_line(s);
    let width = width.max(1);
    let mut rows: Vec<String> = Vec::new();
    let mut row = String::new();
    let mut place = |word: &str| {
        if !row.is_empty() && cells(&row) + 1 + cells(word) <= width {
            row.push(' ');
            row.push_str(word);
            return;
        }
        if !row.is_empty() {
            rows.push(std::mem::take(&mut row));
        }
        for ch in word.chars() {
            if cells(&row) + cells(&ch.to_string()) > width {
                rows.push(std::mem::take(&mut row));
            }
            row.push(ch);
        }
    };
    for unit in quoted_units(&s) {
        if cells(&unit) <= width {
            place(&unit);
        } else {
            unit.split(' ').for_each(&mut place);
        }
    }
    if !row.is_empty() {
        rows.push(row);
    }
    if rows.len() > max {
        rows.truncate(max);
        if let Some(last) = rows.last_mut() {
            *last = with_ellipsis(last, width);
        }
    }
    rows
}

/// The words of `s`, those between a pair of backticks joined into one unit.
fn quoted_units(s: &str) -> Vec<String> {
    let mut units: Vec<String> = Vec::new();
    let mut open = false;
    for word in s.split(' ').filter(|w| !w.is_empty()) {
        match units.last_mut() {
            Some(last) if open => {
                last.push(' ');
                last.push_str(word);
            }
            _ => units.push(word.to_string()),
        }
        if word.matches('`').count() % 2 == 1 {
            open = !open;
        }
    }
    units
}

/// `row` marked as followed by more text, in `width` columns: ` …` after its last whole
/// word that leaves room, else cut with `…`.
fn with_ellipsis(row: &str, width: usize) -> String {
    let mut kept = row;
    while cells(kept) + 2 > width {
        match kept.rfind(' ') {
            Some(i) => kept = kept[..i].trim_end(),
            None => return truncate(&format!("{row}…"), width),
        }
    }
    format!("{kept} …")
}

/// How many of `budget` rows each of several messages gets, given the rows each `need`s:
/// short ones whole, the rest sharing what is left evenly, at least `floor` each.
pub fn share_rows(need: &[usize], budget: usize, floor: usize) -> Vec<usize> {
    let mut out = vec![0; need.len()];
    let mut order: Vec<usize> = (0..need.len()).collect();
    order.sort_by_key(|&i| need[i]);
    let mut left = budget;
    for (k, &i) in order.iter().enumerate() {
        let share = left / (need.len() - k);
        out[i] = need[i].min(share.max(floor));
        left = left.saturating_sub(out[i]);
    }
    out
}

/// Columns `s` takes on the screen.
fn cells(s: &str) -> usize {
    Span::raw(s).width()
}

/// `s` sanitised, with line breaks and tabs as spaces.
pub fn one_line(s: &str) -> String {
    crate::ansi::strip(s)
        .chars()
        .map(|c| if c == '\n' || c == '\t' { ' ' } else { c })
        .collect()
}

/// A duration in ms as `m:ss` (or `h:mm:ss`).
pub fn elapsed(ms: i64) -> String {
    let s = ms.max(0) / 1000;
    if s >= 3600 {
        format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
    } else {
        format!("{}:{:02}", s / 60, s % 60)
    }
}

/// A store timestamp as `HH:MM:SS` (UTC, like the CLI).
pub fn clock(ms: i64) -> String {
    let t = crate::store::rfc3339(ms);
    t.get(11..19).unwrap_or("").to_string()
}

/// The spinner's frames.
pub const SPINNER: [&str; 10] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncates_with_an_ellipsis() {
        assert_eq!(truncate("hello", 10), "hello");
        assert_eq!(truncate("hello world", 6), "hello…");
        assert_eq!(elapsed(65_000), "1:05");
        assert_eq!(elapsed(3_725_000), "1:02:05");
    }

    const WHY: &str = "⚠ agent coder cannot run here: `claude` is not on PATH — install it \
        (`npm install -g @anthropic-ai/claude-code`) or put its full path in `argv`";

    #[test]
    fn wraps_between_words() {
        // The detail pane's step column at 80×24: the install command stays whole words.
        assert_eq!(
            wrap_words(WHY, 27, 6),
            [
                "⚠ agent coder cannot run",
                "here: `claude` is not on",
                "PATH — install it (`npm",
                "install -g",
                "@anthropic-ai/claude-code`)",
                "or put its full path in …",
            ]
        );
        assert_eq!(wrap_words("a b", 10, 3), ["a b"]);
        assert_eq!(wrap_words("", 10, 3), Vec::<String>::new());
    }

    #[test]
    fn a_quoted_command_that_fits_stays_on_one_row() {
        assert_eq!(
            wrap_words(WHY, 50, 9),
            [
                "⚠ agent coder cannot run here: `claude` is not on",
                "PATH — install it",
                "(`npm install -g @anthropic-ai/claude-code`) or",
                "put its full path in `argv`",
            ]
        );
    }

    #[test]
    fn a_word_wider_than_a_row_is_cut_across_rows() {
        assert_eq!(
            wrap_words("see abcdefghij now", 4, 5),
            ["see", "abcd", "efgh", "ij", "now"]
        );
    }

    #[test]
    fn the_last_row_kept_says_more_was_left() {
        // The ellipsis takes the place of the words it needs room for, not half a word.
        assert_eq!(
            wrap_words("one two three four five six", 9, 2),
            ["one two", "three …"]
        );
        assert_eq!(wrap_words("abcdefghijkl", 5, 1), ["abcd…"]);
        assert_eq!(wrap_words("one two", 10, 0), Vec::<String>::new());
    }

    #[test]
    fn rows_are_shared_short_messages_first() {
        assert_eq!(share_rows(&[2, 10], 6, 3), [2, 4]);
        assert_eq!(share_rows(&[10, 10], 6, 1), [3, 3]);
        assert_eq!(share_rows(&[10, 10], 7, 1), [3, 4]);
        // Never under the floor, even past the budget.
        assert_eq!(share_rows(&[10, 10], 2, 3), [3, 3]);
        assert_eq!(share_rows(&[1], 0, 3), [1]);
    }
}
