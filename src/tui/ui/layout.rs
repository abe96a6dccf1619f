//! Where everything goes, computed once from the terminal size and the focus. Both the
//! views and the reducer (for page sizes) use it, so they agree on what is visible.

use crate::tui::app::{App, Focus};
use crate::tui::modal::Modal;
use ratatui::layout::{Constraint, Layout, Rect};

/// The smallest terminal the board is drawn in.
pub const MIN_W: u16 = 60;
pub const MIN_H: u16 = 16;
/// Rows per card.
pub const CARD_H: u16 = 2;

/// The screen's areas.
#[derive(Debug, Clone, Copy)]
pub struct Areas {
    pub header: Rect,
    /// The row under the header saying this board took the engine over (empty if not).
    pub engine: Rect,
    pub board: Rect,
    pub detail: Rect,
    pub status: Rect,
    /// The whole body (for full-screen layers).
    pub body: Rect,
}

impl Areas {
    /// Splits a screen of `size` for an app with `focus`, and the engine banner if shown.
    pub fn new(size: Rect, focus: Focus, engine_banner: bool) -> Self {
        let [header, engine, body, status] = Layout::vertical([
            Constraint::Length(1),
            Constraint::Length(u16::from(engine_banner)),
            Constraint::Min(0),
            Constraint::Length(1),
        ])
        .areas(size);
        let share = if focus == Focus::Detail { 30 } else { 45 };
        let board_h = (body.height * share / 100).max(2 + 3 * CARD_H);
        let [board, detail] =
            Layout::vertical([Constraint::Length(board_h), Constraint::Min(0)]).areas(body);
        Self {
            header,
            engine,
            board,
            detail,
            status,
            body,
        }
    }

    /// Cards that fit in a column.
    pub fn card_capacity(&self) -> usize {
        // Borders, then the cards.
        (self.board.height.saturating_sub(2) / CARD_H) as usize
    }
}

/// Splits the detail pane's inside into the banner, the left column and the log.
pub fn detail_parts(inner: Rect, banner: bool) -> (Rect, Rect, Rect) {
    let [banner_area, rest] =
        Layout::vertical([Constraint::Length(u16::from(banner)), Constraint::Min(0)]).areas(inner);
    let left_w = if inner.width >= 110 { 36 } else { 28 };
    let [left, log] =
        Layout::horizontal([Constraint::Length(left_w), Constraint::Min(0)]).areas(rest);
    (banner_area, left, log)
}

/// The rows of log text visible now (detail pane or full screen).
pub fn log_height(app: &App) -> usize {
    let size = Rect::new(0, 0, app.size.0, app.size.1);
    let areas = Areas::new(size, app.focus, app.engine_banner());
    if app.modals.iter().any(|m| matches!(m, Modal::FullLog)) {
        // Frame borders and the title row.
        return areas.body.height.saturating_sub(3) as usize;
    }
    let inner = areas.detail.height.saturating_sub(2);
    let banner = u16::from(app.banner());
    // The log's own title row.
    inner.saturating_sub(banner + 1) as usize
}
