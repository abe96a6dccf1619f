//! `baton engine`: the headless engine, and what it says while it runs.

use super::console::Console;
use super::{Failure, Outcome, exit};
use crate::engine::RunOptions;
use crate::engine::engines::Identity;
use crate::engine::progress::{BATCH, Progress};
use crate::engine::wake::Owner;
use crate::workspace::Workspace;

/// The runtime of a headless engine (`baton engine`, `run --wait`): one thread for the
/// engine's loop and every step's tasks, as an engine spends its time waiting, while the
/// store, the warden and blocking work have threads of their own. On several workers each
/// step's end and start crossed from thread to thread a few times over.
pub(super) fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::new(format!("cannot start the async runtime: {e}")))
}

/// Sends tracing to `.baton/logs/engine.log` (never to the screen).
pub fn init_tracing(ws: &Workspace) -> Option<tracing_appender::non_blocking::WorkerGuard> {
    crate::workspace::logging::init(ws, "engine.log")
}

/// `baton engine [--exit-when-idle] [--quiet] [--name NAME] [--labels A,B]`.
pub fn run(
    ws: &Workspace,
    exit_when_idle: bool,
    quiet: bool,
    (name, labels): (Option<&str>, Option<&str>),
) -> Outcome {
    let ident = Identity::with_flags(&ws.config()?, name, labels).map_err(Failure::new)?;
    let _guard = init_tracing(ws);
    let rt = runtime()?;
    rt.block_on(async {
        let Some((mut engine, from)) = super::engine_takeover::start(ws, ident).await? else {
            return Ok(exit::OK);
        };
        // A name another engine holds (a shared board) is refused before this engine says
        // it runs.
        engine.take_name_early().await?;
        let r = &engine.recovered;
        // Quiet, only problems are printed: not that it runs, nor whose engine it took.
        if !quiet {
            say_started(ws, engine.identity(), from);
        }
        say_recovered(r);
        for e in &engine.trigger_errors {
            eprintln!(
                "{} — this trigger is skipped; `baton pipelines validate` checks the files",
                crate::ansi::strip(&e.to_string())
            );
        }
        tracing::info!(?r, "engine started");
        super::signals::stop_on_signals(&engine, || {});
        let mut events = engine.handle().subscribe();
        let console = Console::start();
        // Quiet, only the moves a failure made are printed, on stderr.
        let moves = Some(std::sync::Arc::new(tokio::sync::Mutex::new(
            MovePrinter::start(engine.progress(), quiet, console.clone()).await,
        )));
        let printer = moves.clone();
        let problems = std::sync::Arc::new(tokio::sync::Mutex::new(
            ProblemPrinter::start(engine.progress(), console.clone()).await,
        ));
        let lines = console.clone();
        let problem_printer = problems.clone();
        tokio::spawn(async move {
            use tokio::sync::broadcast::error::{RecvError, TryRecvError};
            loop {
                let first = match events.recv().await {
                    Ok(ev) => Some(ev),
                    Err(RecvError::Lagged(_)) => None,
                    Err(RecvError::Closed) => break,
                };
                // A lagging stream may have dropped a change: look at the board.
                let mut look = first.as_ref().is_none_or(changes_board);
                first.iter().for_each(|ev| say(&lines, ev));
                // What else came meanwhile is read with it: one look at the board for a
                // burst of changes (several a step), not one each.
                let mut closed = false;
                // Bounded, so a steady stream of events still gets its lines printed.
                for _ in 0..256 {
                    match events.try_recv() {
                        Ok(ev) => {
                            look |= changes_board(&ev);
                            say(&lines, &ev);
                        }
                        Err(TryRecvError::Lagged(_)) => look = true,
                        Err(TryRecvError::Closed) => {
                            closed = true;
                            break;
                        }
                        Err(TryRecvError::Empty) => break,
                    }
                }
                if look {
                    if let Some(m) = printer.as_ref() {
                        m.lock().await.print_new().await;
                    }
                    problem_printer.lock().await.print_new().await;
                }
                if closed {
                    break;
                }
            }
        });
        engine
            .run(RunOptions {
                exit_when_idle,
                ..Default::default()
            })
            .await?;
        // The last moves (the one that made the engine idle, say) may not have been read
        // when it stopped.
        if let Some(m) = &moves {
            m.lock().await.print_new().await;
        }
        problems.lock().await.print_new().await;
        console.flush();
        tracing::info!("engine stopped");
        Ok::<_, Failure>(exit::OK)
    })
}

/// Whether an engine event may have added moves or problems to print.
fn changes_board(ev: &crate::engine::EngineEvent) -> bool {
    use crate::engine::EngineEvent;
    matches!(ev, EngineEvent::TaskChanged { .. } | EngineEvent::Changed)
}

/// Prints what an engine event says for the person at the terminal (a notice, a
/// notification, a reload's problems) on stderr.
fn say(lines: &Console, ev: &crate::engine::EngineEvent) {
    use crate::engine::EngineEvent;
    match ev {
        EngineEvent::Notice { task_id, text } => {
            let text = crate::ansi::strip(text);
            match task_id {
                Some(id) => lines.err(format!("task {id}: {text}")),
                None => lines.err(text.into_owned()),
            }
        }
        EngineEvent::Notify {
            task_id,
            title,
            body,
        } => {
            let (title, body) = (crate::ansi::strip(title), crate::ansi::strip(body));
            lines.err(format!("task {task_id}: notify: {title}: {body}"));
        }
        EngineEvent::Reloaded { problems } => {
            for p in problems {
                lines.err(crate::ansi::strip(p).into_owned());
            }
        }
        _ => {}
    }
}

/// Prints each move (and so each step's result, which moves the task) as one line, the way
/// a CI runner prints its jobs: read from the history after the last row printed, so a
/// burst of changes or a lagging event stream loses no line and prints none twice.
struct MovePrinter {
    progress: Progress,
    last: i64,
    only_failures: bool,
    console: Console,
}

impl MovePrinter {
    async fn start(progress: Progress, only_failures: bool, console: Console) -> Self {
        let last = progress.last_move().await;
        Self {
            progress,
            last,
            only_failures,
            console,
        }
    }

    async fn print_new(&mut self) {
        loop {
            let Some(rows) = self.progress.moves_after(self.last).await else {
                return;
            };
            let Some((last, _)) = rows.last() else { return };
            self.last = last.id;
            let full = rows.len() == BATCH;
            for (h, title) in rows {
                if !self.only_failures {
                    self.console.out(move_line(&h, &title));
                } else if FAILURES.contains(&h.trigger.as_str()) {
                    self.console.err(move_line(&h, &title));
                }
            }
            if !full {
                return;
            }
        }
    }
}

/// The triggers of moves a failure made.
const FAILURES: &[&str] = &["failure", "error", "ci_failed"];

/// Prints each warning or error the engine records (a failed step, a failed hook) on
/// stderr, `--quiet` or not: read from the events after the last one printed.
struct ProblemPrinter {
    progress: Progress,
    last: i64,
    console: Console,
}

impl ProblemPrinter {
    async fn start(progress: Progress, console: Console) -> Self {
        let last = progress.last_event().await;
        Self {
            progress,
            last,
            console,
        }
    }

    async fn print_new(&mut self) {
        loop {
            let Some(rows) = self.progress.problems_after(self.last).await else {
                return;
            };
            let Some(last) = rows.last() else { return };
            self.last = last.id;
            for e in &rows {
                let text = crate::ansi::strip(&e.summary);
                match e.task_id {
                    Some(id) => self.console.err(format!("task {id}: {}: {text}", e.level)),
                    None => self.console.err(format!("{}: {text}", e.level)),
                }
            }
            if rows.len() < BATCH {
                return;
            }
        }
    }
}

/// `10:42:03 #3 Fix the login bug: plan → plan_review (success)`.
fn move_line(h: &crate::store::HistoryEntry, title: &str) -> String {
    let clean = |s: &str| -> String {
        crate::ansi::strip(s)
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect()
    };
    let at = chrono::DateTime::from_timestamp_millis(h.at)
        .map(|t| {
            t.with_timezone(&chrono::Local)
                .format("%H:%M:%S")
                .to_string()
        })
        .unwrap_or_default();
    let title = super::tasks::one_line(&clean(title), 60);
    let from = h
        .from
        .as_deref()
        .map(|f| format!("{f} → "))
        .unwrap_or_default();
    let mut why = clean(&h.trigger);
    if !matches!(h.actor.as_str(), "engine" | "system" | "") {
        why.push_str(&format!(" by {}", clean(&h.actor)));
    }
    if let Some(reason) = h.reason.as_deref().filter(|r| !r.is_empty()) {
        // Long enough for a failure's whole sentence: the file to fix is at its end.
        let reason = super::tasks::one_line(&clean(reason), 400);
        why.push_str(&format!(": {reason}"));
    }
    format!(
        "{at} #{} {title}: {from}{} ({why})",
        h.task_id,
        clean(&h.to)
    )
}

/// Says on stderr that the engine runs, where and as whom, and whose engine it took over.
fn say_started(ws: &Workspace, me: &Identity, from: Option<Owner>) {
    let labels = if me.labels.is_empty() {
        String::new()
    } else {
        format!(", labels {}", me.labels.join(","))
    };
    eprintln!(
        "baton engine running in {} as {}{labels} (pid {}); SIGINT/SIGTERM stop it",
        ws.root().display(),
        me.name,
        std::process::id()
    );
    if let Some(from) = from {
        eprintln!(
            "{} took over the engine from {from}; steps it left queued run here",
            chrono::Local::now().format("%H:%M:%S")
        );
    }
}

/// Says on stderr what an engine found at its start that a stopped engine left: tasks it
/// marked interrupted (or resumed), and tasks whose executor did not answer.
pub(super) fn say_recovered(r: &crate::engine::Recovered) {
    if !r.interrupted.is_empty() {
        let (tasks, were) = tasks_were(&r.interrupted);
        eprintln!(
            "recovered: {tasks} {were} interrupted by a stopped engine{}",
            if r.resumed.is_empty() {
                " — `baton resume ID` re-runs them".to_string()
            } else {
                format!("; resumed {}", tasks_were(&r.resumed).0)
            }
        );
    }
    if !r.unknown_tasks.is_empty() {
        let (tasks, were) = tasks_were(&r.unknown_tasks);
        let (stay, their) = match were {
            "was" => ("stays", "its"),
            _ => ("stay", "their"),
        };
        eprintln!(
            "{tasks} {stay} running: the executor {their} step ran on did not answer, so it may still run there — the engine looks again until it does (`baton show ID` says why)"
        );
    }
}

/// `task 4` and `was`, or `tasks 4, 7` and `were`.
fn tasks_were(ids: &[i64]) -> (String, &'static str) {
    let list: Vec<String> = ids.iter().map(i64::to_string).collect();
    match ids.len() {
        1 => (format!("task {}", list[0]), "was"),
        _ => (format!("tasks {}", list.join(", ")), "were"),
    }
}
