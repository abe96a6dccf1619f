//! Throughput: N tasks × 5 `true` steps at `max_parallel` P, against `xargs -P P` running the
//! same 5N commands — in a plain folder, then in a git repository where each task also gets
//! a worktree on its own branch, removed when it is done.
//!
//! The tasks are created and started with `baton new --start` before the clock starts,
//! while no engine runs (the CLI then applies the start itself and queues the first step);
//! the figure is `baton engine --exit-when-idle` alone, from spawn to exit, so it counts
//! engine start-up and shutdown but not task creation — the floor creates nothing either.

use crate::report::{Line, count, ratio};
use crate::workspace::{Ws, pipeline, true_steps};
use crate::{Ctx, floors, proc};
use std::time::Duration;

pub(super) const STEPS: usize = 5;
/// Throughput against `xargs -P` running the same commands.
pub(super) const MAX_RATIO: f64 = 1.5;

/// Row 2: a plain (non-git) workspace at P = 16.
pub fn plain(ctx: &Ctx, out: &mut Vec<Line>) -> Result<(), String> {
    let (n, p) = (ctx.n(1_000, 200), 16);
    let floor = floors::xargs(n, STEPS, p, ctx.left())?;
    let ws = Ws::new(&ctx.bin)?;
    let (baton, ended) = engine_run(ctx, &ws, n, p)?;
    let row = format!("{} tasks × {STEPS} steps, P = {p}", count(n));
    let text = format!("{}{}", rate(n, baton), ended.note());
    let r = ratio(baton, floor);
    out.push(
        Line::new(row, rate(n, floor), text)
            .ratio(r)
            .target(format!("≤ {MAX_RATIO}×"), r <= MAX_RATIO),
    );
    Ok(())
}

/// Row 3: in a git repository, at P = 16 and 32; no task may fail.
pub fn git(ctx: &Ctx, out: &mut Vec<Line>) -> Result<(), String> {
    let n = ctx.n(1_000, 100);
    for p in [16, 32] {
        let (floor, floor_failed) = git_floor(ctx, n, p)?;
        let ws = Ws::git(&ctx.bin)?;
        let (baton, ended) = engine_run(ctx, &ws, n, p)?;
        let row = format!("git: {} tasks × {STEPS} steps, P = {p}", count(n));
        let floor_text = format!("{}, {floor_failed} failed", rate(n, floor));
        let text = format!(
            "{}, {} not done{}",
            rate(n, baton),
            ended.not_done,
            ended.note()
        );
        out.push(
            Line::new(row, floor_text, text)
                .ratio(ratio(baton, floor))
                .target("0 failed", ended.not_done == 0),
        );
    }
    Ok(())
}

/// How the tasks ended: those not done, and their states counted.
pub(super) struct Ended {
    pub not_done: usize,
    states: Vec<(String, usize)>,
}

impl Ended {
    /// How the tasks on `ws`'s board ended.
    pub fn on(ws: &Ws) -> Result<Self, String> {
        let states: Vec<_> = ws
            .states()?
            .into_iter()
            .filter(|(s, _)| s != "done")
            .collect();
        let not_done = states.iter().map(|(_, c)| c).sum();
        Ok(Self { not_done, states })
    }

    /// ", 3 failed, 1 interrupted" — empty when every task is done.
    pub fn note(&self) -> String {
        self.states
            .iter()
            .map(|(state, count)| format!(", {count} {state}"))
            .collect()
    }
}

/// Creates and starts `n` tasks with no engine running, then times
/// `baton engine --exit-when-idle`.
fn engine_run(ctx: &Ctx, ws: &Ws, n: usize, p: usize) -> Result<(Duration, Ended), String> {
    ws.config(&format!("max_parallel = {p}\n"))?;
    ws.pipeline(&pipeline("five", &true_steps(STEPS)))?;
    for i in 0..n {
        ws.cli(&["new", &format!("task {i}"), "--pipeline", "five", "--start"])?;
    }
    let what = "`baton engine --exit-when-idle`";
    let done = proc::run(
        &mut ws.baton(&["engine", "--exit-when-idle"]),
        ctx.left(),
        what,
    )?
    .ok(what)?;
    Ok((done.elapsed, Ended::on(ws)?))
}

/// The same work as a shell script: per task `git worktree add -b`, five `sh -c true` in
/// it, `git worktree remove`, at `p` at once. Git's worktree commands are not safe to run
/// in parallel on one repository (one may read another's half-made `.git/worktrees/*`
/// entry and fail), so, like a correct tool must, the script serializes them with `flock`
/// and runs only the steps in parallel. Returns the time and the tasks that failed.
fn git_floor(ctx: &Ctx, n: usize, p: usize) -> Result<(Duration, usize), String> {
    let ws = Ws::git(&ctx.bin)?;
    let task = "flock .git/bench.lock git worktree add -q -b floor/$0 ../floor/$0 main && \
                (cd ../floor/$0 && sh -c true && sh -c true && sh -c true && sh -c true && sh -c true) && \
                flock .git/bench.lock git worktree remove ../floor/$0 && echo ok";
    let script = format!("seq {n} | xargs -P {p} -n1 sh -c '{task}' 2>/dev/null; true");
    let done = floors::shell(&script, &ws.root, ctx.left(), "the git floor")?;
    let ok = done.stdout.lines().filter(|l| *l == "ok").count();
    Ok((done.elapsed, n - ok))
}

pub(super) fn rate(tasks: usize, d: Duration) -> String {
    format!("{:.0} steps/s", (tasks * STEPS) as f64 / d.as_secs_f64())
}
