//! Handing the engine over to `baton engine`: an engine a front end (a board, `serve`)
//! runs agrees when a headless engine asks on the socket, starts no more steps, lets the
//! running ones finish (their agents keep their sessions and their cost) and stops, which
//! frees the lock the headless engine waits for. Queued work stays queued for it.

use super::wake::{self, Role};
use super::{Engine, EngineEvent, ShutdownMode};
use tokio::io::AsyncWriteExt;
use tokio::net::UnixStream;

impl Engine {
    /// Answers `baton engine` (process `pid`) asking to take over: `ok N` with N the steps
    /// still to finish, or `no` and why.
    pub(super) async fn on_handover(
        &mut self,
        pid: u32,
        mut stream: UnixStream,
        stopping: &mut Option<ShutdownMode>,
    ) {
        let running = self.running.len();
        let answer = match self.role {
            Role::Headless | Role::Command => {
                let who = wake::Owner {
                    pid: std::process::id(),
                    role: self.role,
                };
                format!(
                    "no another baton engine is running in this workspace ({who}), and one engine runs per workspace — attach to it with `baton`, or stop it first (Ctrl+C in its terminal, or kill {})\n",
                    who.pid
                )
            }
            // A handover to another `baton engine` is under way: that one gets the lock.
            Role::Front if self.handover_to.is_some_and(|to| to != pid) => {
                let to = self.handover_to.unwrap_or_default();
                format!(
                    "no this engine is already handing over to baton engine (pid {to}), and one engine runs per workspace — stop that one first (kill {to}), or attach to it with `baton` once it runs\n"
                )
            }
            // Already stopping (its board is quitting): the lock is free soon anyway.
            Role::Front if stopping.is_some() && self.handover_to.is_none() => {
                format!("ok {running}\n")
            }
            Role::Front => {
                self.handover_to = Some(pid);
                self.handed_to
                    .store(pid, std::sync::atomic::Ordering::SeqCst);
                *stopping = Some(ShutdownMode::Drain);
                let text = wake::handover_text(pid, running);
                tracing::info!("{text}");
                let _ = self.events.send(EngineEvent::HandingOver { pid, running });
                format!("ok {running}\n")
            }
        };
        let _ = stream.write_all(answer.as_bytes()).await;
    }
}
