//! What of the host a step's container sees: the task's worktree at `/workspace`, its
//! context folder, and, read-only, the repository's git folder.
//!
//! The git folder is read-only as a whole. Anything writable in it could make the host's
//! `git` run a program or read a folder the step chose: a hook, a `core.fsmonitor` in a
//! config, a `commondir` or `.git` file pointing elsewhere, a renamed folder put back with
//! other contents, a moved ref. So `git` in the image can read history and diff, and the
//! step's changes are committed on the task branch by baton, on the host, like any
//! uncommitted work.
//!
//! The workspace's own `.baton` folder is hidden under an empty read-only cover when it lies
//! inside the step's working tree (a workspace that is not a git repository runs its steps
//! in its root): pipelines, agents, config and database there are what the engine on the
//! host acts on, so a step that rewrote them would run its own code on the host. The
//! context folder, which lives under `.baton`, is mounted on its own at its host path.
//!
//! Everything here touches the filesystem: call it off the async workers.

use super::ExecError;
use super::docker::WORKSPACE;
use std::path::{Path, PathBuf};

/// The container's `HOME` (made under the context folder), its bind mounts and the paths
/// covered by an empty read-only folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mounts {
    pub home: PathBuf,
    pub binds: Vec<String>,
    pub covers: Vec<String>,
}

/// Makes the container's home and lists the mounts for a step in `worktree` of the
/// workspace at `workspace`.
pub fn host_mounts(
    worktree: &Path,
    context_dir: &Path,
    workspace: &Path,
) -> Result<Mounts, ExecError> {
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
    let inside = Path::new(WORKSPACE).join(".git");
    // A `.git` that is a link could point the mount anywhere: such a worktree gets no git.
    let meta = std::fs::symlink_metadata(&dot_git).ok();
    if meta.as_ref().is_some_and(|m| m.file_type().is_dir()) {
        // The step runs in the repository's own checkout: its git folder, inside the
        // writable workspace, is covered by a read-only mount of itself.
        binds.push(format!("{}:{}:ro", dot_git.display(), inside.display()));
    } else if meta.as_ref().is_some_and(|m| m.file_type().is_file())
        && let Some(linked) = linked_worktree(&dot_git)
        && own_repository(worktree, workspace, &linked)
    {
        binds.push(format!("{0}:{0}:ro", linked.common.display()));
        binds.push(format!("{}:{}:ro", dot_git.display(), inside.display()));
    }
    let covers = baton_inside(worktree, workspace).into_iter().collect();
    Ok(Mounts {
        home,
        binds,
        covers,
    })
}

/// Where the workspace's `.baton` folder appears in the container, when the worktree holds
/// it (the workspace root, or a folder above it).
fn baton_inside(worktree: &Path, workspace: &Path) -> Option<String> {
    let real = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let (worktree, workspace) = (real(worktree), real(workspace));
    let rel = workspace.strip_prefix(&worktree).ok()?;
    Some(
        Path::new(WORKSPACE)
            .join(rel)
            .join(".baton")
            .display()
            .to_string(),
    )
}

/// True when `linked` is the git folder of the workspace's own repository, so mounting it
/// shows the step nothing but its history. A step can write a `.git` file naming any host
/// folder; it is honoured only in a task worktree (never the workspace root, where git
/// would read that very file to answer) of a workspace that is a git repository.
fn own_repository(worktree: &Path, workspace: &Path, linked: &Linked) -> bool {
    let real = |p: &Path| std::fs::canonicalize(p).ok();
    if real(worktree).is_none() || real(worktree) == real(workspace) {
        return false;
    }
    let out = std::process::Command::new("git")
        .args(["rev-parse", "--path-format=absolute", "--git-common-dir"])
        .current_dir(workspace)
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output();
    let Some(out) = out.ok().filter(|o| o.status.success()) else {
        return false;
    };
    let common = String::from_utf8_lossy(&out.stdout);
    real(Path::new(common.trim())).is_some_and(|c| c == linked.common)
}

/// The repository's common git folder, seen from a linked worktree.
struct Linked {
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
    Some(Linked { common })
}
