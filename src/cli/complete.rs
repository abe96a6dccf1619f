//! Dynamic shell completion: `COMPLETE=bash baton` prints a script that asks baton itself
//! for candidates, so task ids and pipeline ids complete from the workspace as it is now.
//! Ids are read through the store's read-only path, as `baton list` reads them.

use clap::Command;
use clap_complete::engine::{ArgValueCandidates, CompletionCandidate};

/// The longest title shown beside a task id.
const HELP_WIDTH: usize = 60;

/// Adds the id candidates to the arguments that take a task or a pipeline id.
pub fn with_candidates(cmd: Command) -> Command {
    cmd.mut_subcommands(|sc| {
        let on_pipelines = sc.get_name() == "pipelines";
        let sc = sc.mut_args(|a| match a.get_id().as_str() {
            "id" | "after" => a.add(ArgValueCandidates::new(task_ids)),
            "pipeline" => a.add(ArgValueCandidates::new(pipeline_ids)),
            _ => a,
        });
        if on_pipelines {
            sc.mut_subcommands(|s| {
                s.mut_args(|a| match a.get_id().as_str() {
                    "id" => a.add(ArgValueCandidates::new(pipeline_ids)),
                    _ => a,
                })
            })
        } else {
            sc
        }
    })
}

/// The workspace completion runs in: `BATON_DIR`, else the nearest one above the cwd.
fn workspace() -> Option<crate::workspace::Workspace> {
    let dir = std::env::var_os("BATON_DIR").map(std::path::PathBuf::from);
    super::workspace(dir.as_ref()).ok()
}

fn short(text: &str) -> String {
    let line = crate::ansi::strip(text);
    let line = line.lines().next().unwrap_or("").trim();
    let mut out: String = line
        .chars()
        .filter(|c| !c.is_control())
        .take(HELP_WIDTH)
        .collect();
    if line.chars().count() > HELP_WIDTH {
        out.push('…');
    }
    out
}

/// Task ids on the board, newest first, each with its title.
fn task_ids() -> Vec<CompletionCandidate> {
    let Some(ws) = workspace() else {
        return Vec::new();
    };
    if !ws.db_path().exists() {
        return Vec::new();
    }
    let Ok(reader) = crate::engine::Reader::open(&ws) else {
        return Vec::new();
    };
    let tasks = reader
        .tasks(&crate::store::TaskFilter::default())
        .unwrap_or_default();
    tasks
        .iter()
        .map(|t| {
            CompletionCandidate::new(t.id.to_string())
                .help(Some(format!("{} ({})", short(&t.title), t.status).into()))
        })
        .collect()
}

/// Pipeline ids: built-in and the workspace's.
fn pipeline_ids() -> Vec<CompletionCandidate> {
    let ws = workspace();
    let pipelines = ws.as_ref().map(|w| w.pipelines_dir());
    let agents_dir = ws.as_ref().map(|w| w.agents_dir());
    let agents = crate::pipeline::agent_ids(agents_dir.as_deref());
    crate::pipeline::load_catalog(pipelines.as_deref(), Some(&agents))
        .pipelines
        .iter()
        .map(|p| CompletionCandidate::new(p.id.clone()).help(Some(short(&p.name).into())))
        .collect()
}
