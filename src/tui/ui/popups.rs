//! The layers over the board: each is drawn on a `Clear`ed rectangle.

use super::layout::Areas;
use super::log;
use super::text::{one_line, truncate};
use crate::tui::app::App;
use crate::tui::event::Diff;
use crate::tui::keymap::Bar;
use crate::tui::keymap::help_sections;
use crate::tui::modal::{
    Confirm, DiffView, Field, Modal, MoveMenu, NewTaskForm, NoteFor, NoteForm,
};
use ansi_to_tui::IntoText;
use ratatui::Frame;
use ratatui::layout::{Constraint, Flex, Layout, Margin, Rect};
use ratatui::text::{Line, Span, Text};
use ratatui::widgets::{Block, Clear, Paragraph, Wrap};

/// A centred rectangle of at most `w`×`h` inside `area`.
pub(super) fn centered(area: Rect, w: u16, h: u16) -> Rect {
    let [r] = Layout::horizontal([Constraint::Length(w.min(area.width))])
        .flex(Flex::Center)
        .areas(area);
    let [r] = Layout::vertical([Constraint::Length(h.min(area.height))])
        .flex(Flex::Center)
        .areas(r);
    r
}

pub(super) fn frame<'a>(app: &App, title: String, hint: &'a str) -> Block<'a> {
    let t = &app.theme;
    Block::bordered()
        .border_style(t.border_focus())
        .title(Span::styled(format!(" {title} "), t.title()))
        .title_bottom(Line::styled(format!(" {hint} "), t.dim()).right_aligned())
}

pub fn render(f: &mut Frame, areas: &Areas, app: &App, modal: &Modal) {
    match modal {
        Modal::Help { scroll } => help(f, areas.body, app, *scroll),
        Modal::NewTask(form) => new_task(f, areas.body, app, form),
        Modal::Note(form) => note(f, areas.body, app, form),
        Modal::Answer(form) => super::answer::render(f, areas.body, app, form),
        Modal::Move(menu) => move_menu(f, areas.body, app, menu),
        Modal::Confirm(c) => confirm(f, areas.body, app, c),
        Modal::Diff(d) => diff(f, areas.body, app, d),
        Modal::FullLog => full_log(f, areas.body, app),
        Modal::Pick(menu) => super::task_menus::pick(f, areas.body, app, menu),
        Modal::Edit(form) => super::task_menus::edit(f, areas.body, app, form),
        Modal::Graph(g) => super::graph::render(f, areas.body, app, g),
        Modal::Playground(v) => super::playground::render(f, areas.body, app, v),
        // Drawn in the status line.
        Modal::Input(_) => {}
    }
}

fn help(f: &mut Frame, body: Rect, app: &App, scroll: u16) {
    let t = &app.theme;
    let sections = help_sections();
    let section_lines = |range: &[(crate::tui::keymap::Ctx, Vec<(String, &'static str)>)]| {
        let mut lines = Vec::new();
        for (ctx, rows) in range {
            if !lines.is_empty() {
                lines.push(Line::raw(""));
            }
            lines.push(Line::styled(ctx.title(), t.title()));
            for (keys, desc) in rows {
                lines.push(Line::from(vec![
                    Span::styled(format!("  {keys:<13}"), t.key()),
                    Span::raw(*desc),
                ]));
            }
        }
        lines
    };
    let two = body.width >= 100;
    let area = centered(body, if two { 118 } else { 70 }, body.height);
    f.render_widget(Clear, area);
    let block = frame(app, "Keys".into(), "j/k scroll · any other key closes");
    let inner = block.inner(area);
    f.render_widget(block, area);
    if two {
        let split = 3.min(sections.len());
        let [l, r] = Layout::horizontal([Constraint::Fill(1), Constraint::Fill(1)]).areas(inner);
        let left = section_lines(&sections[..split]);
        let right = section_lines(&sections[split..]);
        f.render_widget(Paragraph::new(left).scroll((scroll, 0)), l);
        f.render_widget(Paragraph::new(right).scroll((scroll, 0)), r);
    } else {
        let lines = section_lines(&sections);
        f.render_widget(Paragraph::new(lines).scroll((scroll, 0)), inner);
    }
}

fn new_task(f: &mut Frame, body: Rect, app: &App, form: &NewTaskForm) {
    let t = &app.theme;
    let area = centered(body, 72, 20);
    f.render_widget(Clear, area);
    let block = frame(
        app,
        "New task".into(),
        "tab next field · ctrl+s create · esc cancel",
    );
    let inner = block.inner(area);
    f.render_widget(block, area);
    let [title, prompt, pipeline, after, start, error] = Layout::vertical([
        Constraint::Length(3),
        Constraint::Min(3),
        Constraint::Length(2),
        Constraint::Length(1),
        Constraint::Length(1),
        // Two lines: the engine's sentence says what to do too.
        Constraint::Length(2),
    ])
    .areas(inner);
    let field_block = |name: &'static str, field: Field| {
        let style = if form.field == field {
            t.border_focus()
        } else {
            t.border()
        };
        Block::bordered()
            .border_style(style)
            .title(Span::styled(name, style))
    };
    let b = field_block("Title", Field::Title);
    f.render_widget(&form.title, b.inner(title));
    f.render_widget(b, title);
    let p = form.pipelines.get(form.pipeline);
    let focused = form.field == Field::Pipeline;
    let name_style = if focused { t.selected() } else { t.text() };
    let lines = vec![
        Line::from(vec![
            Span::styled(
                if focused {
                    "› Pipeline "
                } else {
                    "  Pipeline "
                },
                if focused { t.title() } else { t.dim() },
            ),
            Span::styled("◀ ", if focused { t.title() } else { t.dim() }),
            Span::styled(p.map_or("(none)".into(), |p| one_line(&p.name)), name_style),
            Span::styled(" ▶", if focused { t.title() } else { t.dim() }),
            Span::styled(
                format!("  {}/{}", form.pipeline + 1, form.pipelines.len()),
                t.dim(),
            ),
            Span::styled(if focused { "  ←/→ change" } else { "" }, t.dim()),
        ]),
        Line::styled(
            format!(
                "  {}",
                truncate(
                    p.map_or("", |p| p.description.as_str()),
                    (pipeline.width as usize).saturating_sub(2),
                )
            ),
            t.dim(),
        ),
    ];
    f.render_widget(Paragraph::new(lines), pipeline);
    let focused = form.field == Field::After;
    let [label, input] =
        Layout::horizontal([Constraint::Length(11), Constraint::Fill(1)]).areas(after);
    f.render_widget(
        Span::styled(
            if focused {
                "› After ⛓ "
            } else {
                "  After ⛓ "
            },
            if focused { t.title() } else { t.dim() },
        ),
        label,
    );
    f.render_widget(&form.after, input);
    let b = field_block("Prompt", Field::Prompt);
    f.render_widget(&form.prompt, b.inner(prompt));
    f.render_widget(b, prompt);
    let check = if form.start { "[x]" } else { "[ ]" };
    let style = if form.field == Field::Start {
        t.title()
    } else {
        t.text()
    };
    f.render_widget(
        Paragraph::new(Line::from(vec![
            Span::styled(
                format!(
                    "{}{check} start it now",
                    if form.field == Field::Start {
                        "› "
                    } else {
                        "  "
                    }
                ),
                style,
            ),
            Span::styled("  (space toggles)", t.dim()),
            Span::styled(
                if form.warning().is_some() {
                    "  ⚠ not started: see below"
                } else {
                    ""
                },
                t.error(),
            ),
        ])),
        start,
    );
    let wrapped = |text: &str| {
        Paragraph::new(Span::styled(one_line(text), t.error())).wrap(Wrap { trim: true })
    };
    if form.discard.asking() {
        f.render_widget(
            Paragraph::new(discard_question(app, "this new task")),
            error,
        );
    } else if let Some(e) = &form.error {
        f.render_widget(wrapped(e), error);
    } else if let Some(why) = form.warning() {
        f.render_widget(wrapped(&format!("⚠ {}", crate::ansi::strip(why))), error);
    }
}

/// The one-line question `esc` asks in a form that holds typed text.
pub(super) fn discard_question(app: &App, what: &str) -> Line<'static> {
    let t = &app.theme;
    Line::from(vec![
        Span::styled(format!("Discard {what}? "), t.attention()),
        Span::styled("y", t.key()),
        Span::styled("/", t.dim()),
        Span::styled("esc", t.key()),
        Span::styled(" discard · any other key keeps editing", t.dim()),
    ])
}

fn note(f: &mut Frame, body: Rect, app: &App, form: &NoteForm) {
    let t = &app.theme;
    let area = centered(body, 64, 10);
    f.render_widget(Clear, area);
    let (title, hint) = match &form.purpose {
        NoteFor::Reject => (
            format!(
                "Reject #{} {}",
                form.target.task_id,
                truncate(&form.target.title, 36)
            ),
            "ctrl+s reject · esc cancel",
        ),
        NoteFor::Move { to } => (
            format!(
                "Move #{} {} → {}",
                form.target.task_id,
                truncate(&form.target.title, 28),
                truncate(to, 16)
            ),
            "ctrl+s move · esc cancel",
        ),
        NoteFor::Say => (
            format!(
                "Say to #{} {}",
                form.target.task_id,
                truncate(&form.target.title, 36)
            ),
            "ctrl+s send · esc cancel",
        ),
    };
    let said = match &form.purpose {
        NoteFor::Say => "Message for the agent:",
        _ => "Note for the next step (optional):",
    };
    let block = frame(app, title, hint);
    let inner = block.inner(area);
    f.render_widget(block, area);
    let [label, note] = Layout::vertical([Constraint::Length(1), Constraint::Min(1)]).areas(inner);
    f.render_widget(Paragraph::new(Span::styled(said, t.dim())), label);
    f.render_widget(&form.note, note);
}

fn move_menu(f: &mut Frame, body: Rect, app: &App, menu: &MoveMenu) {
    let t = &app.theme;
    let rows = match &menu.options {
        Some(Ok(o)) => o.len().max(1) as u16,
        _ => 1,
    };
    let area = centered(body, 72, rows + 2);
    f.render_widget(Clear, area);
    let title = format!("Move #{} from {}", menu.target.task_id, menu.target.status);
    let block = frame(app, title, "enter choose · esc close");
    let lines: Vec<Line> = match &menu.options {
        None => vec![Line::styled("loading…", t.dim())],
        Some(Err(e)) => vec![Line::styled(one_line(e), t.error())],
        Some(Ok(options)) if options.is_empty() => {
            vec![Line::styled("no moves from here", t.dim())]
        }
        Some(Ok(options)) => options
            .iter()
            .enumerate()
            .map(|(i, o)| {
                let marker = if i == menu.cursor { "▸ " } else { "  " };
                let label = one_line(&o.label.clone().unwrap_or_else(|| o.trigger.to_string()));
                if o.allowed {
                    let mut line = Line::from(vec![
                        Span::raw(format!("{marker}{:<14}", o.to)),
                        Span::styled(label, t.dim()),
                    ]);
                    if i == menu.cursor {
                        line = line.patch_style(t.selected());
                    }
                    line
                } else {
                    Line::styled(
                        format!(
                            "{marker}{:<14}{label} — blocked by {}",
                            o.to,
                            o.blocked_by.join(", ")
                        ),
                        t.dim(),
                    )
                }
            })
            .collect(),
    };
    f.render_widget(Paragraph::new(lines).block(block), area);
}

fn confirm(f: &mut Frame, body: Rect, app: &App, c: &Confirm) {
    let t = &app.theme;
    let (title, text) = match c {
        Confirm::Abort(target) => (
            format!("Abort #{}?", target.task_id),
            format!(
                "“{}” stops its running step and moves to cancelled.",
                truncate(&target.title, 40)
            ),
        ),
        Confirm::Dismiss(target) => (
            format!("Dismiss #{}?", target.task_id),
            format!(
                "“{}” gives up its interrupted step and moves to cancelled; the history keeps why.",
                truncate(&target.title, 40)
            ),
        ),
        Confirm::Quit { running } => (
            "Quit?".to_string(),
            format!(
                "{running} step(s) are running in this baton. Quitting stops the engine and \
                 interrupts them; resume them later with R."
            ),
        ),
    };
    let area = centered(body, 56, 7);
    f.render_widget(Clear, area);
    let block = frame(app, title, "y yes · n no");
    let lines = vec![
        Line::raw(text),
        Line::raw(""),
        Line::from(vec![
            Span::styled("y", t.key()),
            Span::raw(" yes   "),
            Span::styled("n", t.key()),
            Span::raw(" no"),
        ]),
    ];
    f.render_widget(
        Paragraph::new(lines).wrap(Wrap { trim: true }).block(block),
        area,
    );
}

fn diff(f: &mut Frame, body: Rect, app: &App, d: &DiffView) {
    let t = &app.theme;
    let area = body.inner(Margin::new(2, 1));
    f.render_widget(Clear, area);
    let title = format!(
        "Diff #{} {}",
        d.target.task_id,
        truncate(&d.target.title, 40)
    );
    let block = frame(app, title, "j/k scroll · esc close");
    let text: Text = match &d.result {
        None => Text::styled("loading…", t.dim()),
        Some(Err(e)) => Text::styled(crate::ansi::strip(e).into_owned(), t.error()),
        Some(Ok(Diff::Absent(why))) => Text::styled(crate::ansi::strip(why).into_owned(), t.dim()),
        Some(Ok(Diff::Text(diff))) => colour_diff(app, diff),
    };
    f.render_widget(
        Paragraph::new(text)
            .wrap(Wrap { trim: false })
            .scroll((d.scroll, 0))
            .block(block),
        area,
    );
}

/// Uses the diff's own ANSI colours when it has them, else colours +/- lines.
fn colour_diff(app: &App, diff: &str) -> Text<'static> {
    let t = &app.theme;
    // File contents in a diff may hold escape sequences of their own: colours only.
    let diff = crate::ansi::sanitize(diff, t.color);
    if diff.contains('\x1b')
        && t.color
        && let Ok(text) = diff.as_bytes().into_text()
    {
        return text;
    }
    let plain = crate::tui::logview::plain(&diff);
    Text::from(
        plain
            .lines()
            .map(|l| {
                let style = if l.starts_with("+++") || l.starts_with("---") {
                    t.title()
                } else if l.starts_with('+') {
                    t.ok()
                } else if l.starts_with('-') {
                    t.stderr()
                } else if l.starts_with("@@") {
                    t.running()
                } else {
                    t.text()
                };
                Line::styled(l.to_string(), style)
            })
            .collect::<Vec<_>>(),
    )
}

fn full_log(f: &mut Frame, body: Rect, app: &App) {
    f.render_widget(Clear, body);
    let title = app
        .detail
        .as_ref()
        .map(|d| format!("#{} {}", d.task.id, truncate(&d.task.title, 50)))
        .unwrap_or_default();
    let hint: Vec<String> = Bar::FullLog
        .rows()
        .into_iter()
        .map(|(keys, hint)| format!("{keys} {}", hint.label))
        .collect();
    let hint = hint.join(" · ");
    let block = frame(app, title, &hint);
    let inner = block.inner(body);
    f.render_widget(block, body);
    let [title, lines] = Layout::vertical([Constraint::Length(1), Constraint::Min(0)]).areas(inner);
    f.render_widget(
        Paragraph::new(Line::from(log::title(app, title.width))),
        title,
    );
    log::render_lines(f, lines, app);
}
