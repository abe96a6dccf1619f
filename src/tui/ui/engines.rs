//! The engines on the board, as the header names them, and why a queued card waits for
//! one: `engines: devbox ▸2 · gpu-1 ▸1`, `waits for an engine labelled gpu`.

use super::text::one_line;
use crate::store::{EngineView, TaskCard, TaskState};
use crate::tui::app::App;

/// The engines worth naming: those running now, and any that still has steps running.
fn shown(app: &App) -> Vec<&EngineView> {
    app.engines
        .iter()
        .filter(|e| e.live || e.running > 0)
        .collect()
}

/// The header's engines, at a `level` of detail: 0 names each with its running steps,
/// 1 counts them (`2 engines ▸3`). None when no engine is known (the board then says only
/// where its engine runs).
pub fn header_text(app: &App, level: u8) -> Option<String> {
    let shown = shown(app);
    if shown.is_empty() {
        return None;
    }
    let word = if shown.len() == 1 {
        "engine"
    } else {
        "engines"
    };
    let steps = |n: i64| {
        if n > 0 {
            format!(" ▸{n}")
        } else {
            String::new()
        }
    };
    Some(if level == 0 {
        let names: Vec<String> = shown
            .iter()
            .map(|e| format!("{}{}", one_line(&e.row.name), steps(e.running)))
            .collect();
        format!("{word}: {}", names.join(" · "))
    } else {
        let total = shown.iter().map(|e| e.running).sum();
        format!("{} {word}{}", shown.len(), steps(total))
    })
}

/// Why a queued card's step has not started: no running engine has every label it
/// requires. The sentence, and the labels (`gpu,ssd`) for a card's badge.
pub fn label_wait(app: &App, card: &TaskCard) -> Option<(String, String)> {
    if card.state != TaskState::Queued {
        return None;
    }
    let requires = &app
        .board
        .pipelines
        .iter()
        .find(|p| p.id == card.pipeline_id)?
        .status(&card.status)?
        .step
        .as_ref()?
        .requires;
    let why = crate::engine::engines::label_wait(requires, &app.engines)?;
    Some((one_line(&why), one_line(&requires.join(","))))
}
