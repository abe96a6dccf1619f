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
                    // A task made because a task ended is that task's child: a trigger
                    // that answers its own pipeline's tasks stops after a few generations.
                    let depth = match f.parent {
                        Some(parent) => {
                            let depth = db.task_depth(parent)? + 1;
                            if depth > super::followups::MAX_CHAIN_DEPTH {
                                // Said on the task whose end fired it, where `show` finds it.
                                let why = format!(
                                    "trigger {} did not start a task: task {parent} is already {} tasks deep in a chain of tasks that tasks made (at most {}) — check for a task_done trigger on its own pipeline",
                                    f.key,
                                    depth - 1,
                                    super::followups::MAX_CHAIN_DEPTH
                                );
                                db.insert_event(&crate::store::NewEvent {
                                    task_id: Some(parent),
                                    category: "lifecycle",
                                    kind: "trigger.refused",
                                    summary: why.clone(),
                                    data: serde_json::json!({ "trigger": f.key }),
                                    actor: "engine",
                                    level: "warn",
                                })?;
                                return Ok(Err((parent, why)));
                            }
                            Some((parent, depth))
                        }
                        None => None,
                    };
                    let fired = triggers::fire(db, &pipeline, &trigger, &f.key, &vars)?;
                    if let (Some(id), Some((parent, depth))) = (fired, depth) {
                        db.set_task_parent(id, parent, depth)?;
                    }
                    if let Some(slot) = f.slot {
                        let memo =
                            super::schedule_catchup::memo_key(&trigger.pipeline, trigger.index);
                        db.set_meta(&memo, &slot.to_rfc3339())?;
                    }
                    Ok::<_, super::EngineError>(Ok(fired))
                })
                .await;
            match fired {
                Ok(Ok(Some(id))) => {
                    let _ = self.events.send(EngineEvent::TaskChanged { task_id: id });
                }
                Ok(Ok(None)) => {}
                Ok(Err((parent, why))) => {
                    tracing::warn!("{why}");
                    let _ = self.events.send(EngineEvent::Notice {
                        task_id: Some(parent),
                        text: why,
                    });
                    let _ = self
                        .events
                        .send(EngineEvent::TaskChanged { task_id: parent });
                }
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
