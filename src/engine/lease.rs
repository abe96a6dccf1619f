//! Leases on a board shared by several engines. Each step an engine claims carries a lease
//! and a fence (see the store's claims). On every heartbeat the engine renews the leases of
//! the steps it runs, each only while its fence still matches, and reaps the steps whose
//! lease ran out (their engine was killed, cut off or paused) through the interrupt path,
//! so `auto_resume` runs them again on whichever engine claims them. A step whose claim is
//! found lost (reaped, or aborted by another process) is stopped here at once, and its
//! result is never written.

use super::actions::{Action, Request, apply};
use super::{Engine, EngineEvent, StopReason};
use crate::store::{Db, NewEvent, TaskState};
use serde_json::json;

/// Records that engine `engine` lost its claim on step run `step_run_id`: a warning on the
/// step's task.
pub(super) fn record_lost(db: &Db, step_run_id: i64, engine: &str) -> crate::store::Result<()> {
    let step = db.step_run(step_run_id)?;
    db.insert_event(&NewEvent {
        task_id: Some(step.task_id),
        category: "lifecycle",
        kind: "lease.lost",
        summary: format!(
            "engine `{engine}` lost its lease on {}#{}; its result was not committed",
            step.status, step.attempt
        ),
        data: json!({ "step_run": step.id, "engine": engine, "state": step.state }),
        actor: "engine",
        level: "warn",
    })?;
    Ok(())
}

/// Interrupts step run `id` whose lease ran out, then resumes its task when `auto_resume`
/// is set. False when the step had already ended (another engine reaped it first).
fn reap_one(db: &Db, id: i64, holder: &str, auto_resume: bool) -> super::Result<bool> {
    let why = format!("the lease of engine `{holder}` on it ran out");
    let step = db.step_run(id)?;
    if !super::results::interrupt_step(db, id, &why)? {
        return Ok(false);
    }
    db.insert_event(&NewEvent {
        task_id: Some(step.task_id),
        category: "lifecycle",
        kind: "lease.expired",
        summary: format!(
            "engine `{holder}` stopped renewing its lease on {}#{}; the step is interrupted",
            step.status, step.attempt
        ),
        data: json!({ "step_run": id, "engine": holder }),
        actor: "engine",
        level: "warn",
    })?;
    let task = db.task(step.task_id)?;
    if auto_resume && task.state == TaskState::Interrupted {
        let req = Request {
            task_id: task.id,
            action: Action::Resume,
            expected_status: Some(task.status.clone()),
            actor: "auto_resume".into(),
        };
        apply(db, &req, &super::Outside::NONE)?;
    }
    Ok(true)
}

impl Engine {
    /// Start-up recovery on a shared board, once this engine holds its name: only the
    /// steps its previous incarnation left running are looked at (their process groups
    /// ended, their steps interrupted and, with `auto_resume`, resumed); another live
    /// engine's steps are its own.
    pub(super) async fn recover_own(&mut self) -> super::Result<()> {
        let name = self.me.ident.name.clone();
        let looked = super::recovery::look(
            &self.ws,
            &self.store,
            self.cfg.kill_grace,
            None,
            Some(&name),
        )
        .await?;
        let auto = self.cfg.auto_resume;
        let found = self
            .store
            .with_writer(move |s| super::recovery::record(s, looked, auto, true))
            .await??;
        self.recovered = found;
        Ok(())
    }

    /// Renews the lease of every step this engine runs under a fence; a step whose renewal
    /// matched no row is no longer this engine's and is stopped.
    pub(super) async fn renew_leases(&mut self) {
        let held: Vec<(i64, i64)> = self
            .running
            .iter()
            .filter(|(_, r)| !r.lost && r.reason.is_none())
            .filter_map(|(id, r)| Some((*id, r.fence?)))
            .collect();
        if held.is_empty() {
            return;
        }
        let me = self.me.ident.clone();
        let lease_ms = me.lease().as_millis() as i64;
        let renewed = self
            .store
            .write(move |db| {
                let mut lost = Vec::new();
                for (id, fence) in held {
                    if !db.renew_lease(id, &me.name, fence, lease_ms)? {
                        lost.push(id);
                    }
                }
                Ok::<_, crate::store::StoreError>(lost)
            })
            .await;
        match renewed {
            Ok(lost) => self.lose(lost).await,
            Err(e) => tracing::warn!("renewing the steps' leases failed: {e}"),
        }
    }

    /// Looks, in one read, whether every step this engine runs is still running under its
    /// claim; stops those that are not (an abort another process applied, a reap).
    pub(super) async fn check_held(&mut self) {
        if !self.me.shared || self.running.values().all(|r| r.lost || r.fence.is_none()) {
            return;
        }
        let name = self.me.ident.name.clone();
        let rows = match self.store.read(move |db| db.held_step_runs(&name)).await {
            Ok(rows) => rows,
            Err(e) => {
                tracing::warn!("checking the claims of running steps failed: {e}");
                return;
            }
        };
        let lost: Vec<i64> = self
            .running
            .iter()
            // A step this engine stopped itself (an abort, a shutdown) ends its own way.
            .filter(|(_, r)| !r.lost && r.reason.is_none())
            .filter(|(id, r)| {
                r.fence
                    .is_some_and(|f| !rows.iter().any(|(i, g)| i == *id && *g == Some(f)))
            })
            .map(|(id, _)| *id)
            .collect();
        self.lose(lost).await;
    }

    /// Stops the steps whose claim this engine lost, and says so on their tasks.
    async fn lose(&mut self, lost: Vec<i64>) {
        if lost.is_empty() {
            return;
        }
        let mut tasks = Vec::new();
        for id in &lost {
            if let Some(r) = self.running.get_mut(id) {
                r.lost = true;
                r.reason = Some(StopReason::Moved);
                r.cancel.cancel();
                tasks.push(r.task_id);
            }
        }
        let name = self.me.ident.name.clone();
        let recorded = self
            .store
            .write(move |db| {
                for id in lost {
                    record_lost(db, id, &name)?;
                }
                Ok::<_, crate::store::StoreError>(())
            })
            .await;
        if let Err(e) = recorded {
            tracing::warn!("recording lost leases failed: {e}");
        }
        for task_id in tasks {
            let _ = self.events.send(EngineEvent::TaskChanged { task_id });
        }
    }

    /// Interrupts the running steps whose lease ran out by the database's clock, one
    /// transaction each (every engine does this; the write lock makes it happen once).
    pub(super) async fn reap(&mut self) {
        let expired = match self.store.read(|db| db.expired_leases()).await {
            Ok(e) => e,
            Err(e) => {
                tracing::warn!("looking for expired leases failed: {e}");
                return;
            }
        };
        let auto_resume = self.cfg.auto_resume;
        for e in expired {
            // This engine's own steps renew their leases; one it no longer runs is its own
            // to report through the fence, not to reap.
            if self.running.contains_key(&e.step_run_id) {
                continue;
            }
            let holder = e.engine.unwrap_or_else(|| "?".into());
            let id = e.step_run_id;
            let out = self
                .store
                .write(move |db| {
                    // Read again under the write lock: renewed or ended meanwhile, it stays.
                    let still = db.expired_leases()?.iter().any(|x| x.step_run_id == id);
                    if !still {
                        return Ok(None);
                    }
                    let task = db.step_run(id)?.task_id;
                    Ok::<_, super::EngineError>(
                        reap_one(db, id, &holder, auto_resume)?.then_some(task),
                    )
                })
                .await;
            match out {
                Ok(Some(task_id)) => {
                    let _ = self.events.send(EngineEvent::TaskChanged { task_id });
                }
                Ok(None) => {}
                Err(err) => tracing::warn!("reaping step run {id} failed: {err}"),
            }
        }
    }

    /// True for a command that is another engine's on a shared board, so it is left for
    /// that one: a `say` to a step another engine runs (the message is that engine's to
    /// hand to its step), and any request on a task whose home is another live engine
    /// (a merge, a worktree's cleanup and the next step belong on the machine holding the
    /// worktree).
    pub(super) async fn for_another(&self, order: &super::Order) -> bool {
        let super::Order::Act(req) = order else {
            return false;
        };
        if !self.me.shared {
            return false;
        }
        let say = matches!(req.action, Action::Say { .. } | Action::ForgeSay { .. });
        let (task_id, me) = (req.task_id, self.me.ident.clone());
        self.store
            .read(move |db| {
                if say {
                    for s in db.open_step_runs(task_id)? {
                        if s.state == crate::store::StepState::Running
                            && db.step_engine(s.id)?.is_some_and(|e| e != me.name)
                        {
                            return Ok(true);
                        }
                    }
                }
                Ok(!super::home::may_claim(
                    db,
                    &me,
                    task_id,
                    &[],
                    &mut Default::default(),
                )?)
            })
            .await
            .unwrap_or(false)
    }
}
