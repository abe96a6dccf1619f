//! The answer form: each open question of the agent, and a field for its answer.

use super::popups::{centered, frame};
use super::text::truncate;
use crate::tui::answer_form::AnswerForm;
use crate::tui::app::App;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::Span;
use ratatui::widgets::{Clear, Paragraph};

/// Rows per question: the question, its answer.
const ROWS: u16 = 2;

pub fn render(f: &mut Frame, body: Rect, app: &App, form: &AnswerForm) {
    let t = &app.theme;
    let n = form.questions.len() as u16;
    let area = centered(body, 76, (n * ROWS + 2).min(body.height));
    f.render_widget(Clear, area);
    let title = format!(
        "Answer #{} {}",
        form.target.task_id,
        truncate(&form.target.title, 40)
    );
    let block = frame(app, title, "tab next · ctrl+s send · esc cancel");
    let inner = block.inner(area);
    f.render_widget(block, area);
    let w = inner.width as usize;
    // The focused question stays in view when they do not all fit.
    let fit = (inner.height / ROWS).max(1) as usize;
    let first = form.field.saturating_sub(fit - 1);
    for (row, i) in (first..form.questions.len()).take(fit).enumerate() {
        let y = inner.y + row as u16 * ROWS;
        let q = Rect::new(inner.x, y, inner.width, 1);
        let a = Rect::new(inner.x + 2, y + 1, inner.width.saturating_sub(2), 1);
        let style = if i == form.field { t.key() } else { t.dim() };
        let text = truncate(&format!("{}. {}", i + 1, form.questions[i]), w);
        f.render_widget(Paragraph::new(Span::styled(text, style)), q);
        if a.y < inner.y + inner.height {
            f.render_widget(&form.answers[i], a);
        }
    }
}
