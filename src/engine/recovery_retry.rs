//! Steps whose executor did not answer at start-up (a Docker daemon or Kubernetes API
//! down) stay `running`: they may still run there. They are looked for again, waiting a
//! little longer each time, until their executor answers; what is found then is recorded
//! as at start-up and handed to the engine.

use super::recovery::{Recovered, look, record};
use super::{Engine, EngineEvent};
use crate::store::StoreHandle;
use crate::workspace::Workspace;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// The first wait before looking again.
const FIRST_WAIT: Duration = Duration::from_secs(2);
/// The longest wait between two looks.
pub(super) const MAX_WAIT: Duration = Duration::from_secs(60);

/// Looks for `ids` again until none is left unknown or `stop` is cancelled, sending what
/// each pass recorded.
async fn retry(
    ws: Workspace,
    store: StoreHandle,
    (grace, auto_resume): (Duration, bool),
    mut ids: Vec<i64>,
    stop: CancellationToken,
    found: mpsc::UnboundedSender<Recovered>,
) {
    let mut wait = FIRST_WAIT;
    while !ids.is_empty() {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(wait) => {}
        }
        wait = (wait * 2).min(MAX_WAIT);
        let looked = match look(&ws, &store, grace, Some(&ids), None).await {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!("looking again for steps left by the last engine failed: {e}");
                continue;
            }
        };
        match store
            .with_writer(move |s| record(s, looked, auto_resume, true))
            .await
        {
            Ok(Ok(r)) => {
                ids = r.unknown.clone();
                if found.send(r).is_err() {
                    return;
                }
            }
            Ok(Err(e)) => tracing::warn!("recording steps left by the last engine failed: {e}"),
            Err(e) => tracing::warn!("recording steps left by the last engine failed: {e}"),
        }
    }
}

/// Waits for the next pass's findings; never, when nothing is being looked for.
pub(super) async fn next(rx: &mut Option<mpsc::UnboundedReceiver<Recovered>>) -> Recovered {
    match rx {
        Some(rx) => match rx.recv().await {
            Some(r) => r,
            None => std::future::pending().await,
        },
        None => std::future::pending().await,
    }
}

impl Engine {
    /// Starts looking again for the steps start-up recovery could not look for.
    pub(super) fn retry_unknown(&mut self) {
        let ids = std::mem::take(&mut self.recovered.unknown);
        if ids.is_empty() {
            return;
        }
        let (tx, rx) = mpsc::unbounded_channel();
        self.recovery_rx = Some(rx);
        tokio::spawn(retry(
            self.ws.clone(),
            self.store.clone(),
            (self.cfg.kill_grace, self.cfg.auto_resume),
            ids,
            self.shutdown.clone(),
            tx,
        ));
    }

    /// Takes in a later pass's findings: reattaches the steps found, and tells front ends
    /// the tasks changed.
    pub(super) async fn on_recovered(&mut self, found: Recovered) {
        let changed = found
            .reattach
            .iter()
            .chain(&found.interrupted)
            .chain(&found.resumed)
            .count();
        self.recovered.reattach = found.reattach;
        if let Err(e) = self.reattach().await {
            tracing::error!("picking up steps that outlived the last engine failed: {e}");
        }
        if changed > 0 {
            let _ = self.events.send(EngineEvent::Changed);
        }
    }
}
