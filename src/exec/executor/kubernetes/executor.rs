//! The Kubernetes executor behind the [`Executor`] seam: a Job per step, through kube-rs.

use super::job::{JobPlan, selector};
use super::step::KubeStep;
use crate::exec::LogSender;
use crate::exec::executor::remote_git::{LocalRepo, argv_script, check_remote, display_url, var};
use crate::exec::executor::{
    BoxFuture, ExecError, Executor, Found, Labels, Launch, Program, Started,
};
use crate::pipeline::executor_spec::KubeSpec;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio::sync::OnceCell;

/// Runs steps as Jobs on the cluster of the current kubeconfig context (or the one given).
pub struct Kubernetes {
    spec: KubeSpec,
    client: OnceCell<kube::Client>,
}

impl Kubernetes {
    /// The executor for a step's `{"kubernetes": {...}}`; the cluster is reached at the first
    /// step, from `KUBECONFIG`, `~/.kube/config` or the pod's service account.
    pub fn new(spec: &KubeSpec) -> Self {
        Self {
            spec: spec.clone(),
            client: OnceCell::new(),
        }
    }

    /// The executor with a client made elsewhere (a test's stub cluster).
    pub fn with_client(spec: &KubeSpec, client: kube::Client) -> Self {
        Self {
            spec: spec.clone(),
            client: OnceCell::new_with(Some(client)),
        }
    }

    async fn client(&self) -> Result<kube::Client, ExecError> {
        self.client
            .get_or_try_init(|| async {
                kube::Client::try_default().await.map_err(|e| {
                    ExecError(format!(
                        "no Kubernetes cluster is configured ({e}); set KUBECONFIG or ~/.kube/config, then try `baton agents check`"
                    ))
                })
            })
            .await
            .cloned()
    }

    /// The namespace: the step's, else `[executor.kubernetes]`'s, else the kubeconfig's.
    fn namespace(&self, client: &kube::Client, config: &Settings) -> String {
        self.spec
            .namespace
            .clone()
            .or_else(|| config.namespace.clone())
            .unwrap_or_else(|| client.default_namespace().to_string())
    }

    fn apis(&self, client: kube::Client, ns: &str) -> Apis {
        Apis {
            jobs: Api::namespaced(client.clone(), ns),
            pods: Api::namespaced(client.clone(), ns),
            secrets: Api::namespaced(client, ns),
        }
    }

    /// The git remote: the step's, else `[executor.kubernetes]`'s; a sentence when neither
    /// is set or it is unusable.
    fn git_remote(&self, settings: &Settings) -> Result<String, ExecError> {
        let remote = self.spec.git_remote.clone().or(settings.git_remote.clone()).ok_or_else(|| {
            ExecError("a kubernetes step needs a git remote both baton and the cluster reach: set `git_remote` under [executor.kubernetes] in .baton/config.toml".into())
        })?;
        check_remote(&remote).map_err(ExecError)?;
        Ok(remote)
    }
}

/// The APIs a step uses in its namespace.
pub(super) struct Apis {
    pub jobs: Api<Job>,
    pub pods: Api<Pod>,
    pub secrets: Api<Secret>,
}

/// The branch on the shared git remote: baton's own and per workspace, since task branch
/// names (`baton/7-x`) repeat across workspaces and the push is forced.
pub fn remote_branch(workspace_tag: &str, branch: &str) -> String {
    format!("baton-kube/{workspace_tag}/{branch}")
}

/// A trigger payload larger than this stays behind (the Job's Secret holds at most 1 MiB).
const MAX_PAYLOAD: u64 = 256 * 1024;

/// The trigger payload file's content, when the step has one that is small enough.
fn trigger_payload(vars: &[(String, String)]) -> Option<String> {
    let path = std::path::Path::new(var(vars, "BATON_TRIGGER_PAYLOAD_FILE")?);
    // Never a link an earlier step left in the context folder.
    let bytes = crate::exec::safe_file::read_plain(path, MAX_PAYLOAD).ok()?;
    String::from_utf8(bytes).ok()
}

/// Settings (and the trigger payload) read off the async workers.
async fn load_settings(workspace: Option<String>) -> Settings {
    tokio::task::spawn_blocking(move || {
        workspace
            .map(|w| Settings::load(std::path::Path::new(&w)))
            .unwrap_or_default()
    })
    .await
    .unwrap_or_default()
}

/// Settings from `[executor.kubernetes]` in the workspace's config.toml.
#[derive(Debug, Default)]
pub struct Settings {
    pub git_remote: Option<String>,
    pub namespace: Option<String>,
}

impl Settings {
    /// Reads them from the workspace at `root` (none when it has no such table).
    pub fn load(root: &std::path::Path) -> Self {
        let path = crate::workspace::Workspace::at(root)
            .root()
            .join(".baton/config.toml");
        let Ok(cfg) = crate::workspace::Config::load(&path) else {
            return Self::default();
        };
        let table = cfg
            .executor_table
            .as_ref()
            .and_then(|t| t.get("kubernetes"))
            .and_then(|k| k.as_table());
        let get = |k: &str| {
            table
                .and_then(|t| t.get(k))
                .and_then(|v| v.as_str())
                .map(str::to_string)
        };
        Self {
            git_remote: get("git_remote"),
            namespace: get("namespace"),
        }
    }
}

impl Executor for Kubernetes {
    fn name(&self) -> &'static str {
        "kubernetes"
    }

    fn start<'a>(
        &'a self,
        launch: &'a Launch,
        log: LogSender,
    ) -> BoxFuture<'a, Result<Box<dyn Started>, ExecError>> {
        Box::pin(async move {
            let mut vars = launch.env.vars.clone();
            let script = match &launch.program {
                Program::Shell(s) => s.clone(),
                Program::Argv(argv) if argv.is_empty() => {
                    return Err(ExecError("the command line is empty".into()));
                }
                Program::Argv(argv) => argv_script(argv, &mut vars),
            };
            let workspace = Some(launch.labels.workspace.as_str())
                .filter(|w| !w.is_empty())
                .or_else(|| var(&vars, "BATON_WORKSPACE"))
                .map(str::to_string);
            let settings = load_settings(workspace).await;
            let git_remote = self.git_remote(&settings)?;
            let payload = {
                let vars = vars.clone();
                tokio::task::spawn_blocking(move || trigger_payload(&vars))
                    .await
                    .ok()
                    .flatten()
            };
            // The cluster first: no push when no cluster is configured.
            let client = self.client().await?;
            let ns = self.namespace(&client, &settings);
            let repo = LocalRepo::find(&launch.env.workdir)
                .await
                .map_err(ExecError)?;
            let tag = launch.labels.workspace_tag();
            let local = repo
                .branch
                .clone()
                .unwrap_or_else(|| launch.labels.execution_key.replace(':', "-"));
            let branch = remote_branch(&tag, &local);
            let shown = display_url(&git_remote);
            repo.push(None, &git_remote, &branch).await.map_err(|e| {
                ExecError(format!(
                    "could not push {local} to {shown} as {branch}: {e}"
                ))
            })?;
            let _ = log
                .send((
                    crate::store::Stream::System,
                    format!("→ {local} pushed to {shown} as {branch}"),
                ))
                .await;
            let apis = self.apis(client, &ns);
            let worktree = repo.top.display().to_string();
            let plan = JobPlan {
                spec: &self.spec,
                workspace_tag: &tag,
                task_id: launch.labels.task_id,
                step_run_id: launch.labels.step_run_id,
                execution_key: &launch.labels.execution_key,
                git_remote: &git_remote,
                branch: &branch,
                subdir: &repo.subdir,
                script: &script,
                vars: &vars,
                trigger_payload: payload.as_deref(),
                timeout_secs: launch.env.timeout.as_secs(),
                worktree: &worktree,
            };
            let refused = |what: &str, e: kube::Error| {
                ExecError(match e {
                    kube::Error::Api(s) => format!(
                        "the cluster refused the step's {what} in namespace `{ns}`: {} ({})",
                        s.message, s.code
                    ),
                    other => {
                        format!("could not reach the cluster: {other}; check `baton agents check`")
                    }
                })
            };
            // The Secret first, so the pod never starts without it; then the Job, which
            // then owns the Secret.
            apis.secrets
                .create(&PostParams::default(), &plan.secret())
                .await
                .map_err(|e| refused("Secret", e))?;
            let job = match apis.jobs.create(&PostParams::default(), &plan.job()).await {
                Ok(job) => job,
                Err(e) => {
                    let _ = apis
                        .secrets
                        .delete(&plan.name(), &DeleteParams::default())
                        .await;
                    return Err(refused("Job", e));
                }
            };
            let owner = json!({"metadata": {"ownerReferences": [{
                "apiVersion": "batch/v1",
                "kind": "Job",
                "name": job.metadata.name,
                "uid": job.metadata.uid,
            }]}});
            if let Err(e) = apis
                .secrets
                .patch(&plan.name(), &PatchParams::default(), &Patch::Merge(&owner))
                .await
            {
                let _ = log
                    .send((
                        crate::store::Stream::System,
                        format!("could not hand the Secret {} to its Job ({e}); baton deletes it when the step ends", plan.name()),
                    ))
                    .await;
            }
            let _ = log
                .send((
                    crate::store::Stream::System,
                    format!(
                        "Job {} created in namespace {ns}",
                        job.metadata.name.clone().unwrap_or_default()
                    ),
                ))
                .await;
            Ok(Box::new(KubeStep {
                apis,
                name: job.metadata.name.clone().unwrap_or_default(),
                selector: selector(&tag, launch.labels.step_run_id),
                repo: Some(repo),
                git_remote,
                branch,
                log,
                logged: false,
                since: None,
                exited: None,
            }) as Box<dyn Started>)
        })
    }

    /// Finds the step's Job by its step-run label: still running (reattached, its log
    /// followed from now on, so lines already stored are not stored again), ended (its exit
    /// code read, its commits brought back), or gone.
    fn find<'a>(
        &'a self,
        labels: &'a Labels,
        log: LogSender,
    ) -> BoxFuture<'a, Result<Found, ExecError>> {
        Box::pin(async move {
            let client = self.client().await?;
            let settings = load_settings(Some(labels.workspace.clone())).await;
            let ns = self.namespace(&client, &settings);
            // The full remote comes from config again: the Job shows it without credentials.
            let git_remote = self.git_remote(&settings).ok();
            let apis = self.apis(client, &ns);
            let selector = selector(&labels.workspace_tag(), labels.step_run_id);
            let lp = ListParams::default().labels(&selector);
            let list = apis.jobs.list(&lp).await.map_err(|e| {
                ExecError(format!(
                    "could not look for the step's Job in namespace `{ns}`: {e}"
                ))
            })?;
            let Some(job) = list.items.first() else {
                return Ok(Found::Gone);
            };
            let step = KubeStep::found(apis, job, selector, git_remote, log);
            Ok(Found::Running(Box::new(step)))
        })
    }
}
