//! The columns and their cards. Only the cards that fit are built.

use super::layout::CARD_H;
use super::text::{SPINNER, elapsed, one_line, truncate};
use crate::pipeline::StatusKind;
use crate::store::{TaskCard, TaskState};
use crate::tui::app::{App, Focus};
use crate::tui::theme::Theme;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph};

/// Width of a collapsed column.
const STRIP_W: u16 = 5;

pub fn render(f: &mut Frame, area: Rect, app: &App) {
    let t = &app.theme;
    let board = &app.board;
    let n = board.column_count();
    if n == 0 {
        let msg = if app.loaded {
            "no pipelines — add one under .baton/pipelines/"
        } else {
            "loading…"
        };
        f.render_widget(
            Paragraph::new(msg).block(Block::bordered().border_style(t.border())),
            area,
        );
        return;
    }
    let width = app.size.0;
    let constraints: Vec<Constraint> = (0..n)
        .map(|i| {
            if board.is_collapsed(i, width) {
                Constraint::Length(STRIP_W)
            } else {
                Constraint::Fill(1)
            }
        })
        .collect();
    let cols = Layout::horizontal(constraints).split(area);
    let cap = (area.height.saturating_sub(2) / CARD_H) as usize;
    for (i, rect) in cols.iter().enumerate() {
        let Some(status) = board.status(i) else {
            continue;
        };
        let count = board.column_len(i);
        let current = i == board.col;
        let border = if current && app.focus == Focus::Board {
            t.border_focus()
        } else {
            t.border()
        };
        if board.is_collapsed(i, width) {
            let mut lines = vec![Line::styled(count.to_string(), t.title())];
            lines.extend(
                one_line(&status.label)
                    .chars()
                    .take(rect.height.saturating_sub(3) as usize)
                    .map(|c| Line::styled(c.to_string(), t.dim())),
            );
            // Collapsed columns cannot be selected: say which key opens them.
            let block = Block::bordered()
                .border_style(border)
                .title_bottom(Line::styled(collapse_key(), t.key()).centered());
            f.render_widget(Paragraph::new(lines).centered().block(block), *rect);
            continue;
        }
        let inner_w = rect.width.saturating_sub(2) as usize;
        let title_style = match status.kind {
            StatusKind::Gate => t.attention(),
            _ if current => t.title(),
            _ => t.text().add_modifier(Modifier::BOLD),
        };
        let scroll = board
            .scroll
            .get(i)
            .copied()
            .unwrap_or(0)
            .min(count.saturating_sub(1));
        // The scroll mark shares the top border: the title gets what it leaves.
        let up = (scroll > 0).then(|| format!("↑{scroll}"));
        let room = match &up {
            Some(up) => inner_w.saturating_sub(up.chars().count() + 1),
            None => inner_w,
        };
        let (label, count_text) = column_title(&status.label, count, room);
        let mut block = Block::bordered()
            .border_style(border)
            .title(Line::from(vec![
                Span::styled(label, title_style),
                Span::styled(count_text, t.dim()),
            ]));
        if let Some(up) = up {
            block = block.title(Line::styled(up, t.dim()).right_aligned());
        }
        let below = count.saturating_sub(scroll + cap);
        if below > 0 {
            block =
                block.title_bottom(Line::styled(format!("↓{below} more"), t.dim()).right_aligned());
        }
        let mut lines = Vec::with_capacity(cap * CARD_H as usize);
        for (row, card) in board.column(i).enumerate().skip(scroll).take(cap) {
            let selected = current && board.rows.get(i) == Some(&row);
            card_lines(&mut lines, app, card, inner_w, selected);
        }
        f.render_widget(Paragraph::new(lines).block(block), *rect);
    }
}

/// A column's title in `width` cells: its label, then its count. When both do not fit, the
/// label is cut and the count kept; a label with no room for a letter and `…` is left out.
fn column_title(label: &str, count: usize, width: usize) -> (String, String) {
    let label = one_line(label);
    let count = count.to_string();
    let count_w = count.chars().count();
    if Span::raw(label.as_str()).width() + 1 + count_w <= width {
        return (label, format!(" {count}"));
    }
    let room = width.saturating_sub(count_w + 1);
    if room < 2 {
        return (String::new(), count);
    }
    let cut = truncate(&label, room);
    // "AI …" reads as a cut word; "AI…" as a cut label.
    let cut = match cut.strip_suffix('…') {
        Some(kept) => format!("{}…", kept.trim_end()),
        None => cut,
    };
    (cut, format!(" {count}"))
}

fn card_lines(out: &mut Vec<Line<'static>>, app: &App, card: &TaskCard, w: usize, selected: bool) {
    let t = &app.theme;
    let id = format!("#{} ", card.id);
    let title = truncate(&card.title, w.saturating_sub(id.chars().count()));
    let mut first = Line::from(vec![Span::styled(id, t.id()), Span::raw(title)]);
    let mut second = Line::from(badges(app, card, w));
    if selected {
        let sel = t.selected();
        first = first.patch_style(sel);
        second = second.patch_style(sel);
        pad(&mut first, w, sel);
        pad(&mut second, w, sel);
    }
    out.push(first);
    out.push(second);
}

/// Pads a selected line to the full width so the highlight is a solid bar.
fn pad(line: &mut Line<'static>, w: usize, style: Style) {
    let used = line.width();
    if used < w {
        line.spans.push(Span::styled(" ".repeat(w - used), style));
    }
}

/// The state badge first, then as many of tests, cost and progress as fit in `w`.
fn badges(app: &App, card: &TaskCard, w: usize) -> Vec<Span<'static>> {
    let t: &Theme = &app.theme;
    let total = app.board.step_total(card);
    let progress = (total > 0).then(|| format!("{}/{}", card.steps_done.min(total as i64), total));
    let mut spans = Vec::new();
    let mut used = 0;
    let mut push = |text: String, style: Style| {
        let gap = usize::from(!spans.is_empty());
        let width = Span::raw(text.as_str()).width();
        // The state badge always shows (clipped if need be); the others only whole.
        if !spans.is_empty() && used + gap + width > w {
            return;
        }
        if gap == 1 {
            spans.push(Span::raw(" "));
        }
        used += gap + width;
        spans.push(Span::styled(text, style));
    };
    let (long, short, style): (String, &str, Style) = match card.state {
        // Its start waits for other tasks: which ones, and whether one of them failed.
        _ if card.after.is_some() => {
            let after = card.after.clone().unwrap_or_default();
            let (short, style) = if after.contains("failed") || after.contains("cancelled") {
                ("⛓ ✗", t.error())
            } else {
                ("⛓", t.dim())
            };
            (format!("⛓ {after}"), short, style)
        }
        TaskState::Running => {
            let since = card.running_since.unwrap_or(app.now_ms);
            let spin = SPINNER[app.frame % SPINNER.len()];
            let text = format!("{spin} {}", elapsed(app.now_ms - since));
            (text, spin, t.running())
        }
        // Its step needs an engine with labels no running engine has.
        TaskState::Queued => match super::engines::label_wait(app, card) {
            Some((_, labels)) => (format!("… needs {labels}"), "… ⚙", t.attention()),
            None => ("… queued".into(), "…", t.dim()),
        },
        TaskState::Waiting if app.board.needs_approval(card) => {
            ("⚑ approval".into(), "⚑", t.attention())
        }
        TaskState::Waiting => ("◆ waiting".into(), "◆", t.attention()),
        TaskState::Interrupted => ("⏸ interrupted".into(), "⏸ int.", t.attention()),
        TaskState::Failed => ("✗ failed".into(), "✗", t.error()),
        TaskState::Cancelled => ("– cancelled".into(), "–", t.dim()),
        TaskState::Done => ("✓ done".into(), "✓", t.ok()),
        TaskState::Idle => ("idle".into(), "idle", t.dim()),
    };
    // A narrow column gets the short form rather than a clipped word.
    let state = if Span::raw(long.as_str()).width() <= w {
        long
    } else {
        short.to_string()
    };
    push(state, style);
    if card.alert.is_some() {
        push("⚠".into(), t.error());
    }
    if let Some(tests) = &card.tests {
        let n = |k: &str| tests.get(k).and_then(|v| v.as_u64()).unwrap_or(0);
        let (passed, failed) = (n("passed"), n("failed"));
        push(format!("✓{passed}"), t.ok());
        if failed > 0 {
            push(format!("✗{failed}"), t.error());
        }
    }
    if let Some(cost) = card.cost.filter(|c| *c > 0.0) {
        push(format!("${cost:.2}"), t.dim());
    }
    if let Some(pr) = &card.pr {
        push(pr.clone(), t.dim());
    }
    if let Some(p) = progress {
        push(p, t.dim());
    }
    // The last person who created or moved it, where there is room.
    if let Some(who) = &card.moved_by {
        push(format!("@{}", truncate(who, 10)), t.dim());
    }
    spans
}

/// The key that expands collapsed columns, as the keymap binds it.
fn collapse_key() -> String {
    crate::tui::keymap::Bar::Board
        .key_for(crate::tui::intent::Intent::ToggleCollapse)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::column_title;

    fn title(label: &str, count: usize, width: usize) -> String {
        let (label, count) = column_title(label, count, width);
        format!("{label}{count}")
    }

    #[test]
    fn a_column_title_uses_the_width_it_has() {
        // 80×24, demo pipeline: nine cells inside the border.
        assert_eq!(title("Backlog", 1, 9), "Backlog 1");
        assert_eq!(title("Planning", 0, 10), "Planning 0");
        // 120 wide: they fit, so nothing is cut.
        assert_eq!(title("Cancelled", 0, 11), "Cancelled 0");
        assert_eq!(title("Implementing", 0, 13), "Implementi… 0");
    }

    #[test]
    fn a_cut_title_keeps_its_count_and_as_much_label_as_fits() {
        assert_eq!(title("Backlog", 1, 7), "Back… 1");
        assert_eq!(title("Backlog", 12, 7), "Bac… 12");
        assert_eq!(title("AI review", 0, 6), "AI… 0");
        assert_eq!(title("Backlog", 1, 4), "B… 1");
        // No room for a letter and its ellipsis: the count alone.
        assert_eq!(title("Backlog", 1, 3), "1");
        assert_eq!(title("Backlog", 1, 0), "1");
    }
}
