//! The task's history and its notable events on one timeline: each move with the guards
//! that blocked it and the hooks it ran (indented under it), errors and warnings in
//! between, all with times.

use super::text::{clock, truncate};
use crate::tui::app::App;
use crate::tui::event::TaskDetail;
use ratatui::text::{Line, Span};
use serde_json::Value;

/// The timeline's rows, oldest first, `w` columns wide.
pub fn lines(app: &App, d: &TaskDetail, w: usize) -> Vec<Line<'static>> {
    let t = &app.theme;
    // (time, order, line): history before events at the same millisecond.
    let mut rows: Vec<(i64, usize, Line<'static>)> = Vec::new();
    for h in &d.history {
        let from = h.from.as_deref().unwrap_or("·");
        // A takeover moves nothing: its reason says who and what became of the changes.
        let what = match (h.trigger.as_str(), &h.reason) {
            ("takeover", Some(reason)) => reason.clone(),
            _ => format!("{from}→{} {}", h.to, h.trigger),
        };
        // Who made the move (a person's name, or the engine, a hook, a trigger): beside it
        // where it fits; else a person's name goes on the line below, so a narrow pane
        // still shows who (the engine's moves say so by their trigger).
        let who = truncate(&h.actor, 16);
        let beside = format!(" · {who}");
        let fits = 9 + Span::raw(what.as_str()).width() + Span::raw(beside.as_str()).width() <= w;
        let mut line = vec![
            Span::styled(format!("{} ", clock(h.at)), t.dim()),
            Span::raw(truncate(&what, w.saturating_sub(9))),
        ];
        if fits {
            line.push(Span::styled(beside, t.dim()));
        }
        rows.push((h.at, 0, Line::from(line)));
        if !fits && crate::workspace::person::is_person(&h.actor) {
            let below = truncate(&format!("  by {who}"), w);
            rows.push((h.at, 0, Line::styled(below, t.dim())));
        }
        for g in guards(&h.guards) {
            if g["passed"].as_bool() == Some(false) {
                let detail = g["detail"].as_str().or(g["guard"].as_str()).unwrap_or("");
                rows.push((
                    h.at,
                    1,
                    Line::styled(truncate(&format!("  ⊘ {detail}"), w), t.attention()),
                ));
            }
        }
        for hook in h.hooks.as_array().into_iter().flatten() {
            let name = hook["hook"].as_str().or(hook.as_str()).unwrap_or("hook");
            let state = hook["state"].as_str().unwrap_or("");
            let style = if state == "failed" {
                t.error()
            } else {
                t.dim()
            };
            let detail = hook["detail"].as_str().unwrap_or("");
            let text = if detail.is_empty() {
                format!("  ↳ {name} {state}")
            } else {
                format!("  ↳ {name} {state}: {detail}")
            };
            rows.push((h.at, 2, Line::styled(truncate(&text, w), style)));
        }
    }
    for e in &d.notices {
        let style = if e.level == "error" {
            t.error()
        } else {
            t.attention()
        };
        rows.push((
            e.at,
            3,
            Line::from(vec![
                Span::styled(format!("{} ", clock(e.at)), t.dim()),
                Span::styled(
                    truncate(&format!("! {}", e.summary), w.saturating_sub(9)),
                    style,
                ),
            ]),
        ));
    }
    rows.sort_by_key(|(at, order, _)| (*at, *order));
    rows.into_iter().map(|(_, _, l)| l).collect()
}

/// A history row's guards as a list (older rows kept blocked ones under `checked`).
fn guards(v: &Value) -> Vec<Value> {
    v.get("checked")
        .unwrap_or(v)
        .as_array()
        .cloned()
        .unwrap_or_default()
}
