//! `baton engine` and `baton run --wait`.

use super::{Failure, Outcome, exit, json, tasks};
use crate::engine::{Engine, RunOptions};
use crate::store::Store;
use crate::workspace::{EngineLock, Workspace};
use std::time::Duration;

fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::new(format!("cannot start the async runtime: {e}")))
}

/// Sends tracing to `.baton/logs/engine.log` (never to the screen).
pub fn init_tracing(ws: &Workspace) -> Option<tracing_appender::non_blocking::WorkerGuard> {
    std::fs::create_dir_all(ws.logs_dir()).ok()?;
    let appender = tracing_appender::rolling::never(ws.logs_dir(), "engine.log");
    let (writer, guard) = tracing_appender::non_blocking(appender);
    let filter = tracing_subscriber::EnvFilter::try_from_env("BATON_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_writer(writer)
        .with_ansi(false)
        .with_env_filter(filter)
        .try_init()
        .ok()?;
    Some(guard)
}

/// `baton engine [--exit-when-idle]`.
pub fn run(ws: &Workspace, exit_when_idle: bool) -> Outcome {
    let _guard = init_tracing(ws);
    let rt = runtime()?;
    rt.block_on(async {
        let engine = Engine::start(ws)?;
        let r = &engine.recovered;
        eprintln!(
            "baton engine running in {} (pid {}); SIGINT/SIGTERM stop it",
            ws.root().display(),
            std::process::id()
        );
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
        tracing::info!(?r, "engine started");
        let shutdown = engine.shutdown_token();
        tokio::spawn(async move {
            wait_for_signal().await;
            shutdown.cancel();
        });
        engine
            .run(RunOptions {
                exit_when_idle,
                stop_when: None,
            })
            .await?;
        tracing::info!("engine stopped");
        Ok::<_, Failure>(exit::OK)
    })
}

async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt()))
    else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}

/// `baton run`: the task is created; start it and, with `--wait`, wait for it to settle.
pub fn run_task(ws: &Workspace, store: &mut Store, id: i64, wait: bool, as_json: bool) -> Outcome {
    if !wait {
        if as_json {
            println!("{}", json::show(&store.read(), id)?);
        } else {
            println!("{id}");
        }
        return Ok(exit::OK);
    }
    if EngineLock::is_held(ws) {
        poll_until_settled(store, id)?;
    } else {
        let _guard = init_tracing(ws);
        let rt = runtime()?;
        rt.block_on(async {
            let engine = Engine::start(ws)?;
            let shutdown = engine.shutdown_token();
            tokio::spawn(async move {
                wait_for_signal().await;
                shutdown.cancel();
            });
            engine
                .run(RunOptions {
                    exit_when_idle: false,
                    stop_when: Some(Box::new(move |db| {
                        db.task(id).is_ok_and(|t| tasks::settled(t.state))
                    })),
                })
                .await?;
            Ok::<_, Failure>(())
        })?;
    }
    if as_json {
        println!("{}", json::show(&store.read(), id)?);
    } else {
        let t = store.read().task(id)?;
        println!("{id} {} ({})", t.status, t.state);
    }
    tasks::wait_code(store, id)
}

fn poll_until_settled(store: &Store, id: i64) -> Result<(), Failure> {
    loop {
        if tasks::settled(store.read().task(id)?.state) {
            return Ok(());
        }
        // Watching another process's engine: there is no cross-process event, so poll.
        std::thread::sleep(Duration::from_millis(100));
    }
}
