//! The engine's step scheduling: claiming due step runs, running them, and taking their
//! results back through `transition()`. A step's end is one transaction: its result, the
//! move it causes, and the claim of the next steps, which start at once.

use super::actions::{Outside, merge_gate};
use super::engines::Claimant;
use super::{Engine, EngineError, EngineEvent, Result, Running, StepReport, StopReason};
use super::{results, runner};
use crate::pipeline::{Pipeline, StatusKind};
use crate::store::{Db, StepRun, Task, TaskState, now_ms};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// A step run claimed in a write transaction, with what its job needs.
pub(super) struct Claimed {
    step: StepRun,
    task: Task,
    pipeline: Option<Arc<Pipeline>>,
    handoff: Option<StepRun>,
    /// A step that outlived the previous engine: found again rather than started.
    reattach: bool,
    /// Its opening line was stored with the claim.
    announced: bool,
    /// The claim's fence (none for a step picked up again after a restart without one).
    fence: Option<i64>,
}

/// A line of the engine's own for a step's log, to store inside a transaction.
fn system_line(step_run_id: i64, text: String) -> crate::store::NewLogLine {
    crate::store::NewLogLine {
        step_run_id,
        stream: crate::store::Stream::System,
        ts: now_ms(),
        text,
    }
}

/// Claims up to `free` due step runs that engine `me` may run, oldest first, inside the
/// caller's transaction. Claiming is what makes a step run at most once: only a pending row
/// can be claimed, and a succeeded execution key is never claimed again.
fn claim_due(db: &Db, free: usize, me: &Claimant) -> crate::store::Result<Vec<Claimed>> {
    let mut out = Vec::new();
    let now = now_ms();
    // The common case in one statement: the oldest due steps claimed at once. A step
    // this engine may not take (labels it lacks, a task whose home is another live engine)
    // is put back, and then the rest are looked at one row at a time past such steps.
    let mut steps = Vec::new();
    let mut held = false;
    let mut seen = super::home::Seen::default();
    let by = me.claim_by();
    // On a shared board, steps are looked at before they are claimed: a claim put back
    // would still take a fence number and wake every other engine for nothing.
    let shared = db.is_postgres();
    let one_go = if shared {
        held = true;
        Vec::new()
    } else {
        db.claim_due_step_runs(now, free as i64, Some(&by))?
    };
    for c in one_go {
        let step = c.step;
        // An unreadable snapshot is reported by the step itself (it cannot start).
        let pipeline = db.pipeline(step.task_id).ok();
        if may_take(db, me, &step, pipeline.as_deref(), &mut seen)? {
            super::home::settle(db, me, step.task_id)?;
            steps.push((step, pipeline, c.fence));
        } else {
            db.unclaim_step_run(step.id)?;
            held = true;
        }
    }
    if held {
        claim_past_held(db, now, free, me, &mut steps)?;
    }
    // An execution key is unique, so a pending row's key can never have succeeded: the
    // claim alone decides.
    for (step, pipeline, fence) in steps {
        let task = db.task(step.task_id)?;
        db.set_task_state(task.id, TaskState::Running)?;
        let handoff = match task.run_id {
            Some(r) => db.last_handoff(r)?,
            None => None,
        };
        // The step's log opens in the claim's transaction: no write of its own.
        let spec = pipeline.as_ref().and_then(|p| {
            p.status(&step.status)
                .filter(|s| s.kind == StatusKind::Step)
                .and_then(|s| s.step.as_ref())
        });
        let announced = match spec {
            Some(spec) => {
                let line = runner::opening_line(&step, spec);
                db.insert_log_lines_or_skip(&[system_line(step.id, line)])?
            }
            None => false,
        };
        out.push(Claimed {
            step,
            task,
            pipeline,
            handoff,
            reattach: false,
            announced,
            fence,
        });
    }
    Ok(out)
}

/// A step claimed in a write transaction: its row, its task's pipeline, its claim's fence.
type Taken = (StepRun, Option<Arc<Pipeline>>, Option<i64>);

/// Claims due steps one at a time until `steps` holds `free`, reading past the pending
/// steps engine `me` may not take (labels it lacks, another engine's task): they stay
/// pending, for another engine.
fn claim_past_held(
    db: &Db,
    now: i64,
    free: usize,
    me: &Claimant,
    steps: &mut Vec<Taken>,
) -> crate::store::Result<()> {
    let mut held = 0;
    let mut seen = super::home::Seen::default();
    while steps.len() < free {
        let limit = held + free - steps.len();
        let due = db.due_step_runs(now, limit as i64)?;
        let exhausted = due.len() < limit;
        held = 0;
        for step in due {
            let pipeline = db.pipeline(step.task_id).ok();
            if !may_take(db, me, &step, pipeline.as_deref(), &mut seen)? {
                held += 1;
                continue;
            }
            let Some(c) = db.claim_step_run_by(step.id, now, Some(&me.claim_by()))? else {
                continue;
            };
            super::home::settle(db, me, step.task_id)?;
            steps.push((c.step, pipeline, c.fence));
            if steps.len() == free {
                break;
            }
        }
        if exhausted {
            break;
        }
    }
    Ok(())
}

/// True while a step runs, or one is pending that engine `me` may start: what an engine
/// that stops when idle waits for. A step that requires labels it lacks is another
/// engine's, and keeps no engine from stopping.
pub(super) fn runnable_open(db: &Db, me: &Claimant) -> crate::store::Result<bool> {
    /// Pending steps looked at; past that many, the engine counts as busy.
    const LOOK: usize = 1000;
    if !db.any_open_step_runs()? {
        return Ok(false);
    }
    if !db.running_step_runs()?.is_empty() {
        return Ok(true);
    }
    let pending = db.due_step_runs(i64::MAX, LOOK as i64)?;
    if pending.len() == LOOK {
        return Ok(true);
    }
    let mut seen = super::home::Seen::default();
    for s in &pending {
        let pipeline = db.pipeline(s.task_id).ok();
        if may_take(db, me, s, pipeline.as_deref(), &mut seen)? {
            return Ok(true);
        }
    }
    Ok(false)
}

/// True when engine `me` may run pending step `step`: it has the labels the step requires,
/// and the step's task is its own or free to take (see [`super::home`]).
fn may_take(
    db: &Db,
    me: &Claimant,
    step: &StepRun,
    pipeline: Option<&Pipeline>,
    seen: &mut super::home::Seen,
) -> crate::store::Result<bool> {
    let required = requires(pipeline, &step.status);
    Ok(me.may_run(required) && super::home::may_claim(db, me, step.task_id, required, seen)?)
}

/// The labels the step of `status` requires of the engine that runs it.
fn requires<'p>(pipeline: Option<&'p Pipeline>, status: &str) -> &'p [String] {
    pipeline
        .and_then(|p| p.status(status))
        .and_then(|s| s.step.as_ref())
        .map_or(&[], |s| s.requires.as_slice())
}

/// How a step's end is recorded.
#[derive(Clone, Copy, PartialEq)]
enum End {
    /// Its report decides the task's next move.
    Report,
    /// The engine is shutting down: the step is interrupted, to be resumed.
    Shutdown,
}

/// What a step's end did: the move it caused, the steps claimed to start now, and when a
/// retry it queued comes due.
type Ended = (Option<super::actions::Applied>, Vec<Claimed>, Option<i64>);

/// The claim a step's end is written under.
#[derive(Clone, Copy)]
struct Held {
    /// The claim's fence: the end is written only while the row still runs under it.
    fence: Option<i64>,
    /// This engine stopped the step because the task moved on (an abort it applied).
    moved_here: bool,
    /// This engine already found and reported the claim lost.
    lost_known: bool,
}

/// A step's end as one transaction: its closing log line, its result, the move it causes,
/// and the claim of up to `free` steps that can start now (each with its opening line).
fn step_end(
    db: &Db,
    step_id: i64,
    report: &StepReport,
    outside: &Outside,
    end: End,
    held: Held,
    (free, me): (usize, &Claimant),
) -> Result<Ended> {
    // A step no longer running under this engine's claim (reaped while the engine was
    // cut off or paused, aborted elsewhere) has its result dropped: another engine may
    // have run it again already. Only a step this engine stopped itself ends as before.
    if let Some(fence) = held.fence
        && (held.lost_known || !held.moved_here)
        && !db.holds_step_run(step_id, &me.name, fence)?
    {
        if !held.lost_known {
            super::lease::record_lost(db, step_id, &me.name)?;
        }
        return Ok((None, claim_due(db, free, me)?, None));
    }
    // The step's last line, after every line it sent (they were queued before its report).
    if let Some(line) = report.closing.clone() {
        db.insert_log_lines_or_skip(&[system_line(step_id, line)])?;
    }
    let applied = match end {
        End::Shutdown => {
            results::interrupt_step(db, step_id, "the engine was shut down")?;
            None
        }
        End::Report => results::finish_step(db, step_id, report, outside)?,
    };
    let retry = applied.as_ref().is_some_and(|a| a.retry);
    let due = if retry { next_due(db)? } else { None };
    Ok((applied, claim_due(db, free, me)?, due))
}

/// Sends a step's report to the engine exactly once: if the step's task ends without one
/// (a panic), dropping this reports an error, so the engine never waits for it for ever.
struct ReportOnce {
    tx: Option<tokio::sync::mpsc::UnboundedSender<(i64, StepReport)>>,
    step_id: i64,
}

impl ReportOnce {
    fn new(tx: tokio::sync::mpsc::UnboundedSender<(i64, StepReport)>, step_id: i64) -> Self {
        Self {
            tx: Some(tx),
            step_id,
        }
    }

    fn send(mut self, report: StepReport) {
        if let Some(tx) = self.tx.take() {
            let _ = tx.send((self.step_id, report));
        }
    }
}

impl Drop for ReportOnce {
    fn drop(&mut self) {
        if let Some(tx) = self.tx.take() {
            let finish = crate::exec::Finish::SpawnFailed(
                "the step's runner stopped unexpectedly (see .baton/logs/engine.log)".into(),
            );
            let env = crate::exec::StepEnv {
                vars: vec![],
                workdir: std::path::PathBuf::new(),
                timeout: std::time::Duration::ZERO,
                kill_grace: std::time::Duration::ZERO,
            };
            let _ = tx.send((self.step_id, runner::report_for(&finish, &env)));
        }
    }
}

/// The earliest time a delayed step (a retry's backoff) comes due, if any.
fn next_due(db: &Db) -> crate::store::Result<Option<i64>> {
    db.next_due_after(now_ms())
}

impl Engine {
    /// Picks up the steps recovery found still on their executor (containers that outlived
    /// the previous engine): their output is followed again and their end recorded.
    pub(super) async fn reattach(&mut self) -> Result<()> {
        let ids = self.recovered.reattach.clone();
        if ids.is_empty() {
            return Ok(());
        }
        let found = self
            .store
            .read(move |db| {
                let mut out = Vec::new();
                for step in super::reattach::still_running(db, &ids)? {
                    let task = db.task(step.task_id)?;
                    let handoff = match task.run_id {
                        Some(r) => db.last_handoff(r)?,
                        None => None,
                    };
                    let fence = db.step_fence(step.id)?;
                    out.push(Claimed {
                        pipeline: db.pipeline(task.id).ok(),
                        step,
                        task,
                        handoff,
                        reattach: true,
                        announced: false,
                        fence,
                    });
                }
                Ok(out)
            })
            .await?;
        for c in found {
            self.spawn_step(c);
        }
        Ok(())
    }

    /// Tells subscribers (a board's live pane) of the lines stored with a step's end (its
    /// closing line) and with claims (opening lines), as the log writer does for others.
    fn logged(&self, task_id: i64, step_id: i64, closed: bool, claimed: &[Claimed]) {
        if self.events.receiver_count() == 0 {
            return;
        }
        let ended = closed.then_some((task_id, step_id));
        let opened = claimed
            .iter()
            .filter(|c| c.announced)
            .map(|c| (c.task.id, c.step.id));
        for (task_id, step_run_id) in ended.into_iter().chain(opened) {
            let _ = self.events.send(EngineEvent::LogLines {
                task_id,
                step_run_id,
            });
        }
    }

    /// Claims due step runs up to `max_parallel` and starts them.
    pub(super) async fn schedule(&mut self) -> Result<()> {
        let free = self.cfg.max_parallel.saturating_sub(self.running.len());
        let me = self.me.ident.clone();
        let (claimed, due) = self
            .store
            .write(move |db| Ok::<_, EngineError>((claim_due(db, free, &me)?, next_due(db)?)))
            .await?;
        self.next_due = due;
        self.logged(0, 0, false, &claimed);
        for c in claimed {
            self.spawn_step(c);
        }
        Ok(())
    }

    fn spawn_step(&mut self, c: Claimed) {
        let Claimed {
            step,
            task,
            pipeline,
            handoff,
            reattach,
            announced,
            fence,
        } = c;
        let _ = self
            .events
            .send(EngineEvent::TaskChanged { task_id: task.id });
        let spec = pipeline.as_ref().and_then(|p| {
            p.status(&step.status)
                .filter(|s| s.kind == StatusKind::Step)
                .and_then(|s| s.step.clone())
        });
        let cancel = CancellationToken::new();
        let ended = CancellationToken::new();
        let (said, inbox) = tokio::sync::mpsc::unbounded_channel();
        let inbox: crate::exec::agent::Inbox =
            std::sync::Arc::new(std::sync::Mutex::new(Some(inbox)));
        self.running.insert(
            step.id,
            Running {
                cancel: cancel.clone(),
                reason: None,
                ended: ended.clone(),
                task_id: task.id,
                said,
                inbox: inbox.clone(),
                uses_clean: self.git.is_some()
                    && pipeline
                        .as_ref()
                        .is_some_and(|p| super::transition::uses_clean_worktree(p)),
                fence,
                lost: false,
            },
        );
        // Cancelled however the step's task ends (after its report is sent).
        let ended = ended.drop_guard();
        let finished = ReportOnce::new(self.finished_tx.clone(), step.id);
        let step_id = step.id;
        let Some(spec) = spec else {
            let report = runner::report_for(
                &crate::exec::Finish::SpawnFailed(format!(
                    "status `{}` has no step in the task's pipeline",
                    step.status
                )),
                &crate::exec::StepEnv {
                    vars: vec![],
                    workdir: self.ws.root().to_path_buf(),
                    timeout: self.cfg.default_timeout,
                    kill_grace: self.cfg.kill_grace,
                },
            );
            finished.send(report);
            return;
        };
        let context_dir = self.ws.context_dir(task.id);
        let handoff_context = handoff.as_ref().and_then(|h| {
            let raw = h.handoff_content.as_deref()?;
            Some(crate::handoff::context_header(
                &crate::handoff::extract(raw),
                &h.status,
            ))
        });
        let job = runner::Job {
            workdir: self.ws.root().to_path_buf(),
            seq: step.seq,
            step,
            task,
            spec,
            context_dir,
            handoff_file: None,
            handoff_context,
            workspace_root: self.ws.root().to_path_buf(),
            agents: Some(self.agents.clone()),
            default_timeout: self.cfg.default_timeout,
            kill_grace: self.cfg.kill_grace,
            default_executor: self.cfg.default_executor.clone(),
            reattach,
            max_step_log: self.cfg.max_step_log,
            opencode: Some(self.opencode.clone()),
            inbox: Some(inbox),
            env: None,
            announced,
            shared: self
                .git
                .as_ref()
                .and_then(|g| Some((g.shared_remote.clone()?, g.queue.clone()))),
        };
        let store = self.store.clone();
        let logs = self.logs.clone();
        let git = self.git.clone();
        let git_used = git.is_some();
        tokio::spawn(async move {
            let _ended = ended;
            let mut job = job;
            // Git off the async threads (a step in a git workspace); the store records what
            // git made. Without git only a folder and a small file are made, here.
            let prepare = move || {
                let _ = std::fs::create_dir_all(&job.context_dir);
                job.handoff_file = handoff.and_then(|h| {
                    let path = job
                        .context_dir
                        .join(format!("id_{}_{:03}.md", h.status, h.seq));
                    let text = h.handoff_content.unwrap_or_default();
                    crate::exec::safe_file::write_fresh(&path, text.as_bytes()).ok()?;
                    Some(path)
                });
                let made = match &git {
                    Some(git) => match git.prepare(&job.task) {
                        Ok((dir, made)) => {
                            job.workdir = dir;
                            made
                        }
                        Err(e) => return Err((Box::new(job), e.to_string())),
                    },
                    None => None,
                };
                // The step's environment writes the prompt file: made here with the rest.
                if made.is_none() {
                    job.env = Some(runner::env_for(&job));
                }
                Ok((job, made))
            };
            let prepared = if git_used {
                tokio::task::spawn_blocking(prepare).await
            } else {
                Ok(prepare())
            };
            let job = match prepared {
                Ok(Ok((mut job, made))) => {
                    if let Some(made) = made {
                        let (task_id, rec) = (job.task.id, made.clone());
                        match store.write(move |db| rec.record(db, task_id)).await {
                            Ok(()) => {
                                job.task.branch = Some(made.branch);
                                job.task.worktree = Some(made.path);
                                job.task.base_branch = Some(made.base);
                            }
                            Err(e) => {
                                tracing::error!("recording task {task_id}'s worktree failed: {e}")
                            }
                        }
                    }
                    job
                }
                Ok(Err((job, e))) => {
                    let job = *job;
                    let finish = crate::exec::Finish::SpawnFailed(format!(
                        "could not prepare the task's git worktree: {e}"
                    ));
                    let env = runner::env_for(&job);
                    let mut report = runner::report_for(&finish, &env);
                    if job.announced {
                        let ended = format!("could not start: {e}");
                        report.closing =
                            Some(runner::closing_line(&ended, std::time::Duration::ZERO));
                    }
                    finished.send(report);
                    return;
                }
                // Dropping `finished` reports the step as failed.
                Err(e) => {
                    tracing::error!("preparing step run {step_id} panicked: {e}");
                    return;
                }
            };
            let report = runner::run(job, store, logs, cancel).await;
            finished.send(report);
        });
    }

    /// A step ended: record its result, move the task on, and claim what can start now —
    /// one transaction. A `merge` hook on the move runs between two tries of it.
    pub(super) async fn on_finished(&mut self, step_id: i64, report: StepReport) {
        let running = self.running.remove(&step_id);
        let reason = running.as_ref().and_then(|r| r.reason);
        let held = Held {
            fence: running.as_ref().and_then(|r| r.fence),
            moved_here: reason == Some(StopReason::Moved),
            lost_known: running.as_ref().is_some_and(|r| r.lost),
        };
        let task_id = running.as_ref().map_or(0, |r| r.task_id);
        let shutdown = reason == Some(StopReason::Shutdown)
            && report.state == crate::store::StepState::Cancelled;
        // `git status` only for a pipeline with a `clean_worktree` guard (known at spawn).
        let clean = if shutdown || !running.as_ref().is_some_and(|r| r.uses_clean) {
            None
        } else {
            self.worktree_clean_for(task_id).await
        };
        let free = if shutdown
            || self.winding_down
            || self.shutdown.is_cancelled()
            || self.handover_to.is_some()
        {
            0
        } else {
            self.cfg.max_parallel.saturating_sub(self.running.len())
        };
        let has_git = self.git.is_some();
        let me = self.me.ident.clone();
        let forge = !shutdown && self.forge_ready().await;
        let mut merged: Option<std::result::Result<(), String>> = None;
        let closing = report.closing.clone();
        let mut said_busy = false;
        let out = loop {
            let (report, merged2, me) = (report.clone(), merged.clone(), me.clone());
            let out = self
                .store
                .write(move |db| {
                    let gate = |_: &Task, hooks: &[crate::pipeline::Hook]| {
                        merge_gate(has_git, &merged2, hooks)
                    };
                    let outside = Outside {
                        merge: &gate,
                        worktree_clean: clean,
                        forge,
                    };
                    let end = if shutdown { End::Shutdown } else { End::Report };
                    step_end(db, step_id, &report, &outside, end, held, (free, &me))
                })
                .await;
            match out {
                Err(EngineError::MergePending { task }) if merged.is_none() => {
                    merged = Some(self.merge(task).await);
                }
                // Another program holds the board's write past the busy timeout (each try
                // waits that long): the result waits for it rather than being lost.
                Err(EngineError::Store(crate::store::StoreError::Busy))
                    if !self.shutdown.is_cancelled() =>
                {
                    if !std::mem::replace(&mut said_busy, true) {
                        let text = format!(
                            "step run {step_id} ended while another program holds the board's database: its result waits until that program lets go"
                        );
                        tracing::warn!("{text}");
                        let _ = self.events.send(EngineEvent::Notice {
                            task_id: Some(task_id),
                            text,
                        });
                    }
                }
                // The database went away: the result waits for it.
                Err(_) if self.database_back().await => {}
                other => break other,
            }
        };
        match out {
            Ok((applied, claimed, due)) => {
                let ahead = applied.as_ref().is_some_and(|a| {
                    a.retry || a.moved.as_ref().is_some_and(|m| m.step_run.is_some())
                });
                self.step_ended = Some((task_id, ahead));
                self.logged(task_id, step_id, closing.is_some(), &claimed);
                if let Some(due) = due {
                    self.next_due = Some(self.next_due.map_or(due, |d| d.min(due)));
                }
                if let Some(applied) = applied {
                    self.after(&applied).await;
                }
                for c in claimed {
                    self.spawn_step(c);
                }
            }
            Err(e) => {
                tracing::error!("finishing step run {step_id} failed: {e}");
                // Leave it resumable rather than `running` with nothing behind it.
                let _ = self
                    .store
                    .write(move |db| {
                        if let Some(line) = closing {
                            db.insert_log_lines_or_skip(&[system_line(step_id, line)])?;
                        }
                        results::interrupt_step(db, step_id, "its result could not be recorded")
                    })
                    .await;
                let _ = self.events.send(EngineEvent::Notice {
                    task_id: Some(task_id),
                    text: e.to_string(),
                });
            }
        }
        let _ = self.events.send(EngineEvent::TaskChanged { task_id });
    }
}

#[cfg(test)]
#[path = "scheduler_tests.rs"]
mod tests;
