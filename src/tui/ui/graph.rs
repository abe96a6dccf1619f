//! Draws the graph layer: the pipeline's lines, styled by their marks, scrolled so the
//! current status is in view when the drawing is taller than the screen.

use crate::pipeline::graph::{Mark, draw};
use crate::tui::app::App;
use crate::tui::graph_view::GraphView;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph};

pub fn render(f: &mut Frame, area: Rect, app: &App, view: &GraphView) {
    let t = &app.theme;
    let title = format!(" #{} · pipeline graph ", view.target.task_id);
    let mut block = Block::bordered()
        .border_style(t.border_focus())
        .title(Span::styled(title, t.title()));
    let lines: Vec<Line> = match &view.data {
        None => vec![Line::styled("loading…", t.dim())],
        Some(Err(e)) => vec![Line::styled(e.clone(), t.error())],
        Some(Ok(data)) => draw(&data.pipeline, &data.path)
            .into_iter()
            .map(|l| {
                Line::from(
                    l.0.into_iter()
                        .map(|(text, mark)| Span::styled(text, style(app, mark)))
                        .collect::<Vec<_>>(),
                )
            })
            .collect(),
    };
    let inner = area.height.saturating_sub(2) as usize;
    let max = lines.len().saturating_sub(inner);
    let scroll = (view.scroll as usize).min(max);
    let below = max - scroll;
    let mut hint = String::from(" j/k scroll · any other key closes ");
    if scroll > 0 || below > 0 {
        hint = format!(" ↑{scroll} ↓{below} ·{hint}");
    }
    block = block.title_bottom(Line::styled(hint, t.dim()).right_aligned());
    f.render_widget(Clear, area);
    f.render_widget(
        Paragraph::new(lines)
            .block(block)
            .scroll((scroll as u16, 0)),
        area,
    );
}

fn style(app: &App, mark: Mark) -> Style {
    let t = &app.theme;
    match mark {
        Mark::Plain => Style::default(),
        Mark::Dim => t.dim(),
        Mark::Heading => t.title(),
        Mark::Here => t
            .running()
            .add_modifier(Modifier::REVERSED | Modifier::BOLD),
        Mark::Visited => t.ok(),
        Mark::Guard => t.attention(),
        Mark::Hook => t.dim(),
    }
}
