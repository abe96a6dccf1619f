//! The playground popup (`p`): the agent picker and prompt, then the streaming log, then
//! the result with its handoff and diff stat. Every text in it was sanitised on arrival.

use super::popups::{centered, frame};
use super::text::{share_rows, truncate, wrap_words};
use crate::store::Stream;
use crate::tui::app::App;
use crate::tui::playground::{PgField, PlaygroundView, Run};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph, Wrap};

/// Agents listed at once in the picker.
const LIST_ROWS: usize = 8;

/// Draws the popup over `body`.
pub fn render(f: &mut Frame, body: Rect, app: &App, view: &PlaygroundView) {
    let area = centered(body, 110.min(body.width.saturating_sub(4)), body.height);
    f.render_widget(Clear, area);
    match &view.run {
        None => form(f, area, app, view),
        Some(run) if run.finished.is_none() => running(f, area, app, run),
        Some(run) => done(f, area, app, view, run),
    }
}

fn form(f: &mut Frame, area: Rect, app: &App, view: &PlaygroundView) {
    let t = &app.theme;
    let block = frame(
        app,
        "Playground · try an agent once".into(),
        "↑/↓ agent · tab field · enter run · esc close",
    );
    let inner = block.inner(area);
    f.render_widget(block, area);
    let agents = view.choices();
    let rows = agents.len().clamp(1, LIST_ROWS) as u16;
    let [label, list, prompt, note, error, reasons] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(rows),
        Constraint::Length(5),
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Fill(1),
    ])
    .areas(inner);
    let focused = view.field == PgField::Agent;
    f.render_widget(
        Paragraph::new(Span::styled(
            "Agent",
            if focused { t.title() } else { t.dim() },
        )),
        label,
    );
    // Reasons too long for their row, said in full under the form.
    let mut cut: Vec<(Vec<&str>, String)> = Vec::new();
    let lines: Vec<Line> = match &view.agents {
        None => vec![Line::styled("loading the agent profiles…", t.dim())],
        Some(Err(e)) => vec![Line::styled(truncate(e, list.width as usize), t.error())],
        Some(Ok(a)) if a.is_empty() => vec![Line::styled(
            "no agent profiles: add one under .baton/agents/",
            t.error(),
        )],
        Some(Ok(a)) => {
            let first = view.cursor.saturating_sub(LIST_ROWS - 1);
            let id_w = a.iter().map(|c| c.id.chars().count()).max().unwrap_or(0);
            let mut lines = Vec::new();
            for (i, c) in a.iter().enumerate() {
                let picked = i == view.cursor;
                let lead = format!(
                    "{} {:<id_w$}  {:<12} ",
                    if picked { "›" } else { " " },
                    c.id,
                    c.backend,
                );
                let room = (list.width as usize).saturating_sub(Span::raw(&lead).width());
                // The name and the reason come from profile files: repository content.
                let what = match &c.problem {
                    Some(why) => {
                        let why = crate::ansi::strip(why).into_owned();
                        let row = wrap_words(&format!("⚠ {why}"), room, 1);
                        if row.first().is_some_and(|r| r.ends_with('…')) {
                            match cut.iter_mut().find(|(_, w)| *w == why) {
                                Some((ids, _)) => ids.push(&c.id),
                                None => cut.push((vec![&c.id], why)),
                            }
                        }
                        row.into_iter().next().unwrap_or_default()
                    }
                    None => crate::ansi::strip(&c.name).into_owned(),
                };
                if i < first || i >= first + LIST_ROWS {
                    continue;
                }
                let style = match (picked, &c.problem) {
                    (true, _) => t.selected(),
                    (false, Some(_)) => t.attention(),
                    (false, None) => t.text(),
                };
                lines.push(Line::styled(
                    truncate(&format!("{lead}{what}"), list.width as usize),
                    style,
                ));
            }
            lines
        }
    };
    f.render_widget(Paragraph::new(lines), list);
    let style = if focused {
        t.border()
    } else {
        t.border_focus()
    };
    let b = Block::bordered()
        .border_style(style)
        .title(Span::styled("Prompt", style));
    f.render_widget(&view.prompt, b.inner(prompt));
    f.render_widget(b, prompt);
    f.render_widget(
        Paragraph::new(Span::styled(
            "Runs once in a scratch worktree; nothing is written to the board.",
            t.dim(),
        )),
        note,
    );
    if let Some(e) = &view.error {
        f.render_widget(Paragraph::new(Span::styled(e.as_str(), t.error())), error);
    }
    // Each says what to install or change: wrapped between words, never cut mid-command.
    let texts: Vec<String> = cut
        .iter()
        .map(|(ids, why)| format!("⚠ {} cannot run here: {why}", ids.join(", ")))
        .collect();
    let width = reasons.width as usize;
    let need: Vec<usize> = texts
        .iter()
        .map(|text| wrap_words(text, width, usize::MAX).len())
        .collect();
    let mut lines = Vec::new();
    for (text, rows) in texts
        .iter()
        .zip(share_rows(&need, reasons.height as usize, 1))
    {
        lines.extend(
            wrap_words(text, width, rows)
                .into_iter()
                .map(|l| Line::styled(l, t.attention())),
        );
    }
    f.render_widget(Paragraph::new(lines), reasons);
}

fn log_line<'a>(app: &App, stream: Stream, text: &'a str) -> Line<'a> {
    let t = &app.theme;
    match stream {
        Stream::Stderr => Line::from(vec![Span::styled("▌", t.stderr()), Span::raw(text)]),
        Stream::System => Line::styled(text, t.dim()),
        Stream::Stdout => Line::raw(text),
    }
}

fn running(f: &mut Frame, area: Rect, app: &App, run: &Run) {
    let t = &app.theme;
    let hint = if run.cancelling {
        "stopping the agent…"
    } else {
        "esc/x stop the agent"
    };
    let block = frame(app, format!("Playground · {}", run.agent), hint);
    let inner = block.inner(area);
    f.render_widget(block, area);
    let [head, log] = Layout::vertical([Constraint::Length(1), Constraint::Fill(1)]).areas(inner);
    let state = if run.cancelling {
        "stopping…"
    } else {
        "running…"
    };
    f.render_widget(
        Paragraph::new(Line::from(vec![
            Span::styled(state, t.running()),
            Span::styled(
                format!("  {} lines", run.lines.len() + run.dropped),
                t.dim(),
            ),
        ])),
        head,
    );
    let h = log.height as usize;
    let lines: Vec<Line> = run
        .lines
        .iter()
        .skip(run.lines.len().saturating_sub(h))
        .map(|(s, text)| log_line(app, *s, text))
        .collect();
    f.render_widget(Paragraph::new(lines), log);
}

fn done(f: &mut Frame, area: Rect, app: &App, view: &PlaygroundView, run: &Run) {
    let t = &app.theme;
    let Some(end) = &run.finished else { return };
    let block = frame(
        app,
        format!("Playground · {}", run.agent),
        "j/k scroll · enter try again · esc close",
    );
    let inner = block.inner(area);
    f.render_widget(block, area);
    let mut lines: Vec<Line> = vec![Line::styled(
        format!("{} {}", if end.ok { "✓" } else { "✗" }, end.summary),
        if end.ok { t.ok() } else { t.error() },
    )];
    if let Some(e) = &end.error {
        lines.push(Line::styled(e.as_str(), t.error()));
    }
    if !end.ran_in.is_empty() {
        lines.push(Line::styled(format!("ran in {}", end.ran_in), t.dim()));
    }
    let section = |lines: &mut Vec<Line>, title: &str| {
        lines.push(Line::raw(""));
        lines.push(Line::styled(format!("── {title} ──"), t.title()));
    };
    section(&mut lines, "handoff (what the next agent would receive)");
    match &end.handoff {
        Some(h) => lines.extend(h.lines().map(Line::raw)),
        None => lines.push(Line::styled("(none)", t.dim())),
    }
    section(&mut lines, "diff");
    match &end.diff_stat {
        Some(stat) => lines.extend(stat.iter().map(|s| Line::raw(s.as_str()))),
        None => lines.push(Line::styled("(not a git repository: no diff)", t.dim())),
    }
    section(
        &mut lines,
        &format!(
            "log ({} lines{})",
            run.lines.len() + run.dropped,
            if run.dropped > 0 {
                ", the newest kept"
            } else {
                ""
            }
        ),
    );
    lines.extend(run.lines.iter().map(|(s, text)| log_line(app, *s, text)));
    lines.push(Line::raw(""));
    lines.push(Line::styled(
        "Nothing was written to the board. `baton try AGENT --prompt P --keep BRANCH` saves a result as a branch.",
        t.dim(),
    ));
    f.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .scroll((view.scroll, 0)),
        inner,
    );
}
