//! A step's container while it runs: its output followed through the logs API into the
//! bounded line reader, its end awaited, and the container removed once its exit status is
//! known (or it was stopped).

use super::docker::remove;
use super::drain::drain_readers;
use super::{BoxFuture, Identity, Started};
use crate::exec::lines::pump;
use crate::exec::redact::Redactor;
use crate::exec::{Finish, LogSender};
use crate::store::Stream;
use bollard::container::LogOutput;
use bollard::errors::Error as DockerError;
use bollard::models::{ContainerState, ContainerStateStatusEnum};
use bollard::query_parameters::{LogsOptions, StopContainerOptions};
use futures_util::StreamExt;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::task::JoinHandle;

/// How long the output may take to arrive after the container ended.
const DRAIN_AFTER_EXIT: Duration = Duration::from_secs(5);

/// A container started (or found again) for a step.
pub struct DockerStep {
    docker: bollard::Docker,
    id: String,
    log: Option<LogSender>,
    /// What long lines must not be cut inside (the step's secrets).
    secrets: Arc<Redactor>,
    readers: Vec<JoinHandle<()>>,
    exited: Option<Finish>,
    drain_until: Option<tokio::time::Instant>,
}

impl DockerStep {
    /// Follows the container `id`; its output (from its start) goes to `log` once it is
    /// waited for, long lines cut outside `secrets`.
    pub fn new(
        docker: bollard::Docker,
        id: String,
        log: LogSender,
        secrets: Arc<Redactor>,
    ) -> Self {
        Self {
            docker,
            id,
            log: Some(log),
            secrets,
            readers: Vec::new(),
            exited: None,
            drain_until: None,
        }
    }

    /// Starts following the output, once: all of it since the container started, so
    /// nothing is lost between the start and the first wait (or a restart of the engine).
    fn follow(&mut self) {
        let Some(log) = self.log.take() else {
            return;
        };
        let secrets = self.secrets.clone();
        let (mut out_w, out_r) = tokio::io::duplex(64 * 1024);
        let (mut err_w, err_r) = tokio::io::duplex(64 * 1024);
        let (docker, id) = (self.docker.clone(), self.id.clone());
        let feeder = tokio::spawn(async move {
            let opts = LogsOptions {
                follow: true,
                stdout: true,
                stderr: true,
                ..Default::default()
            };
            let mut logs = docker.logs(&id, Some(opts));
            while let Some(Ok(chunk)) = logs.next().await {
                let written = match chunk {
                    LogOutput::StdErr { message } => err_w.write_all(&message).await,
                    LogOutput::StdOut { message } | LogOutput::Console { message } => {
                        out_w.write_all(&message).await
                    }
                    LogOutput::StdIn { .. } => Ok(()),
                };
                if written.is_err() {
                    break;
                }
            }
        });
        self.readers = vec![
            feeder,
            tokio::spawn(pump(out_r, Stream::Stdout, log.clone(), secrets.clone())),
            tokio::spawn(pump(err_r, Stream::Stderr, log, secrets)),
        ];
    }

    /// Waits for the output to be read to its end, up to a deadline set at the first call.
    async fn drain(&mut self) {
        drain_readers(&mut self.readers, &mut self.drain_until, DRAIN_AFTER_EXIT).await;
    }

    /// Waits until the daemon records the container as ended, and how. A wait that breaks
    /// off (a dropped connection, a daemon restart) is begun again while the container
    /// still runs; the daemon going away for good ends it with a sentence.
    async fn wait_for_end(&self) -> Finish {
        let mut failures = 0;
        let mut pause = Duration::from_millis(100);
        loop {
            // Ends with the container (a non-zero exit comes back as an error) or with a
            // failure of the request: the record says which.
            let mut waiting = self.docker.wait_container(&self.id, None);
            let _ = waiting.next().await;
            drop(waiting);
            match self.docker.inspect_container(&self.id, None).await {
                Ok(info) => {
                    if let Some(end) = ended(&info.state.unwrap_or_default()) {
                        return end;
                    }
                    failures = 0;
                }
                Err(DockerError::DockerResponseServerError {
                    status_code: 404, ..
                }) => {
                    return Finish::SpawnFailed(format!(
                        "container {} was removed by someone else before it finished",
                        short(&self.id)
                    ));
                }
                Err(e) => {
                    failures += 1;
                    if failures >= WAIT_ATTEMPTS {
                        return Finish::SpawnFailed(
                            super::docker::api_error(&e, "waiting for the container").0,
                        );
                    }
                }
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(5));
        }
    }
}

/// How many times in a row the daemon may fail to answer while a step is waited for.
const WAIT_ATTEMPTS: u32 = 12;

/// How a container ended, from its state; `None` while it has not (running, paused,
/// restarting: the daemon reports exit code 0 for those too).
pub(super) fn ended(state: &ContainerState) -> Option<Finish> {
    match state.status {
        Some(ContainerStateStatusEnum::EXITED | ContainerStateStatusEnum::DEAD) => {}
        _ => return None,
    }
    if state.oom_killed == Some(true) {
        return Some(Finish::SpawnFailed(
            "the container was killed for going over its memory limit (raise `memory` in the step's docker executor)".into(),
        ));
    }
    Some(Finish::Exited(state.exit_code.unwrap_or(-1) as i32))
}

impl Started for DockerStep {
    fn identity(&self) -> Identity {
        Identity::Container(self.id.clone())
    }

    fn wait(&mut self) -> BoxFuture<'_, Finish> {
        Box::pin(async move {
            self.follow();
            if self.exited.is_none() {
                self.exited = Some(self.wait_for_end().await);
            }
            self.drain().await;
            remove(&self.docker, &self.id).await;
            self.exited.clone().unwrap_or(Finish::Exited(-1))
        })
    }

    fn abort(&mut self, grace: Duration) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            self.follow();
            if self.exited.is_none() {
                // The daemon sends the stop signal, then SIGKILL once `grace` has passed.
                let opts = StopContainerOptions {
                    t: Some(grace.as_secs_f64().ceil().max(1.0) as i32),
                    signal: None,
                };
                let stop = self.docker.stop_container(&self.id, Some(opts));
                let _ = tokio::time::timeout(grace + Duration::from_secs(10), stop).await;
                self.exited = Some(Finish::Cancelled);
            }
            remove(&self.docker, &self.id).await;
            self.drain().await;
        })
    }
}

/// The first 12 characters of a container id, as `docker ps` shows it.
pub fn short(id: &str) -> &str {
    &id[..id.len().min(12)]
}
