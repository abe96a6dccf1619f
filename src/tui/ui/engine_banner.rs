//! The row under the header once this board has taken the engine over from one that
//! stopped: it runs the engine now, and quitting interrupts what runs.

use super::text::truncate;
use crate::tui::app::App;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

pub fn render(f: &mut Frame, area: Rect, app: &App) {
    let t = &app.theme;
    let width = area.width as usize;
    let text = [0, 1, 2]
        .map(|level| banner_text(app.running_count(), level))
        .into_iter()
        .find(|s| Span::raw(s.as_str()).width() <= width)
        .unwrap_or_else(|| truncate(&banner_text(app.running_count(), 2), width));
    f.render_widget(Paragraph::new(Line::from(text)).style(t.banner()), area);
}

/// What the banner says with `running` steps running; `level` 0 is the longest form, 2
/// the shortest.
fn banner_text(running: usize, level: u8) -> String {
    let quit = match (running, level) {
        (0, _) => "quitting stops it (nothing runs now)".to_string(),
        (1, 0 | 1) => "quitting interrupts 1 step (R resumes it)".to_string(),
        (1, _) => "quitting interrupts 1 step".to_string(),
        (n, 0 | 1) => format!("quitting interrupts {n} steps (R resumes them)"),
        (n, _) => format!("quitting interrupts {n} steps"),
    };
    match level {
        0 => format!(
            " ⚠ the engine this board followed stopped; this board now runs the engine: {quit} · esc hides this"
        ),
        _ => format!(" ⚠ this board now runs the engine; {quit} · esc hides"),
    }
}
