//! Reading a 10,000-task board: `baton list --json` (the whole CLI process) and the TUI's
//! first frame, against a bare rusqlite `SELECT` of the same columns from the same rows.
//!
//! The first frame is measured in this process through the `baton` library, the way
//! `baton` (the TUI) starts: find the workspace, connect the backend (which embeds the
//! engine, as the TUI does when none runs), start the loader thread, load the board, feed
//! it to the app and draw one frame on ratatui's `TestBackend` (120×40). The terminal set-up
//! and the real terminal's write are left out. Then the same again with a million-line
//! log on one of the board's finished steps.

use super::sample;
use crate::report::{Line, millis, ms};
use crate::workspace::Ws;
use crate::{Ctx, board, proc};
use baton::engine::client::{Client, changes};
use baton::tui::app::App;
use baton::tui::app::Mode;
use baton::tui::event::{AppEvent, Effect};
use baton::tui::loader::{LoadReq, Loader};
use baton::tui::theme::Theme;
use baton::workspace::Workspace;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use std::path::Path;
use std::time::{Duration, Instant};

const TASKS: usize = 10_000;
const MAX_MS: f64 = 150.0;
/// Repeats stop once a figure has taken this long in all.
const BUDGET: Duration = Duration::from_secs(5);

pub fn run(ctx: &Ctx, out: &mut Vec<Line>) -> Result<(), String> {
    let ws = Ws::new(&ctx.bin)?;
    board::fill(&ws, TASKS)?;
    let reps = ctx.n(7, 3);
    let floor = sample(reps, BUDGET, || select(&ws))?;
    let list = sample(reps, BUDGET, || list_json(ctx, &ws))?;
    out.push(line("list --json, 10,000 tasks", floor, list));
    let frame = sample(reps, BUDGET, || first_frame(&ws.root, ctx.left()))?;
    out.push(line("TUI first frame, 10,000 tasks", floor, frame));
    // A long log on the board is not the board's business: the first frame must not read it.
    long_log(&ws, LOG_LINES)?;
    let with_log = sample(reps, BUDGET, || first_frame(&ws.root, ctx.left()))?;
    let (f, b) = (millis(frame), millis(with_log));
    out.push(
        Line::new(
            "TUI first frame, 10,000 tasks and a 1M-line log (floor: without it)",
            ms(f),
            ms(b),
        )
        .ratio(b / f.max(0.001))
        .target(format!("≤ {LOG_RATIO}×"), b <= f * LOG_RATIO),
    );
    Ok(())
}

/// Lines of the long log added to the board.
const LOG_LINES: i64 = 1_000_000;
/// How much slower the first frame may get with it (noise on a shared box).
const LOG_RATIO: f64 = 1.25;

/// Gives one finished step run on the board a log of `n` 60-byte lines (and its count),
/// written with SQL as a step printing them would leave it.
fn long_log(ws: &Ws, n: i64) -> Result<(), String> {
    let conn = ws.db()?;
    conn.execute_batch(&format!(
        "BEGIN;
         INSERT INTO log_lines (step_run_id, stream, ts, line)
             WITH RECURSIVE i(k) AS (SELECT 1 UNION ALL SELECT k + 1 FROM i WHERE k < {n})
             SELECT (SELECT MIN(id) FROM step_runs), 'stdout', 0, printf('%059d', k) FROM i;
         UPDATE step_runs SET log_count = log_count + {n} WHERE id = (SELECT MIN(id) FROM step_runs);
         COMMIT;"
    ))
    .map_err(|e| format!("adding a {n}-line log: {e}"))
}

fn line(row: &str, floor: Duration, baton: Duration) -> Line {
    let (f, b) = (millis(floor), millis(baton));
    Line::new(row, ms(f), ms(b))
        .ratio(b / f.max(0.001))
        .target(format!("≤ {MAX_MS:.0} ms"), b <= MAX_MS)
}

/// The floor: open the database, read the columns `list --json` prints, newest first.
fn select(ws: &Ws) -> Result<Duration, String> {
    let start = Instant::now();
    let conn = ws.db()?;
    let mut stmt = conn
        .prepare(
            "SELECT id, title, pipeline_id, status, state, updated_at FROM tasks \
             ORDER BY updated_at DESC",
        )
        .map_err(|e| e.to_string())?;
    let rows = stmt
        .query_map([], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, String>(4)?,
                r.get::<_, i64>(5)?,
            ))
        })
        .map_err(|e| e.to_string())?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    let elapsed = start.elapsed();
    if rows.len() != TASKS {
        return Err(format!("the board has {} tasks, not {TASKS}", rows.len()));
    }
    Ok(elapsed)
}

fn list_json(ctx: &Ctx, ws: &Ws) -> Result<Duration, String> {
    let what = "`baton list --json`";
    let done = proc::run(&mut ws.baton(&["list", "--json"]), ctx.left(), what)?.ok(what)?;
    let rows: Vec<serde_json::Value> = serde_json::from_str(&done.stdout)
        .map_err(|e| format!("{what} printed something else: {e}"))?;
    if rows.len() != TASKS {
        return Err(format!("{what} printed {} tasks, not {TASKS}", rows.len()));
    }
    Ok(done.elapsed)
}

/// From "open the workspace" to the first frame showing the board.
fn first_frame(root: &Path, limit: Duration) -> Result<Duration, String> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start a tokio runtime: {e}"))?;
    rt.block_on(async {
        let start = Instant::now();
        let ws = Workspace::discover(root).map_err(|e| e.to_string())?;
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let (engine, _gone) = Client::connect(&ws, &changes()).await?;
        let loader = Loader::spawn(ws.clone(), tx);
        let mode = if engine.embedded() {
            Mode::Embedded
        } else {
            Mode::Attached
        };
        let mut app = App::new(Theme::new(true), mode, (120, 40));
        for effect in app.take_effects() {
            if effect == Effect::LoadBoard {
                loader.request(LoadReq::Board);
            }
        }
        let shown = loop {
            match tokio::time::timeout(limit, rx.recv()).await {
                Ok(Some(ev @ AppEvent::Board(_))) => break app.update(ev),
                Ok(Some(AppEvent::LoadFailed(e))) => return Err(format!("the TUI's loader: {e}")),
                Ok(Some(ev)) => {
                    app.update(ev);
                }
                Ok(None) => return Err("the TUI's loader stopped".into()),
                Err(_) => return Err("the board did not load in time".into()),
            }
        };
        let mut term = Terminal::new(TestBackend::new(120, 40)).map_err(|e| e.to_string())?;
        term.draw(|f| baton::tui::ui::render(f, &app))
            .map_err(|e| format!("drawing failed: {e}"))?;
        let elapsed = start.elapsed();
        engine.shutdown(Duration::from_secs(10)).await;
        drop(loader);
        if !shown || app.board.cards.len() != TASKS {
            return Err(format!(
                "the first frame showed {} tasks, not {TASKS}",
                app.board.cards.len()
            ));
        }
        Ok(elapsed)
    })
}
