//! A step's container while it runs: its output followed through the logs API into the
//! bounded line reader, its end awaited, and the container removed once its exit status is
//! known (or it was stopped).

use super::docker::remove;
use super::{BoxFuture, Identity, Started};
use crate::exec::lines::pump;
use crate::exec::redact::Redactor;
use crate::exec::{Finish, LogSender};
use crate::store::Stream;
use bollard::container::LogOutput;
use bollard::errors::Error as DockerError;
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
    readers: Vec<JoinHandle<()>>,
    exited: Option<Finish>,
    drain_until: Option<tokio::time::Instant>,
}

impl DockerStep {
    /// Follows the container `id`; its output (from its start) goes to `log` once it is
    /// waited for.
    pub fn new(docker: bollard::Docker, id: String, log: LogSender) -> Self {
        Self {
            docker,
            id,
            log: Some(log),
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
        let secrets = Arc::new(Redactor::from_vars(std::env::vars()));
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
        let deadline = *self
            .drain_until
            .get_or_insert_with(|| tokio::time::Instant::now() + DRAIN_AFTER_EXIT);
        while let Some(reader) = self.readers.last_mut() {
            if tokio::time::timeout_at(deadline, reader).await.is_err() {
                for r in &self.readers {
                    r.abort();
                }
            }
            self.readers.pop();
        }
    }

    /// How the container ended, from the daemon's record of it.
    async fn exit_status(&self) -> Finish {
        match self.docker.inspect_container(&self.id, None).await {
            Ok(info) => {
                let state = info.state.unwrap_or_default();
                if state.oom_killed == Some(true) {
                    return Finish::SpawnFailed(
                        "the container was killed for going over its memory limit (raise `memory` in the step's docker executor)".into(),
                    );
                }
                Finish::Exited(state.exit_code.unwrap_or(-1) as i32)
            }
            Err(DockerError::DockerResponseServerError {
                status_code: 404, ..
            }) => Finish::SpawnFailed(format!(
                "container {} was removed by someone else before it finished",
                short(&self.id)
            )),
            Err(e) => Finish::SpawnFailed(
                super::docker::api_error(&e, "reading the container's exit status").0,
            ),
        }
    }
}

impl Started for DockerStep {
    fn identity(&self) -> Identity {
        Identity::Container(self.id.clone())
    }

    fn wait(&mut self) -> BoxFuture<'_, Finish> {
        Box::pin(async move {
            self.follow();
            if self.exited.is_none() {
                // The wait ends with the container (a non-zero exit comes back as an
                // error); its exit status is then read from its record either way.
                let mut waiting = self.docker.wait_container(&self.id, None);
                let _ = waiting.next().await;
                drop(waiting);
                self.exited = Some(self.exit_status().await);
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
