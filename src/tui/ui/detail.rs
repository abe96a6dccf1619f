//! The selected task: banner, steps, handoff, history, and the live log.

use super::layout::detail_parts;
use super::log;
use super::text::{elapsed, one_line, share_rows, truncate, wrap_words};
use crate::pipeline::StatusKind;
use crate::store::{StepRun, StepState};
use crate::tui::app::{App, Focus};
use crate::tui::event::TaskDetail;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph};

pub fn render(f: &mut Frame, area: Rect, app: &App) {
    let t = &app.theme;
    let border = if app.focus == Focus::Detail {
        t.border_focus()
    } else {
        t.border()
    };
    let mut block = Block::bordered().border_style(border);
    let Some(d) = &app.detail else {
        let msg = match app.board.selected {
            Some(_) => "loading…",
            None if app.board.cards.is_empty() && app.loaded => {
                "no tasks yet — press n to create one"
            }
            None => "no task selected",
        };
        f.render_widget(
            Paragraph::new(Span::styled(msg, t.dim())).block(block),
            area,
        );
        return;
    };
    let task = &d.task;
    let label = app
        .board
        .pipelines
        .iter()
        .find(|p| p.id == task.pipeline_id)
        .and_then(|p| p.status(&task.status))
        .map_or(task.status.clone(), |s| one_line(&s.label));
    let w = area.width.saturating_sub(4) as usize;
    let mut title = vec![
        Span::styled(format!(" #{} ", task.id), t.id()),
        Span::styled(truncate(&task.title, w.saturating_sub(30)), t.title()),
        Span::styled(format!(" · {label} · {} ", task.state), t.dim()),
    ];
    let card = app.board.cards.iter().find(|c| c.id == task.id);
    // The tasks it waits for, as its card shows them.
    if let Some(after) = card.and_then(|c| c.after.as_ref()) {
        title.push(Span::styled(
            format!("· waits for ⛓ {after} "),
            t.attention(),
        ));
    }
    // Why its step waits: no running engine has the labels it requires.
    if let Some((why, _)) = card.and_then(|c| super::engines::label_wait(app, c)) {
        title.push(Span::styled(format!("· {why} "), t.attention()));
    }
    // The pull request's badge, as its card shows it.
    if let Some(pr) = card.and_then(|c| c.pr.as_ref()) {
        title.push(Span::styled(format!("· {pr} "), t.dim()));
    }
    block = block.title(Line::from(title));
    let inner = block.inner(area);
    f.render_widget(block, area);
    let banner = app.banner();
    let (banner_area, left, right) = detail_parts(inner, banner);
    if banner && crate::tui::task_menus::paused(&d.task) {
        super::task_menus::paused_banner(f, banner_area, app, &d.task);
    } else if banner {
        render_banner(f, banner_area, app, d);
    }
    render_left(f, left, app, d);
    let [title, lines] = Layout::vertical([Constraint::Length(1), Constraint::Min(0)])
        .areas(right.inner(ratatui::layout::Margin::new(1, 0)));
    f.render_widget(
        Paragraph::new(Line::from(log::title(app, title.width))),
        title,
    );
    log::render_lines(f, lines, app);
}

fn render_banner(f: &mut Frame, area: Rect, app: &App, d: &TaskDetail) {
    let t = &app.theme;
    let step = d
        .steps
        .iter()
        .rev()
        .find(|s| s.state == StepState::Interrupted)
        .map_or(d.task.status.clone(), |s| s.status.clone());
    let b = t.banner();
    let k = b.add_modifier(ratatui::style::Modifier::BOLD);
    let width = area.width as usize;
    // Longest first; narrower screens get shorter words rather than a cut-off key.
    let forms = [
        (
            format!(" ⏸ Interrupted while {step} ran. "),
            "Retry from scratch",
        ),
        (format!(" ⏸ Interrupted ({step}). "), "Retry"),
        (" ⏸ Interrupted. ".to_string(), "Retry"),
        (" ⏸ ".to_string(), "Retry"),
    ];
    let build = |(lead, retry): &(String, &'static str)| {
        Line::from(vec![
            Span::styled(lead.clone(), b),
            Span::styled("[R]", k),
            Span::styled(" Resume  ", b),
            Span::styled("[F]", k),
            Span::styled(format!(" {retry}  "), b),
            Span::styled("[d]", k),
            Span::styled(" Dismiss", b),
        ])
    };
    let line = forms
        .iter()
        .map(build)
        .find(|l| l.width() <= width)
        .unwrap_or_else(|| build(&forms[forms.len() - 1]));
    let mut line = line;
    let used = line.width();
    if used < width {
        line.spans.push(Span::styled(" ".repeat(width - used), b));
    }
    f.render_widget(Paragraph::new(line), area);
}

fn symbol(s: &StepRun) -> &'static str {
    match s.state {
        StepState::Succeeded => "✓",
        StepState::Failed | StepState::TimedOut => "✗",
        StepState::Running => "●",
        StepState::Pending => "○",
        StepState::Interrupted => "⏸",
        StepState::Cancelled => "–",
    }
}

fn render_left(f: &mut Frame, area: Rect, app: &App, d: &TaskDetail) {
    let t = &app.theme;
    let w = area.width.saturating_sub(1) as usize;
    // The step list: the runs (a rule before each new one), then the statuses still ahead
    // in this run, the breakpoint's marked.
    let (mut steps, selected_row) = step_rows(app, d, w);
    if let Some(p) = app
        .board
        .pipelines
        .iter()
        .find(|p| p.id == d.task.pipeline_id)
    {
        let here = p.index_of(&d.task.status).unwrap_or(0);
        let run = d.task.run_id.unwrap_or_default();
        // A task paused at its breakpoint has not run the step of its own status yet.
        let from = if crate::tui::task_menus::paused(&d.task) {
            here
        } else {
            here + 1
        };
        for s in p.statuses.iter().skip(from) {
            let ran = d.steps.iter().any(|r| r.run_id == run && r.status == s.id);
            if s.kind != StatusKind::Step || ran {
                continue;
            }
            if d.task.breakpoint.as_deref() == Some(s.id.as_str()) {
                let text = truncate(&format!("⏸ {} · breakpoint", s.id), w);
                steps.push(Line::styled(text, t.attention()));
            } else {
                steps.push(Line::styled(format!("○ {}", s.id), t.dim()));
            }
        }
    }
    // Agents failing for the same reason (one CLI missing) share one warning.
    let mut problems: Vec<(Vec<String>, &str)> = Vec::new();
    for (agent, why) in app.agent_problems(&d.task.pipeline_id) {
        match problems.iter_mut().find(|(_, w)| *w == why) {
            Some((agents, _)) => agents.push(agent),
            None => problems.push((vec![agent], why)),
        }
    }
    let mut others = Vec::new();
    if let Some(step) = app.shown_step() {
        if let Some(e) = &step.error {
            others.push(Line::styled(truncate(e, w), t.error()));
        }
        if let Some(id) = &step.session_id {
            // Whether this run carried on an earlier conversation of its agent.
            let how = match &step.continued_from {
                Some(_) => "continued",
                None => "fresh",
            };
            others.push(Line::styled(
                truncate(&format!("{how} session {id}"), w),
                t.dim(),
            ));
        }
        if let Some(content) = &step.handoff_content {
            others.push(Line::raw(""));
            others.push(Line::styled("Handoff", t.title()));
            others.extend(handoff_lines(step, content, w, app));
        }
    }
    others.extend(super::conversation::lines(app, d, w));
    let height = area.height as usize;
    // A warning says what to do next: it is wrapped between words over the rows the rest
    // leaves (two steps, the History heading), so that an install command reads whole.
    let warnings: Vec<String> = problems
        .iter()
        .map(|(agents, why)| {
            let noun = if agents.len() == 1 { "agent" } else { "agents" };
            format!("⚠ {noun} {} cannot run here: {why}", agents.join(", "))
        })
        .collect();
    let steps_floor = steps.len().min(if warnings.is_empty() { 3 } else { 2 });
    let budget = height.saturating_sub(1 + steps_floor + others.len() + 2);
    let need: Vec<usize> = warnings
        .iter()
        .map(|text| wrap_words(text, w, usize::MAX).len())
        .collect();
    let mut after = Vec::new();
    for (text, rows) in warnings.iter().zip(share_rows(&need, budget, 3)) {
        after.extend(
            wrap_words(text, w, rows)
                .into_iter()
                .map(|l| Line::styled(l, t.attention())),
        );
    }
    after.extend(others);
    after.push(Line::raw(""));
    after.push(Line::styled("History", t.title()));
    let hist = super::timeline::lines(app, d, w);
    // The step list gets what the rest and a few history rows leave (a loop can have
    // hundreds of runs), and scrolls to keep the shown step in view.
    let rest = 1 + after.len() + hist.len().min(3);
    let cap = height.saturating_sub(rest).max(steps_floor);
    let first = window(steps.len(), selected_row, cap);
    let below = steps.len().saturating_sub(first + cap);
    let mut title = vec![Span::styled("Steps", t.title())];
    if first > 0 {
        title.push(Span::styled(format!(" ↑{first}"), t.dim()));
    }
    if below > 0 {
        title.push(Span::styled(format!(" ↓{below}"), t.dim()));
    }
    let mut lines = vec![Line::from(title)];
    lines.extend(steps.into_iter().skip(first).take(cap));
    lines.extend(after);
    let room = height.saturating_sub(lines.len());
    let skip = hist.len().saturating_sub(room);
    lines.extend(hist.into_iter().skip(skip));
    f.render_widget(Paragraph::new(lines), area);
}

/// The rows of the steps that ran, a rule starting each run after the first, and the row
/// of the shown step.
fn step_rows(app: &App, d: &TaskDetail, w: usize) -> (Vec<Line<'static>>, Option<usize>) {
    let mut rows = Vec::new();
    let mut selected = None;
    let mut runs = 0;
    let mut last_run = None;
    for (i, s) in d.steps.iter().enumerate() {
        if last_run != Some(s.run_id) {
            runs += 1;
            if last_run.is_some() {
                let rule = format!("── run {runs} ");
                let fill = w.saturating_sub(rule.chars().count());
                rows.push(Line::styled(
                    format!("{rule}{}", "─".repeat(fill)),
                    app.theme.dim(),
                ));
            }
            last_run = Some(s.run_id);
        }
        if Some(i) == app.step {
            selected = Some(rows.len());
        }
        rows.push(step_line(app, s, i, w));
    }
    (rows, selected)
}

/// The first of `cap` rows out of `len` to show so that row `selected` is visible: the
/// last rows when they include it (the newest steps), else from the selected row down.
pub(super) fn window(len: usize, selected: Option<usize>, cap: usize) -> usize {
    let last = len.saturating_sub(cap);
    match selected {
        Some(s) if s < last => s,
        _ => last,
    }
}

/// One row of the step list.
fn step_line(app: &App, s: &StepRun, i: usize, w: usize) -> Line<'static> {
    let t = &app.theme;
    let style: Style = match s.state {
        StepState::Succeeded => t.ok(),
        StepState::Failed | StepState::TimedOut => t.error(),
        StepState::Running => t.running(),
        StepState::Interrupted => t.attention(),
        _ => t.dim(),
    };
    let dur = match (s.started_at, s.finished_at) {
        (Some(a), Some(b)) => elapsed(b - a),
        (Some(a), None) if s.state == StepState::Running => elapsed(app.now_ms - a),
        _ => String::new(),
    };
    let name = truncate(
        &format!("{} #{}", s.status, s.attempt),
        w.saturating_sub(10),
    );
    let line = Line::from(vec![
        Span::styled(format!("{} ", symbol(s)), style),
        Span::raw(format!("{name:<width$}", width = w.saturating_sub(9))),
        Span::styled(format!("{dur:>6}"), t.dim()),
    ]);
    if Some(i) != app.step {
        line
    } else if app.focus == Focus::Detail {
        line.patch_style(t.selected())
    } else {
        line.patch_style(Style::new().add_modifier(ratatui::style::Modifier::BOLD))
    }
}

/// The structured fields when the handoff has them, else its first lines.
fn handoff_lines(step: &StepRun, content: &str, w: usize, app: &App) -> Vec<Line<'static>> {
    let t = &app.theme;
    let fields = [
        ("what_was_done", "Done"),
        ("decisions_made", "Decisions"),
        ("open_questions", "Open"),
        ("next_agent_context", "Next"),
    ];
    let meta = step.handoff_metadata.as_ref();
    let mut out: Vec<Line> = fields
        .iter()
        .filter_map(|(key, label)| {
            let v = meta?.get(*key)?.as_str()?;
            let first = v.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
            Some(Line::from(vec![
                Span::styled(format!("{label}: "), t.key()),
                Span::raw(truncate(first.trim(), w.saturating_sub(label.len() + 2))),
            ]))
        })
        .collect();
    if out.is_empty() {
        out = content
            .lines()
            .filter(|l| !l.trim().is_empty())
            .take(3)
            .map(|l| Line::raw(truncate(l, w)))
            .collect();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::window;

    #[test]
    fn the_step_window_keeps_the_selected_row_in_view() {
        // Fits: from the top.
        assert_eq!(window(5, Some(0), 10), 0);
        // The newest rows, when the selection is among them.
        assert_eq!(window(600, Some(599), 10), 590);
        assert_eq!(window(600, Some(592), 10), 590);
        // Further back: the selected row at the top.
        assert_eq!(window(600, Some(3), 10), 3);
        assert_eq!(window(600, None, 10), 590);
    }
}
