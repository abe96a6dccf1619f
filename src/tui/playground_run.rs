//! The playground's background work: reads the agent profiles on a blocking thread and runs
//! a try as a tokio task, delivering its log lines and result to the UI as events. Nothing
//! here blocks the draw loop; nothing touches the engine or the board.

use super::event::AppEvent;
use super::playground::{AgentChoice, PlaygroundEffect, PlaygroundEvent};
use crate::engine::playground::try_agent;
use crate::workspace::Workspace;
use tokio::sync::mpsc::UnboundedSender;

/// Does what the playground asked, in the background. Call inside the tokio runtime.
pub fn perform(effect: PlaygroundEffect, ws: &Workspace, tx: &UnboundedSender<AppEvent>) {
    let tx = tx.clone();
    match effect {
        PlaygroundEffect::LoadAgents => {
            let dir = ws.agents_dir();
            tokio::task::spawn_blocking(move || {
                let catalog = crate::agents::load_agents(Some(&dir));
                let list = catalog
                    .profiles
                    .iter()
                    .map(|p| AgentChoice {
                        id: p.id.clone(),
                        backend: p.backend.as_str().to_string(),
                        name: p.name.clone(),
                        problem: None,
                    })
                    .collect();
                let _ = tx.send(AppEvent::Playground(PlaygroundEvent::Agents(Ok(list))));
            });
        }
        PlaygroundEffect::Run {
            run,
            request,
            cancel,
        } => {
            let ws = ws.clone();
            tokio::spawn(async move {
                let (lines, mut rx) = tokio::sync::mpsc::channel(256);
                let forward = tx.clone();
                let forwarder = tokio::spawn(async move {
                    while let Some((stream, text)) = rx.recv().await {
                        let ev = PlaygroundEvent::Line { run, stream, text };
                        if forward.send(AppEvent::Playground(ev)).is_err() {
                            break;
                        }
                    }
                });
                let result = try_agent(&ws, request, lines, cancel).await;
                // Every line before the result.
                let _ = forwarder.await;
                let _ = tx.send(AppEvent::Playground(PlaygroundEvent::Done { run, result }));
            });
        }
    }
}
