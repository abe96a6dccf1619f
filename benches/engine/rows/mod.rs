//! The rows of the table, each a function measuring baton and its floor in one run.

mod board;
mod command;
mod idle;
mod ingest;
mod parallel;
mod per_step;
mod pg;

use crate::Ctx;
use crate::report::Line;

/// One row: its name on the command line, what it measures, how to run it and how long it
/// may take (full and quick mode) before it is stopped and reported as failed.
pub struct Row {
    pub name: &'static str,
    pub title: &'static str,
    pub run: fn(&Ctx, &mut Vec<Line>) -> Result<(), String>,
    pub full_s: u64,
    pub quick_s: u64,
}

/// Every row, in the order they run.
pub const ROWS: &[Row] = &[
    Row {
        name: "per_step",
        title: "per-step overhead against pipeline length and board size",
        run: per_step::run,
        full_s: 900,
        quick_s: 240,
    },
    Row {
        name: "parallel",
        title: "N tasks × 5 steps at max_parallel 16 against xargs -P 16",
        run: parallel::plain,
        full_s: 900,
        quick_s: 240,
    },
    Row {
        name: "git",
        title: "the same in a git repository, a worktree per task, at P = 16 and 32",
        run: parallel::git,
        full_s: 1800,
        quick_s: 300,
    },
    Row {
        name: "ingest",
        title: "one step printing 1M lines of 60 bytes",
        run: ingest::run,
        full_s: 600,
        quick_s: 240,
    },
    Row {
        name: "board",
        title: "list --json and the TUI's first frame at 10,000 tasks",
        run: board::run,
        full_s: 300,
        quick_s: 180,
    },
    Row {
        name: "idle",
        title: "an idle engine on a 10,000-task board",
        run: idle::run,
        full_s: 180,
        quick_s: 120,
    },
    Row {
        name: "command",
        title: "a command from another process reaching a running engine",
        run: command::run,
        full_s: 180,
        quick_s: 120,
    },
    Row {
        name: "pg",
        title: "per step and N tasks × 5 steps on one engine and on three, the board in PostgreSQL",
        run: pg::run,
        full_s: 1800,
        quick_s: 420,
    },
];

/// The middle value (the upper middle for an even count).
pub fn median<T: PartialOrd + Copy>(mut v: Vec<T>) -> T {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    v[v.len() / 2]
}

/// Runs `f` up to `reps` times, fewer once `budget` is spent (a figure of seconds needs no
/// repeating); returns the median of the runs made.
pub fn sample<T: PartialOrd + Copy>(
    reps: usize,
    budget: std::time::Duration,
    mut f: impl FnMut() -> Result<T, String>,
) -> Result<T, String> {
    let start = std::time::Instant::now();
    let mut got = Vec::new();
    while got.len() < reps.max(1) && (got.is_empty() || start.elapsed() < budget) {
        got.push(f()?);
    }
    Ok(median(got))
}
