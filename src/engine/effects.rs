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

    /// Creates the task's worktree if it has none yet (or if its folder is no longer a
    /// checkout of the task's branch); returns the folder its steps run in. git runs without
    /// holding the store; the store is locked only to record the result.
    pub fn prepare(
        &self,
        store: &std::sync::Mutex<Store>,
        task: &Task,
    ) -> Result<PathBuf, GitError> {
        if let (Some(wt), Some(branch)) = (&task.worktree, &task.branch)
            && git::current_branch(Path::new(wt)).as_deref() == Some(branch.as_str())
        {
            return Ok(Path::new(wt).join(&self.rel));
        }
        let base = task
            .base_branch
            .clone()
            .unwrap_or_else(|| self.base.clone());
        if let Some(stale) = &task.worktree {
            // A folder left half-removed (or removed by hand): let git forget it.
            let _ = git::remove_worktree(&self.repo, Path::new(stale));
        }
        let (branch, path) =
            git::ensure_worktree(&self.repo, &self.worktree_root, &base, task.id, &task.title)?;
        let path_s = path.to_string_lossy().into_owned();
        let mut guard = store.lock().unwrap_or_else(|p| p.into_inner());
        let recorded = guard.write(|db| {
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
        Some(g) => g.merge(task).map_err(|e| match (&e, &task.worktree) {
            // Say how to get out of it: the conflict is resolved where the task's work is.
            (GitError::Conflict { base, .. }, Some(wt)) => {
                format!("{e}; to resolve, run `git merge {base}` in {wt}, fix and commit, then approve again")
            }
            _ => e.to_string(),
        }),
        None => Ok(()),
    }
}

/// After a committed transition: the worktree clean-up of a finished task, then the hooks.
/// Opens its own connection, so slow git or hooks never hold anyone else's.
pub fn after_commit(ws: &Workspace, git: Option<&GitCtx>, moved: &Moved) {
    let mut store = match Store::open(&ws.db_path()) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!("after task {} moved: {e}", moved.task_id);
            return;
        }
    };
    let Ok(task) = store.read().task(moved.task_id) else {
        return;
    };
    if let Some(g) = git {
        cleanup_worktree(g, &mut store, &task, moved);
    }
    run_hooks(ws, &mut store, &task, moved);
}

/// At done or cancelled the worktree goes. Uncommitted work is committed to the task branch
/// first, so nothing is lost; a merged branch is deleted, any other kept.
fn cleanup_worktree(g: &GitCtx, store: &mut Store, task: &Task, moved: &Moved) {
    let kind = super::pipeline_of(task)
        .ok()
        .and_then(|p| p.status(&moved.to).map(|s| s.kind));
    let (Some(wt), Some(kind @ (StatusKind::Done | StatusKind::Cancelled))) =
        (&task.worktree, kind)
    else {
        return;
    };
    let wt_path = Path::new(wt);
    let saved = if wt_path.exists() {
        git::commit_all(
            wt_path,
            &format!(
                "baton: work left when task {} ended at {}",
                task.id, moved.to
            ),
        )
    } else {
        Ok(false)
    };
    let (summary, level) = match saved {
        Err(e) => (
            format!("kept worktree {wt}: its uncommitted work could not be committed ({e})"),
            "error",
        ),
        Ok(saved) => {
            let saved_note = if saved {
                "; uncommitted work committed to the branch"
            } else {
                ""
            };
            match git::remove_worktree(&g.repo, wt_path) {
                Err(e) => (format!("could not remove worktree {wt}: {e}"), "error"),
                Ok(()) => {
                    let _ = store.write(|db| db.clear_worktree(task.id));
                    let merged = kind == StatusKind::Done
                        && moved.hooks.iter().any(|h| matches!(h, Hook::Merge(_)));
                    let base = task.base_branch.as_deref().unwrap_or(&g.base);
                    let branch_note = match (&task.branch, merged) {
                        (Some(b), true) => match git::delete_merged_branch(&g.repo, b, base) {
                            Ok(()) => format!("; merged branch {b} deleted"),
                            Err(e) => format!("; branch {b} kept ({e})"),
                        },
                        (Some(b), false) => format!("; branch {b} kept"),
                        (None, _) => String::new(),
                    };
                    (
                        format!("worktree {wt} removed{saved_note}{branch_note}"),
                        "info",
                    )
                }
            }
        }
    };
    let _ = store.write(|db| {
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

/// Runs a transition's hooks (all but `merge`, which ran before the commit) and records
/// each result; a failing hook is an event, never a rollback.
fn run_hooks(ws: &Workspace, store: &mut Store, task: &Task, moved: &Moved) {
    let mut results = Vec::new();
    for hook in &moved.hooks {
        let outcome = match hook {
            Hook::Merge(_) => Ok("merged".to_string()),
            Hook::Notify(v) => Ok(v
                .get("message")
                .and_then(|m| m.as_str())
                .unwrap_or("notified")
                .to_string()),
            Hook::Run(cmd) => run_hook(ws, task, moved, cmd),
            Hook::StartTask(spec) => start_task_hook(ws, store, task, spec),
            Hook::Webhook(spec) => webhook_hook(task, moved, spec),
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

/// How long a `run` hook may take before its process group is killed.
const HOOK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// A `run` hook: `sh -c` in the workspace root with the task in the environment, in its own
/// process group, killed after [`HOOK_TIMEOUT`].
fn run_hook(ws: &Workspace, task: &Task, moved: &Moved, cmd: &str) -> Result<String, String> {
    use std::os::unix::process::CommandExt;
    let dir = tempfile_path(ws, task.id);
    let out_path = dir.with_extension("out");
    let err_path = dir.with_extension("err");
    let open = |p: &Path| {
        std::fs::File::create(p).map_err(|e| format!("cannot write {}: {e}", p.display()))
    };
    let mut child = std::process::Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .current_dir(ws.root())
        .env("BATON_TASK_ID", task.id.to_string())
        .env("BATON_TASK_TITLE", &task.title)
        .env("BATON_FROM", &moved.from)
        .env("BATON_TO", &moved.to)
        .env("BATON_TRIGGER", moved.trigger.to_string())
        .stdin(std::process::Stdio::null())
        .stdout(open(&out_path)?)
        .stderr(open(&err_path)?)
        .process_group(0)
        .spawn()
        .map_err(|e| format!("could not start `sh`: {e}"))?;
    let deadline = std::time::Instant::now() + HOOK_TIMEOUT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            _ => {
                crate::exec::process::signal_group(child.id(), nix::sys::signal::Signal::SIGKILL);
                let _ = child.wait();
                return Err(format!(
                    "`{cmd}` took longer than {} s and was killed",
                    HOOK_TIMEOUT.as_secs()
                ));
            }
        }
    };
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    let (text, err) = (read(&out_path), read(&err_path));
    let _ = std::fs::remove_file(&out_path);
    let _ = std::fs::remove_file(&err_path);
    let first = text.lines().next().unwrap_or("").to_string();
    if status.success() {
        Ok(first)
    } else {
        Err(format!(
            "`{cmd}` exited {}: {}",
            status.code().unwrap_or(-1),
            err.lines().next().unwrap_or(&first)
        ))
    }
}

/// A scratch path in the task's context folder for a hook's output.
fn tempfile_path(ws: &Workspace, task_id: i64) -> std::path::PathBuf {
    let dir = ws.context_dir(task_id);
    let _ = std::fs::create_dir_all(&dir);
    dir.join(format!(
        "hook-{}-{}",
        std::process::id(),
        crate::store::now_ms()
    ))
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
    // The blocking client gets a thread of its own, whatever context this runs in.
    let target = url.to_string();
    let sent = std::thread::spawn(move || {
        let client = reqwest::blocking::Client::builder()
            .timeout(std::time::Duration::from_secs(10))
            .build()
            .map_err(|e| format!("cannot build an HTTP client: {e}"))?;
        client
            .post(&target)
            .json(&body)
            .send()
            .map(|r| r.status())
            .map_err(|e| {
                format!("POST {target} failed: {e} — check the URL and that the receiver is up")
            })
    })
    .join()
    .map_err(|_| "the webhook thread panicked".to_string())?;
    let status = sent?;
    if status.is_success() {
        Ok(format!("POST {url}: {status}"))
    } else {
        Err(format!("POST {url} answered {status}"))
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
