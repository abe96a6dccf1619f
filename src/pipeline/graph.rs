//! A pipeline drawn for a terminal: each status on a line (in column order), the
//! transitions out of it below, with their trigger, guards and hooks. Given the path a task
//! took, the current status is marked and each status and transition says how often the
//! task went there. Pure: the TUI's graph view and `baton pipelines graph --text` both draw
//! these lines.

use super::{Pipeline, Status, StatusKind, Transition, Trigger};

/// How a piece of a line is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    Plain,
    /// Secondary text (defaults, the legend).
    Dim,
    /// The pipeline's name.
    Heading,
    /// The task's current status.
    Here,
    /// A status the task entered, or a transition it took.
    Visited,
    Guard,
    Hook,
}

/// One line of the drawing: pieces of text with their marks.
#[derive(Debug, Clone, PartialEq)]
pub struct GraphLine(pub Vec<(String, Mark)>);

impl GraphLine {
    /// The line as plain text.
    pub fn text(&self) -> String {
        self.0.iter().map(|(t, _)| t.as_str()).collect()
    }

    fn push(&mut self, text: impl Into<String>, mark: Mark) {
        self.0.push((text.into(), mark));
    }
}

/// Where a task has been: its current status and its moves (from, to, trigger), oldest
/// first. Empty for a pipeline drawn on its own.
#[derive(Debug, Clone, Default)]
pub struct TaskPath {
    pub current: Option<String>,
    pub moves: Vec<(Option<String>, String, String)>,
}

impl TaskPath {
    fn visits(&self, status: &str) -> usize {
        self.moves.iter().filter(|(_, to, _)| to == status).count()
    }

    /// Moves along an edge: from `from` (any status for `None`) to `to` by one of `triggers`.
    fn taken(&self, from: Option<&str>, to: &str, triggers: &[String]) -> usize {
        self.moves
            .iter()
            .filter(|(f, t, tr)| {
                t == to
                    && from.is_none_or(|from| f.as_deref() == Some(from))
                    && triggers.iter().any(|x| x == tr)
            })
            .count()
    }
}

/// A transition as drawn.
struct Edge {
    triggers: Vec<String>,
    to: String,
    label: Option<String>,
    guards: Vec<String>,
    hooks: Vec<&'static str>,
    default: bool,
}

impl Edge {
    fn of(t: &Transition) -> Self {
        Self {
            triggers: vec![t.on.to_string()],
            to: t.to.clone(),
            label: t.label.clone(),
            guards: t.guards.iter().map(|g| g.name()).collect(),
            hooks: t.hooks.iter().map(|h| h.name()).collect(),
            default: false,
        }
    }

    fn implied(triggers: &[&str], to: &str) -> Self {
        Self {
            triggers: triggers.iter().map(|t| t.to_string()).collect(),
            to: to.to_string(),
            label: None,
            guards: Vec::new(),
            hooks: Vec::new(),
            default: true,
        }
    }
}

/// The glyph of a status kind.
pub fn glyph(kind: StatusKind) -> &'static str {
    match kind {
        StatusKind::Queue => "○",
        StatusKind::Gate => "◆",
        StatusKind::Step => "■",
        StatusKind::Done => "✓",
        StatusKind::Failed => "✗",
        StatusKind::Cancelled => "⊘",
    }
}

/// The transitions out of `s`: its own, then the defaults it falls back on.
fn edges(p: &Pipeline, s: &Status) -> Vec<Edge> {
    let own: Vec<&Transition> = p.transitions.iter().filter(|t| t.from == s.id).collect();
    let mut out: Vec<Edge> = own.iter().map(|t| Edge::of(t)).collect();
    // A default still applies when every own transition on its trigger is guarded (all of
    // them may be blocked), so it is drawn unless an unguarded one takes its place.
    let has = |tr: Trigger| own.iter().any(|t| t.on == tr && t.guards.is_empty());
    let next = p.next_after(&s.id).map(|n| n.id.as_str());
    let failed = p.first_of_kind(StatusKind::Failed).map(|f| f.id.as_str());
    match s.kind {
        StatusKind::Queue if !has(Trigger::Start) => {
            out.extend(next.map(|n| Edge::implied(&["start"], n)))
        }
        StatusKind::Gate if !has(Trigger::Approve) => {
            out.extend(next.map(|n| Edge::implied(&["approve"], n)))
        }
        StatusKind::Step => {
            if !has(Trigger::Success) {
                out.extend(next.map(|n| Edge::implied(&["success"], n)));
            }
            let fails: Vec<&str> = [(Trigger::Failure, "failure"), (Trigger::Error, "error")]
                .into_iter()
                .filter(|(t, _)| !has(t.clone()))
                .map(|(_, n)| n)
                .collect();
            if !fails.is_empty() {
                out.extend(failed.map(|f| Edge::implied(&fails, f)));
            }
        }
        _ => {}
    }
    out
}

/// Draws `p` with the task's `path` marked.
pub fn draw(p: &Pipeline, path: &TaskPath) -> Vec<GraphLine> {
    let mut lines = Vec::new();
    let mut head = GraphLine(Vec::new());
    head.push(
        one_line(&format!("{} ({})", p.name, p.id), 76),
        Mark::Heading,
    );
    lines.push(head);
    let id_w = p
        .statuses
        .iter()
        .map(|s| width(&s.id))
        .max()
        .unwrap_or(0)
        .min(18);
    // Labels are shown when some status has one of its own.
    let labelled = p.statuses.iter().any(|s| s.label != s.id);
    let label_w = if labelled {
        p.statuses
            .iter()
            .map(|s| width(&s.label))
            .max()
            .unwrap_or(0)
            .min(18)
    } else {
        0
    };
    for s in &p.statuses {
        let here = path.current.as_deref() == Some(s.id.as_str());
        let visits = path.visits(&s.id);
        let mark = if here {
            Mark::Here
        } else if visits > 0 {
            Mark::Visited
        } else {
            Mark::Plain
        };
        let what = match &s.step {
            Some(step) => step.action.describe(),
            None => s.kind.as_str().to_string(),
        };
        let mut line = GraphLine(Vec::new());
        line.push(if here { "▶ " } else { "  " }, mark);
        let label = if labelled {
            format!(" {}", pad(&s.label, label_w))
        } else {
            String::new()
        };
        line.push(
            format!("{} {}{label}", glyph(s.kind), pad(&s.id, id_w)),
            mark,
        );
        line.push(format!(" {}", one_line(&what, 40)), Mark::Dim);
        if visits > 0 {
            line.push(format!("  ×{visits}"), mark);
        }
        lines.push(line);
        let out = edges(p, s);
        lines.extend(edge_lines(&out, Some(&s.id), path));
    }
    let any: Vec<Edge> = p
        .transitions
        .iter()
        .filter(|t| t.from == "*")
        .map(Edge::of)
        .collect();
    if !any.is_empty() {
        let mut line = GraphLine(Vec::new());
        line.push("  * from any status that has not ended", Mark::Dim);
        lines.push(line);
        lines.extend(edge_lines(&any, None, path));
    }
    let cancel = p
        .first_of_kind(StatusKind::Cancelled)
        .or_else(|| p.first_of_kind(StatusKind::Failed));
    if let Some(c) = cancel {
        let mut line = GraphLine(Vec::new());
        line.push(
            format!(
                "  abort ─▶ {} from any status (default)",
                one_line(&c.id, 24)
            ),
            Mark::Dim,
        );
        lines.push(line);
    }
    let mut legend = GraphLine(Vec::new());
    legend.push(
        "  ○ queue ◆ gate ■ step ✓ done ✗ failed ⊘ cancelled · ×n visits ✓n taken",
        Mark::Dim,
    );
    lines.push(legend);
    lines
}

fn edge_lines(edges: &[Edge], from: Option<&str>, path: &TaskPath) -> Vec<GraphLine> {
    let names: Vec<String> = edges.iter().map(|e| e.triggers.join(", ")).collect();
    let w = names.iter().map(|n| width(n)).max().unwrap_or(0).min(24);
    let mut out = Vec::new();
    for (i, (e, name)) in edges.iter().zip(&names).enumerate() {
        let branch = if i + 1 == edges.len() {
            "└─"
        } else {
            "├─"
        };
        let taken = path.taken(from, &e.to, &e.triggers);
        let mark = if taken > 0 {
            Mark::Visited
        } else if e.default {
            Mark::Dim
        } else {
            Mark::Plain
        };
        let mut line = GraphLine(Vec::new());
        let to = one_line(&e.to, 24);
        line.push(format!("    {branch} {} ─▶ {to}", pad(name, w)), mark);
        if let Some(label) = &e.label {
            line.push(format!(" “{}”", one_line(label, 24)), mark);
        }
        if !e.guards.is_empty() {
            line.push(format!(" [{}]", e.guards.join(", ")), Mark::Guard);
        }
        if !e.hooks.is_empty() {
            line.push(format!(" ⚑ {}", e.hooks.join(", ")), Mark::Hook);
        }
        if e.default {
            line.push(" (default)", Mark::Dim);
        }
        if taken > 0 {
            line.push(format!("  ✓{taken}"), Mark::Visited);
        }
        out.push(line);
    }
    out
}

fn width(s: &str) -> usize {
    s.chars().count()
}

/// `s` on one line, cut to `max` characters with an ellipsis.
fn one_line(s: &str, max: usize) -> String {
    let flat: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if width(&flat) <= max {
        return flat;
    }
    let mut cut: String = flat.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// `s` cut or padded to `w` characters.
fn pad(s: &str, w: usize) -> String {
    let s = one_line(s, w);
    format!("{s}{}", " ".repeat(w.saturating_sub(width(&s))))
}

/// The drawing as plain text, one line each.
pub fn text(p: &Pipeline, path: &TaskPath) -> String {
    let mut out = String::new();
    for line in draw(p, path) {
        out.push_str(line.text().trim_end());
        out.push('\n');
    }
    out
}
