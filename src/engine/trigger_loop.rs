//! The engine's side of pipeline triggers: firing due schedules, new pushes and
//! finished tasks.

use super::trigger_chain::{self, Recorded};
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
            let memo: Vec<String> = self.triggers.push_memo_keys(&heads);
            let seen = self
                .store
                .read(move |db| {
                    memo.into_iter()
                        .map(|k| Ok((db.meta(&k)?, k)))
                        .collect::<crate::store::Result<Vec<_>>>()
                })
                .await
                .unwrap_or_default();
            let seen: std::collections::HashMap<String, String> = seen
                .into_iter()
                .filter_map(|(v, k)| v.map(|v| (k, v)))
                .collect();
            let mut updates = Vec::new();
            let pushes = self.triggers.pushes(
                &heads,
                |k| seen.get(k).cloned(),
                |k, v| updates.push((k.to_string(), v.to_string())),
            );
            if !updates.is_empty() {
                let written = self
                    .store
                    .write(move |db| {
                        for (k, v) in &updates {
                            db.set_meta(k, v)?;
                        }
                        Ok::<_, crate::store::StoreError>(())
                    })
                    .await;
                if let Err(e) = written {
                    tracing::warn!("remembering branch heads failed: {e}");
                }
            }
            firings.extend(pushes);
        }
        self.record_firings(firings).await;
    }

    pub(super) async fn record_firings(&mut self, firings: Vec<triggers::Firing>) {
        for firing in firings {
            let Some((trigger, pipeline)) = self.triggers.parts(&firing) else {
                continue;
            };
            let f = firing.clone();
            let fired = self
                .store
                .write(move |db| {
                    let vars: Vec<(&str, &str)> = f
                        .vars
                        .iter()
                        .map(|(k, v)| (k.as_str(), v.as_str()))
                        .collect();
                    let recorded =
                        trigger_chain::record(db, &pipeline, &trigger, &f.key, &vars, &f.origin)?;
                    if let Some(slot) = f.slot {
                        let memo =
                            super::schedule_catchup::memo_key(&trigger.pipeline, trigger.index);
                        db.set_meta(&memo, &slot.to_rfc3339())?;
                    }
                    Ok::<_, super::EngineError>(recorded)
                })
                .await;
            match fired {
                Ok(recorded) => self.announce(recorded),
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

    /// Tells boards what recording a firing did: a new task, or a refusal on its parent.
    pub(super) fn announce(&self, recorded: Recorded) {
        match recorded {
            Recorded::Made(id) => {
                let _ = self.events.send(EngineEvent::TaskChanged { task_id: id });
            }
            Recorded::Before => {}
            Recorded::Refused { parent, why } => {
                tracing::warn!("{why}");
                let _ = self.events.send(EngineEvent::Notice {
                    task_id: Some(parent),
                    text: why,
                });
                let _ = self
                    .events
                    .send(EngineEvent::TaskChanged { task_id: parent });
            }
        }
    }
}
