//! The Kubernetes executor behind the [`Executor`] seam: a Job per step, through kube-rs.

use super::job::{JobPlan, selector};
use super::step::KubeStep;
use crate::exec::LogSender;
use crate::exec::executor::remote_git::LocalRepo;
use crate::exec::executor::{
    BoxFuture, ExecError, Executor, Found, Labels, Launch, Program, Started,
};
use crate::pipeline::executor_spec::KubeSpec;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, PostParams};
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

    fn apis(&self, client: kube::Client, ns: &str) -> (Api<Job>, Api<Pod>) {
        (
            Api::namespaced(client.clone(), ns),
            Api::namespaced(client, ns),
        )
    }
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

fn var<'a>(vars: &'a [(String, String)], name: &str) -> Option<&'a str> {
    vars.iter()
        .rev()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// `exec "$BATON_ARGV_0" …`: an argv whose elements travel in variables.
fn argv_script(argv: &[String], vars: &mut Vec<(String, String)>) -> String {
    let mut script = String::from("exec");
    for (i, a) in argv.iter().enumerate() {
        script.push_str(&format!(" \"$BATON_ARGV_{i}\""));
        vars.push((format!("BATON_ARGV_{i}"), a.clone()));
    }
    script
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
                .or_else(|| var(&vars, "BATON_WORKSPACE"));
            let settings = workspace
                .map(|w| Settings::load(std::path::Path::new(w)))
                .unwrap_or_default();
            let git_remote = self.spec.git_remote.clone().or(settings.git_remote.clone()).ok_or_else(|| {
                ExecError("a kubernetes step needs a git remote both baton and the cluster reach: set `git_remote` under [executor.kubernetes] in .baton/config.toml".into())
            })?;
            // The cluster first: no push when no cluster is configured.
            let client = self.client().await?;
            let ns = self.namespace(&client, &settings);
            let repo = LocalRepo::find(&launch.env.workdir)
                .await
                .map_err(ExecError)?;
            let branch = repo.branch.clone().unwrap_or_else(|| {
                format!(
                    "baton-kube/{}",
                    launch.labels.execution_key.replace(':', "-")
                )
            });
            repo.push(None, &git_remote, &branch)
                .await
                .map_err(|e| ExecError(format!("could not push {branch} to {git_remote}: {e}")))?;
            let _ = log
                .send((
                    crate::store::Stream::System,
                    format!("→ {branch} pushed to {git_remote}"),
                ))
                .await;
            let (jobs, pods) = self.apis(client, &ns);
            let worktree = repo.top.display().to_string();
            let tag = launch.labels.workspace_tag();
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
                timeout_secs: launch.env.timeout.as_secs(),
                worktree: &worktree,
            };
            let job = jobs
                .create(&PostParams::default(), &plan.job())
                .await
                .map_err(|e| {
                    ExecError(match e {
                        kube::Error::Api(s) => format!(
                            "the cluster refused the step's Job in namespace `{ns}`: {} ({})",
                            s.message, s.code
                        ),
                        other => format!(
                            "could not reach the cluster: {other}; check `baton agents check`"
                        ),
                    })
                })?;
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
                jobs,
                pods,
                name: job.metadata.name.clone().unwrap_or_default(),
                selector: selector(&tag, launch.labels.step_run_id),
                repo: Some(repo),
                git_remote,
                branch,
                log,
                logged: false,
                exited: None,
            }) as Box<dyn Started>)
        })
    }

    /// Finds the step's Job by its step-run label: still running (reattached, its log
    /// followed from the start), ended (its exit code read, its commits brought back), or gone.
    fn find<'a>(
        &'a self,
        labels: &'a Labels,
        log: LogSender,
    ) -> BoxFuture<'a, Result<Found, ExecError>> {
        Box::pin(async move {
            let client = self.client().await?;
            let settings = Settings::load(std::path::Path::new(&labels.workspace));
            let ns = self.namespace(&client, &settings);
            let (jobs, pods) = self.apis(client, &ns);
            let selector = selector(&labels.workspace_tag(), labels.step_run_id);
            let lp = ListParams::default().labels(&selector);
            let list = jobs.list(&lp).await.map_err(|e| {
                ExecError(format!(
                    "could not look for the step's Job in namespace `{ns}`: {e}"
                ))
            })?;
            let Some(job) = list.items.first() else {
                return Ok(Found::Gone);
            };
            let step = KubeStep::found(jobs, pods, job, selector, log);
            Ok(Found::Running(Box::new(step)))
        })
    }
}
