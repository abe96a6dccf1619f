//! The top line (pipeline tabs, counts, engine mode) and the bottom status line.

use super::text::{one_line, truncate};
use crate::tui::app::{App, Focus, Mode};
use crate::tui::intent::Intent;
use crate::tui::keymap::Bar;
use crate::tui::modal::{InputFor, Modal};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

pub fn render_header(f: &mut Frame, area: Rect, app: &App) {
    let t = &app.theme;
    let width = area.width as usize;
    let brand = Span::styled(" baton ", t.title());
    let current = app.board.tab;
    let tabs: Vec<Span> = app
        .board
        .pipelines
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let style = if i == current {
                t.selected().add_modifier(Modifier::BOLD)
            } else {
                t.dim()
            };
            // A tab whose steps use an agent that cannot run here says so before it fails.
            let warn = if app.agent_problems(&p.id).is_empty() {
                ""
            } else {
                "⚠ "
            };
            Span::styled(format!(" {warn}{} ", one_line(&p.name)), style)
        })
        .collect();
    // Each tab has a space before it.
    let tab_w: Vec<usize> = tabs.iter().map(|s| s.width() + 1).collect();
    let all_w = brand.width() + tab_w.iter().sum::<usize>();
    // The counts and the engine mode take their shorter forms so that every tab shows; when
    // even the shortest leaves no room, the tabs scroll to keep the current one in view,
    // and when it would not fit beside the current tab at all, the right side yields.
    let (right, shown) = match (0..=LAST_LEVEL)
        .map(|level| header_right(app, level))
        .find(|r| all_w + line_width(r) <= width)
    {
        Some(right) => (right, 0..tabs.len()),
        None => {
            let right = header_right(app, LAST_LEVEL);
            let one = tab_w.get(current).copied().unwrap_or(0) + 2 * Span::raw(MORE).width();
            let right = if brand.width() + one + line_width(&right) <= width {
                right
            } else {
                Vec::new()
            };
            let room = width.saturating_sub(brand.width() + line_width(&right));
            (right, visible_tabs(&tab_w, current, room))
        }
    };
    let mut spans = vec![brand];
    if shown.start > 0 {
        spans.push(Span::styled(MORE, t.dim()));
    }
    let last = shown.end;
    for (i, tab) in tabs.into_iter().enumerate() {
        if shown.contains(&i) {
            spans.push(Span::raw(" "));
            spans.push(tab);
        }
    }
    if last < app.board.pipelines.len() {
        spans.push(Span::styled(MORE, t.dim()));
    }
    let right_w = (line_width(&right) as u16).min(area.width);
    let [left_area, right_area] =
        Layout::horizontal([Constraint::Min(0), Constraint::Length(right_w)]).areas(area);
    f.render_widget(Paragraph::new(Line::from(spans)), left_area);
    f.render_widget(Paragraph::new(Line::from(right)), right_area);
}

/// Marks tabs scrolled out of the header.
const MORE: &str = " …";

/// The tabs shown in `room` columns (`widths` each, the current one `current`): all when
/// they fit, else a run holding the current tab, starting as far left as leaves it room,
/// with room for a `…` on each side that hides tabs.
fn visible_tabs(widths: &[usize], current: usize, room: usize) -> std::ops::Range<usize> {
    let n = widths.len();
    if current >= n {
        return 0..n;
    }
    let mark = Span::raw(MORE).width();
    let fits = |first: usize, end: usize| {
        let marks = mark * (usize::from(first > 0) + usize::from(end < n));
        widths[first..end].iter().sum::<usize>() + marks <= room
    };
    let (mut first, mut end) = (current, current + 1);
    while first > 0 && fits(first - 1, end) {
        first -= 1;
    }
    while end < n && fits(first, end + 1) {
        end += 1;
    }
    first..end
}

fn line_width(spans: &[Span]) -> usize {
    spans.iter().map(Span::width).sum()
}

/// The shortest form of the header's right side.
const LAST_LEVEL: u8 = 5;

/// The right side of the header; `level` 0 is the longest form, [`LAST_LEVEL`] the
/// shortest.
fn header_right(app: &App, level: u8) -> Vec<Span<'static>> {
    let t = &app.theme;
    let (running, waiting) = app.board.counts();
    let interrupted = app.board.interrupted_count();
    let counts: [(usize, &str, &str, Style); 3] = [
        (running, "●", "running", t.running()),
        (waiting, "⚑", "need approval", t.attention()),
        (interrupted, "⏸", "interrupted", t.attention()),
    ];
    let mut right = Vec::new();
    for (n, sym, word, style) in counts {
        if n == 0 {
            continue;
        }
        let text = if level == 0 {
            format!("{sym} {n} {word}  ")
        } else {
            format!("{sym} {n}  ")
        };
        right.push(Span::styled(text, style));
    }
    // The engines by name (with where this board's runs), then counted, then only where.
    if let Some(engines) = super::engines::header_text(app, u8::from(level >= 3))
        && level <= 4
    {
        let here = match (app.mode, &app.owner) {
            (Mode::Embedded, _) => "here".to_string(),
            (Mode::Attached, Some(owner)) if level < 3 => owner.to_string(),
            (Mode::Attached, _) => "attached".to_string(),
        };
        let text = match level {
            0 | 1 | 3 => format!("{engines} · {here} "),
            _ => format!("{engines} "),
        };
        right.push(Span::styled(text, t.dim()));
        return right;
    }
    let level = level.min(3);
    let mode = match (app.mode, level, &app.owner) {
        (Mode::Attached, 0 | 1, Some(owner)) => format!("engine: {owner} "),
        (Mode::Attached, 2, Some(owner)) => format!("engine: pid {} ", owner.pid),
        (Mode::Embedded, 0..=2, _) => "engine: here ".into(),
        (Mode::Attached, 0..=2, _) => "engine: attached ".into(),
        (Mode::Embedded, _, _) => "here ".into(),
        (Mode::Attached, _, _) => "attached ".into(),
    };
    right.push(Span::styled(mode, t.dim()));
    right
}

pub fn render_status(f: &mut Frame, area: Rect, app: &App) {
    let t = &app.theme;
    let width = area.width as usize;
    let line = if let Some(Modal::Input(input)) = app.modals.last() {
        let label = match input.purpose {
            InputFor::Filter => "filter: ",
            InputFor::Search => "search: ",
        };
        Line::from(vec![
            Span::styled(label, t.key()),
            Span::raw(input.text.clone()),
            Span::styled("█", t.dim()),
            Span::styled("   enter keep · esc clear", t.dim()),
        ])
    } else if let Some(msg) = &app.status {
        let style = if msg.error { t.error() } else { t.ok() };
        Line::from(Span::styled(truncate(&msg.text, width), style))
    } else if !app.modals.is_empty() && !matches!(app.modals.last(), Some(Modal::FullLog)) {
        // The layer shows its own keys in its frame.
        Line::raw("")
    } else {
        let full_log = matches!(app.modals.last(), Some(Modal::FullLog));
        let bar = match (full_log, app.focus) {
            (true, _) => Bar::FullLog,
            (false, Focus::Detail) => Bar::Detail,
            (false, Focus::Board) => crate::tui::task_menus::board_bar(app),
        };
        let collapsed = app.board.any_collapsed(app.size.0);
        let mut rows: Vec<_> = bar
            .rows()
            .into_iter()
            .filter(|(_, h)| collapsed || h.actions != [Intent::ToggleCollapse])
            .collect();
        let mut spans = Vec::new();
        if !app.board.filter.is_empty() && bar != Bar::Detail && bar != Bar::FullLog {
            spans.push(Span::styled(
                format!("filter “{}”  ", truncate(&app.board.filter, 20)),
                t.attention(),
            ));
        }
        // Too narrow: drop the least needed hints first (the last of the lowest rank).
        let used: usize = spans.iter().map(Span::width).sum();
        // The last hint needs no gap after it.
        let hint_w = |rows: &[(String, &crate::tui::keymap::Hint)]| -> usize {
            rows.iter()
                .map(|(k, h)| Span::raw(format!("{k} {}  ", h.label)).width())
                .sum::<usize>()
                .saturating_sub(2)
        };
        while used + hint_w(&rows) > width && !rows.is_empty() {
            let lowest = rows.iter().map(|(_, h)| h.rank).min().unwrap_or(0);
            if let Some(i) = rows.iter().rposition(|(_, h)| h.rank == lowest) {
                rows.remove(i);
            }
        }
        for (k, h) in rows {
            spans.push(Span::styled(k, t.key()));
            spans.push(Span::styled(format!(" {}  ", h.label), t.dim()));
        }
        Line::from(spans)
    };
    f.render_widget(Paragraph::new(line), area);
}

#[cfg(test)]
mod tests {
    use super::visible_tabs;

    #[test]
    fn every_tab_shows_when_they_fit() {
        assert_eq!(visible_tabs(&[7, 12, 10], 2, 29), 0..3);
    }

    #[test]
    fn the_current_tab_stays_in_view_when_they_do_not() {
        // From the left while the current one still fits, with room for the marks.
        assert_eq!(visible_tabs(&[7, 12, 10], 0, 25), 0..2);
        assert_eq!(visible_tabs(&[7, 12, 10], 2, 25), 1..3);
        assert_eq!(visible_tabs(&[7, 12, 10], 2, 15), 2..3);
        // Too narrow for even the current tab: it shows alone, cut by the screen's edge.
        assert_eq!(visible_tabs(&[7, 12, 10], 1, 5), 1..2);
    }
}
