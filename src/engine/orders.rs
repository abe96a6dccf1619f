//! How the engine takes an [`Order`]: a request goes through `apply_command`, a new task is
//! checked against the workspace and created (and started) in one transaction. An
//! apply-only engine takes one order this way and finishes its follow-ups before it ends.

use super::request::{Answer, Made, NewTask, Order};
use super::{Action, Engine, EngineError, EngineEvent, Request, create_and_start};
use crate::store::{CommandState, TaskState};

impl Engine {
    /// Marks queued command `command` (when the order came as one) failed with `text`; a
    /// write that fails too is logged as `what`.
    pub(super) async fn fail_command(&self, command: Option<i64>, text: &str, what: &str) {
        let Some(id) = command else { return };
        let failed = text.to_string();
        let recorded = self
            .store
            .write(move |db| db.finish_command(id, CommandState::Failed, &failed))
            .await;
        if let Err(e) = recorded {
            tracing::error!("recording {what} failed: {e}");
        }
    }

    /// Takes one order; `command` is its row when it came through the commands table,
    /// finished in the same transaction as the order.
    pub(super) async fn take(
        &mut self,
        order: Order,
        command: Option<i64>,
    ) -> Result<Answer, String> {
        self.later = None;
        match order {
            Order::Act(req) => self.apply_command(req, command).await,
            Order::Create { create } => self.create(create, None, command).await,
            Order::Issue { issue } => self.take_issue(issue, command).await,
            Order::Push { push } => self.take_push(push, command).await,
            Order::Stray { stray } => self.take_stray(stray, command).await,
            Order::Triggered { triggered, bytes } => {
                self.create(triggered, Some(bytes), command).await
            }
        }
    }

    /// Reads the agent profiles again when the new task's pipeline names one this engine
    /// has not loaded: its file may have been written a moment ago, before the watcher
    /// told the engine, and creation (which reads the files) found it. Its steps resolve
    /// through the engine's catalog, so the engine must see what creation saw.
    async fn know_agents_of(&mut self, pipeline: &crate::pipeline::Pipeline) {
        if self.apply_only {
            return;
        }
        let unknown = pipeline
            .step_agents()
            .any(|id| self.agents.get(id).is_err());
        if !unknown {
            return;
        }
        let (dir, mut live) = (self.ws.agents_dir(), self.live_agents.clone());
        match tokio::task::spawn_blocking(move || {
            live.reload(&dir);
            live
        })
        .await
        {
            Ok(live) => {
                self.agents = std::sync::Arc::new(live.catalog.clone());
                self.live_agents = live;
            }
            Err(e) => tracing::error!("reading the agent profiles again failed: {e}"),
        }
    }

    /// Creates (and starts) a task; `webhook`: the size of the body of the webhook that
    /// asked for it, recorded on it in the same transaction.
    async fn create(
        &mut self,
        new: NewTask,
        webhook: Option<usize>,
        command: Option<i64>,
    ) -> Result<Answer, String> {
        let (ws, asked) = (self.ws.clone(), new.clone());
        // An engine that only applies this command has read no agent profiles: read here.
        let read_agents = self.apply_only;
        let prepared = tokio::task::spawn_blocking(move || {
            let pipeline = asked.prepare(&ws)?;
            let has_agent = pipeline.step_agents().next().is_some();
            let agents = (read_agents && has_agent)
                .then(|| crate::agents::load_agents(Some(&ws.agents_dir())));
            Ok((pipeline, has_agent, agents))
        })
        .await
        .unwrap_or_else(|e| Err(EngineError::Other(format!("creating a task failed: {e}"))));
        let out = match prepared {
            Ok((pipeline, has_agent, agents)) => {
                self.know_agents_of(&pipeline).await;
                // Looked for on PATH off the async threads. Not on a shared board, whose
                // steps may run on another machine's engine.
                let cannot_start = match has_agent && !self.me.shared {
                    true => {
                        let agents =
                            agents.map_or_else(|| self.agents.clone(), std::sync::Arc::new);
                        let p = pipeline.clone();
                        tokio::task::spawn_blocking(move || {
                            super::agent_reach::cannot_start(&p, &agents)
                        })
                        .await
                        .ok()
                        .flatten()
                    }
                    false => None,
                };
                self.store
                    .write(move |db| {
                        let created = create_and_start(db, &pipeline, &new)?;
                        if let Some(bytes) = webhook.filter(|_| !created.existed) {
                            super::push_in::record_trigger(db, created.id, &pipeline.id, bytes)?;
                        }
                        // A pipeline whose first status is a step queued it on creation.
                        let first_is_step = pipeline.statuses.first().map(|s| s.kind)
                            == Some(crate::pipeline::StatusKind::Step);
                        let queued = !created.existed
                            && !created.waits
                            && (first_is_step
                                || created
                                    .started
                                    .as_ref()
                                    .and_then(|a| a.moved.as_ref())
                                    .is_some_and(|m| m.step_run.is_some()));
                        let made = Made {
                            id: created.id,
                            existed: created.existed,
                            started: created.started.as_ref().map(|a| a.summary.clone()),
                            queued,
                            waits: created.waits,
                            cannot_start: cannot_start.filter(|_| queued || created.waits),
                        };
                        if let Some(id) = command {
                            let body = serde_json::to_string(&made)
                                .map_err(|e| EngineError::Other(e.to_string()))?;
                            db.finish_command(id, CommandState::Done, &body)?;
                        }
                        Ok((created, made))
                    })
                    .await
            }
            Err(e) => Err(e),
        };
        match out {
            Ok((created, made)) => {
                if let Some(started) = &created.started {
                    self.after(started).await;
                }
                let _ = self.events.send(EngineEvent::TaskChanged {
                    task_id: created.id,
                });
                Ok(Answer::Made(made))
            }
            Err(e) => {
                let text = e.to_string();
                self.fail_command(command, &text, "a refused creation")
                    .await;
                Err(text)
            }
        }
    }

    /// Takes one order before this engine runs: `baton run --wait` makes its task through
    /// the engine it starts, so the engine's first look at the board sees it, and a refused
    /// creation is answered before anything else runs.
    pub async fn take_first(&mut self, order: Order) -> Result<Answer, String> {
        self.take(order, None).await
    }

    /// Takes one order in a process with no engine running, runs the follow-ups it
    /// recorded (hooks, clean-up) and ends; the steps it queued wait for an engine.
    pub async fn apply_here(mut self, order: Order) -> Result<Answer, String> {
        if let Order::Act(req) = &order {
            self.refuse_cut_off(req).await?;
        }
        let out = self.take(order, None).await;
        while self.followups.join_next().await.is_some() {}
        drop(self.logs);
        let _ = self.log_writer.await;
        out
    }

    /// A step left `running` with no engine alive was cut off by one that died: only the
    /// next engine's recovery can say what became of it.
    async fn refuse_cut_off(&self, req: &Request) -> Result<(), String> {
        if !matches!(req.action, Action::Resume | Action::Retry) {
            return Ok(());
        }
        let id = req.task_id;
        let t = self
            .store
            .read(move |db| db.task(id))
            .await
            .map_err(|e| e.to_string())?;
        if t.state != TaskState::Running {
            return Ok(());
        }
        Err(EngineError::Refused {
            task: t.id,
            message: format!(
                "its step at `{}` was cut off when its engine stopped — start one (`baton engine`, or `baton`), which marks the step interrupted, then {} it",
                t.status,
                req.action.verb()
            ),
        }
        .to_string())
    }
}
