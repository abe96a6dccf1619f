//! The conversation section of the detail pane: the last messages said to the task's
//! agent, when, and where each went; and the questions its agent waits to have answered.

use super::text::{clock, truncate};
use crate::tui::app::App;
use crate::tui::event::TaskDetail;
use ratatui::text::{Line, Span};

/// Messages shown at most (the newest); `show` lists them all.
const SHOWN: usize = 3;

/// The section's rows, or none when nothing was said and nothing is asked.
pub fn lines(app: &App, d: &TaskDetail, w: usize) -> Vec<Line<'static>> {
    let t = &app.theme;
    let mut out = Vec::new();
    if d.messages.is_empty() && d.questions.is_empty() {
        return out;
    }
    out.push(Line::raw(""));
    let mut title = vec![Span::styled("Conversation", t.title())];
    let older = d.messages.len().saturating_sub(SHOWN);
    if older > 0 {
        title.push(Span::styled(format!(" +{older} earlier"), t.dim()));
    }
    out.push(Line::from(title));
    for m in d.messages.iter().skip(older) {
        let went = match (m.state.as_str(), m.delivered_to) {
            ("delivered", Some(id)) => {
                let step = d
                    .steps
                    .iter()
                    .find(|s| s.id == id)
                    .map(|s| format!("{}#{}", s.status, s.attempt))
                    .unwrap_or_else(|| "a step".into());
                let via = match m.via.as_str() {
                    "new attempt" => "new",
                    "next step" => "next",
                    other => other,
                };
                format!("→ {step} ({via})")
            }
            _ => "queued".to_string(),
        };
        // Compact: the minute, where it went, then as much of the text as fits.
        let at = clock(m.at);
        let head = format!("{} {went}: ", at.get(..5).unwrap_or(&at));
        let room = w.saturating_sub(head.chars().count());
        out.push(Line::from(vec![
            Span::styled(truncate(&head, w), t.dim()),
            Span::raw(truncate(&m.text, room)),
        ]));
    }
    if !d.questions.is_empty() {
        out.push(Line::styled(
            truncate(
                &format!("{} open question(s) — I answers them", d.questions.len()),
                w,
            ),
            t.attention(),
        ));
    }
    out
}
