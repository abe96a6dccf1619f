//! Drawing: a pure function of the app state. Nothing here changes state or does I/O.

mod answer;
mod board;
mod conversation;
mod detail;
mod engine_banner;
mod engines;
mod graph;
mod header;
pub mod layout;
mod log;
mod playground;
mod popups;
mod task_menus;
mod text;
mod timeline;

use super::app::App;
use super::modal::{Confirm, Modal};
use layout::{Areas, MIN_H, MIN_W};
use ratatui::Frame;
use ratatui::widgets::{Paragraph, Wrap};

/// Draws the whole screen.
pub fn render(f: &mut Frame, app: &App) {
    let area = f.area();
    if area.width < MIN_W || area.height < MIN_H {
        // Keys act blind here, so only quitting works; its question must show.
        let msg = match app.modals.last() {
            Some(Modal::Confirm(Confirm::Quit { running })) => format!(
                "Quit? {running} running step(s) will be interrupted (R resumes them). y yes · n no"
            ),
            _ => format!("terminal too small — need {MIN_W}×{MIN_H} (q quits)"),
        };
        f.render_widget(Paragraph::new(msg).wrap(Wrap { trim: true }), area);
        return;
    }
    let areas = Areas::new(area, app.focus, app.engine_banner());
    header::render_header(f, areas.header, app);
    if app.engine_banner() {
        engine_banner::render(f, areas.engine, app);
    }
    board::render(f, areas.board, app);
    detail::render(f, areas.detail, app);
    header::render_status(f, areas.status, app);
    for modal in &app.modals {
        popups::render(f, &areas, app, modal);
    }
}
