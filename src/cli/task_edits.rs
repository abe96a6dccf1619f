//! Commands that fix a task up: `dismiss`, `rerun`, `edit`, `archive`, `delete`, and
//! `list --archived`.

use super::tasks::{act, read_prompt};
use super::{Command, Failure, Outcome, exit};
use crate::engine::MAX_TITLE;
use crate::engine::{Action, Reader};
use crate::store::rfc3339;
use crate::workspace::{GitQueue, Workspace, git};
use std::path::Path;

/// Runs one of this file's commands.
pub fn run(ws: &Workspace, command: Command) -> Outcome {
    match command {
        Command::Dismiss { id, note } => act(ws, id, Action::Dismiss { note }),
        Command::Rerun { id, from, brk } => act(ws, id, Action::Rerun { from, brk }),
        Command::Edit { id, title, prompt } => {
            if let Some(t) = &title
                && t.chars().count() > MAX_TITLE
            {
                return Err(Failure::new(format!(
                    "the title is {} characters long; keep it to {MAX_TITLE} at most and put the details in --prompt",
                    t.chars().count()
                )));
            }
            let prompt = match prompt {
                Some(p) => Some(read_prompt(Some(p))?),
                None => None,
            };
            act(ws, id, Action::Edit { title, prompt })
        }
        Command::Archive { id } => act(ws, id, Action::Archive),
        Command::Unarchive { id } => act(ws, id, Action::Unarchive),
        Command::Delete { id, purge } => {
            // Its branch and worktree as they were before the delete took its record.
            let task = Reader::open(ws)?.task(id)?;
            let code = act(ws, id, Action::Delete)?;
            // Its prompt and the copies of its step logs go with it, as its history did.
            let context = ws.context_dir(id);
            if let Err(e) = std::fs::remove_dir_all(&context)
                && e.kind() != std::io::ErrorKind::NotFound
            {
                eprintln!(
                    "the task is deleted, but its folder {} could not be removed: {e} — remove it by hand",
                    context.display()
                );
            }
            match (&task.branch, purge) {
                (Some(branch), true) => purge_git(ws, task.worktree.as_deref(), branch)?,
                (Some(branch), false) => outln!(
                    "its branch {branch} is kept{} — `--purge` removes {}",
                    task.worktree
                        .as_deref()
                        .map(|w| format!(" and so is its worktree {w}"))
                        .unwrap_or_default(),
                    if task.worktree.is_some() {
                        "both"
                    } else {
                        "it"
                    }
                ),
                _ => {}
            }
            Ok(code)
        }
        _ => unreachable!("dispatched elsewhere"),
    }
}

/// Removes a deleted task's worktree and branch, through the repository's git queue.
fn purge_git(ws: &Workspace, worktree: Option<&str>, branch: &str) -> Result<(), Failure> {
    let Some(repo) = git::repo_root(ws.root()) else {
        return Ok(());
    };
    let (wt, b) = (worktree.map(str::to_string), branch.to_string());
    GitQueue::for_repo(&repo)
        .run(move |repo| {
            if let Some(wt) = &wt {
                git::remove_worktree(repo, Path::new(wt))?;
            }
            git::delete_branch(repo, &b)
        })
        .map_err(|e| {
            Failure::new(format!(
                "the task is deleted, but removing branch {branch} failed: {e} — remove it with `git branch -D {branch}`"
            ))
        })?;
    outln!("removed branch {branch}");
    Ok(())
}

/// `list --archived`: archived tasks, most recently archived first.
pub(super) fn print_archived(tasks: Vec<crate::store::Task>, filtered: bool) -> Outcome {
    if tasks.is_empty() && filtered {
        outln!("no archived tasks match — `baton list --archived` shows them all");
        return Ok(exit::OK);
    }
    if tasks.is_empty() {
        outln!("no archived tasks — `baton archive ID` archives a finished one");
        return Ok(exit::OK);
    }
    outln!(
        "{:>5}  {:<14} {:<12} {:<20} TITLE",
        "ID",
        "STATUS",
        "PIPELINE",
        "UPDATED"
    );
    for t in tasks {
        let title: String = crate::ansi::strip(&t.title)
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .take(80)
            .collect();
        outln!(
            "{:>5}  {:<14} {:<12} {:<20} {title}",
            t.id,
            t.status,
            t.pipeline_id,
            &rfc3339(t.updated_at)[..19],
        );
    }
    Ok(exit::OK)
}
