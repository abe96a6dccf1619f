//! The engine's side of pipeline triggers: firing due schedules, new pushes and
//! finished tasks.

use super::{Engine, EngineEvent, triggers};

impl Engine {
    /// Fires due schedules and new pushes.
    pub(super) async fn run_triggers(&mut self) {
        if self.triggers.is_empty() {
            return;
        }
        let mut firings = self.triggers.due_schedules(chrono::Local::now());
        if let Some(git) = self.git.clone()
            && self.triggers.push_poll_due()
        {
            let heads =
                tokio::task::spawn_blocking(move || crate::workspace::git::branch_heads(&git.repo))
                    .await
                    .ok()
                    .and_then(|r| r.ok())
                    .unwrap_or_default();
            let store = self.store.clone();
            let mut guard = store.lock().unwrap_or_else(|p| p.into_inner());
            let seen = |k: &str| guard.read().meta(k).ok().flatten();
            let mut updates = Vec::new();
            let pushes = self.triggers.pushes(&heads, seen, |k, v| {
                updates.push((k.to_string(), v.to_string()))
            });
            let _ = guard.write(|db| {
                for (k, v) in &updates {
                    db.set_meta(k, v)?;
                }
                Ok::<_, crate::store::StoreError>(())
            });
            firings.extend(pushes);
        }
        self.record_firings(firings);
    }

    pub(super) fn record_firings(&mut self, firings: Vec<triggers::Firing>) {
        for firing in firings {
            let store = self.store.clone();
            let mut guard = store.lock().unwrap_or_else(|p| p.into_inner());
            match guard.write(|db| self.triggers.record(db, &firing)) {
                Ok(Some(id)) => {
                    let _ = self.events.send(EngineEvent::TaskChanged { task_id: id });
                }
                Ok(None) => {}
                Err(e) => {
                    let text = format!("trigger {} did not fire: {e}", firing.key);
                    tracing::warn!("{text}");
                    let _ = self.events.send(EngineEvent::Notice {
                        task_id: None,
                        text,
                    });
                }
            }
        }
    }
}
