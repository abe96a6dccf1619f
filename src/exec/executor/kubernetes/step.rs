//! A step's Job on the cluster: wait for its pod, follow its log, read its exit code, bring
//! its commits back; abort deletes the Job with its pod.

use super::executor::Apis;
use super::job::{
    ANNOTATION_BRANCH, ANNOTATION_REMOTE, ANNOTATION_WORKTREE, CONTAINER, PodState, pod_state,
};
use crate::exec::executor::remote_git::{LocalRepo, display_url};
use crate::exec::executor::{BoxFuture, Identity, Started};
use crate::exec::{Finish, LogSender};
use crate::store::Stream;
use futures_util::{AsyncBufReadExt, StreamExt, TryStreamExt};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{DeleteParams, ListParams, LogParams, PropagationPolicy, WatchEvent, WatchParams};
use std::time::Duration;

/// How long one watch request may last before it is renewed (the server's limit is 300 s).
const WATCH_SECS: u32 = 240;

/// A step running as a Job.
pub struct KubeStep {
    pub(super) apis: Apis,
    /// The Job's name, and its Secret's.
    pub(super) name: String,
    /// The label selector of its Job and pod.
    pub(super) selector: String,
    /// Where the commits come back to (None when the local worktree is gone).
    pub(super) repo: Option<LocalRepo>,
    /// The full git remote (credentials included): never shown, see [`display_url`].
    pub(super) git_remote: String,
    /// The branch on the git remote.
    pub(super) branch: String,
    pub(super) log: LogSender,
    pub(super) logged: bool,
    /// Follow the log only from this time: a reattached step's earlier lines are stored.
    pub(super) since: Option<Timestamp>,
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
                .apis
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
                .apis
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

    /// Follows the container's log to its end, line by line; a reattached step's only from
    /// the moment it was found (by the lines' timestamps: `sinceTime` has whole seconds).
    async fn follow_log(&self, pod: &str) -> Result<(), String> {
        let lp = LogParams {
            container: Some(CONTAINER.into()),
            follow: true,
            timestamps: self.since.is_some(),
            since_time: self
                .since
                .map(|t| t.checked_sub(SignedDuration::from_secs(1)).unwrap_or(t)),
            ..LogParams::default()
        };
        let reader = self
            .apis
            .pods
            .log_stream(pod, &lp)
            .await
            .map_err(|e| api_error("read the step's log", e))?;
        let mut lines = reader.lines();
        while let Some(line) = lines.next().await {
            let Ok(line) = line else { break };
            let line = match self.since {
                Some(since) => match after(&line, since) {
                    Some(text) => text.to_string(),
                    None => continue,
                },
                None => line,
            };
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
                    self.delete(PropagationPolicy::Background, None).await;
                    return Finish::SpawnFailed(format!(
                        "the step's pod ended (exit {code}) but its commits could not be brought back from {} {}: {e}",
                        display_url(&self.git_remote),
                        self.branch
                    ));
                }
            },
            None => {
                self.note(format!(
                    "the step's commits stay on {} in {}: the local worktree or the git_remote setting is gone",
                    self.branch,
                    display_url(&self.git_remote)
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
        // The Job owns its Secret, but the Secret goes now in any case.
        if let Err(e) = self
            .apis
            .secrets
            .delete(&self.name, &DeleteParams::default())
            .await
            && !matches!(&e, kube::Error::Api(s) if s.code == 404)
        {
            self.note(api_error("delete the step's Secret", e)).await;
        }
        if let Err(e) = self.apis.jobs.delete(&self.name, &dp).await {
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

    /// A step found after a restart, from its Job's annotations and the full `git_remote`
    /// read from config (None: the commits stay on the remote).
    pub(super) fn found(
        apis: Apis,
        job: &Job,
        selector: String,
        git_remote: Option<String>,
        log: LogSender,
    ) -> Self {
        let ann = job.metadata.annotations.clone().unwrap_or_default();
        let get = |k: &str| ann.get(k).cloned().unwrap_or_default();
        let worktree = get(ANNOTATION_WORKTREE);
        // The commits come back only while the local worktree still exists.
        let repo = (!worktree.is_empty() && std::path::Path::new(&worktree).is_dir())
            .then(|| LocalRepo::at(worktree))
            .filter(|_| git_remote.is_some());
        Self {
            apis,
            name: job.metadata.name.clone().unwrap_or_default(),
            selector,
            repo,
            git_remote: git_remote.unwrap_or_else(|| get(ANNOTATION_REMOTE)),
            branch: get(ANNOTATION_BRANCH),
            log,
            logged: false,
            since: Some(Timestamp::now()),
            exited: None,
        }
    }
}

/// A timestamped log line's text when it was written at or after `since` (a line without
/// a timestamp is kept whole).
fn after(line: &str, since: Timestamp) -> Option<&str> {
    match line.split_once(' ') {
        Some((stamp, text)) => match stamp.parse::<Timestamp>() {
            Ok(t) if t < since => None,
            Ok(_) => Some(text),
            Err(_) => Some(line),
        },
        None => match line.parse::<Timestamp>() {
            Ok(t) if t < since => None,
            Ok(_) => Some(""),
            Err(_) => Some(line),
        },
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_before_a_reattach_are_skipped_by_their_timestamps() {
        let since: Timestamp = "2026-01-01T00:00:05.5Z".parse().unwrap();
        assert_eq!(after("2026-01-01T00:00:05.4Z old", since), None);
        assert_eq!(
            after("2026-01-01T00:00:05.6Z new text", since),
            Some("new text")
        );
        assert_eq!(after("2026-01-01T00:00:06Z", since), Some(""));
        assert_eq!(after("no stamp here", since), Some("no stamp here"));
    }
}
