//! `baton run --wait`: an engine run in this process when none runs, until the task it made
//! settles; or, with another process's engine, watching the task until it does.

use super::engine_cmd::{init_tracing, runtime, say_recovered};
use super::signals::stop_on_signals;
use super::{Failure, Outcome, exit, tasks};
use crate::engine::Reader;
use crate::engine::client::{Change, Follower};
use crate::engine::{Engine, RunOptions, Waited};
use crate::workspace::{EngineLock, ShutdownMode, Workspace};
use std::time::Duration;

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
    let signalled = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let seen = signalled.clone();
    let signals = stop_on_signals(&engine, move || {
        seen.store(true, std::sync::atomic::Ordering::SeqCst)
    });
    // What the engine says to its console (that it stops, and how): on stderr, as
    // `baton engine` says it.
    let mut events = engine.handle().subscribe();
    tokio::spawn(async move {
        use tokio::sync::broadcast::error::RecvError;
        loop {
            match events.recv().await {
                Ok(crate::engine::EngineEvent::Notice {
                    task_id: None,
                    text,
                }) => eprintln!("{}", crate::ansi::strip(&text)),
                Ok(_) | Err(RecvError::Lagged(_)) => {}
                Err(RecvError::Closed) => break,
            }
        }
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
            Ok(crate::engine::Answer::Made(m)) => {
                tasks::say_cannot_start(&m);
                m.id
            }
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

/// Says on stderr why a wait goes on after its task has ended: the engine run here is
/// letting other tasks' steps finish, and what ctrl+c would do to them.
fn say_draining(id: i64) -> crate::engine::OnDrain {
    Box::new(move |n, on_stop| {
        let stop = match on_stop {
            ShutdownMode::Interrupt => "ctrl+c interrupts them (`baton resume ID` continues each)",
            ShutdownMode::Drain => {
                "ctrl+c lets them finish (`shutdown = \"drain\"`), a second one interrupts them"
            }
        };
        eprintln!(
            "task {id} has settled; waiting for {n} running step(s) of other tasks (no new one starts) — {stop}"
        );
    })
}

/// Prints a task the engine of this process waited for, as `run --wait` does, and gives
/// its exit code.
pub fn report(waited: &Waited, as_json: bool) -> Outcome {
    let t = &waited.task;
    match &waited.json {
        Some(json) if as_json => outln!("{json}"),
        _ => print_line(t),
    }
    say_why(t, waited.why.as_deref());
    let kind = waited.kind.clone().map_err(Failure::new)?;
    Ok(tasks::code_for(t.state, kind))
}

fn print_task(store: &Reader, id: i64, as_json: bool) -> Result<(), Failure> {
    let task = store.task(id)?;
    if as_json {
        outln!("{}", store.show_json(id)?);
    } else {
        print_line(&task);
    }
    let steps = store.steps(id)?;
    say_why(
        &task,
        crate::engine::why_stopped(&task, steps.last()).as_deref(),
    );
    Ok(())
}

/// Says on stderr why a task that failed or was interrupted stopped, so that a script's
/// log holds the reason and not only `1 failed (failed)`; and that a task still queued (a
/// wait a signal stopped before its step started) runs with the next engine.
fn say_why(task: &crate::store::Task, why: Option<&str>) {
    if let Some(why) = why {
        eprintln!(
            "task {} {} at {why} — `baton show {}` and `baton logs {}` say more",
            task.id, task.state, task.id, task.id
        );
    } else if task.state == crate::store::TaskState::Queued {
        eprintln!(
            "task {} queued at {}: the wait was stopped before its step started — the next engine runs it (`baton engine`, or `baton`)",
            task.id, task.status
        );
    }
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
