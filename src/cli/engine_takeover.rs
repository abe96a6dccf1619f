//! `baton engine` started while a board (or `baton serve`) runs the workspace's engine:
//! it asks that engine to hand over, waits for it to finish its running steps and free
//! the lock, then runs the engine here. A headless engine already running refuses, and
//! one that holds the name asked for says so by name.

use super::Failure;
use crate::engine::engines::{Identity, held_sentence, host_name};
use crate::engine::wake::{self, Owner, Role};
use crate::engine::{Engine, EngineError};
use crate::workspace::{EngineLock, Workspace, WorkspaceError};
use std::time::Duration;

/// How long the running engine has to answer on its socket.
const ANSWER_WITHIN: Duration = Duration::from_secs(5);

/// The engine, and who it took over from; None when the user stopped the wait (Ctrl+C).
pub(super) async fn start(
    ws: &Workspace,
    ident: Identity,
) -> Result<Option<(Engine, Option<Owner>)>, Failure> {
    let refused = match Engine::start_as(ws, Role::Headless).await {
        Ok(mut engine) => {
            engine.set_identity(ident);
            return Ok(Some((engine, None)));
        }
        Err(e @ EngineError::Workspace(WorkspaceError::EngineRunning(_))) => e,
        Err(e) => return Err(e.into()),
    };
    let dir = ws.dir();
    let at = ws.clone();
    let name = ident.name.clone();
    let asked = tokio::task::spawn_blocking(move || {
        let owner = wake::who(&dir, ANSWER_WITHIN);
        if let Some(held) = name_held(&at, &name, owner) {
            return Ok((owner, Some(Err(held))));
        }
        let token = crate::api::token::load_or_create(&dir)?;
        Ok::<_, String>((owner, wake::hand_over(&dir, &token, ANSWER_WITHIN)))
    })
    .await
    .map_err(|e| {
        Failure::new(format!(
            "asking the running engine to hand over failed: {e}"
        ))
    })?
    .map_err(|e| {
        Failure::new(format!(
            "{e} — `baton engine` shows the workspace's token to take the engine over"
        ))
    })?;
    let (owner, running) = match asked {
        (owner, Some(Ok(n))) => (owner, n),
        (_, Some(Err(reason))) => return Err(Failure::new(reason)),
        // It does not answer (an older baton, or one stopping): say what the lock says.
        (_, None) => return Err(refused.into()),
    };
    let from = owner.map_or_else(|| "the running engine".to_string(), |o| o.to_string());
    if running == 0 {
        eprintln!("{from} runs the engine here and hands it over now");
    } else {
        eprintln!(
            "{from} runs the engine here; it starts no new step and hands over once its {running} running step(s) finish (Ctrl+C stops waiting)"
        );
    }
    // A thread of its own blocks on the lock: given up (Ctrl+C), it is left behind, and a
    // lock it takes after that is let go at once.
    let (tx, rx) = tokio::sync::oneshot::channel();
    let at = ws.clone();
    std::thread::Builder::new()
        .name("baton-takeover".into())
        .spawn(move || {
            let _ = tx.send(EngineLock::wait(&at));
        })
        .map_err(|e| Failure::new(format!("cannot wait for the engine lock: {e}")))?;
    let lock = tokio::select! {
        got = rx => got,
        _ = super::signals::wait_for_signal() => {
            eprintln!("stopped waiting; {from} stops once its steps finish, and a board still open runs the engine again");
            return Ok(None);
        }
    };
    let lock = lock
        .map_err(|_| {
            Failure::new(
                "waiting for the engine lock stopped unexpectedly — start `baton engine` again",
            )
        })?
        .map_err(Failure::from)?;
    let mut engine = Engine::start_locked(ws, lock, Role::Headless).await?;
    engine.set_identity(ident);
    Ok(Some((engine, owner)))
}

/// The refusal when a live engine holds `name`, unless it is the board's engine that hands
/// the workspace over to this one (the usual case: both named after the host).
fn name_held(ws: &Workspace, name: &str, owner: Option<Owner>) -> Option<String> {
    let engines = crate::engine::Reader::open(ws).ok()?.engines().ok()?;
    let e = engines.into_iter().find(|e| e.row.name == name && e.live)?;
    let holds_lock = owner.filter(|o| i64::from(o.pid) == e.row.pid && e.row.host == host_name());
    let said = held_sentence(&e.row.name, &e.row.host, e.row.pid, e.seen_ago_ms);
    match holds_lock {
        Some(o) if o.role == Role::Front => None,
        // Another name would not help: say what the lock says too.
        Some(o) => {
            let (head, _) = said.split_once(" — ").unwrap_or((&said, ""));
            Some(format!(
                "another baton engine is running in this workspace ({o}): {head}, and one engine runs per workspace — attach to it with `baton`, or stop it first (Ctrl+C in its terminal, or kill {})",
                o.pid
            ))
        }
        None => Some(said),
    }
}
