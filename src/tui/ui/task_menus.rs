//! Drawing the fix-up layers: the status menu (breakpoint, re-run) and the edit form.

use super::popups::{centered, frame};
use super::text::one_line;
use crate::tui::app::App;
use crate::tui::task_menus::{EditForm, PickMenu};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph};

/// A menu of choices about one task.
pub fn pick(f: &mut Frame, body: Rect, app: &App, menu: &PickMenu) {
    let t = &app.theme;
    let area = centered(body, 64, menu.options.len().max(1) as u16 + 2);
    f.render_widget(Clear, area);
    let block = frame(app, menu.title.clone(), "enter choose · esc close");
    let lines: Vec<Line> = if menu.options.is_empty() {
        vec![Line::styled("nothing to choose here", t.dim())]
    } else {
        menu.options
            .iter()
            .enumerate()
            .map(|(i, (label, _))| {
                let marker = if i == menu.cursor { "▸ " } else { "  " };
                let line = Line::raw(format!("{marker}{}", one_line(label)));
                if i == menu.cursor {
                    line.patch_style(t.selected())
                } else {
                    line
                }
            })
            .collect()
    };
    f.render_widget(Paragraph::new(lines).block(block), area);
}

/// The edit form: title above, prompt below.
pub fn edit(f: &mut Frame, body: Rect, app: &App, form: &EditForm) {
    let t = &app.theme;
    let area = centered(body, 72, 16);
    f.render_widget(Clear, area);
    let block = frame(
        app,
        format!("Edit #{}", form.target.task_id),
        "tab next field · ctrl+s save · esc cancel",
    );
    let inner = block.inner(area);
    f.render_widget(block, area);
    let [title, prompt, error] = Layout::vertical([
        Constraint::Length(3),
        Constraint::Min(3),
        Constraint::Length(1),
    ])
    .areas(inner);
    let field = |name: &'static str, focused: bool| {
        let style = if focused {
            t.border_focus()
        } else {
            t.border()
        };
        Block::bordered()
            .border_style(style)
            .title(Span::styled(name, style))
    };
    let b = field("Title", !form.on_prompt);
    f.render_widget(&form.title, b.inner(title));
    f.render_widget(b, title);
    let b = field("Prompt", form.on_prompt);
    f.render_widget(&form.prompt, b.inner(prompt));
    f.render_widget(b, prompt);
    if form.discard.asking() {
        let line = super::popups::discard_question(app, "your changes");
        f.render_widget(Paragraph::new(line), error);
    } else if let Some(e) = &form.error {
        f.render_widget(Paragraph::new(Span::styled(one_line(e), t.error())), error);
    }
}

/// The banner of a task paused at its breakpoint: where to look, and how to go on.
pub fn paused_banner(f: &mut Frame, area: Rect, app: &App, task: &crate::store::Task) {
    let t = &app.theme;
    let b = t.banner();
    let k = b.add_modifier(ratatui::style::Modifier::BOLD);
    let width = area.width as usize;
    let context = format!(".baton/context/{}", task.id);
    let worktree = task
        .worktree
        .clone()
        .unwrap_or_else(|| "(workspace root)".into());
    let lead = format!(" ⏸ Paused before {}. ", task.status);
    let keys = vec![
        Span::styled("[c]", k),
        Span::styled(" Continue  ", b),
        Span::styled("[b]", k),
        Span::styled(" Breakpoint ", b),
    ];
    let keys_w: usize = keys.iter().map(Span::width).sum();
    let room = width.saturating_sub(keys_w + Span::raw(&lead).width());
    let place = super::text::truncate(
        &format!("context {context} · worktree {worktree}"),
        room.saturating_sub(2),
    ) + "  ";
    let mut spans = vec![Span::styled(lead, b), Span::styled(place, b)];
    spans.extend(keys);
    let mut line = Line::from(spans);
    let used = line.width();
    if used < width {
        line.spans.push(Span::styled(" ".repeat(width - used), b));
    }
    f.render_widget(Paragraph::new(line), area);
}
