//! Forge events reaching a task, whichever path brought them (a webhook, a poll): recorded
//! once by what they mean, the task's pull request updated, an event written. The caller
//! then fires the event's trigger.

use crate::forge::webhook::{ForgeEvent, What};
use crate::store::{Db, NewEvent};
use serde_json::json;

/// Event keys remembered (in the webhook deliveries' window).
pub const KEEP: i64 = 10_000;
/// How long they are remembered.
pub const KEEP_MS: i64 = 7 * 24 * 3600 * 1000;

/// The note handed to the next step for failed checks.
pub fn failure_note(ev: &ForgeEvent) -> Option<String> {
    let What::ChecksFailed { failures, .. } = &ev.what else {
        return None;
    };
    let lines: Vec<String> = failures
        .iter()
        .map(|f| format!("check `{}` failed: {}", f.name, f.summary))
        .collect();
    Some(if lines.is_empty() {
        "the checks failed".into()
    } else {
        lines.join("\n")
    })
}

/// Records `ev` for `task` unless an event with the same meaning was recorded before.
/// Returns true when it is new (and its trigger should fire).
pub fn record(
    db: &Db,
    task: i64,
    number: u64,
    ev: &ForgeEvent,
    source: &str,
) -> crate::store::Result<bool> {
    if !db.note_delivery(&ev.key(number), KEEP, KEEP_MS)? {
        return Ok(false);
    }
    let (summary, state) = match &ev.what {
        What::Merged => (format!("#{number} was merged"), Some("merged")),
        What::Closed => (
            format!("#{number} was closed without merging"),
            Some("closed"),
        ),
        What::ChangesRequested { .. } => (format!("changes requested on #{number}"), None),
        What::ChecksFailed { failures, .. } => (
            format!(
                "checks failed on #{number}: {}",
                failures
                    .iter()
                    .map(|f| f.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            None,
        ),
    };
    let failed = matches!(ev.what, What::ChecksFailed { .. });
    if let Some(mut pr) = db.task_pr(task)? {
        if let Some(st) = state {
            pr.state = st.to_string();
        }
        if failed {
            pr.checks = "failed".into();
        }
        db.set_task_pr(&pr)?;
    }
    db.insert_event(&NewEvent {
        task_id: Some(task),
        category: "forge",
        kind: "forge.event",
        summary: format!("{summary} ({source})"),
        data: json!({"number": number, "trigger": ev.trigger(), "source": source}),
        actor: "forge",
        level: if failed { "warning" } else { "info" },
    })?;
    Ok(true)
}

/// After a pull request was merged: deletes its branch on the remote (through the
/// repository's git queue), and records what happened as an event.
pub async fn after_merge(
    store: &crate::store::StoreHandle,
    root: std::path::PathBuf,
    settings: crate::forge::ForgeSettings,
    task: i64,
) {
    let Ok(t) = store.read(move |db| db.task(task)).await else {
        return;
    };
    let Some(branch) = t.branch else { return };
    let remote = settings.remote().to_string();
    let gone = {
        let (branch, remote) = (branch.clone(), remote.clone());
        tokio::task::spawn_blocking(move || {
            let repo = crate::workspace::git::repo_root(&root)
                .ok_or("the workspace is not a git repository")?;
            crate::workspace::GitQueue::for_repo(&repo)
                .run(move |repo| crate::forge::push::delete_branch(repo, &remote, &branch))
        })
        .await
        .unwrap_or_else(|e| Err(e.to_string()))
    };
    let (summary, level) = match &gone {
        Ok(()) => (
            format!("deleted {branch} on {remote} after the merge"),
            "info",
        ),
        Err(e) => (e.clone(), "warning"),
    };
    let written = store
        .write(move |db| {
            db.insert_event(&NewEvent {
                task_id: Some(task),
                category: "git",
                kind: "forge.branch_deleted",
                summary,
                data: json!({}),
                actor: "forge",
                level,
            })
        })
        .await;
    if let Err(e) = written {
        tracing::warn!("recording the branch deletion of task {task} failed: {e}");
    }
}
