//! Running the follow-ups of committed transitions: the finished task's worktree clean-up,
//! then its hooks, in order. Each was recorded in the transition's transaction; one that an
//! engine started but never finished runs again at the next start (at least once), with the
//! same idempotency key. Hooks use the step's process runner: own process group, timeout,
//! cancellation, redaction.

use super::effects::{self, GitCtx};
use super::transition::FollowUp;
use super::{Engine, EngineEvent};
use crate::exec::{self, Finish, StepEnv};
use crate::pipeline::{Hook, StatusKind};
use crate::store::{FollowupRow, NewEvent, StoreHandle, Stream, Task};
use crate::workspace::Workspace;
use serde_json::json;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{broadcast, mpsc};
use tokio_util::sync::CancellationToken;

/// How long a `run` hook may take before its process group is ended.
const HOOK_TIMEOUT: Duration = Duration::from_secs(60);
/// Tries at delivering a webhook (network errors and 5xx answers are retried).
const WEBHOOK_TRIES: u32 = 4;
/// The first webhook retry waits this long; each further one doubles it.
const WEBHOOK_BACKOFF: Duration = Duration::from_millis(500);
/// Tasks made by tasks (`start_task` hooks, `task_done` triggers, `push` triggers on a
/// task's branch) of tasks made so… stop at this depth.
pub const MAX_CHAIN_DEPTH: i64 = 5;

/// What a follow-up runner needs from the engine.
#[derive(Clone)]
pub(super) struct Ctx {
    pub ws: Workspace,
    pub git: Option<GitCtx>,
    pub store: StoreHandle,
    pub events: broadcast::Sender<EngineEvent>,
    pub kill_grace: Duration,
    pub cancel: CancellationToken,
    /// Follow-up ids being run in this process.
    pub running: Arc<Mutex<HashSet<i64>>>,
    /// The engine's name: a follow-up it starts is its own.
    pub engine: String,
}

impl Engine {
    fn followup_ctx(&self) -> Ctx {
        Ctx {
            ws: self.ws.clone(),
            git: self.git.clone(),
            store: self.store.clone(),
            events: self.events.clone(),
            kill_grace: self.cfg.kill_grace,
            cancel: self.followup_cancel.clone(),
            running: self.followups_running.clone(),
            engine: self.me.ident.name.clone(),
        }
    }

    /// Runs a committed transition's follow-ups once the steps it stopped are gone.
    pub(super) fn spawn_followups(
        &mut self,
        task_id: i64,
        rows: Vec<FollowupRow>,
        ended: Vec<CancellationToken>,
    ) {
        let ctx = self.followup_ctx();
        let rows = claim(&ctx, rows);
        if rows.is_empty() {
            return;
        }
        let grace = self.cfg.kill_grace + Duration::from_secs(5);
        // A task's follow-ups run in the order of its moves: each runner waits for the one
        // before it.
        let done = CancellationToken::new();
        self.followup_tails.retain(|_, t| !t.is_cancelled());
        let before = self.followup_tails.insert(task_id, done.clone());
        self.followups.spawn(async move {
            let _done = done.drop_guard();
            if let Some(before) = before {
                before.cancelled().await;
            }
            for e in ended {
                let _ = tokio::time::timeout(grace, e.cancelled()).await;
            }
            run_rows(&ctx, rows).await;
            let _ = ctx.events.send(EngineEvent::TaskChanged { task_id });
        });
    }

    /// Runs the follow-ups left unfinished by an engine that stopped (at start).
    pub(super) async fn sweep_followups(&mut self) {
        let open = match self.store.read(|db| db.open_followups()).await {
            Ok(rows) => rows,
            Err(e) => {
                tracing::error!("reading unfinished hooks failed: {e}");
                return;
            }
        };
        // One runner per transition, in recorded order.
        let mut by_history: Vec<(i64, i64, Vec<FollowupRow>)> = Vec::new();
        for row in open {
            match by_history.iter_mut().find(|(h, _, _)| *h == row.history_id) {
                Some((_, _, rows)) => rows.push(row),
                None => by_history.push((row.history_id, row.task_id, vec![row])),
            }
        }
        for (_, task_id, rows) in by_history {
            self.spawn_followups(task_id, rows, Vec::new());
        }
    }
}

/// Keeps the rows no runner in this process has yet, and marks them taken.
fn claim(ctx: &Ctx, rows: Vec<FollowupRow>) -> Vec<FollowupRow> {
    let mut running = ctx.running.lock().unwrap_or_else(|p| p.into_inner());
    rows.into_iter().filter(|r| running.insert(r.id)).collect()
}

async fn run_rows(ctx: &Ctx, rows: Vec<FollowupRow>) {
    // However this ends, the rows are no longer this process's: a sweep may take up any
    // left unfinished.
    struct Release<'a>(&'a Ctx, Vec<i64>);
    impl Drop for Release<'_> {
        fn drop(&mut self) {
            let mut running = self.0.running.lock().unwrap_or_else(|p| p.into_inner());
            for id in &self.1 {
                running.remove(id);
            }
        }
    }
    let _release = Release(ctx, rows.iter().map(|r| r.id).collect());
    for row in rows {
        if ctx.cancel.is_cancelled() {
            // Left `running`: the next engine runs it again.
            break;
        }
        let id = row.id;
        let engine = ctx.engine.clone();
        let attempt = match ctx
            .store
            .write(move |db| db.start_followup(id, &engine))
            .await
        {
            Ok(Some(n)) => n,
            Ok(None) => continue,
            Err(e) => {
                tracing::error!("starting follow-up {id} failed: {e}");
                continue;
            }
        };
        // An earlier attempt was cut off by a dead engine: whatever of it still runs (its
        // guard ends it with the engine, but a guard can be killed too) goes before this
        // one starts, so two never run at once.
        if attempt > 1 {
            let root = ctx.ws.root().display().to_string();
            let mark = crate::exec::process::Mark::new(&row.key, &root);
            crate::exec::process::end_marked(&mark, ctx.kill_grace).await;
        }
        let body: Option<FollowUp> = serde_json::from_value(row.body.clone()).ok();
        let hook_index = match &body {
            Some(FollowUp::Hook { index, .. }) => Some(*index),
            _ => None,
        };
        let task_id = row.task_id;
        let task = ctx.store.read(move |db| db.task(task_id)).await;
        let (name, outcome) = match (body, task) {
            (_, Err(e)) => ("follow-up", Err(format!("task {task_id} is gone ({e})"))),
            (None, _) => (
                "follow-up",
                Err("it was recorded by another baton version and is skipped".to_string()),
            ),
            (Some(FollowUp::Cleanup { to, merged, run }), Ok(task)) => {
                ("cleanup", cleanup(ctx, task, to, merged, run).await)
            }
            (
                Some(FollowUp::Hook {
                    transition,
                    index,
                    from,
                    to,
                    trigger,
                }),
                Ok(task),
            ) => {
                let moved = MoveFacts {
                    from,
                    to,
                    trigger,
                    key: row.key.clone(),
                    attempt,
                    row: row.id,
                };
                // The hook itself is read from the task's pipeline snapshot: the row names
                // it, so no header or URL secret is copied into the follow-ups table.
                let hook = ctx
                    .store
                    .read(move |db| db.pipeline(task_id))
                    .await
                    .ok()
                    .and_then(|p| p.transitions.get(transition)?.hooks.get(index).cloned());
                match hook {
                    Some(hook) => (hook.name(), run_hook(ctx, &task, &moved, &hook).await),
                    None => (
                        "hook",
                        Err("its transition is no longer in the task's pipeline".to_string()),
                    ),
                }
            }
        };
        if ctx.cancel.is_cancelled() && outcome.is_err() {
            break;
        }
        let (ok, detail) = match &outcome {
            Ok(d) => (true, d.clone()),
            Err(e) => (false, e.clone()),
        };
        let result = json!({
            "hook": name,
            "state": if ok { "ok" } else { "failed" },
            "detail": detail,
            "attempts": attempt,
            "at": crate::store::rfc3339(crate::store::now_ms()),
        });
        let hist = row.history_id;
        // A removed worktree is forgotten, so `show` and the board no longer name it.
        let removed =
            name == "cleanup" && ok && ctx.git.is_some() && task_worktree_gone(ctx, task_id).await;
        let recorded = ctx
            .store
            .write(move |db| {
                db.finish_followup(id, ok, &detail)?;
                if removed {
                    db.clear_worktree(task_id)?;
                }
                if name != "cleanup" {
                    db.insert_event(&NewEvent {
                        task_id: Some(task_id),
                        category: "hook",
                        kind: if ok { "hook.ok" } else { "hook.failed" },
                        summary: format!("hook {name}: {detail}"),
                        data: json!({ "hook": name, "attempt": attempt }),
                        actor: "hook",
                        level: if ok { "info" } else { "error" },
                    })?;
                    let mut hooks = db.history_hooks(hist)?;
                    super::transition::record_hook(&mut hooks, hook_index, result);
                    db.set_history_hooks(hist, &hooks)?;
                } else {
                    db.insert_event(&NewEvent {
                        task_id: Some(task_id),
                        category: "git",
                        kind: "worktree.removed",
                        summary: detail.clone(),
                        data: json!({}),
                        actor: "engine",
                        level: if ok { "info" } else { "error" },
                    })?;
                }
                Ok::<_, crate::store::StoreError>(())
            })
            .await;
        if let Err(e) = recorded {
            tracing::error!("recording follow-up {id} failed: {e}");
        }
    }
}

/// True when the task has a recorded worktree whose folder no longer exists.
async fn task_worktree_gone(ctx: &Ctx, task_id: i64) -> bool {
    let Ok(task) = ctx.store.read(move |db| db.task(task_id)).await else {
        return false;
    };
    task.worktree
        .is_some_and(|wt| !std::path::Path::new(&wt).exists())
}

/// The move a hook fires on, and its idempotency key.
struct MoveFacts {
    from: String,
    to: String,
    trigger: String,
    key: String,
    attempt: i64,
    /// The follow-up row, finished in the same write as a hook's own record.
    row: i64,
}

async fn cleanup(
    ctx: &Ctx,
    task: Task,
    to: String,
    merged: bool,
    run: Option<i64>,
) -> Result<String, String> {
    let Some(git) = ctx.git.clone() else {
        return Ok("no git repository".into());
    };
    // A task retried (or moved on) while the clean-up waited for its stopped step uses the
    // worktree again: leave it.
    if task.status != to || (run.is_some() && task.run_id != run) {
        return Ok(format!(
            "worktree kept: the task has moved on to {} since it ended at {to}",
            task.status
        ));
    }
    tokio::task::spawn_blocking(move || effects::cleanup_worktree(&git, &task, &to, merged))
        .await
        .unwrap_or_else(|e| Err(format!("the clean-up panicked: {e}")))
}

async fn run_hook(
    ctx: &Ctx,
    task: &Task,
    moved: &MoveFacts,
    hook: &Hook,
) -> Result<String, String> {
    match hook {
        Hook::Merge(_) => Ok("merged".to_string()),
        Hook::Notify(v) => {
            super::notify_hook::notify(&ctx.events, v, task, &moved.from, &moved.to).await
        }
        Hook::Run(cmd) => run_command(ctx, task, moved, cmd).await,
        Hook::StartTask(spec) => start_task(ctx, task, moved.row, spec.clone()).await,
        Hook::Webhook(spec) => webhook(task, moved, spec, &ctx.cancel).await,
        Hook::Push(_) => super::forge_hooks::push(ctx, task).await,
        Hook::Pr(spec) => super::forge_hooks::pr(ctx, task, spec).await,
        Hook::Comment(spec) => super::forge_hooks::comment(ctx, task, spec).await,
    }
}

/// A `run` hook: `sh -c` in the workspace root with the task in the environment, through
/// the step runner. Its output is redacted like a step's; the first line is the result.
async fn run_command(
    ctx: &Ctx,
    task: &Task,
    moved: &MoveFacts,
    cmd: &str,
) -> Result<String, String> {
    let vars = vec![
        ("BATON_TASK_ID".to_string(), task.id.to_string()),
        ("BATON_TASK_TITLE".to_string(), task.title.clone()),
        ("BATON_PIPELINE".to_string(), task.pipeline_id.clone()),
        ("BATON_FROM".to_string(), moved.from.clone()),
        ("BATON_TO".to_string(), moved.to.clone()),
        ("BATON_TRIGGER".to_string(), moved.trigger.clone()),
        ("BATON_EXECUTION_KEY".to_string(), moved.key.clone()),
        ("BATON_HOOK_ATTEMPT".to_string(), moved.attempt.to_string()),
        (
            "BATON_WORKSPACE".to_string(),
            ctx.ws.root().display().to_string(),
        ),
    ];
    debug_assert!(
        vars.iter().all(|(k, _)| {
            let k = k.as_str();
            crate::pipeline::STEP_VARS.contains(&k) || crate::pipeline::HOOK_VARS.contains(&k)
        }),
        "every variable baton sets for a hook is in STEP_VARS or HOOK_VARS (none is masked)"
    );
    let env = StepEnv {
        vars,
        workdir: ctx.ws.root().to_path_buf(),
        timeout: HOOK_TIMEOUT,
        kill_grace: ctx.kill_grace,
    };
    let (tx, mut rx) = mpsc::channel::<(Stream, String)>(256);
    let collect = tokio::spawn(async move {
        // The first lines of each stream are enough for a one-line result.
        let (mut out, mut err) = (Vec::new(), Vec::new());
        while let Some((stream, line)) = rx.recv().await {
            let keep = if stream == Stream::Stderr {
                &mut err
            } else {
                &mut out
            };
            if keep.len() < 20 {
                keep.push(line);
            }
        }
        (out, err)
    });
    let finish = exec::run_shell(cmd, &env, tx, ctx.cancel.child_token(), |_| {}).await;
    let (out, err) = collect.await.unwrap_or_default();
    let redactor = crate::exec::redact::Redactor::from_vars(crate::exec::redact::env_secrets());
    let first = |lines: &[String]| {
        lines
            .iter()
            .find(|l| !l.trim().is_empty())
            .map(|l| redactor.apply(crate::ansi::strip(l).into_owned()))
            .unwrap_or_default()
    };
    match finish {
        Finish::Exited(0) => Ok(first(&out)),
        Finish::Exited(code) => {
            let why = Some(first(&err))
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| first(&out));
            Err(format!(
                "`{}` exited {code}: {why}",
                redactor.apply(cmd.to_string())
            ))
        }
        Finish::TimedOut => Err(format!(
            "`{}` took longer than {} s and was stopped",
            redactor.apply(cmd.to_string()),
            HOOK_TIMEOUT.as_secs()
        )),
        Finish::Signalled(s) => Err(format!("killed by signal {s}")),
        Finish::Cancelled => Err("stopped: the engine shut down".into()),
        Finish::SpawnFailed(e) => Err(e),
    }
}

/// A `start_task` hook: `{"pipeline": "deploy", "title": "Deploy {{title}}", "prompt": "…"}`
/// creates a task on another pipeline and starts it. Templates see `{{id}}`, `{{title}}`,
/// `{{prompt}}` and `{{status}}` of the task that moved, filled in one pass. A chain of
/// tasks creating tasks stops at [`MAX_CHAIN_DEPTH`]. With `"after": "siblings"` the new
/// task waits for the tasks made by the `start_task` hooks before it in the same move.
async fn start_task(
    ctx: &Ctx,
    task: &Task,
    row: i64,
    spec: serde_json::Value,
) -> Result<String, String> {
    let pipeline_id = spec
        .get("pipeline")
        .and_then(|p| p.as_str())
        .ok_or("start_task needs a \"pipeline\" (a pipeline id)")?
        .to_string();
    let id = task.id.to_string();
    let render = |t: &str| {
        crate::agents::fill(t, |name| match name {
            "id" => Some(id.as_str()),
            "title" => Some(task.title.as_str()),
            "prompt" => Some(task.prompt.as_str()),
            "status" => Some(task.status.as_str()),
            _ => None,
        })
    };
    let title = super::actions::card_title(&render(
        spec.get("title")
            .and_then(|t| t.as_str())
            .unwrap_or("{{title}}"),
    ));
    let prompt = render(
        spec.get("prompt")
            .and_then(|t| t.as_str())
            .unwrap_or("{{prompt}}"),
    );
    let ws = ctx.ws.clone();
    let catalog = tokio::task::spawn_blocking(move || {
        let agents = crate::pipeline::agent_ids(Some(&ws.agents_dir()));
        crate::pipeline::load_catalog(Some(&ws.pipelines_dir()), Some(&agents))
    })
    .await
    .map_err(|e| e.to_string())?;
    let pipeline = catalog
        .pipelines
        .into_iter()
        .find(|p| p.id == pipeline_id)
        .ok_or_else(|| format!("no pipeline `{pipeline_id}` to start a task on"))?;
    let parent = task.id;
    let waits_for_siblings = spec.get("after").and_then(|a| a.as_str()) == Some("siblings");
    let created = ctx
        .store
        .write(move |db| {
            let depth = db.task_depth(parent)? + 1;
            if depth > MAX_CHAIN_DEPTH {
                return Ok(Err(format!(
                    "not started: task {parent} is already {} tasks deep in a chain of start_task hooks (at most {MAX_CHAIN_DEPTH}) — check for a hook that starts its own pipeline",
                    depth - 1
                )));
            }
            if waits_for_siblings {
                // Waits for the tasks the hooks before it made, started once they are done.
                let new = super::NewTask {
                    title: title.clone(),
                    prompt: prompt.clone(),
                    start: true,
                    actor: "hook".into(),
                    after: db.sibling_tasks(row)?,
                    ..Default::default()
                };
                let id = super::create_and_start(db, &pipeline, &new)?.id;
                db.set_task_parent(id, parent, depth)?;
                db.set_followup_task(row, id)?;
                db.finish_followup(row, true, &format!("started task {id} on {}", pipeline.id))?;
                return Ok(Ok(id));
            }
            let id = super::actions::create_task_by(db, &pipeline, &title, &prompt, "hook")?;
            db.set_task_parent(id, parent, depth)?;
            db.set_followup_task(row, id)?;
            // Finished in the same transaction that made the task: a crash after it never
            // makes a second one.
            db.finish_followup(row, true, &format!("started task {id} on {}", pipeline.id))?;
            let req = super::Request {
                task_id: id,
                action: super::Action::Start,
                expected_status: None,
                actor: format!("task {parent}"),
            };
            let first_is_queue =
                pipeline.statuses.first().map(|s| s.kind) == Some(StatusKind::Queue);
            if first_is_queue {
                super::actions::apply(db, &req, &super::Outside::NONE)?;
            }
            Ok::<_, super::EngineError>(Ok(id))
        })
        .await
        .map_err(|e| e.to_string())??;
    let _ = ctx
        .events
        .send(EngineEvent::TaskChanged { task_id: created });
    Ok(format!("started task {created} on {pipeline_id}"))
}

/// A `webhook` hook: `{"url": "https://…", "headers": {…}}` receives a JSON POST describing
/// the move, with an `Idempotency-Key` header that stays the same across retries and
/// restarts. Network errors and 5xx answers are retried with backoff. Credentials in the
/// URL and header values never reach events or logs.
async fn webhook(
    task: &Task,
    moved: &MoveFacts,
    spec: &serde_json::Value,
    cancel: &CancellationToken,
) -> Result<String, String> {
    let raw = spec
        .get("url")
        .and_then(|u| u.as_str())
        .ok_or("webhook needs a \"url\"")?;
    let mut url = reqwest::Url::parse(raw)
        .map_err(|e| format!("webhook URL {} is not valid: {e}", effects::safe_url(raw)))?;
    let shown = effects::safe_url(raw);
    let (user, pass) = (
        url.username().to_string(),
        url.password().map(str::to_string),
    );
    let _ = url.set_username("");
    let _ = url.set_password(None);
    let body = json!({
        "task": { "id": task.id, "title": task.title, "pipeline": task.pipeline_id },
        "from": moved.from,
        "to": moved.to,
        "trigger": moved.trigger,
        "idempotency_key": moved.key,
    });
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .map_err(|e| format!("cannot build an HTTP client: {e}"))?;
    let mut last = String::new();
    for attempt in 0..WEBHOOK_TRIES {
        if attempt > 0 {
            tokio::select! {
                _ = tokio::time::sleep(WEBHOOK_BACKOFF * 2u32.pow(attempt - 1)) => {}
                _ = cancel.cancelled() => return Err("stopped: the engine shut down".into()),
            }
        }
        let mut req = client
            .post(url.clone())
            .header("Idempotency-Key", &moved.key)
            .json(&body);
        if !user.is_empty() || pass.is_some() {
            req = req.basic_auth(&user, pass.as_deref());
        }
        if let Some(headers) = spec.get("headers").and_then(|h| h.as_object()) {
            for (k, v) in headers {
                if let Some(v) = v.as_str() {
                    req = req.header(k.as_str(), v);
                }
            }
        }
        match req.send().await {
            Ok(r) if r.status().is_success() => return Ok(format!("POST {shown}: {}", r.status())),
            Ok(r) if r.status().is_server_error() => {
                last = format!("POST {shown} answered {}", r.status());
            }
            Ok(r) => return Err(format!("POST {shown} answered {}", r.status())),
            Err(e) => {
                // reqwest's message can carry the URL: say it in our own words.
                let why = if e.is_timeout() {
                    "timed out"
                } else if e.is_connect() {
                    "could not connect"
                } else {
                    "failed"
                };
                last = format!("POST {shown} {why} — check the URL and that the receiver is up");
            }
        }
    }
    Err(format!("{last} (after {WEBHOOK_TRIES} tries)"))
}
