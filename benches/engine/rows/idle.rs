//! An idle engine: `baton engine` on a 10,000-task board where nothing runs. After a
//! warm-up, CPU time (all threads, nanoseconds from `schedstat`) and context switches (all
//! threads) are read at both ends of a window. Idle should mean idle.

use crate::proc::{self, Background};
use crate::report::{Line, count};
use crate::workspace::Ws;
use crate::{Ctx, board};
use std::time::{Duration, Instant};

const TASKS: usize = 10_000;
const MAX_CPU_PCT: f64 = 0.05;
const MAX_WAKEUPS: f64 = 1.0;
const WARM_UP: Duration = Duration::from_secs(2);

pub fn run(ctx: &Ctx, out: &mut Vec<Line>) -> Result<(), String> {
    let window = Duration::from_secs(ctx.n(10, 5) as u64);
    let ws = Ws::new(&ctx.bin)?;
    board::fill(&ws, TASKS)?;
    let mut engine = Background::start(&mut ws.baton(&["engine"]), "`baton engine`")?;
    std::thread::sleep(WARM_UP);
    engine.alive()?;
    let pid = engine.pid();
    let (cpu0, sw0, t0) = (proc::cpu_ns(pid)?, proc::switches(pid)?, Instant::now());
    std::thread::sleep(window);
    let (cpu1, sw1, t1) = (proc::cpu_ns(pid)?, proc::switches(pid)?, Instant::now());
    engine.alive()?;
    engine.stop(Duration::from_secs(10));
    let secs = (t1 - t0).as_secs_f64();
    let pct = cpu1.saturating_sub(cpu0) as f64 / (secs * 1e9) * 100.0;
    let wakeups = sw1.saturating_sub(sw0) as f64 / secs;
    let row = format!("idle engine, {} tasks, {secs:.0} s", count(TASKS));
    out.push(
        Line::new(format!("{row}: CPU"), "0", format!("{pct:.3}% of a core"))
            .target(format!("≤ {MAX_CPU_PCT}%"), pct <= MAX_CPU_PCT),
    );
    out.push(
        Line::new(format!("{row}: wake-ups"), "0", format!("{wakeups:.1}/s"))
            .target(format!("≤ {MAX_WAKEUPS:.0}/s"), wakeups <= MAX_WAKEUPS),
    );
    Ok(())
}
