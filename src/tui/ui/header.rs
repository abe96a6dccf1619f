//! The top line (pipeline tabs, counts, engine mode) and the bottom status line.

use super::text::truncate;
use crate::tui::app::{App, Focus, Mode};
use crate::tui::modal::{InputFor, Modal};
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

pub fn render_header(f: &mut Frame, area: Rect, app: &App) {
    let t = &app.theme;
    let mut spans = vec![Span::styled(" baton ", t.title())];
    for (i, p) in app.board.pipelines.iter().enumerate() {
        let style = if i == app.board.tab {
            t.selected().add_modifier(Modifier::BOLD)
        } else {
            t.dim()
        };
        spans.push(Span::raw(" "));
        spans.push(Span::styled(format!(" {} ", p.name), style));
    }
    let (running, waiting) = app.board.counts();
    let mut right = Vec::new();
    if running > 0 {
        right.push(Span::styled(format!("● {running} running  "), t.running()));
    }
    if waiting > 0 {
        right.push(Span::styled(
            format!("⚑ {waiting} need approval  "),
            t.attention(),
        ));
    }
    right.push(Span::styled(
        match app.mode {
            Mode::Embedded => "engine: here ",
            Mode::Attached => "engine: attached ",
        },
        t.dim(),
    ));
    let right_w: usize = right.iter().map(Span::width).sum();
    let left_w: usize = spans.iter().map(Span::width).sum();
    let pad = (area.width as usize).saturating_sub(left_w + right_w);
    spans.push(Span::raw(" ".repeat(pad)));
    spans.extend(right);
    f.render_widget(Paragraph::new(Line::from(spans)), area);
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
        let focus = if full_log { Focus::Detail } else { app.focus };
        let hints: &[(&str, &str)] = match focus {
            Focus::Board => &[
                ("enter", "open"),
                ("n", "new"),
                ("s", "start"),
                ("a", "approve"),
                ("m", "move"),
                ("/", "filter"),
                ("?", "help"),
                ("q", "quit"),
            ],
            Focus::Detail => &[
                ("j/k", "step"),
                ("J/K", "scroll"),
                ("G", "follow"),
                ("/", "search"),
                ("w", "wrap"),
                ("L", "full log"),
                ("esc", "board"),
                ("?", "help"),
            ],
        };
        let mut spans = Vec::new();
        if !app.board.filter.is_empty() {
            spans.push(Span::styled(
                format!("filter “{}”  ", app.board.filter),
                t.attention(),
            ));
        }
        for (k, d) in hints {
            spans.push(Span::styled(*k, t.key()));
            spans.push(Span::styled(format!(" {d}  "), t.dim()));
        }
        Line::from(spans)
    };
    f.render_widget(Paragraph::new(line), area);
}
