//! What `baton attach` opens for a task: the agent CLI's own interactive UI on the task's
//! last agent session (the profile's `attach_argv`), in the folder its step ran in, with the
//! environment its step had; or `$SHELL` there, with the reason, when the agent has no
//! interactive resume or the task no session. Read from the store; nothing is started here.

use super::session::agent_of;
use super::takeover::refusal;
use super::transition::pipeline_of;
use crate::agents::{AgentCatalog, Backend, Profile};
use crate::pipeline::Pipeline;
use crate::store::{Db, StepRun, Task};
use crate::workspace::Workspace;
use std::path::{Path, PathBuf};

/// What to run for a takeover, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The program and its arguments (each element one argument; no shell reads them).
    pub argv: Vec<String>,
    /// The folder the task's step ran in: its worktree (and the workspace's place in it).
    pub cwd: PathBuf,
    /// Added to the person's own environment: the `BATON_*` variables of the step and the
    /// step's and profile's `env`.
    pub env: Vec<(String, String)>,
    /// The agent profile and the session opened, when it is the agent's own UI.
    pub session: Option<(String, String)>,
    /// Why a shell opens instead of the agent, when it does.
    pub instead: Option<String>,
}

/// The takeover of task `id`, or the sentence saying why it cannot be taken over now (its
/// step runs, it has no worktree). `shell` is what opens when the agent cannot.
pub fn plan(
    db: &Db,
    ws: &Workspace,
    agents: &AgentCatalog,
    id: i64,
    shell: Vec<String>,
) -> Result<Plan, String> {
    let task = db.task(id).map_err(|e| e.to_string())?;
    if let Some(why) = refusal(&task) {
        return Err(why);
    }
    let pipeline = pipeline_of(db, &task).map_err(|e| e.to_string())?;
    let steps = db.step_runs(id).map_err(|e| e.to_string())?;
    let worktree = PathBuf::from(task.worktree.clone().unwrap_or_default());
    let agent_steps: Vec<(&StepRun, &str)> = steps
        .iter()
        .rev()
        .filter_map(|s| Some((s, agent_of(&pipeline, &s.status)?)))
        .collect();
    let with_session = agent_steps.iter().find(|(s, _)| s.session_id.is_some());
    let Some(&(step, agent)) = with_session.or(agent_steps.first()) else {
        return Ok(Plan {
            env: vars(ws, &task, None, &pipeline, None),
            cwd: step_dir(ws, &worktree, None),
            argv: shell,
            session: None,
            instead: Some(format!(
                "task {id} has had no agent step; opening a shell in its worktree instead"
            )),
        });
    };
    let profile = agents.get(agent).ok();
    let spec_dir = pipeline
        .status(&step.status)
        .and_then(|s| s.step.as_ref())
        .and_then(|s| s.workdir.clone());
    let cwd = step_dir(ws, &worktree, spec_dir.as_deref());
    let env = vars(ws, &task, Some(step), &pipeline, profile);
    let (p, session) = match (profile, step.session_id.clone()) {
        (Some(p), Some(s)) if !p.attach_argv.is_empty() => (p, s),
        (p, s) => {
            let instead = match (p, s) {
                (None, _) => format!(
                    "agent `{agent}` is not defined here any more; opening a shell in the worktree instead"
                ),
                (Some(_), None) => format!(
                    "task {id} has no agent session yet (its `{agent}` step recorded none); opening a shell in its worktree instead"
                ),
                (Some(_), Some(_)) => format!(
                    "agent `{agent}` has no interactive resume (no `attach_argv` in its profile); opening a shell in the worktree instead"
                ),
            };
            return Ok(Plan {
                argv: shell,
                cwd,
                env,
                session: None,
                instead: Some(instead),
            });
        }
    };
    let argv = p
        .attach_argv
        .iter()
        .map(|a| crate::agents::fill(a, |n| (n == "session").then_some(session.as_str())))
        .collect();
    Ok(Plan {
        argv,
        cwd,
        env,
        session: Some((agent.to_string(), session)),
        instead: None,
    })
}

/// The agent profile a status's step names.
/// Where a step of the task ran: the workspace's place inside the worktree, and the
/// step's own `workdir` below it (an agent CLI finds its sessions by this folder).
fn step_dir(ws: &Workspace, worktree: &Path, workdir: Option<&str>) -> PathBuf {
    let rel = crate::workspace::git::repo_root(ws.root())
        .and_then(|repo| {
            let root = ws.root().canonicalize().ok()?;
            let repo = repo.canonicalize().ok()?;
            root.strip_prefix(repo).ok().map(Path::to_path_buf)
        })
        .unwrap_or_default();
    let dir = worktree.join(rel);
    let dir = match workdir {
        Some(w) => dir.join(w),
        None => dir,
    };
    if dir.is_dir() {
        dir
    } else {
        worktree.to_path_buf()
    }
}

/// The environment the step had: the `BATON_*` variables, the step's `env` and the
/// profile's. Values come from the task and the files; no secret of the engine's is here.
fn vars(
    ws: &Workspace,
    task: &Task,
    step: Option<&StepRun>,
    pipeline: &Pipeline,
    profile: Option<&Profile>,
) -> Vec<(String, String)> {
    let context = ws.context_dir(task.id);
    let mut vars = vec![
        ("BATON_TASK_ID".to_string(), task.id.to_string()),
        ("BATON_TASK_TITLE".into(), task.title.clone()),
        ("BATON_PIPELINE".into(), task.pipeline_id.clone()),
        ("BATON_CONTEXT_DIR".into(), context.display().to_string()),
        ("BATON_WORKSPACE".into(), ws.root().display().to_string()),
    ];
    let status = step.map_or(task.status.as_str(), |s| s.status.as_str());
    vars.push(("BATON_STATUS".into(), status.to_string()));
    if let Some(s) = step {
        vars.push(("BATON_RUN_ID".into(), s.run_id.to_string()));
        vars.push(("BATON_ATTEMPT".into(), s.attempt.to_string()));
        vars.push(("BATON_EXECUTION_KEY".into(), s.execution_key.clone()));
    }
    let prompt_file = context.join("prompt.md");
    if prompt_file.is_file() {
        vars.push((
            "BATON_TASK_PROMPT_FILE".into(),
            prompt_file.display().to_string(),
        ));
    }
    if task.prompt.len() <= 64 * 1024 {
        vars.push(("BATON_TASK_PROMPT".into(), task.prompt.clone()));
    }
    if let Some(b) = &task.branch {
        vars.push(("BATON_BRANCH".into(), b.clone()));
    }
    if let Some(spec) = pipeline.status(status).and_then(|s| s.step.as_ref()) {
        vars.extend(spec.own_env());
    }
    if let Some(p) = profile {
        vars = p.env_under(vars);
        // The OpenCode server baton starts reads the workspace's OpenCode settings; the
        // interactive one should too.
        let config = ws.dir().join("opencode.json");
        if p.backend == Backend::Opencode
            && config.is_file()
            && std::env::var_os("OPENCODE_CONFIG").is_none()
        {
            vars.push(("OPENCODE_CONFIG".into(), config.display().to_string()));
        }
    }
    vars
}
