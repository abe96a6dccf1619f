//! The `push` and `pr` hooks: push the task branch to the forge's remote through the
//! repository's git queue, then open or update its pull request through the forge's API
//! (on a blocking thread) and record it on the task. Results are one line; the token never
//! appears in them.

use super::followups::Ctx;
use crate::forge::hook::{PrOptions, TestCounts};
use crate::forge::{ForgeSettings, PrRequest, Target};
use crate::store::{NewEvent, Task, TaskPr};
use serde_json::{Value, json};

/// The forge settings and the task's branch, or why the hook cannot run.
async fn prepare(ctx: &Ctx, task: &Task, hook: &str) -> Result<(ForgeSettings, String), String> {
    let ws = ctx.ws.clone();
    let cfg = tokio::task::spawn_blocking(move || ws.config())
        .await
        .map_err(|e| format!("reading config.toml failed: {e}"))?
        .map_err(|e| e.to_string())?;
    let settings = cfg.forge.ok_or_else(|| {
        format!(
            "the {hook} hook needs a [forge] table in .baton/config.toml — add one (docs/forge.md)"
        )
    })?;
    let branch = task.branch.clone().ok_or_else(|| {
        format!(
            "task {} has no branch to push — the {hook} hook works in a git repository, after a step ran",
            task.id
        )
    })?;
    Ok((settings, branch))
}

/// Commits what the task's worktree holds to its branch (as a merge does), then pushes the
/// branch to the settings' remote: one queued git operation.
async fn push_now(
    ctx: &Ctx,
    task: &Task,
    settings: &ForgeSettings,
    branch: &str,
) -> Result<(), String> {
    let git = ctx
        .git
        .clone()
        .ok_or("the workspace is not a git repository, so there is no branch to push")?;
    let (remote, branch) = (settings.remote().to_string(), branch.to_string());
    let worktree = task.worktree.clone().map(std::path::PathBuf::from);
    let message = format!("baton: work of task {} pushed for review", task.id);
    git.queue
        .run_async(move |repo| {
            if let Some(wt) = worktree.filter(|w| w.exists()) {
                crate::workspace::git::commit_all(&wt, &message).map_err(|e| {
                    format!("the worktree's work could not be committed before the push: {e}")
                })?;
            }
            crate::forge::push::push_branch(repo, &remote, &branch)
        })
        .await
}

/// `push`: the task branch to the remote, `--force-with-lease`.
pub(super) async fn push(ctx: &Ctx, task: &Task) -> Result<String, String> {
    let (settings, branch) = prepare(ctx, task, "push").await?;
    push_now(ctx, task, &settings, &branch).await?;
    Ok(format!("pushed {branch} to {}", settings.remote()))
}

/// `pr`: push, then open the branch's pull request or update the open one.
pub(super) async fn pr(ctx: &Ctx, task: &Task, spec: &Value) -> Result<String, String> {
    let opts = PrOptions::parse(spec).map_err(|e| format!("hook pr: {e}"))?;
    let (settings, branch) = prepare(ctx, task, "pr").await?;
    push_now(ctx, task, &settings, &branch).await?;
    let (handoff, tests) = latest_work(ctx, task.id).await?;
    let id = task.id;
    let closes = ctx
        .store
        .read(move |db| super::forge_issues::issue_of(db, id))
        .await
        .map_err(|e| e.to_string())?;
    let base = opts
        .base
        .clone()
        .or_else(|| settings.base.clone())
        .or_else(|| task.base_branch.clone())
        .or_else(|| ctx.git.as_ref().map(|g| g.base.clone()))
        .unwrap_or_else(|| "main".into());
    let req = PrRequest {
        head: branch,
        base,
        title: task.title.clone(),
        body: crate::forge::hook::body(handoff.as_ref(), tests, closes, task.id),
        draft: opts.draft,
        labels: opts.labels,
        reviewers: opts.reviewers,
    };
    let root = ctx.ws.root().to_path_buf();
    let opened = tokio::task::spawn_blocking(move || {
        let target = Target::of_workspace(&settings, &root)?;
        let forge = target.connect().map_err(|e| e.to_string())?;
        let (pr, created) = forge.open_or_update(&req).map_err(|e| e.to_string())?;
        // The checks of a fresh push are usually not in yet; what there is goes on the card.
        let checks = forge.checks(&pr).unwrap_or_default();
        Ok::<_, String>((target.kind, pr, created, checks))
    })
    .await
    .map_err(|e| format!("the pr hook stopped: {e}"))??;
    let (kind, pr, created, checks) = opened;
    let row = TaskPr {
        task_id: task.id,
        url: pr.url.clone(),
        number: pr.number as i64,
        state: pr.state.as_str().to_string(),
        checks: serde_json::to_value(checks.state)
            .ok()
            .and_then(|v| v.as_str().map(String::from))
            .unwrap_or_else(|| "none".into()),
        checks_summary: checks.summary(),
    };
    let verb = if created { "opened" } else { "updated" };
    let summary = format!("{verb} {} #{}: {}", kind.pr_noun(), pr.number, pr.url);
    let event = summary.clone();
    ctx.store
        .write(move |db| {
            db.set_task_pr(&row)?;
            db.insert_event(&NewEvent {
                task_id: Some(row.task_id),
                category: "forge",
                kind: if created {
                    "forge.pr_opened"
                } else {
                    "forge.pr_updated"
                },
                summary: event,
                data: json!({"url": row.url, "number": row.number, "state": row.state}),
                actor: "hook",
                level: "info",
            })?;
            Ok::<_, crate::store::StoreError>(())
        })
        .await
        .map_err(|e| e.to_string())?;
    Ok(summary)
}

/// The latest handoff's fields and the latest test counts: they speak for the work as it is
/// now.
async fn latest_work(
    ctx: &Ctx,
    id: i64,
) -> Result<(Option<crate::handoff::HandoffFields>, Option<TestCounts>), String> {
    let steps = ctx
        .store
        .read(move |db| db.step_runs(id))
        .await
        .map_err(|e| e.to_string())?;
    let handoff = steps
        .iter()
        .rev()
        .find_map(|s| s.handoff_content.as_deref())
        .map(|raw| crate::handoff::extract(raw).fields);
    let tests = steps.iter().rev().find_map(|s| {
        let t = s.tests.as_ref()?;
        Some(TestCounts {
            passed: t["passed"].as_u64()?,
            failed: t["failed"].as_u64().unwrap_or(0),
            skipped: t["skipped"].as_u64().unwrap_or(0),
        })
    });
    Ok((handoff, tests))
}

/// `comment`: posts the handoff, or the hook's `body` template, on the task's pull request,
/// or on its issue when it has no pull request (or `"on": "issue"` asks for the issue).
pub(super) async fn comment(ctx: &Ctx, task: &Task, spec: &Value) -> Result<String, String> {
    let ws = ctx.ws.clone();
    let settings = tokio::task::spawn_blocking(move || ws.config())
        .await
        .map_err(|e| format!("reading config.toml failed: {e}"))?
        .map_err(|e| e.to_string())?
        .forge
        .ok_or("the comment hook needs a [forge] table in .baton/config.toml — add one (docs/forge.md)")?;
    let id = task.id;
    let (pr, issue) = ctx
        .store
        .read(move |db| Ok((db.task_pr(id)?, super::forge_issues::issue_of(db, id)?)))
        .await
        .map_err(|e: crate::store::StoreError| e.to_string())?;
    let on_issue = match spec.get("on").and_then(Value::as_str) {
        Some("issue") => true,
        Some("pr") | None => pr.is_none() && issue.is_some(),
        Some(other) => {
            return Err(format!(
                "hook comment: `on` is \"pr\" or \"issue\", not \"{other}\""
            ));
        }
    };
    let number = match (on_issue, &pr, issue) {
        (true, _, Some(n)) => n,
        (true, _, None) => {
            return Err(format!(
                "task {id} came from no issue, so there is none to comment on"
            ));
        }
        (false, Some(pr), _) => pr.number as u64,
        (false, None, _) => {
            return Err(format!(
                "task {id} has no pull request to comment on — a pr hook opens one first"
            ));
        }
    };
    let (handoff, tests) = latest_work(ctx, id).await?;
    let default = crate::forge::hook::body(handoff.as_ref(), tests, None, id);
    let body = match spec.get("body").and_then(Value::as_str) {
        Some(t) => t
            .replace("{{id}}", &id.to_string())
            .replace("{{title}}", &task.title)
            .replace("{{status}}", &task.status)
            .replace("{{handoff}}", &default),
        None => default,
    };
    let root = ctx.ws.root().to_path_buf();
    tokio::task::spawn_blocking(move || {
        let forge = Target::client_for(&settings, &root)?;
        let posted = if on_issue {
            forge.comment_issue(number, &body)
        } else {
            forge.comment(number, &body)
        };
        posted.map_err(|e| e.to_string())
    })
    .await
    .map_err(|e| format!("the comment hook stopped: {e}"))??;
    Ok(if on_issue {
        format!("commented on issue #{number}")
    } else {
        format!("commented on #{number}")
    })
}
