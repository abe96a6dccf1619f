//! The board in PostgreSQL: the per-step and throughput rows again, on a server the bench
//! starts itself ([`crate::pg`]), against the same floors. Each run gets a fresh database.
//!
//! - Per step: `baton run --wait` through N `true` steps, time ÷ N, against a tokio program
//!   spawning `sh -c true` N times (as the `per_step` row); and `baton run` of one step.
//! - One engine: N tasks × 5 `true` steps at `max_parallel` 16 (as the `parallel` row),
//!   against `xargs -P 16`.
//! - Three engines: the same N tasks spread over `baton engine --name a|b|c
//!   --exit-when-idle`, each in a workspace of its own on the one board (as three machines
//!   would be), timed from their spawn until the last one exits. Their `max_parallel` are 6,
//!   5 and 5: sixteen steps at once in all, as the floor's `xargs -P 16`, so the row shows
//!   what sharing the board costs and not what more parallelism buys. A task's steps stay
//!   on the engine that ran its first one (its home engine, docs/team.md).
//!
//! The tasks are created and started before the clock starts, with no engine running.
//! After each measurement an information line says what the server did for each step (or
//! each `baton run`), from its own counters: baton's write transactions and statements,
//! connections opened, WAL flushes (see [`crate::pg::Work`]).

use super::parallel::{Ended, MAX_RATIO, STEPS, rate};
use super::per_step::{self, MAX_RUN_MS};
use crate::pg::{self, Server, Work};
use crate::proc;
use crate::report::{Line, count, millis, ms, ratio};
use crate::workspace::{Ws, pipeline, true_steps};
use crate::{Ctx, floors};
use std::time::{Duration, Instant};

/// `max_parallel` in all, as the floor's `xargs -P`.
const P: usize = 16;
/// The three engines' names and `max_parallel`: sixteen in all.
const ENGINES: [(&str, usize); 3] = [("a", 6), ("b", 5), ("c", 5)];

pub fn run(ctx: &Ctx, out: &mut Vec<Line>) -> Result<(), String> {
    let Some(server) = Server::start(&ctx.bin)? else {
        out.push(Line::new("pg: not measured", "—", pg::MISSING));
        return Ok(());
    };
    // One measurement failing does not hide the others.
    let mut each = |name: &str, got: Result<Vec<Line>, String>| match got {
        Ok(lines) => out.extend(lines),
        Err(e) => out.push(Line::failed(name, &e)),
    };
    let steps = ctx.n(1_000, 100);
    let floor = floors::sequential_spawns(steps)?;
    each("pg: per step", per_step(ctx, &server, steps, floor));
    each("pg: `baton run` of 1 step", run_once(ctx, &server, floor));
    let tasks = ctx.n(1_000, 200);
    let floor = floors::xargs(tasks, STEPS, P, ctx.left())?;
    each("pg: 1 engine", one_engine(ctx, &server, tasks, floor));
    each("pg: 3 engines", three_engines(ctx, &server, tasks, floor));
    Ok(())
}

/// `baton run` through `n` steps, and what the server did for them.
fn per_step(ctx: &Ctx, server: &Server, n: usize, floor: Duration) -> Result<Vec<Line>, String> {
    let (ws, db) = server.workspace(&ctx.bin)?;
    let before = server.work(&db)?;
    let baton = per_step::per_step_in(ctx, &ws, n)?;
    let did = server.work(&db)?.since(&before);
    Ok(vec![
        per_step::step_line(
            &format!("pg: per step, {} statuses", count(n)),
            floor,
            baton,
        ),
        Line::new("pg: per step, server work", "—", did.per(n as f64, "step")),
    ])
}

/// `baton run` of one step, fixed costs included, and what the server did for one.
fn run_once(ctx: &Ctx, server: &Server, floor: Duration) -> Result<Vec<Line>, String> {
    let (ws, db) = server.workspace(&ctx.bin)?;
    let before = server.work(&db)?;
    let once = per_step::run_once_in(ctx, &ws)?;
    let did = server.work(&db)?.since(&before);
    let runs: i64 = server
        .client(&db)?
        .query_one("SELECT count(*) FROM tasks", &[])
        .map_err(|e| format!("counting the tasks: {e}"))?
        .get(0);
    let ms_once = millis(once);
    Ok(vec![
        Line::new("pg: `baton run` of 1 step", ms(millis(floor)), ms(ms_once))
            .ratio(ratio(once, floor))
            .target(format!("≤ {MAX_RUN_MS:.0} ms"), ms_once <= MAX_RUN_MS),
        Line::new(
            "pg: `baton run` of 1 step, server work",
            "—",
            did.per(runs.max(1) as f64, "run"),
        ),
    ])
}

/// `n` tasks × 5 steps on one engine at P = 16, and what the server did for them.
fn one_engine(ctx: &Ctx, server: &Server, n: usize, floor: Duration) -> Result<Vec<Line>, String> {
    let row = format!("pg: {} tasks × {STEPS} steps, P = {P}, 1 engine", count(n));
    run_engines(ctx, server, n, floor, &[(None, P)], row)
}

/// The same over three engines sharing the board, P = 6 + 5 + 5.
fn three_engines(
    ctx: &Ctx,
    server: &Server,
    n: usize,
    floor: Duration,
) -> Result<Vec<Line>, String> {
    let p: Vec<String> = ENGINES.iter().map(|(_, p)| p.to_string()).collect();
    let row = format!(
        "pg: {} tasks × {STEPS} steps, P = {}, 3 engines",
        count(n),
        p.join(" + ")
    );
    let named: Vec<(Option<&str>, usize)> =
        ENGINES.iter().map(|(name, p)| (Some(*name), *p)).collect();
    run_engines(ctx, server, n, floor, &named, row)
}

/// Makes and starts `n` tasks with no engine running, then times `baton engine
/// --exit-when-idle` once per entry of `engines` (its `--name`, if any, and its
/// `max_parallel`), each in a workspace of its own on one fresh board, from their spawn
/// until the last one exits.
fn run_engines(
    ctx: &Ctx,
    server: &Server,
    n: usize,
    floor: Duration,
    engines: &[(Option<&str>, usize)],
    row: String,
) -> Result<Vec<Line>, String> {
    let (first, db) = server.workspace(&ctx.bin)?;
    let mut wss = vec![first];
    for _ in 1..engines.len() {
        wss.push(Ws::with_env(&ctx.bin, server.env(&db))?);
    }
    for (ws, (_, p)) in wss.iter().zip(engines) {
        ws.config(&format!("max_parallel = {p}\n"))?;
        ws.pipeline(&pipeline("five", &true_steps(STEPS)))?;
    }
    for i in 0..n {
        wss[0].cli(&["new", &format!("task {i}"), "--pipeline", "five", "--start"])?;
    }
    let before = server.work(&db)?;
    let start = Instant::now();
    let ran: Vec<Result<proc::Done, String>> = std::thread::scope(|s| {
        let runs: Vec<_> = wss
            .iter()
            .zip(engines)
            .map(|(ws, (name, _))| {
                s.spawn(move || {
                    let mut args = vec!["engine"];
                    if let Some(name) = name {
                        args.extend(["--name", name]);
                    }
                    args.push("--exit-when-idle");
                    let what = format!("`baton {}`", args.join(" "));
                    proc::run(&mut ws.baton(&args), ctx.left(), &what)?.ok(&what)
                })
            })
            .collect();
        runs.into_iter()
            .map(|r| r.join().unwrap_or_else(|_| Err("a thread panicked".into())))
            .collect()
    });
    let baton = start.elapsed();
    for r in ran {
        r?;
    }
    let did = server.work(&db)?.since(&before);
    let ended = Ended::on(&wss[0])?;
    let shares = if engines.len() > 1 {
        steps_by_engine(server, &db)?
    } else {
        String::new()
    };
    let r = ratio(baton, floor);
    let text = format!(
        "{}, {} not done{}{shares}",
        rate(n, baton),
        ended.not_done,
        ended.note()
    );
    let work = format!("{}, server work", row);
    Ok(vec![
        Line::new(row, rate(n, floor), text).ratio(r).target(
            format!("≤ {MAX_RATIO}×, all done"),
            r <= MAX_RATIO && ended.not_done == 0,
        ),
        Line::new(work, "—", did.per((n * STEPS) as f64, "step")),
    ])
}

/// " (a 340, b 330, c 330 steps)": which engine ran how many steps.
fn steps_by_engine(server: &Server, db: &str) -> Result<String, String> {
    let rows = server
        .client(db)?
        .query(
            "SELECT coalesce(engine, '?'), count(*) FROM step_runs GROUP BY 1 ORDER BY 1",
            &[],
        )
        .map_err(|e| format!("counting the steps by engine: {e}"))?;
    let each: Vec<String> = rows
        .iter()
        .map(|r| format!("{} {}", r.get::<_, String>(0), r.get::<_, i64>(1)))
        .collect();
    Ok(format!(" ({} steps)", each.join(", ")))
}

impl Work {
    /// What was done between `before` and this.
    fn since(&self, before: &Work) -> Work {
        let diff = |a: Option<u64>, b: Option<u64>| Some(a?.saturating_sub(b?));
        Work {
            writes: diff(self.writes, before.writes),
            statements: diff(self.statements, before.statements),
            sessions: diff(self.sessions, before.sessions),
            flushes: diff(self.flushes, before.flushes),
        }
    }

    /// "2.9 write transactions, 45.1 statements, 0.06 connections, 2.9 WAL flushes per
    /// step": what the server could count.
    fn per(&self, n: f64, what: &str) -> String {
        let parts: Vec<String> = [
            (self.writes, "write transactions", 1),
            (self.statements, "statements", 1),
            (self.sessions, "connections", 2),
            (self.flushes, "WAL flushes", 1),
        ]
        .into_iter()
        .filter_map(|(v, name, digits)| Some(format!("{:.digits$} {name}", v? as f64 / n)))
        .collect();
        if parts.is_empty() {
            return "(PostgreSQL counted nothing)".into();
        }
        format!("{} per {what}", parts.join(", "))
    }
}
