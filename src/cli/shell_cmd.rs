//! `baton shell ID`: a shell in a task's worktree, as the board's `o` key opens it — a new
//! tmux window there inside tmux, else `$SHELL` in the foreground until it exits.

use super::{Failure, Outcome, exit};
use crate::engine::Reader;
use crate::tui::launch::shell_argv;
use crate::workspace::Workspace;
use std::path::Path;
use std::process::Command;

/// Opens the shell for task `id`.
pub fn run(ws: &Workspace, id: i64, here: bool) -> Outcome {
    let task = Reader::open(ws)?.task(id)?;
    let Some(wt) = task.worktree.as_deref().filter(|w| Path::new(w).is_dir()) else {
        let why = match &task.branch {
            Some(b) => format!("its worktree was removed when it ended; its branch is {b}"),
            None => "it has no worktree yet — one is made when a step runs".into(),
        };
        return Err(Failure::new(format!("task {id}: {why}")));
    };
    let argv = shell_argv();
    if !here && crate::tui::notify::in_tmux() {
        let out = Command::new("tmux")
            .args(["new-window", "-c", wt, "--"])
            .args(&argv)
            .output()
            .map_err(|e| Failure::new(format!("cannot run tmux: {e}")))?;
        if !out.status.success() {
            return Err(Failure::new(format!(
                "tmux new-window failed: {} — `baton shell {id} --here` opens it in this pane",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        outln!("task {id}: opened a tmux window in {wt}");
        return Ok(exit::OK);
    }
    let status = Command::new(&argv[0])
        .args(&argv[1..])
        .current_dir(wt)
        .status()
        .map_err(|e| Failure::new(format!("cannot run {}: {e}", argv[0])))?;
    Ok(status.code().unwrap_or(exit::ERROR))
}
