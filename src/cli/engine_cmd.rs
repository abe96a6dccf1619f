//! `baton engine` and `baton run --wait`.

use super::console::Console;
use super::{Failure, Outcome, exit, tasks};
use crate::engine::Reader;
use crate::engine::client::{Change, Follower};
use crate::engine::engines::Identity;
use crate::engine::progress::{BATCH, Progress};
use crate::engine::wake::Owner;
use crate::engine::{Engine, RunOptions, Waited};
use crate::workspace::{EngineLock, ShutdownMode, Workspace};
use std::time::Duration;

/// The runtime of a headless engine (`baton engine`, `run --wait`): one thread for the
/// engine's loop and every step's tasks, as an engine spends its time waiting, while the
/// store, the warden and blocking work have threads of their own. On several workers each
/// step's end and start crossed from thread to thread a few times over.
fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
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
        let shutdown = engine.shutdown_token();
        tokio::spawn(async move {
            wait_for_signal().await;
            shutdown.cancel();
        });
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
    let title: String = clean(title).chars().take(60).collect();
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
        let reason: String = clean(reason).chars().take(120).collect();
        why.push_str(&format!(": {reason}"));
    }
    format!(
        "{at} #{} {title}: {from}{} ({why})",
        h.task_id,
        clean(&h.to)
    )
}

pub(super) async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}

/// An engine in this process for a command that waits for a task.
struct Here {
    engine: Engine,
    /// Stops the engine on SIGINT or SIGTERM; aborted once the engine has run.
    signals: tokio::task::JoinHandle<()>,
    /// Set when a signal stopped it: the person asked the wait to end.
    signalled: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

/// Starts [`Here`]; None when another process's engine took the workspace's lock first.
async fn engine_here(ws: &Workspace) -> Result<Option<Here>, Failure> {
    let engine = match Engine::start_as(ws, crate::engine::wake::Role::Command).await {
        Ok(e) => e,
        Err(crate::engine::EngineError::Workspace(
            crate::workspace::WorkspaceError::EngineRunning(_),
        )) => return Ok(None),
        Err(e) => return Err(Failure::from(e)),
    };
    let shutdown = engine.shutdown_token();
    let signalled = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let seen = signalled.clone();
    let signals = tokio::spawn(async move {
        wait_for_signal().await;
        seen.store(true, std::sync::atomic::Ordering::SeqCst);
        shutdown.cancel();
    });
    Ok(Some(Here {
        engine,
        signals,
        signalled,
    }))
}

/// How `run --wait`'s own engine ended.
pub enum RanHere {
    /// Another process's engine took the lock first: nothing was made.
    Elsewhere,
    /// The task was made and ran until it settled, or until a signal stopped the wait;
    /// `waited` is the task as the engine left it.
    Made { waited: Box<Waited>, stopped: bool },
}

/// `baton run --wait` with no engine running: starts one here, makes the task through it
/// before it looks at the board (a refused creation runs nothing), and runs until the task
/// settles (draining whatever else runs) or a signal stops it.
pub fn run_new(
    ws: &Workspace,
    new: &dyn Fn() -> Result<crate::engine::NewTask, Failure>,
    as_json: bool,
) -> Result<RanHere, Failure> {
    let _tracing = init_tracing(ws);
    let rt = runtime()?;
    rt.block_on(async {
        let Some(mut here) = engine_here(ws).await? else {
            return Ok(RanHere::Elsewhere);
        };
        // This engine may be the first since one stopped: what it found, as `baton engine`
        // says it.
        say_recovered(&here.engine.recovered);
        // A name another engine holds (a shared board) is refused before the task is made.
        if let Err(e) = here.engine.take_name_early().await {
            here.signals.abort();
            return Err(Failure::from(e));
        }
        let made = match new() {
            Ok(create) => here
                .engine
                .take_first(crate::engine::Order::Create { create })
                .await
                .map_err(Failure::new),
            Err(e) => Err(e),
        };
        let id = match made {
            Ok(crate::engine::Answer::Made(m)) => m.id,
            Ok(other) => {
                here.signals.abort();
                here.engine.mark_stopped().await;
                return Err(Failure::new(format!(
                    "the engine answered a creation with `{}` — is it another baton version?",
                    other.summary()
                )));
            }
            Err(e) => {
                here.signals.abort();
                here.engine.mark_stopped().await;
                return Err(e);
            }
        };
        let out = here
            .engine
            .run_until_settled(id, as_json, Some(say_draining(id)))
            .await;
        here.signals.abort();
        let waited = Box::new(out.map_err(Failure::from)?);
        let stopped = here.signalled.load(std::sync::atomic::Ordering::SeqCst);
        Ok(RanHere::Made { waited, stopped })
    })
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

/// Says on stderr why a wait goes on after its task has ended: the engine run here is
/// letting other tasks' steps finish, and what ctrl+c would do to them.
fn say_draining(id: i64) -> Box<dyn FnOnce(usize, ShutdownMode) + Send> {
    Box::new(move |n, on_stop| {
        let stop = match on_stop {
            ShutdownMode::Interrupt => "ctrl+c interrupts them (`baton resume ID` continues each)",
            ShutdownMode::Drain => {
                "they are not interrupted (`shutdown = \"drain\"` in .baton/config.toml)"
            }
        };
        eprintln!(
            "task {id} has settled; waiting for {n} running step(s) of other tasks that this engine started — {stop}"
        );
    })
}

/// Says on stderr what an engine found at its start that a stopped engine left: tasks it
/// marked interrupted (or resumed), and tasks whose executor did not answer.
fn say_recovered(r: &crate::engine::Recovered) {
    if !r.interrupted.is_empty() {
        eprintln!(
            "recovered: task(s) {:?} were interrupted by a stopped engine{}",
            r.interrupted,
            if r.resumed.is_empty() {
                " — `baton resume ID` re-runs them".to_string()
            } else {
                format!("; resumed {:?}", r.resumed)
            }
        );
    }
    if !r.unknown_tasks.is_empty() {
        eprintln!(
            "task(s) {:?} stay running: the executor their step ran on did not answer, so it may still run there — the engine looks again until it does (`baton show ID` says why)",
            r.unknown_tasks
        );
    }
}

/// Prints a task the engine of this process waited for, as `run --wait` does, and gives
/// its exit code.
pub fn report(waited: &Waited, as_json: bool) -> Outcome {
    let t = &waited.task;
    match &waited.json {
        Some(json) if as_json => outln!("{json}"),
        _ => print_line(t),
    }
    let kind = waited.kind.clone().map_err(Failure::new)?;
    Ok(tasks::code_for(t.state, kind))
}

fn print_task(store: &Reader, id: i64, as_json: bool) -> Result<(), Failure> {
    if as_json {
        outln!("{}", store.show_json(id)?);
    } else {
        print_line(&store.task(id)?);
    }
    Ok(())
}

/// A waited-for task in one line: `ID STATUS (STATE)`.
fn print_line(t: &crate::store::Task) {
    outln!("{} {} ({})", t.id, t.status, t.state);
}

/// `baton run`: the task is created; start it and, with `--wait`, wait for it to settle.
pub fn run_task(ws: &Workspace, id: i64, wait: bool, as_json: bool) -> Outcome {
    // Followed, not read once: the task moves on while this waits.
    let store = Reader::following(ws)?;
    if !wait {
        if as_json {
            outln!("{}", store.show_json(id)?);
        } else {
            outln!("{id}");
        }
        return Ok(exit::OK);
    }
    wait_until_settled(ws, &store, id)?;
    print_task(&store, id, as_json)?;
    tasks::wait_code(&store, id)
}

/// Waits for the task to settle: watching another process's engine while one runs, and
/// running one here whenever none does (another `run --wait` may have stopped its own).
fn wait_until_settled(ws: &Workspace, store: &Reader, id: i64) -> Result<(), Failure> {
    let mut rt = None;
    let mut _tracing = None;
    let mut follower = Follower::new(ws);
    loop {
        if store.task(id)?.state.settled() {
            return Ok(());
        }
        if !EngineLock::is_held(ws) {
            if rt.is_none() {
                _tracing = init_tracing(ws);
                rt = Some(runtime()?);
            }
            // Whether a signal stopped the engine run here; None when another process
            // took the lock first (its engine is watched instead).
            let ran = rt.as_ref().expect("runtime made above").block_on(async {
                let Some(Here {
                    engine,
                    signals,
                    signalled,
                }) = engine_here(ws).await?
                else {
                    return Ok::<_, Failure>(None);
                };
                let out = engine
                    .run(RunOptions {
                        until_settled: Some(id),
                        on_drain: Some(say_draining(id)),
                        ..Default::default()
                    })
                    .await;
                signals.abort();
                out.map_err(Failure::from)?;
                Ok(Some(signalled.load(std::sync::atomic::Ordering::SeqCst)))
            })?;
            match ran {
                // A signal ends the wait, not only this engine.
                Some(true) => return Ok(()),
                Some(false) => continue,
                None => {}
            }
        }
        // Another process's engine runs it: wait for it to say the task changed.
        follower.wait(ws, Duration::from_millis(100), |c| {
            matches!(c, Change::Task(t) if *t == id) || *c == Change::All
        });
    }
}
