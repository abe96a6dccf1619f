//! A step's Job on the cluster: wait for its pod, follow its log, read its exit code, bring
//! its commits back; abort deletes the Job with its pod.

use super::job::{
    ANNOTATION_BRANCH, ANNOTATION_REMOTE, ANNOTATION_WORKTREE, CONTAINER, PodState, pod_state,
};
use crate::exec::executor::remote_git::LocalRepo;
use crate::exec::executor::{BoxFuture, Identity, Started};
use crate::exec::{Finish, LogSender};
use crate::store::Stream;
use futures_util::{AsyncBufReadExt, StreamExt, TryStreamExt};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{
    Api, DeleteParams, ListParams, LogParams, PropagationPolicy, WatchEvent, WatchParams,
};
use std::time::Duration;

/// How long one watch request may last before it is renewed (the server's limit is 300 s).
const WATCH_SECS: u32 = 240;

/// A step running as a Job.
pub struct KubeStep {
    pub(super) jobs: Api<Job>,
    pub(super) pods: Api<Pod>,
    pub(super) name: String,
    /// The label selector of its Job and pod.
    pub(super) selector: String,
    /// Where the commits come back to (None when the local worktree is gone).
    pub(super) repo: Option<LocalRepo>,
    pub(super) git_remote: String,
    pub(super) branch: String,
    pub(super) log: LogSender,
    pub(super) logged: bool,
    pub(super) exited: Option<Finish>,
}

fn api_error(what: &str, e: kube::Error) -> String {
    match e {
        kube::Error::Api(s) => format!("the cluster refused to {what}: {} ({})", s.message, s.code),
        other => format!(
            "could not reach the cluster to {what}: {other}; check `kubectl cluster-info` and the kubeconfig"
        ),
    }
}

impl KubeStep {
    /// The step's pod once it is in `want` (or past it), or why it never will be.
    async fn pod_until(
        &self,
        done: impl Fn(&PodState) -> bool,
    ) -> Result<(String, PodState), String> {
        let lp = ListParams::default().labels(&self.selector);
        loop {
            let list = self
                .pods
                .list(&lp)
                .await
                .map_err(|e| api_error("list the step's pod", e))?;
            if let Some(p) = list.items.first() {
                let state = pod_state(p);
                if done(&state) || matches!(state, PodState::Stuck(_)) {
                    return Ok((p.metadata.name.clone().unwrap_or_default(), state));
                }
            }
            let version = list
                .metadata
                .resource_version
                .clone()
                .unwrap_or_else(|| "0".into());
            let wp = WatchParams::default()
                .labels(&self.selector)
                .timeout(WATCH_SECS);
            let mut events = self
                .pods
                .watch(&wp, &version)
                .await
                .map_err(|e| api_error("watch the step's pod", e))?
                .boxed();
            while let Some(event) = events
                .try_next()
                .await
                .map_err(|e| api_error("watch the step's pod", e))?
            {
                match event {
                    WatchEvent::Added(p) | WatchEvent::Modified(p) => {
                        let state = pod_state(&p);
                        if done(&state) || matches!(state, PodState::Stuck(_)) {
                            return Ok((p.metadata.name.clone().unwrap_or_default(), state));
                        }
                    }
                    WatchEvent::Deleted(_) => {
                        return Err("the step's pod was deleted before it ended".into());
                    }
                    WatchEvent::Bookmark(_) => {}
                    // An expired version (410): list again.
                    WatchEvent::Error(_) => break,
                }
            }
        }
    }

    /// Follows the container's log to its end, line by line.
    async fn follow_log(&self, pod: &str) -> Result<(), String> {
        let lp = LogParams {
            container: Some(CONTAINER.into()),
            follow: true,
            ..LogParams::default()
        };
        let reader = self
            .pods
            .log_stream(pod, &lp)
            .await
            .map_err(|e| api_error("read the step's log", e))?;
        let mut lines = reader.lines();
        while let Some(line) = lines.next().await {
            let Ok(line) = line else { break };
            if self.log.send((Stream::Stdout, line)).await.is_err() {
                break;
            }
        }
        Ok(())
    }

    async fn note(&self, text: String) {
        let _ = self.log.send((Stream::System, text)).await;
    }

    async fn run_to_end(&mut self) -> Finish {
        let (pod, state) = match self.pod_until(|s| !matches!(s, PodState::Waiting)).await {
            Ok(p) => p,
            Err(e) => return Finish::SpawnFailed(e),
        };
        if let PodState::Stuck(why) = state {
            self.delete(PropagationPolicy::Background, None).await;
            return Finish::SpawnFailed(format!(
                "the step's pod could not start ({why}); check the image name and that the cluster can pull it"
            ));
        }
        if !self.logged {
            if let Err(e) = self.follow_log(&pod).await {
                return Finish::SpawnFailed(e);
            }
            self.logged = true;
        }
        let code = match self.pod_until(|s| matches!(s, PodState::Ended(_))).await {
            Ok((_, PodState::Ended(code))) => code,
            Ok((_, PodState::Stuck(why))) => return Finish::SpawnFailed(why),
            Ok(_) => {
                return Finish::SpawnFailed("the step's pod ended without an exit code".into());
            }
            Err(e) => return Finish::SpawnFailed(e),
        };
        match &self.repo {
            Some(repo) => match repo.fetch_back(None, &self.git_remote, &self.branch).await {
                Ok(0) => {}
                Ok(n) => {
                    self.note(format!("← {n} commit(s) brought back to {}", self.branch))
                        .await
                }
                Err(e) => {
                    return Finish::SpawnFailed(format!(
                        "the step's pod ended (exit {code}) but its commits could not be fetched from {}: {e}",
                        self.git_remote
                    ));
                }
            },
            None => {
                self.note(format!(
                    "the local worktree is gone: the step's commits stay on {} in {}",
                    self.branch, self.git_remote
                ))
                .await
            }
        }
        self.delete(PropagationPolicy::Background, None).await;
        Finish::Exited(code)
    }

    /// Deletes the Job and, by propagation, its pod.
    async fn delete(&self, policy: PropagationPolicy, grace: Option<u32>) {
        let dp = DeleteParams {
            propagation_policy: Some(policy),
            grace_period_seconds: grace,
            ..DeleteParams::default()
        };
        if let Err(e) = self.jobs.delete(&self.name, &dp).await {
            let gone = matches!(&e, kube::Error::Api(s) if s.code == 404);
            if !gone {
                self.note(format!(
                    "could not delete Job {}: {}",
                    self.name,
                    api_error("delete the Job", e)
                ))
                .await;
            }
        }
    }

    /// A step found after a restart, from its Job's annotations.
    pub(super) fn found(
        jobs: Api<Job>,
        pods: Api<Pod>,
        job: &Job,
        selector: String,
        log: LogSender,
    ) -> Self {
        let ann = job.metadata.annotations.clone().unwrap_or_default();
        let get = |k: &str| ann.get(k).cloned().unwrap_or_default();
        let worktree = get(ANNOTATION_WORKTREE);
        // The commits come back only while the local worktree still exists.
        let repo = (!worktree.is_empty() && std::path::Path::new(&worktree).is_dir())
            .then(|| LocalRepo::at(worktree));
        Self {
            jobs,
            pods,
            name: job.metadata.name.clone().unwrap_or_default(),
            selector,
            repo,
            git_remote: get(ANNOTATION_REMOTE),
            branch: get(ANNOTATION_BRANCH),
            log,
            logged: false,
            exited: None,
        }
    }
}

impl Started for KubeStep {
    fn identity(&self) -> Identity {
        // The Job's name: what `kubectl get job` shows.
        Identity::Container(self.name.clone())
    }

    fn wait(&mut self) -> BoxFuture<'_, Finish> {
        Box::pin(async move {
            if let Some(f) = &self.exited {
                return f.clone();
            }
            let f = self.run_to_end().await;
            self.exited = Some(f.clone());
            f
        })
    }

    /// Deletes the Job in the foreground: its pod goes first, given `grace` to stop.
    fn abort(&mut self, grace: Duration) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            if self.exited.is_none() {
                self.delete(PropagationPolicy::Foreground, Some(grace.as_secs() as u32))
                    .await;
                self.exited = Some(Finish::Cancelled);
            }
        })
    }
}
