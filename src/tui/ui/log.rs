//! A step's log: the visible slice of the window, ANSI colours rendered, search matches
//! marked, optional wrapping.

use crate::store::{LogLine, Stream};
use crate::tui::app::App;
use crate::tui::logview::plain;
use ansi_to_tui::IntoText;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};

/// The log's title text: step, size, follow state, wrap, search. Narrow panes get the
/// short form, so the search mark is not the part cut off.
pub fn title(app: &App, width: u16) -> Vec<Span<'static>> {
    let long = title_form(app, false);
    if long.iter().map(Span::width).sum::<usize>() <= width as usize {
        long
    } else {
        title_form(app, true)
    }
}

fn title_form(app: &App, short: bool) -> Vec<Span<'static>> {
    let t = &app.theme;
    let Some(step) = app.shown_step() else {
        return vec![Span::styled("Log", t.title())];
    };
    let log = &app.log;
    let head = if short { "" } else { "Log · " };
    let mut spans = vec![
        Span::styled(
            format!("{head}{} #{}", step.status, step.attempt),
            t.title(),
        ),
        Span::styled(
            format!(
                " · {} {}",
                log.total,
                if log.total == 1 { "line" } else { "lines" }
            ),
            t.dim(),
        ),
    ];
    match (log.follow, short) {
        (true, false) => spans.push(Span::styled(" · following", t.running())),
        (true, true) => {}
        (false, false) => spans.push(Span::styled(" · paused (G follows)", t.attention())),
        (false, true) => spans.push(Span::styled(" · paused", t.attention())),
    }
    if log.wrap {
        spans.push(Span::styled(" · wrap", t.dim()));
    }
    if let Some(s) = &log.search {
        let n = log.matches().len();
        spans.push(Span::styled(format!(" · /{s} ({n})"), t.key()));
    }
    spans
}

/// Draws the log lines into `area` (no frame).
pub fn render_lines(f: &mut Frame, area: Rect, app: &App) {
    let t = &app.theme;
    let log = &app.log;
    let h = area.height as usize;
    if log.lines.is_empty() {
        let msg = match app.shown_step() {
            None => "no step has run yet",
            Some(_) if log.total == 0 => "no output yet",
            Some(_) => "loading…",
        };
        f.render_widget(Paragraph::new(Span::styled(msg, t.dim())), area);
        return;
    }
    let matches = log.matches();
    let w = area.width.max(1) as usize;
    // Which lines to build: without wrap exactly `h`; with wrap, as many as fill `h` rows.
    let (start, end) = if log.wrap && log.follow {
        let mut rows = 0;
        let mut start = log.lines.len();
        while start > 0 && rows < h {
            start -= 1;
            rows += rows_of(&log.lines[start], w);
        }
        (start, log.lines.len())
    } else {
        let start = log.first_shown(h);
        (start, (start + h).min(log.lines.len()))
    };
    let lines: Vec<Line> = (start..end)
        .map(|i| {
            let mut line = styled(app, &log.lines[i]);
            if matches.binary_search(&i).is_ok() {
                line = line.patch_style(t.search_match());
            }
            line
        })
        .collect();
    let mut p = Paragraph::new(lines);
    if log.wrap {
        p = p.wrap(Wrap { trim: false });
        if log.follow {
            // Bottom-align: skip the rows the first line overflows by.
            let total: usize = (start..end).map(|i| rows_of(&log.lines[i], w)).sum();
            p = p.scroll(((total.saturating_sub(h)) as u16, 0));
        }
    }
    f.render_widget(p, area);
}

fn rows_of(line: &LogLine, w: usize) -> usize {
    let n = Span::raw(plain(&line.text)).width();
    n.div_ceil(w).max(1)
}

/// One log line as styled text.
fn styled(app: &App, l: &LogLine) -> Line<'static> {
    let t = &app.theme;
    // Only colours survive the sanitiser, so the ANSI parser sees nothing else.
    let text = crate::ansi::sanitize(&l.text, t.color).replace(['\t', '\n'], "    ");
    let mut line = if t.color {
        text.as_bytes()
            .into_text()
            .ok()
            .and_then(|mut tx| (!tx.lines.is_empty()).then(|| tx.lines.remove(0)))
            .unwrap_or_else(|| Line::raw(plain(&text)))
    } else {
        Line::raw(text)
    };
    match l.stream {
        Stream::Stderr => line.spans.insert(0, Span::styled("▌", t.stderr())),
        Stream::System => line = line.patch_style(t.dim()),
        Stream::Stdout => {}
    }
    line
}
