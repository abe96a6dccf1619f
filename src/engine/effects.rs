//! Side effects around a transition: a task's git worktree, the `merge` hook that must
//! succeed *before* a transition commits, and the clean-up and hooks that run after.

use super::transition::Moved;
use crate::pipeline::{Hook, StatusKind};
use crate::store::{Db, NewEvent, Store, Task};
use crate::workspace::git::{self, GitError};
use crate::workspace::{Config, Workspace};
use serde_json::json;
use std::path::{Path, PathBuf};

/// The git facts of a workspace that is a repository.
#[derive(Debug, Clone)]
pub struct GitCtx {
    /// The repository's top folder.
    pub repo: PathBuf,
    /// The workspace root relative to the repository (steps run at the same place in a worktree).
    pub rel: PathBuf,
    /// Where task worktrees are created.
    pub worktree_root: PathBuf,
    /// The branch task branches start from and merge into.
    pub base: String,
}

impl GitCtx {
    /// `Ok(None)` when the workspace is not in a git repository (steps run in its root).
    pub fn detect(ws: &Workspace, cfg: &Config, db: &Db) -> Result<Option<Self>, GitError> {
        let Some(repo) = git::repo_root(ws.root()) else {
            let has_git_dir = ws.root().ancestors().any(|d| d.join(".git").exists());
            if has_git_dir
                && std::process::Command::new("git")
                    .arg("--version")
                    .output()
                    .is_err()
            {
                return Err(GitError::Missing);
            }
            return Ok(None);
        };
        let repo = repo.canonicalize().unwrap_or(repo);
        let rel = ws
            .root()
            .strip_prefix(&repo)
            .map(Path::to_path_buf)
            .unwrap_or_default();
        let base = cfg
            .base_branch
            .clone()
            .or_else(|| db.meta("base_branch").ok().flatten())
            .or_else(|| git::current_branch(&repo))
            .unwrap_or_else(|| "main".into());
        let worktree_root = match &cfg.worktree_root {
            Some(p) if p.is_absolute() => p.clone(),
            Some(p) => ws.root().join(p),
            None => git::default_worktree_root(&repo),
        };
        Ok(Some(Self {
            repo,
            rel,
            worktree_root,
            base,
        }))
    }

    /// Creates the task's worktree if it has none yet; returns the folder its steps run in.
    pub fn prepare(&self, store: &mut Store, task: &Task) -> Result<PathBuf, GitError> {
        if let Some(wt) = &task.worktree
            && Path::new(wt).exists()
        {
            return Ok(Path::new(wt).join(&self.rel));
        }
        let base = task
            .base_branch
            .clone()
            .unwrap_or_else(|| self.base.clone());
        let (branch, path) =
            git::ensure_worktree(&self.repo, &self.worktree_root, &base, task.id, &task.title)?;
        let path_s = path.to_string_lossy().into_owned();
        let recorded = store.write(|db| {
            db.set_worktree(task.id, Some(&branch), Some(&path_s), Some(&base))?;
            db.insert_event(&NewEvent {
                task_id: Some(task.id),
                category: "git",
                kind: "worktree.created",
                summary: format!("worktree {path_s} on branch {branch} from {base}"),
                data: json!({ "branch": branch, "path": path_s, "base": base }),
                actor: "engine",
                level: "info",
            })
        });
        if let Err(e) = recorded {
            return Err(GitError::Failed {
                args: "record worktree".into(),
                message: e.to_string(),
            });
        }
        Ok(path.join(&self.rel))
    }

    /// The `merge` hook: commit what the worktree holds, then merge the task branch into its
    /// base. Runs inside the transition's transaction, before it commits.
    pub fn merge(&self, task: &Task) -> Result<(), GitError> {
        let (Some(branch), Some(wt)) = (&task.branch, &task.worktree) else {
            return Ok(());
        };
        let base = task
            .base_branch
            .clone()
            .unwrap_or_else(|| self.base.clone());
        git::commit_all(
            Path::new(wt),
            &format!(
                "baton: uncommitted work of task {} ({})",
                task.id, task.title
            ),
        )?;
        git::merge(
            &self.repo,
            branch,
            &base,
            &format!("Merge task {}: {}", task.id, task.title),
        )
    }
}

/// Runs the `merge` hook when a decision carries one (no-op outside git).
pub fn pre_commit(git: Option<&GitCtx>, task: &Task, hooks: &[Hook]) -> Result<(), String> {
    if !hooks.iter().any(|h| matches!(h, Hook::Merge(_))) {
        return Ok(());
    }
    match git {
        Some(g) => g.merge(task).map_err(|e| e.to_string()),
        None => Ok(()),
    }
}

/// After a committed transition: remove the worktree at done/cancelled (deleting the branch
/// when it was merged), run the `run` and `notify` hooks, and record what happened.
pub fn after_commit(ws: &Workspace, git: Option<&GitCtx>, store: &mut Store, moved: &Moved) {
    let Ok(task) = store.read().task(moved.task_id) else {
        return;
    };
    let kind = super::pipeline_of(&task)
        .ok()
        .and_then(|p| p.status(&moved.to).map(|s| s.kind));
    let mut results = Vec::new();
    if let (Some(g), Some(wt), Some(StatusKind::Done | StatusKind::Cancelled)) =
        (git, &task.worktree, kind)
    {
        let removed = git::remove_worktree(&g.repo, Path::new(wt));
        let merged = moved.hooks.iter().any(|h| matches!(h, Hook::Merge(_)));
        let branch_note = match (&task.branch, merged, kind) {
            (Some(b), true, Some(StatusKind::Done)) => {
                match git::delete_merged_branch(&g.repo, b) {
                    Ok(()) => format!("; merged branch {b} deleted"),
                    Err(e) => format!("; branch {b} kept ({e})"),
                }
            }
            (Some(b), _, _) => format!("; branch {b} kept"),
            _ => String::new(),
        };
        let (summary, level) = match &removed {
            Ok(()) => (format!("worktree {wt} removed{branch_note}"), "info"),
            Err(e) => (format!("could not remove worktree {wt}: {e}"), "error"),
        };
        let _ = store.write(|db| {
            if removed.is_ok() {
                db.clear_worktree(task.id)?;
            }
            db.insert_event(&NewEvent {
                task_id: Some(task.id),
                category: "git",
                kind: "worktree.removed",
                summary,
                data: json!({ "path": wt }),
                actor: "engine",
                level,
            })
        });
    }
    for hook in &moved.hooks {
        let outcome = match hook {
            Hook::Merge(_) => Ok("merged".to_string()),
            Hook::Notify(v) => Ok(v
                .get("message")
                .and_then(|m| m.as_str())
                .unwrap_or("notified")
                .to_string()),
            Hook::Run(cmd) => run_hook(ws, &task, moved, cmd),
            Hook::StartTask(spec) => start_task_hook(ws, store, &task, spec),
            Hook::Webhook(spec) => webhook_hook(&task, moved, spec),
        };
        let (status, detail, level) = match &outcome {
            Ok(d) => ("ok", d.clone(), "info"),
            Err(e) => ("error", e.clone(), "error"),
        };
        results.push(json!({ "hook": hook.name(), "status": status, "detail": detail }));
        let _ = store.write(|db| {
            db.insert_event(&NewEvent {
                task_id: Some(task.id),
                category: "hook",
                kind: if status == "ok" {
                    "hook.ok"
                } else {
                    "hook.failed"
                },
                summary: format!("hook {}: {detail}", hook.name()),
                data: json!({ "hook": hook.name() }),
                actor: "hook",
                level,
            })
        });
    }
    if !results.is_empty() {
        let _ = store.write(|db| db.set_history_hooks(moved.history_id, &json!(results)));
    }
}

/// A `run` hook: `sh -c` in the workspace root with the task in the environment.
fn run_hook(ws: &Workspace, task: &Task, moved: &Moved, cmd: &str) -> Result<String, String> {
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .current_dir(ws.root())
        .env("BATON_TASK_ID", task.id.to_string())
        .env("BATON_TASK_TITLE", &task.title)
        .env("BATON_FROM", &moved.from)
        .env("BATON_TO", &moved.to)
        .env("BATON_TRIGGER", moved.trigger.to_string())
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("could not start `sh`: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let first = text.lines().next().unwrap_or("").to_string();
    if out.status.success() {
        Ok(first)
    } else {
        let err = String::from_utf8_lossy(&out.stderr);
        Err(format!(
            "`{cmd}` exited {}: {}",
            out.status.code().unwrap_or(-1),
            err.lines().next().unwrap_or(&first)
        ))
    }
}

/// Records a refused merge as a task event, so the board and `show` explain it.
pub fn record_refusal(store: &mut Store, err: &super::EngineError) {
    if let super::EngineError::Merge { task, message, .. } = err {
        let _ = store.write(|db| {
            db.insert_event(&NewEvent {
                task_id: Some(*task),
                category: "git",
                kind: "merge.failed",
                summary: message.clone(),
                data: json!({}),
                actor: "engine",
                level: "error",
            })
        });
    }
}

/// A `start_task` hook: `{"pipeline": "deploy", "title": "Deploy {{title}}", "prompt": "…"}`
/// creates a task on another pipeline and starts it. Templates see `{{id}}`, `{{title}}`,
/// `{{prompt}}` and `{{status}}` of the task that moved.
fn start_task_hook(
    ws: &Workspace,
    store: &mut Store,
    task: &Task,
    spec: &serde_json::Value,
) -> Result<String, String> {
    let pipeline_id = spec
        .get("pipeline")
        .and_then(|p| p.as_str())
        .ok_or("start_task needs a \"pipeline\" (a pipeline id)")?;
    let render = |t: &str| {
        t.replace("{{id}}", &task.id.to_string())
            .replace("{{title}}", &task.title)
            .replace("{{prompt}}", &task.prompt)
            .replace("{{status}}", &task.status)
    };
    let title = render(
        spec.get("title")
            .and_then(|t| t.as_str())
            .unwrap_or("{{title}}"),
    );
    let prompt = render(
        spec.get("prompt")
            .and_then(|t| t.as_str())
            .unwrap_or("{{prompt}}"),
    );
    let agents = crate::pipeline::agent_ids(Some(&ws.agents_dir()));
    let catalog = crate::pipeline::load_catalog(Some(&ws.pipelines_dir()), Some(&agents));
    let pipeline = catalog
        .pipelines
        .iter()
        .find(|p| p.id == pipeline_id)
        .ok_or_else(|| format!("no pipeline `{pipeline_id}` to start a task on"))?;
    let new_id = store
        .write(|db| {
            let id = super::actions::create_task(db, pipeline, &title, &prompt)?;
            let req = super::Request {
                task_id: id,
                action: super::Action::Start,
                expected_status: None,
                actor: format!("task {}", task.id),
            };
            let first_is_queue =
                pipeline.statuses.first().map(|s| s.kind) == Some(StatusKind::Queue);
            if first_is_queue {
                super::actions::apply(db, &req, &super::actions::no_pre_commit)?;
            }
            Ok::<_, super::EngineError>(id)
        })
        .map_err(|e| e.to_string())?;
    Ok(format!("started task {new_id} on {pipeline_id}"))
}

/// A `webhook` hook: `{"url": "https://…"}` receives a JSON POST describing the move.
/// Bounded by a 10 s timeout; a non-2xx answer is a hook failure (the move stands).
fn webhook_hook(task: &Task, moved: &Moved, spec: &serde_json::Value) -> Result<String, String> {
    let url = spec
        .get("url")
        .and_then(|u| u.as_str())
        .ok_or("webhook needs a \"url\"")?;
    let body = json!({
        "task": { "id": task.id, "title": task.title, "pipeline": task.pipeline_id },
        "from": moved.from,
        "to": moved.to,
        "trigger": moved.trigger.to_string(),
    });
    let client = reqwest::blocking::Client::builder()
        .timeout(std::time::Duration::from_secs(10))
        .build()
        .map_err(|e| format!("cannot build an HTTP client: {e}"))?;
    let resp = client.post(url).json(&body).send().map_err(|e| {
        format!("POST {url} failed: {e} — check the URL and that the receiver is up")
    })?;
    let status = resp.status();
    if status.is_success() {
        Ok(format!("POST {url}: {status}"))
    } else {
        Err(format!("POST {url} answered {status}"))
    }
}
