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
}
