//! The `docker` executor: each step in a fresh container of a Docker Engine, reached through
//! its API (`DOCKER_HOST` honoured, `ssh://` included). The task's worktree is mounted at
//! `/workspace` (the working directory), its context folder at the same path as on the host
//! (prompts and `BATON_*` paths name it); the step runs as the host user's uid:gid with
//! `HOME` kept per task under the context folder. Containers carry the task, step run,
//! execution key and workspace as labels, so an engine that restarts finds them again.

use super::docker_mounts::{Mounts, host_mounts};
use super::docker_step::DockerStep;
use super::{BoxFuture, ExecError, Executor, Found, Labels, Launch, Program, Started};
use crate::exec::LogSender;
use crate::exec::redact::Redactor;
use crate::pipeline::executor_spec::{DockerSpec, PullPolicy};
use bollard::errors::Error as DockerError;
use bollard::models::{ContainerCreateBody, HostConfig};
use bollard::query_parameters::{
    CreateContainerOptions, CreateImageOptions, ListContainersOptions, RemoveContainerOptions,
};
use futures_util::StreamExt;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

/// Where the task's worktree is mounted, and the step's working directory.
pub const WORKSPACE: &str = "/workspace";
/// Label names on every container baton starts.
pub const LABEL_TASK: &str = "baton.task";
pub const LABEL_STEP_RUN: &str = "baton.step_run";
pub const LABEL_EXECUTION_KEY: &str = "baton.execution_key";
pub const LABEL_WORKSPACE: &str = "baton.workspace";

/// Runs steps in containers of one image with one set of limits.
#[derive(Debug, Clone)]
pub struct Docker {
    pub spec: DockerSpec,
}

impl Executor for Docker {
    fn name(&self) -> &'static str {
        "docker"
    }

    /// The context folder is mounted at its host path.
    fn stdin(&self) -> super::StdinWay {
        super::StdinWay::ContextFile
    }

    fn start<'a>(
        &'a self,
        launch: &'a Launch,
        log: LogSender,
    ) -> BoxFuture<'a, Result<Box<dyn Started>, ExecError>> {
        Box::pin(async move {
            let docker = connect().await?;
            ensure_image(&docker, &self.spec).await?;
            let (worktree, ctx) = (launch.worktree.clone(), launch.context_dir.clone());
            let workspace = std::path::PathBuf::from(&launch.labels.workspace);
            let mounts =
                tokio::task::spawn_blocking(move || host_mounts(&worktree, &ctx, &workspace))
                    .await
                    .map_err(|e| {
                        ExecError(format!("preparing the container's mounts failed: {e}"))
                    })??;
            let body = container_body(launch, &self.spec, mounts)?;
            let name = container_name(&launch.labels);
            let opts = CreateContainerOptions {
                name: Some(name.clone()),
                ..Default::default()
            };
            let created = match docker
                .create_container(Some(opts.clone()), body.clone())
                .await
            {
                // A container of this very step run left by a start that was cut off: it
                // never ran past its start (a running one would have been reattached).
                Err(DockerError::DockerResponseServerError {
                    status_code: 409, ..
                }) => {
                    remove(&docker, &name).await;
                    docker.create_container(Some(opts), body).await
                }
                other => other,
            }
            .map_err(|e| {
                api_error(
                    &e,
                    &format!("creating a container of `{}`", self.spec.image),
                )
            })?;
            if let Err(e) = docker.start_container(&created.id, None).await {
                remove(&docker, &created.id).await;
                return Err(api_error(&e, "starting the container"));
            }
            // Long lines are not cut inside any secret the step was given.
            let secrets = Redactor::from_vars(
                crate::exec::redact::env_secrets().chain(launch.env.vars.clone()),
            );
            let step = DockerStep::new(docker, created.id, log, Arc::new(secrets));
            Ok(Box::new(step) as Box<dyn Started>)
        })
    }

    /// Finds the step's container by its step-run label. A running one is reattached; one
    /// that ended is reported through the same handle (its output is read again from the
    /// start, its exit status taken, and then it is removed).
    fn find<'a>(
        &'a self,
        labels: &'a Labels,
        log: LogSender,
    ) -> BoxFuture<'a, Result<Found, ExecError>> {
        Box::pin(async move {
            let docker = connect().await?;
            let filters = HashMap::from([(
                "label".to_string(),
                vec![format!("{LABEL_STEP_RUN}={}", labels.step_run_id)],
            )]);
            let found = docker
                .list_containers(Some(ListContainersOptions {
                    all: true,
                    filters: Some(filters),
                    ..Default::default()
                }))
                .await
                .map_err(|e| api_error(&e, "listing baton's containers"))?;
            let mine = found.into_iter().find(|c| {
                let get = |k: &str| c.labels.as_ref().and_then(|l| l.get(k));
                get(LABEL_EXECUTION_KEY) == Some(&labels.execution_key)
                    && get(LABEL_WORKSPACE) == Some(&labels.workspace)
            });
            let Some(id) = mine.and_then(|c| c.id) else {
                return Ok(Found::Gone);
            };
            // Created but never started (the engine died in between): nothing ran, so the
            // step can safely be run again.
            let info = docker
                .inspect_container(&id, None)
                .await
                .map_err(|e| api_error(&e, "reading the step's container"))?;
            let status = info.state.and_then(|s| s.status);
            if status == Some(bollard::models::ContainerStateStatusEnum::CREATED) {
                remove(&docker, &id).await;
                return Ok(Found::Gone);
            }
            // The step's own environment is not known here: only the engine's secrets.
            let secrets = Arc::new(Redactor::from_vars(crate::exec::redact::env_secrets()));
            let step = DockerStep::new(docker, id, log, secrets);
            Ok(Found::Running(Box::new(step)))
        })
    }

    /// Removes the step run's container by its name, should a cut-off start have made it.
    fn discard<'a>(&'a self, labels: &'a Labels) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            if let Ok(docker) = connect().await {
                remove(&docker, &container_name(labels)).await;
            }
        })
    }
}

/// The container's name for a step run: `baton-<workspace tag>-<task>-<step run>`, the
/// same at every start of it, so one left by a start that was cut off is found by name.
pub fn container_name(l: &Labels) -> String {
    format!(
        "baton-{}-{}-{}",
        l.workspace_tag(),
        l.task_id,
        l.step_run_id
    )
}

/// Connects to the daemon `DOCKER_HOST` names (the local socket by default) and agrees on
/// an API version with it.
pub async fn connect() -> Result<bollard::Docker, ExecError> {
    let host = daemon_address();
    let docker = bollard::Docker::connect_with_defaults().map_err(|e| match e {
        DockerError::UnsupportedURISchemeError { .. } => ExecError(format!(
            "DOCKER_HOST={host} is not an address baton can use — write it like unix:///var/run/docker.sock, tcp://host:2375 or ssh://user@host"
        )),
        e => api_error(&e, "connecting"),
    })?;
    docker
        .negotiate_version()
        .await
        .map_err(|e| api_error(&e, "connecting"))
}

fn daemon_address() -> String {
    std::env::var("DOCKER_HOST").unwrap_or_else(|_| "unix:///var/run/docker.sock".into())
}

/// One sentence for an API error: what failed and what to do about it.
pub fn api_error(e: &DockerError, doing: &str) -> ExecError {
    let host = daemon_address();
    let text = e.to_string();
    let lower = text.to_ascii_lowercase();
    let io_kind = match e {
        DockerError::IOError { err } => Some(err.kind()),
        _ => None,
    };
    let msg = if io_kind == Some(std::io::ErrorKind::PermissionDenied)
        || lower.contains("permission denied")
    {
        format!(
            "permission denied on the Docker socket ({host}) while {doing} — add your user to the `docker` group (`sudo usermod -aG docker $USER`, then log in again), or point DOCKER_HOST at a daemon you may use"
        )
    } else if matches!(e, DockerError::SocketNotFoundError(_))
        || matches!(
            io_kind,
            Some(std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused)
        )
        || lower.contains("connection refused")
        || lower.contains("no such file")
        || matches!(e, DockerError::HyperResponseError { .. })
    {
        format!(
            "cannot reach the Docker daemon at {host} while {doing} ({text}) — start it (`sudo systemctl start docker`, or `dockerd`), or point DOCKER_HOST at one"
        )
    } else if let DockerError::DockerResponseServerError { message, .. } = e {
        format!("the Docker daemon refused {doing}: {message}")
    } else {
        format!("{doing} failed on the Docker daemon at {host}: {text}")
    };
    ExecError(msg)
}

/// Whether the daemon answers and has the image (or may pull it).
pub async fn check(spec: &DockerSpec) -> Result<String, ExecError> {
    let docker = connect().await?;
    let version = docker
        .version()
        .await
        .ok()
        .and_then(|v| v.version)
        .unwrap_or_else(|| "(unknown version)".into());
    let host = daemon_address();
    match docker.inspect_image(&spec.image).await {
        Ok(_) => Ok(format!(
            "Docker {version} at {host} has image `{}`",
            spec.image
        )),
        Err(DockerError::DockerResponseServerError {
            status_code: 404, ..
        }) if spec.pull == PullPolicy::Missing => Ok(format!(
            "Docker {version} at {host} answers; image `{}` will be pulled at the first step",
            spec.image
        )),
        Err(DockerError::DockerResponseServerError {
            status_code: 404, ..
        }) => Err(ExecError(format!(
            "Docker {version} at {host} answers but has no image `{0}` — run `docker pull {0}` (or build it), or add \"pull\": \"missing\"",
            spec.image
        ))),
        Err(e) => Err(api_error(
            &e,
            &format!("looking for image `{}`", spec.image),
        )),
    }
}

/// Makes sure the image is on the daemon: pulled when the step allows it, else a sentence
/// saying how to get it.
async fn ensure_image(docker: &bollard::Docker, spec: &DockerSpec) -> Result<(), ExecError> {
    let image = &spec.image;
    match docker.inspect_image(image).await {
        Ok(_) => return Ok(()),
        Err(DockerError::DockerResponseServerError {
            status_code: 404, ..
        }) => {}
        Err(e) => return Err(api_error(&e, &format!("looking for image `{image}`"))),
    }
    if spec.pull == PullPolicy::Never {
        return Err(ExecError(format!(
            "image `{image}` is not on the Docker daemon and the step does not pull images — run `docker pull {image}` (or build it), or add \"pull\": \"missing\" to the step's docker executor"
        )));
    }
    let opts = CreateImageOptions {
        from_image: Some(image.clone()),
        ..Default::default()
    };
    let mut pull = docker.create_image(Some(opts), None, None);
    while let Some(progress) = pull.next().await {
        if let Err(e) = progress {
            return Err(ExecError(format!(
                "pulling image `{image}` failed: {} — check the name and that the daemon can reach its registry",
                e
            )));
        }
    }
    Ok(())
}

/// The container for a step: its command, environment, mounts, user, limits and labels.
fn container_body(
    launch: &Launch,
    spec: &DockerSpec,
    mounts: Mounts,
) -> Result<ContainerCreateBody, ExecError> {
    let home = mounts.home;
    let env = &launch.env;
    let workdir = match env.workdir.strip_prefix(&launch.worktree) {
        Ok(rel) if rel.as_os_str().is_empty() => WORKSPACE.to_string(),
        Ok(rel) => Path::new(WORKSPACE).join(rel).display().to_string(),
        Err(_) => WORKSPACE.to_string(),
    };
    let mut vars: Vec<String> = env
        .vars
        .iter()
        .filter(|(k, _)| k != "HOME")
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    vars.push(format!("HOME={}", home.display()));
    let argv = match &launch.program {
        Program::Shell(script) => vec!["/bin/sh".into(), "-c".into(), script.clone()],
        Program::Argv(argv) if argv.is_empty() => {
            return Err(ExecError("the command line is empty".into()));
        }
        Program::Argv(argv) => argv.clone(),
    };
    let labels = HashMap::from([
        ("baton".to_string(), "1".to_string()),
        (LABEL_TASK.to_string(), launch.labels.task_id.to_string()),
        (
            LABEL_STEP_RUN.to_string(),
            launch.labels.step_run_id.to_string(),
        ),
        (
            LABEL_EXECUTION_KEY.to_string(),
            launch.labels.execution_key.clone(),
        ),
        (LABEL_WORKSPACE.to_string(), launch.labels.workspace.clone()),
    ]);
    // An empty, read-only tmpfs: nothing of the host shows through, nothing can be written.
    let covers: HashMap<String, String> = mounts
        .covers
        .into_iter()
        .map(|path| (path, "ro,size=4k".to_string()))
        .collect();
    let host = HostConfig {
        binds: Some(mounts.binds),
        tmpfs: (!covers.is_empty()).then_some(covers),
        network_mode: spec.network.clone(),
        memory: spec.memory.map(|m| m as i64),
        nano_cpus: spec.cpus.map(|c| (c * 1e9) as i64),
        // A small init as PID 1 passes the stop signal on and reaps orphans.
        init: Some(true),
        ..Default::default()
    };
    Ok(ContainerCreateBody {
        image: Some(spec.image.clone()),
        // The whole command line is the entrypoint: the image's own entrypoint and command
        // are not prepended.
        entrypoint: Some(argv),
        env: Some(vars),
        working_dir: Some(workdir),
        user: Some(format!(
            "{}:{}",
            nix::unistd::getuid().as_raw(),
            nix::unistd::getgid().as_raw()
        )),
        labels: Some(labels),
        attach_stdout: Some(false),
        attach_stderr: Some(false),
        tty: Some(false),
        host_config: Some(host),
        ..Default::default()
    })
}

/// Removes a container, running or not; one already gone is fine.
pub async fn remove(docker: &bollard::Docker, id: &str) {
    let opts = RemoveContainerOptions {
        force: true,
        v: true,
        ..Default::default()
    };
    let _ = docker.remove_container(id, Some(opts)).await;
}

#[cfg(test)]
#[path = "docker_tests.rs"]
mod tests;
