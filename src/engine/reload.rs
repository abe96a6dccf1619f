//! Live reload: when pipeline, agent or config files change, the engine reads them again.
//! New tasks (from triggers and hooks) use the new definitions; running tasks keep the
//! snapshot they were created with. A broken file is reported (log, event, subscribers)
//! and the last good version stays in force.

use super::{Engine, EngineEvent, GitCtx, triggers};
use crate::store::NewEvent;
use crate::workspace::Workspace;
use crate::workspace::watch::{Snapshot, watch as watch_dir};
use serde_json::json;
use std::path::PathBuf;
use std::time::Duration;
use tokio::sync::mpsc::UnboundedSender;

/// How long an engine runs before it watches its definition files. A short `run --wait`
/// then never makes the watch: the kernel ends an inotify watch with a grace period that
/// held every such run's exit for some 15 ms. Nothing is missed: what changed since the
/// definitions were read is reloaded when the watch starts.
const WATCH_AFTER: Duration = Duration::from_secs(1);

/// Starts the definition watcher after [`WATCH_AFTER`], for as long as the engine reads
/// `tx`; `read` is what the files looked like when the engine read them. Without a watch
/// (no inotify slots left, say) edits apply at the next start, and the log says so.
pub(super) fn watch_later(ws: &Workspace, read: Snapshot, tx: UnboundedSender<Vec<PathBuf>>) {
    let ws = ws.clone();
    tokio::spawn(async move {
        tokio::select! {
            _ = tokio::time::sleep(WATCH_AFTER) => {}
            _ = tx.closed() => return,
        }
        let to = tx.clone();
        let start = tokio::task::spawn_blocking(move || {
            let watcher = watch_dir(&ws.dir(), move |paths| {
                let _ = to.send(paths);
            });
            // Looked at after the watch began: a change from now on is the watch's.
            (watcher, read.changed(&Snapshot::take(&ws.dir())))
        });
        let Ok((watcher, changed)) = start.await else {
            return;
        };
        let watcher = match watcher {
            Ok(w) => w,
            Err(e) => {
                tracing::warn!(
                    "{e}; edits to pipelines, agents and config.toml apply at the next start"
                );
                return;
            }
        };
        if !changed.is_empty() {
            let _ = tx.send(changed);
        }
        tx.closed().await;
        drop(watcher);
    });
}

impl Engine {
    /// Reads the definitions again after `changed` files changed.
    pub(super) async fn reload(&mut self, changed: Vec<PathBuf>) {
        let ws = self.ws.clone();
        let mut live = self.live.clone();
        let mut agents = self.live_agents.clone();
        let read = tokio::task::spawn_blocking(move || {
            let mut problems = live.reload(&ws.pipelines_dir(), &ws.agents_dir());
            problems.extend(agents.reload(&ws.agents_dir()));
            let cfg = ws.config();
            (live, agents, problems, cfg)
        })
        .await;
        let Ok((live, agents, mut problems, cfg)) = read else {
            tracing::error!("reloading the definitions panicked");
            return;
        };
        match cfg {
            Ok(cfg) => {
                let git_changed = cfg.worktree_root != self.cfg.worktree_root
                    || cfg.base_branch != self.cfg.base_branch;
                self.cfg = cfg;
                if git_changed {
                    self.redetect_git().await;
                }
            }
            Err(e) => problems.push(format!("{e}; the settings read before stay in force")),
        }
        let (set, trigger_errors) = triggers::TriggerSet::new(&live.catalog.pipelines);
        problems.extend(
            trigger_errors
                .iter()
                .map(|e| format!("{e} — this trigger is skipped")),
        );
        self.triggers = set;
        self.trigger_errors = trigger_errors;
        self.note_new_schedules().await;
        self.live = live;
        self.catalog_tx
            .send_replace(std::sync::Arc::new(self.live.catalog.clone()));
        self.agents = std::sync::Arc::new(agents.catalog.clone());
        self.live_agents = agents;
        let files: Vec<String> = changed
            .iter()
            .map(|p| {
                p.strip_prefix(self.ws.root())
                    .unwrap_or(p)
                    .display()
                    .to_string()
            })
            .collect();
        let summary = if problems.is_empty() {
            tracing::info!("reloaded {}", files.join(", "));
            format!("reloaded {}", files.join(", "))
        } else {
            for p in &problems {
                tracing::warn!("{p}");
            }
            problems.join("; ")
        };
        let ok = problems.is_empty();
        let recorded = self
            .store
            .write(move |db| {
                db.insert_event(&NewEvent {
                    task_id: None,
                    category: "config",
                    kind: if ok { "reload" } else { "reload.failed" },
                    summary,
                    data: json!({ "files": files }),
                    actor: "engine",
                    level: if ok { "info" } else { "error" },
                })
            })
            .await;
        if let Err(e) = recorded {
            tracing::error!("recording a reload failed: {e}");
        }
        let _ = self.events.send(EngineEvent::Reloaded { problems });
    }

    async fn redetect_git(&mut self) {
        let (ws, cfg) = (self.ws.clone(), self.cfg.clone());
        match self
            .store
            .with_writer(move |s| GitCtx::detect(&ws, &cfg, &s.read()))
            .await
        {
            Ok(Ok(git)) => self.git = git,
            Ok(Err(e)) => tracing::warn!("{e}; the git settings read before stay in force"),
            Err(e) => tracing::warn!("re-reading the git settings failed: {e}"),
        }
    }
}
