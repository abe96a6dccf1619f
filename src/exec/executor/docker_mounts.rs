//! What of the host a step's container sees: the task's worktree at `/workspace`, its
//! context folder, and (so `git` in the container can commit) the repository's git folder.
//!
//! The git folder is writable, but everything in it that makes the host's `git` run a
//! program is mounted read-only on top: the repository's `config` and `hooks`, and the
//! files that tell git where its folder and config are (the worktree's `.git` file, the
//! worktree's `commondir` and `config.worktree`). A step therefore cannot plant a hook or a
//! `core.fsmonitor` that baton's own `git status` on the host would then run.
//!
//! Everything here touches the filesystem: call it off the async workers.

use super::ExecError;
use super::docker::WORKSPACE;
use std::path::{Path, PathBuf};

/// The container's `HOME` (made under the context folder) and its bind mounts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mounts {
    pub home: PathBuf,
    pub binds: Vec<String>,
}

/// Makes the container's home and lists the mounts for a step in `worktree`.
pub fn host_mounts(worktree: &Path, context_dir: &Path) -> Result<Mounts, ExecError> {
    let home = context_dir.join("home");
    std::fs::create_dir_all(&home).map_err(|e| {
        ExecError(format!(
            "could not make the container's home {}: {e}",
            home.display()
        ))
    })?;
    let ctx = context_dir.display().to_string();
    let mut binds = vec![
        format!("{}:{WORKSPACE}", worktree.display()),
        format!("{ctx}:{ctx}"),
    ];
    let dot_git = worktree.join(".git");
    if dot_git.is_dir() {
        // The step runs in the repository's own checkout: its git folder is inside the
        // writable workspace.
        let inside = Path::new(WORKSPACE).join(".git");
        protect(&mut binds, &dot_git, &inside)?;
    } else if let Some(linked) = linked_worktree(&dot_git) {
        binds.push(format!("{0}:{0}", linked.common.display()));
        protect(&mut binds, &linked.common, &linked.common)?;
        read_only(&mut binds, &dot_git, &Path::new(WORKSPACE).join(".git"));
        for name in ["commondir", "config.worktree", "gitdir"] {
            let file = linked.gitdir.join(name);
            read_only(&mut binds, &file, &file);
        }
    }
    Ok(Mounts { home, binds })
}

/// Mounts a git folder's `config` and `hooks` read-only over the writable mount of it
/// (seen at `inside` in the container). `hooks` is made when missing, so a step cannot
/// make it.
fn protect(binds: &mut Vec<String>, git_dir: &Path, inside: &Path) -> Result<(), ExecError> {
    let hooks = git_dir.join("hooks");
    std::fs::create_dir_all(&hooks).map_err(|e| {
        ExecError(format!(
            "could not make {} (mounted read-only into the container): {e}",
            hooks.display()
        ))
    })?;
    read_only(binds, &git_dir.join("config"), &inside.join("config"));
    read_only(binds, &hooks, &inside.join("hooks"));
    Ok(())
}

/// A read-only bind of `host` at `inside`, when `host` exists.
fn read_only(binds: &mut Vec<String>, host: &Path, inside: &Path) {
    if host.exists() {
        binds.push(format!("{}:{}:ro", host.display(), inside.display()));
    }
}

/// A linked git worktree's own admin folder and the repository's common git folder.
struct Linked {
    gitdir: PathBuf,
    common: PathBuf,
}

/// Reads a linked worktree's `.git` file (`gitdir: PATH`) and that folder's `commondir`.
fn linked_worktree(dot_git: &Path) -> Option<Linked> {
    let link = std::fs::read_to_string(dot_git).ok()?;
    let gitdir = Path::new(link.strip_prefix("gitdir:")?.trim());
    let gitdir = dot_git.parent()?.join(gitdir);
    let gitdir = std::fs::canonicalize(gitdir).ok()?;
    let common = std::fs::read_to_string(gitdir.join("commondir")).ok()?;
    let common = std::fs::canonicalize(gitdir.join(common.trim())).ok()?;
    Some(Linked { gitdir, common })
}
