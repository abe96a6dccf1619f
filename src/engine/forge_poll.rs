//! Polling the forge (`[forge] poll = "2m"`) for a box that cannot receive webhooks: each
//! interval, every open pull request's state and checks are read; a merge, a close or
//! failed checks are recorded under the same key a webhook uses, so an event is acted on
//! once whichever path sees it first.

use super::actions::{Action, Request};
use super::{Engine, EngineHandle, forge_events};
use crate::forge::webhook::{ForgeEvent, What};
use crate::forge::{ChecksState, ForgeSettings, PrState, Target};
use crate::store::{StoreHandle, TaskPr};
use std::path::PathBuf;

impl Engine {
    /// Starts the poller when `[forge] poll` is set; it ends with the engine.
    pub(super) fn start_forge_poll(&self) {
        let Some(settings) = self.cfg.forge.clone() else {
            return;
        };
        let Ok(Some(every)) = settings.poll_every() else {
            return;
        };
        let (store, handle) = (self.store.clone(), self.handle());
        let (root, stop) = (self.ws.root().to_path_buf(), self.shutdown.clone());
        let labels = super::forge_issues::watched_labels(&self.triggers);
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = stop.cancelled() => break,
                    _ = tokio::time::sleep(every) => {}
                }
                if let Err(e) = poll_once(&store, &handle, &settings, root.clone()).await {
                    tracing::warn!("polling the forge failed: {e}");
                }
                if let Err(e) = poll_issues(&store, &handle, &settings, &root, &labels).await {
                    tracing::warn!("polling the forge's issues failed: {e}");
                }
            }
        });
    }
}

/// One look at the open issues carrying a label an `issue` trigger watches (one call per
/// label); each one not seen before goes to the engine, which makes its task.
async fn poll_issues(
    store: &StoreHandle,
    handle: &EngineHandle,
    settings: &ForgeSettings,
    root: &std::path::Path,
    labels: &[String],
) -> Result<(), String> {
    if labels.is_empty() {
        return Ok(());
    }
    let (s, r, l) = (settings.clone(), root.to_path_buf(), labels.to_vec());
    let seen = tokio::task::spawn_blocking(move || {
        let forge = Target::client_for(&s, &r)?;
        let mut out: Vec<crate::forge::issues::IssueSeen> = Vec::new();
        for label in &l {
            for issue in forge.open_issues(label).map_err(|e| e.to_string())? {
                if !out.iter().any(|o| o.number == issue.number) {
                    out.push(issue);
                }
            }
        }
        Ok::<_, String>(out)
    })
    .await
    .map_err(|e| e.to_string())??;
    for issue in seen {
        let key = format!("trigger:{}", issue.key());
        let made = store
            .read(move |db| db.meta(&key))
            .await
            .map_err(|e| e.to_string())?;
        if made.is_some() {
            continue;
        }
        let number = issue.number;
        match handle.order(super::Order::Issue { issue }).await {
            Ok(a) => tracing::info!("polled issue #{number}: {}", a.summary()),
            Err(e) => tracing::warn!("polled issue #{number} made no task: {e}"),
        }
    }
    Ok(())
}

/// One look at every open pull request; fires what changed.
pub(super) async fn poll_once(
    store: &StoreHandle,
    handle: &EngineHandle,
    settings: &ForgeSettings,
    root: PathBuf,
) -> Result<(), String> {
    let open = store
        .read(|db| db.open_task_prs())
        .await
        .map_err(|e| e.to_string())?;
    if open.is_empty() {
        return Ok(());
    }
    let settings = settings.clone();
    let (s, r) = (settings.clone(), root.clone());
    let seen = tokio::task::spawn_blocking(move || {
        let forge = Target::client_for(&s, &r)?;
        let mut out: Vec<(TaskPr, Option<ForgeEvent>)> = Vec::new();
        for mut row in open {
            let number = row.number as u64;
            // One pull request the API cannot answer for does not hold up the others.
            let pr = match forge.get(number) {
                Ok(pr) => pr,
                Err(e) => {
                    tracing::warn!("polling #{number} of task {} failed: {e}", row.task_id);
                    continue;
                }
            };
            let what = match pr.state {
                PrState::Merged => Some(What::Merged),
                PrState::Closed => Some(What::Closed),
                PrState::Open | PrState::Draft => {
                    let checks = match forge.checks(&pr) {
                        Ok(c) => c,
                        Err(e) => {
                            tracing::warn!(
                                "reading the checks of #{number} of task {} failed: {e}",
                                row.task_id
                            );
                            continue;
                        }
                    };
                    row.checks_summary = checks.summary();
                    row.state = pr.state.as_str().to_string();
                    row.checks = serde_json::to_value(checks.state)
                        .ok()
                        .and_then(|v| v.as_str().map(String::from))
                        .unwrap_or_else(|| "none".into());
                    (checks.state == ChecksState::Failed).then(|| What::ChecksFailed {
                        sha: pr.head_sha.clone().unwrap_or_default(),
                        failures: checks.failures,
                    })
                }
            };
            // Failed checks without a commit cannot be told from later ones: not an event.
            let ev = what
                .map(|what| ForgeEvent {
                    number: Some(number),
                    branch: None,
                    head_repo: None,
                    what,
                })
                .filter(ForgeEvent::keyable);
            out.push((row, ev));
        }
        Ok::<_, String>(out)
    })
    .await
    .map_err(|e| e.to_string())??;
    for (row, ev) in seen {
        let (task, number) = (row.task_id, row.number as u64);
        let Some(ev) = ev else {
            // The checks seen now go on the card; a change of state is an event's to make.
            store
                .write(move |db| db.set_task_pr(&row))
                .await
                .map_err(|e| e.to_string())?;
            continue;
        };
        // Recorded, deduplicated and applied in one transaction.
        let req = Request {
            task_id: task,
            action: Action::Forge {
                trigger: ev.trigger().to_string(),
                note: forge_events::failure_note(&ev),
                seen: Vec::new(),
                record: Some(forge_events::describe(number, &ev, "poll")),
            },
            expected_status: None,
            actor: "forge".into(),
        };
        // The engine deletes a merged branch itself, once, as it applies the merge.
        if let Err(e) = handle.order(super::Order::Act(req)).await {
            tracing::info!("a polled forge event for task {task} was not applied: {e}");
        }
    }
    Ok(())
}
