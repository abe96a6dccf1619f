//! The engine's step scheduling: claiming due step runs, running them, and taking their
//! results back through `transition()`.

use super::{Engine, Running, StopReason, effects, pipeline_of, results, runner};
use super::{EngineEvent, Result, StepReport};
use crate::pipeline::StatusKind;
use crate::store::StepRun;
use tokio_util::sync::CancellationToken;

impl Engine {
    /// Claims due step runs up to `max_parallel` and starts them.
    pub(super) async fn schedule(&mut self) -> Result<()> {
        let free = self.cfg.max_parallel.saturating_sub(self.running.len());
        if free == 0 {
            return Ok(());
        }
        let due = self.with_db(|db| db.due_step_runs(crate::store::now_ms(), free as i64))?;
        for step in due {
            let id = step.id;
            // Claiming is what makes a step run at most once: only a pending row can be claimed,
            // and a succeeded execution key is never claimed again.
            let claimed = self
                .write(move |db| {
                    let key_done = db.key_succeeded(&step.execution_key)?;
                    if key_done || !db.claim_step_run(step.id)? {
                        return Ok(None);
                    }
                    let task = db.task(step.task_id)?;
                    db.set_task_state(task.id, crate::store::TaskState::Running)?;
                    let handoff = task
                        .run_id
                        .map(|r| db.last_handoff(r))
                        .transpose()?
                        .flatten();
                    Ok(Some((db.step_run(step.id)?, task, handoff)))
                })
                .await?;
            let Some((step, task, handoff)) = claimed else {
                continue;
            };
            let _ = self
                .events
                .send(EngineEvent::TaskChanged { task_id: task.id });
            self.spawn_step(step, task, handoff);
            let _ = id;
        }
        Ok(())
    }

    fn spawn_step(&mut self, step: StepRun, task: crate::store::Task, handoff: Option<StepRun>) {
        let spec = pipeline_of(&task).ok().and_then(|p| {
            p.status(&step.status)
                .filter(|s| s.kind == StatusKind::Step)
                .and_then(|s| s.step.clone())
        });
        let cancel = CancellationToken::new();
        let ended = CancellationToken::new();
        self.running.insert(
            step.id,
            Running {
                cancel: cancel.clone(),
                reason: None,
                ended: ended.clone(),
            },
        );
        // Cancelled however the step's task ends (after its report is sent).
        let ended = ended.drop_guard();
        let finished = self.finished_tx.clone();
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
            let _ = finished.send((step_id, report));
            return;
        };
        let context_dir = self.ws.context_dir(task.id);
        let _ = std::fs::create_dir_all(&context_dir);
        let handoff_context = handoff.as_ref().and_then(|h| {
            let raw = h.handoff_content.as_deref()?;
            Some(crate::handoff::context_header(
                &crate::handoff::extract(raw),
                &h.status,
            ))
        });
        let (seq, handoff_seq) = self.with_db(|db| {
            (
                db.step_seq(&step).unwrap_or(step.attempt),
                handoff.as_ref().and_then(|h| db.step_seq(h).ok()),
            )
        });
        let handoff_file = handoff.and_then(|h| {
            let n = handoff_seq.unwrap_or(h.attempt);
            let path = context_dir.join(format!("id_{}_{n:03}.md", h.status));
            std::fs::write(&path, h.handoff_content.unwrap_or_default()).ok()?;
            Some(path)
        });
        let job = runner::Job {
            workdir: self.ws.root().to_path_buf(),
            seq,
            step,
            task,
            spec,
            context_dir,
            handoff_file,
            handoff_context,
            workspace_root: self.ws.root().to_path_buf(),
            default_timeout: self.cfg.default_timeout,
            kill_grace: self.cfg.kill_grace,
        };
        let store = self.store.clone();
        let logs = self.logs.clone();
        let git = self.git.clone();
        tokio::spawn(async move {
            let _ended = ended;
            let mut job = job;
            if let Some(git) = git {
                let (store, task) = (store.clone(), job.task.clone());
                let prepared = tokio::task::spawn_blocking(move || {
                    // git runs without the store lock; only the record of it takes it.
                    let dir = git.prepare(&store, &task).map_err(|e| e.to_string())?;
                    let guard = store.lock().unwrap_or_else(|p| p.into_inner());
                    let task = guard.read().task(task.id).map_err(|e| e.to_string())?;
                    Ok::<_, String>((dir, task))
                })
                .await
                .map_err(|e| e.to_string())
                .and_then(|r| r);
                match prepared {
                    Ok((dir, task)) => {
                        job.workdir = dir;
                        job.task = task;
                    }
                    Err(e) => {
                        let finish = crate::exec::Finish::SpawnFailed(format!(
                            "could not prepare the task's git worktree: {e}"
                        ));
                        let env = runner::env_for(&job);
                        let _ = finished.send((step_id, runner::report_for(&finish, &env)));
                        return;
                    }
                }
            }
            let report = runner::run(job, store, logs, cancel).await;
            let _ = finished.send((step_id, report));
        });
    }

    pub(super) async fn on_finished(&mut self, step_id: i64, report: StepReport) {
        let reason = self.running.remove(&step_id).and_then(|r| r.reason);
        let task_id = self
            .with_db(|db| db.step_run(step_id).map(|s| s.task_id))
            .unwrap_or_default();
        let out = if reason == Some(StopReason::Shutdown)
            && report.state == crate::store::StepState::Cancelled
        {
            self.write(move |db| {
                results::interrupt_step(db, step_id, "the engine was shut down").map(|_| None)
            })
            .await
        } else {
            let git = self.git.clone();
            self.write(move |db| {
                results::finish_step(db, step_id, &report, &|t, h| {
                    effects::pre_commit(git.as_ref(), t, h)
                })
            })
            .await
        };
        match out {
            Ok(Some(applied)) => self.after(&applied),
            Ok(None) => {}
            Err(e) => {
                tracing::error!("finishing step run {step_id} failed: {e}");
                // Leave it resumable rather than `running` with nothing behind it.
                let _ = self
                    .write(move |db| {
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
