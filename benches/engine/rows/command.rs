//! A command from another process: with `baton engine` running and tasks waiting at a gate,
//! `baton approve ID` hands the command to the engine through the database and waits for
//! its answer.
//!
//! Two figures. The CLI's wall time against the floor of a CLI command that opens the same
//! board but needs no engine (`baton list --json`): what a person waits for. And the
//! engine's own delay, read from the `commands` row: `created_at` (the CLI's insert) to
//! `handled_at` (the engine has applied the transition and written its answer) — that is
//! "applied within", free of process start-up and of the CLI's own polling for the answer.
//! The verdict is on the median; the worst case is shown beside it.

use super::median;
use crate::Ctx;
use crate::proc::{self, Background};
use crate::report::{Line, millis, ms, ratio};
use crate::workspace::Ws;
use serde_json::json;
use std::time::Duration;

const MAX_APPLIED_MS: f64 = 20.0;

pub fn run(ctx: &Ctx, out: &mut Vec<Line>) -> Result<(), String> {
    let reps = ctx.n(20, 8);
    let ws = Ws::new(&ctx.bin)?;
    ws.pipeline(&json!({
        "id": "gated",
        "name": "gated",
        "statuses": [
            {"id": "q", "label": "Queue", "kind": "queue"},
            {"id": "gate", "label": "Gate", "kind": "gate"},
            {"id": "done", "label": "Done", "kind": "done"},
            {"id": "failed", "label": "Failed", "kind": "failed"},
            {"id": "cancelled", "label": "Cancelled", "kind": "cancelled"},
        ],
        "transitions": [
            {"from": "q", "to": "gate", "on": "start"},
            {"from": "gate", "to": "done", "on": "approve"},
        ],
    }))?;
    let mut ids = Vec::new();
    for i in 0..reps {
        let id = ws.cli(&[
            "new",
            &format!("gated {i}"),
            "--pipeline",
            "gated",
            "--start",
        ])?;
        ids.push(id.stdout.trim().to_string());
    }
    let mut engine = Background::start(&mut ws.baton(&["engine"]), "`baton engine`")?;
    std::thread::sleep(Duration::from_secs(1));
    engine.alive()?;
    let mut floor = Vec::new();
    let mut approve = Vec::new();
    for id in &ids {
        let list = "`baton list --json`";
        floor.push(
            proc::run(&mut ws.baton(&["list", "--json"]), ctx.left(), list)?
                .ok(list)?
                .elapsed,
        );
        let what = format!("`baton approve {id}`");
        approve.push(
            proc::run(&mut ws.baton(&["approve", id]), ctx.left(), &what)?
                .ok(&what)?
                .elapsed,
        );
    }
    engine.alive()?;
    engine.stop(Duration::from_secs(10));
    let applied = applied_ms(&ws, reps)?;
    let (floor, approve) = (median(floor), median(approve));
    out.push(
        Line::new(
            "approve via the engine (CLI wall)",
            ms(millis(floor)),
            ms(millis(approve)),
        )
        .ratio(ratio(approve, floor)),
    );
    let (mid, worst) = (
        median(applied.clone()),
        applied.iter().copied().fold(0.0, f64::max),
    );
    out.push(
        Line::new(
            "approve: applied within (commands row)",
            "—",
            format!("median {}, max {}", ms(mid), ms(worst)),
        )
        .target(format!("≤ {MAX_APPLIED_MS:.0} ms"), mid <= MAX_APPLIED_MS),
    );
    Ok(())
}

/// created_at → handled_at of each command the engine handled, in milliseconds. Every
/// approve must have gone through the engine: one applied directly (no engine seen) would
/// leave no row and measure nothing.
fn applied_ms(ws: &Ws, reps: usize) -> Result<Vec<f64>, String> {
    let conn = ws.db()?;
    let mut stmt = conn
        .prepare("SELECT created_at, handled_at FROM commands WHERE handled_at IS NOT NULL")
        .map_err(|e| e.to_string())?;
    let rows = stmt
        .query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?)))
        .map_err(|e| e.to_string())?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    if rows.len() != reps {
        return Err(format!(
            "{} of {reps} approvals went through the engine's command queue",
            rows.len()
        ));
    }
    Ok(rows.iter().map(|(c, h)| (h - c) as f64).collect())
}
