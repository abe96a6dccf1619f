//! Log ingest: one step printing a million 60-byte lines, through `baton run --wait` (every
//! line stored in SQLite), against the raw floor of the same work: the command's lines read
//! and sent through a channel to batched SQLite inserts. The same command piped into
//! `cat > /dev/null` is shown too, for scale. Peak RSS comes from a helper process that
//! reports what it ran.

use crate::report::{Line, millis, ms, ratio};
use crate::workspace::{Ws, pipeline};
use crate::{Ctx, proc};
use serde_json::json;

const MAX_RATIO: f64 = 1.1;
const MAX_RSS_MB: f64 = 64.0;

pub fn run(ctx: &Ctx, out: &mut Vec<Line>) -> Result<(), String> {
    let n = ctx.n(1_000_000, 1_000_000);
    // 59 digits and a newline: 60 bytes a line.
    let cmd = format!("awk 'BEGIN {{ for (i = 0; i < {n}; i++) printf \"%059d\\n\", i }}'");
    let ws = Ws::new(&ctx.bin)?;
    let floor_cmd = format!("{cmd} | cat > /dev/null");
    // The floor is cheap and noisy on a shared box: the fastest of three.
    let mut floors = (0..3)
        .map(|_| proc::peak_rss(&["sh", "-c", &floor_cmd], &ws.root, ctx.left(), "the floor"))
        .collect::<Result<Vec<_>, _>>()?;
    floors.sort_by_key(|(d, _)| d.elapsed);
    let (pipe, floor_kb) = floors.swap_remove(0);
    let floor_db = ws.root.join("floor.db");
    let floor = crate::floors::sqlite_ingest(&cmd, &floor_db)?;
    ws.pipeline(&pipeline("ingest", &[json!({"run": cmd})]))?;
    let bin = ctx.bin.to_string_lossy();
    let what = "`baton run` of the 1M-line step";
    let (baton, kb) = proc::peak_rss(
        &[&bin, "run", "ingest", "--title", "x", "--wait"],
        &ws.root,
        ctx.left(),
        what,
    )?;
    let stored: i64 = ws
        .db()?
        .query_row("SELECT COUNT(*) FROM log_lines", [], |r| r.get(0))
        .map_err(|e| format!("counting the stored lines: {e}"))?;
    if stored < n as i64 {
        return Err(format!("{what} stored {stored} log lines of {n}"));
    }
    let r = ratio(baton.elapsed, floor);
    let lines = if n.is_multiple_of(1_000_000) {
        format!("{}M", n / 1_000_000)
    } else {
        n.to_string()
    };
    out.push(
        Line::new(
            format!("ingest {lines} lines × 60 B (floor: lines → channel → SQLite)"),
            ms(millis(floor)),
            ms(millis(baton.elapsed)),
        )
        .ratio(r)
        .target(format!("≤ {MAX_RATIO}×"), r <= MAX_RATIO),
    );
    out.push(
        Line::new(
            format!("ingest {lines} lines, for scale: piped to /dev/null"),
            ms(millis(pipe.elapsed)),
            ms(millis(baton.elapsed)),
        )
        .ratio(ratio(baton.elapsed, pipe.elapsed)),
    );
    let (floor_mb, mb) = (floor_kb as f64 / 1024.0, kb as f64 / 1024.0);
    out.push(
        Line::new(
            "ingest: peak RSS",
            format!("{floor_mb:.1} MB"),
            format!("{mb:.1} MB"),
        )
        .ratio(mb / floor_mb.max(0.001))
        .target(format!("≤ {MAX_RSS_MB:.0} MB"), mb <= MAX_RSS_MB),
    );
    Ok(())
}
