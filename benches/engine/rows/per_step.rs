//! Per-step overhead: one task through a pipeline of N `true` steps (`baton run --wait`, so
//! engine start-up is in the figure, spread over N), against a tokio program spawning
//! `sh -c true` N times. Then the same at a fixed length with 10 and 10,000 tasks on the
//! board. The cost of a step should not grow with either. Floors are per `sh -c true`.

use crate::report::{Line, count, millis, ms, ratio};
use crate::workspace::{Ws, pipeline, true_steps};
use crate::{Ctx, board, floors, proc};
use std::time::Duration;

/// How much slower a step may get from the short case to the long one.
const FLAT: f64 = 1.5;
/// A step against a bare spawn of the same command.
const MAX_RATIO: f64 = 1.5;
/// `baton run` of one step, all its fixed costs included, at any board size.
pub(super) const MAX_RUN_MS: f64 = 10.0;

pub fn run(ctx: &Ctx, out: &mut Vec<Line>) -> Result<(), String> {
    let (short, long) = (ctx.n(200, 100), ctx.n(2_000, 1_000));
    let mut at = Vec::new();
    for n in [short, long] {
        let floor = floors::sequential_spawns(n)?;
        let baton = per_step(ctx, n, 0)?;
        out.push(step_line(
            &format!("per step, {} statuses", count(n)),
            floor,
            baton,
        ));
        at.push(baton);
    }
    out.push(flat_line(
        &format!("flat: {short} → {} statuses", count(long)),
        at[0],
        at[1],
    ));

    // Start-up is inside the per-step figure (spread over the steps); a one-step run
    // shows how much of it is start-up.
    let (few, many) = (10, 10_000);
    let floor = floors::sequential_spawns(short)?;
    let mut at = Vec::new();
    for tasks in [few, many] {
        let baton = per_step(ctx, short, tasks)?;
        let row = format!(
            "per step, {short} statuses, {} tasks on the board",
            count(tasks)
        );
        out.push(step_line(&row, floor, baton));
        let once = run_once(ctx, tasks)?;
        let row = format!("`baton run` of 1 step, {} tasks on the board", count(tasks));
        let ms_once = millis(once);
        out.push(
            Line::new(row, ms(millis(floor)), ms(ms_once))
                .ratio(ratio(once, floor))
                .target(format!("≤ {MAX_RUN_MS:.0} ms"), ms_once <= MAX_RUN_MS),
        );
        at.push(baton);
    }
    out.push(flat_line(
        &format!("flat: {few} → {} tasks", count(many)),
        at[0],
        at[1],
    ));
    Ok(())
}

/// `baton run` of one step on a board of `tasks` other tasks, the median of a few runs
/// (one run of a few milliseconds is mostly noise on a shared box).
fn run_once(ctx: &Ctx, tasks: usize) -> Result<Duration, String> {
    let ws = Ws::new(&ctx.bin)?;
    if tasks > 0 {
        board::fill(&ws, tasks)?;
    }
    run_once_in(ctx, &ws)
}

/// `baton run` of one step in `ws`, the median of a few runs.
pub(super) fn run_once_in(ctx: &Ctx, ws: &Ws) -> Result<Duration, String> {
    ws.pipeline(&pipeline("steps", &true_steps(1)))?;
    let what = "`baton run` of one step";
    super::sample(ctx.n(9, 5), Duration::from_secs(10), || {
        let done = proc::run(
            &mut ws.baton(&["run", "steps", "--title", "x", "--wait"]),
            ctx.left(),
            what,
        )?
        .ok(what)?;
        if !done.stdout.contains("(done)") {
            return Err(format!("{what} ended {:?}, not done", done.stdout.trim()));
        }
        Ok(done.elapsed)
    })
}

/// `baton run` through `n` steps on a board of `tasks` other tasks; the time per step.
fn per_step(ctx: &Ctx, n: usize, tasks: usize) -> Result<Duration, String> {
    let ws = Ws::new(&ctx.bin)?;
    if tasks > 0 {
        board::fill(&ws, tasks)?;
    }
    per_step_in(ctx, &ws, n)
}

/// `baton run` through `n` steps in `ws`; the time per step.
pub(super) fn per_step_in(ctx: &Ctx, ws: &Ws, n: usize) -> Result<Duration, String> {
    ws.pipeline(&pipeline("steps", &true_steps(n)))?;
    let what = format!("`baton run` through {n} steps");
    let done = proc::run(
        &mut ws.baton(&["run", "steps", "--title", "x", "--wait"]),
        ctx.left(),
        &what,
    )?
    .ok(&what)?;
    if !done.stdout.contains("(done)") {
        return Err(format!("{what} ended {:?}, not done", done.stdout.trim()));
    }
    Ok(done.elapsed / n as u32)
}

pub(super) fn step_line(row: &str, floor: Duration, baton: Duration) -> Line {
    let r = ratio(baton, floor);
    Line::new(row, ms(millis(floor)), ms(millis(baton)))
        .ratio(r)
        .target(format!("≤ {MAX_RATIO}×"), r <= MAX_RATIO)
}

fn flat_line(row: &str, before: Duration, after: Duration) -> Line {
    let r = ratio(after, before);
    Line::new(row, ms(millis(before)), ms(millis(after)))
        .ratio(r)
        .target(format!("≤ {FLAT}×"), r <= FLAT)
}
