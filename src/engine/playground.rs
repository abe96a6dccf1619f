//! The agent playground (`baton try`): one agent, run once, in a scratch worktree, with its
//! log streamed to the caller, then its handoff (as the next agent would receive it) and its
//! diff. Nothing reaches the board: no task, no store, no events. `keep` saves the result as
//! a branch; otherwise the scratch checkout disappears. The last try's prompt and handoff
//! files stay in `.baton/context/try/`.

use crate::agents::TemplateVars;
use crate::exec::agent::{AgentStep, Hooks, run_step};
use crate::exec::{LogSender, StepEnv};
use crate::store::StepState;
use crate::workspace::{Workspace, git, scratch};
use std::path::PathBuf;
use tokio_util::sync::CancellationToken;

/// What to try.
#[derive(Debug, Clone)]
pub struct TryRequest {
    /// The agent profile id.
    pub agent: String,
    /// The task text (`{{prompt}}`).
    pub prompt: String,
    /// What to check out (default: the branch checked out in the workspace).
    pub base: Option<String>,
    /// Save the result as this new branch.
    pub keep: Option<String>,
}

/// How the try went.
#[derive(Debug, Clone)]
pub struct TryResult {
    /// succeeded, failed, timed_out or cancelled.
    pub state: StepState,
    /// The trigger it would fire in a pipeline (`success`, `outcome:needs_info`, …).
    pub trigger: String,
    /// Why it failed, when it did.
    pub error: Option<String>,
    /// The context header the next agent would receive (or the raw answer, when it has no
    /// handoff headings).
    pub handoff: Option<String>,
    /// The changes the agent made (none outside a git repository).
    pub diff: Option<String>,
    /// Where it ran, in words.
    pub ran_in: String,
}

/// A folder removed when dropped, whatever happened.
struct Scratch {
    dir: PathBuf,
    repo: Option<PathBuf>,
    worktree: PathBuf,
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if let Some(repo) = &self.repo {
            let _ = git::remove_worktree(repo, &self.worktree);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn scratch_dir() -> PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    std::env::temp_dir().join(format!("baton-try-{}-{nanos}", std::process::id()))
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, String> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| format!("the git work panicked: {e}"))?
}

/// A unique execution key for one `baton try` run: `try:<engine pid>:<n>`.
fn try_key() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("try:{}:{n}", std::process::id())
}

/// Runs `req` once. `lines` receives the log as it happens; `cancel` stops the agent.
pub async fn try_agent(
    ws: &Workspace,
    req: TryRequest,
    lines: LogSender,
    cancel: CancellationToken,
) -> Result<TryResult, String> {
    let cfg = ws.config().map_err(|e| e.to_string())?;
    // The webhook secret, under whatever name the workspace gave it, stays with the engine.
    crate::exec::process::keep_from_children(&cfg.serve.github_secret_env);
    let catalog = crate::agents::load_agents(Some(&ws.agents_dir()));
    catalog.get(&req.agent).map_err(|e| e.to_string())?;
    let root = ws.root().to_path_buf();
    let repo = {
        let root = root.clone();
        blocking(move || Ok(git::repo_root(&root))).await?
    };
    if repo.is_none() && (req.keep.is_some() || req.base.is_some()) {
        return Err(format!(
            "{} is not a git repository, so there is no branch to start from or keep — drop --branch/--keep, or run `git init` first",
            root.display()
        ));
    }
    if let (Some(repo), Some(branch)) = (&repo, &req.keep) {
        let (r, b) = (repo.clone(), branch.clone());
        blocking(move || scratch::check_new_branch(&r, &b)).await?;
    }
    let dir = scratch_dir();
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    // The prompt and handoff files outlive the scratch checkout, for a look afterwards; each
    // try starts the folder afresh.
    let context = ws.dir().join("context").join("try");
    let _ = std::fs::remove_dir_all(&context);
    std::fs::create_dir_all(&context)
        .map_err(|e| format!("cannot create {}: {e}", context.display()))?;
    let mut guard = Scratch {
        worktree: dir.join("work"),
        repo: None,
        dir: dir.clone(),
    };
    let base_sha = match &repo {
        Some(repo) => {
            let base = match &req.base {
                Some(b) => b.clone(),
                None => git::current_branch(&root).unwrap_or_else(|| "HEAD".into()),
            };
            let (r, w, b) = (repo.clone(), guard.worktree.clone(), base.clone());
            let sha = blocking(move || scratch::add(&r, &w, &b).map_err(|e| e.to_string())).await?;
            guard.repo = Some(repo.clone());
            Some((base, sha))
        }
        None => {
            std::fs::create_dir_all(&guard.worktree)
                .map_err(|e| format!("cannot create {}: {e}", guard.worktree.display()))?;
            None
        }
    };
    let ran_in = match &base_sha {
        Some((base, sha)) => format!(
            "a scratch worktree of {base} ({}) at {}",
            &sha[..sha.len().min(12)],
            guard.worktree.display()
        ),
        None => format!("an empty scratch folder {}", guard.worktree.display()),
    };
    let vars = vec![
        ("BATON_TASK_ID".into(), "0".into()),
        ("BATON_TASK_TITLE".into(), "try".into()),
        ("BATON_TASK_PROMPT".into(), req.prompt.clone()),
        ("BATON_STATUS".into(), "try".into()),
        ("BATON_ATTEMPT".into(), "1".into()),
        ("BATON_CONTEXT_DIR".into(), context.display().to_string()),
        ("BATON_WORKSPACE".into(), root.display().to_string()),
        // A key of its own, so stopping it finds the processes that left its group too.
        (crate::exec::process::KEY_VAR.into(), try_key()),
    ];
    let opencode = crate::exec::agent::opencode_serve::OpencodeServer::owned_by(&root, "try");
    let step = AgentStep {
        profile_id: &req.agent,
        agents_dir: &ws.agents_dir(),
        vars: TemplateVars {
            title: req.prompt.lines().next().unwrap_or("try").to_string(),
            prompt: req.prompt.clone(),
            branch: req.keep.clone().unwrap_or_default(),
            status: "try".into(),
            context_dir: context.display().to_string(),
            ..TemplateVars::default()
        },
        env: StepEnv {
            vars,
            workdir: guard.worktree.clone(),
            timeout: cfg.default_timeout,
            kill_grace: cfg.kill_grace,
        },
        step_timeout: None,
        context_dir: &context,
        attempt: 1,
        catalog: None,
        placement: crate::exec::executor::Placement {
            step: None,
            default: cfg.default_executor.clone(),
            worktree: guard.worktree.clone(),
            context_dir: context.clone(),
            labels: crate::exec::executor::Labels {
                task_id: 0,
                step_run_id: 0,
                // One try at a time per workspace holds its scratch worktree; the process
                // id keeps two workspaces' tries apart on one daemon.
                execution_key: format!("try:{}", std::process::id()),
                workspace: root.display().to_string(),
            },
            reattach: false,
        },
        opencode: Some(&opencode),
        earlier: None,
        inbox: None,
    };
    let hooks = Hooks {
        session: &|_| {},
        spawned: &|_| {},
        continued: &|_| {},
        delivered: &|_| {},
    };
    let report = run_step(step, lines, cancel, &hooks).await;
    // A try's OpenCode server lives as long as the try.
    opencode.stop().await;
    let handoff = report.result.handoff_content.as_deref().map(|raw| {
        let h = crate::handoff::extract(raw);
        if h.structured {
            crate::handoff::context_header(&h, "try")
        } else {
            raw.to_string()
        }
    });
    let diff = match (&guard.repo, &base_sha) {
        (Some(_), Some((_, sha))) => {
            let (w, sha) = (guard.worktree.clone(), sha.clone());
            Some(blocking(move || git::diff(&w, &sha, false).map_err(|e| e.to_string())).await?)
        }
        _ => None,
    };
    if let (Some(branch), true) = (&req.keep, report.state == StepState::Succeeded) {
        let (w, b) = (guard.worktree.clone(), branch.clone());
        let message = format!("baton try {}: {}", req.agent, step_title(&req.prompt));
        blocking(move || scratch::keep(&w, &b, &message).map_err(|e| e.to_string())).await?;
    }
    Ok(TryResult {
        state: report.state,
        trigger: report.trigger.to_string(),
        error: report.result.error.clone(),
        handoff,
        diff,
        ran_in,
    })
}

fn step_title(prompt: &str) -> String {
    prompt
        .lines()
        .next()
        .unwrap_or("")
        .chars()
        .take(72)
        .collect()
}
