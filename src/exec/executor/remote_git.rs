//! The local side of a remote step's git trip (ssh, kubernetes): which repository and
//! branch, push it, fetch the step's commits back.

use super::ssh::last_line;
use std::path::{Path, PathBuf};
use tokio::process::Command;

/// The local repository a step runs in, as the trip needs it.
#[derive(Debug, Clone)]
pub struct LocalRepo {
    /// The top of the step's worktree.
    pub top: PathBuf,
    /// The step's folder inside it ("" for the top).
    pub subdir: String,
    /// The branch checked out there (None when detached).
    pub branch: Option<String>,
    /// A name for the repository's mirror on hosts: stable for this repository, distinct
    /// from other repositories with the same folder name.
    pub mirror_name: String,
}

async fn git(dir: &Path, args: &[&str]) -> Result<String, String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|e| format!("could not run git: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    } else {
        Err(format!(
            "git {} failed: {}",
            args[0],
            last_line(&out.stderr)
        ))
    }
}

/// `git` for push and fetch: never prompting, with the ssh command to use when given.
async fn git_over(ssh: Option<&str>, dir: &Path, args: &[&str]) -> Result<String, String> {
    let mut cmd = Command::new("git");
    if let Some(ssh) = ssh {
        cmd.env("GIT_SSH_COMMAND", ssh);
    }
    let out = cmd
        .args(args)
        .current_dir(dir)
        .env("GIT_TERMINAL_PROMPT", "0")
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|e| format!("could not run git: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    } else {
        Err(last_line(&out.stderr))
    }
}

impl LocalRepo {
    /// The repository around `workdir`; an error sentence when there is none.
    pub async fn find(workdir: &Path) -> Result<Self, String> {
        let not_git = |_| {
            format!(
                "a step on another machine needs a git repository (its branch travels there by git), but {} is not in one",
                workdir.display()
            )
        };
        let top = PathBuf::from(
            git(workdir, &["rev-parse", "--show-toplevel"])
                .await
                .map_err(not_git)?,
        );
        let prefix = git(workdir, &["rev-parse", "--show-prefix"]).await?;
        let branch = git(workdir, &["symbolic-ref", "-q", "--short", "HEAD"])
            .await
            .ok()
            .filter(|b| !b.is_empty());
        let common = git(
            workdir,
            &["rev-parse", "--path-format=absolute", "--git-common-dir"],
        )
        .await?;
        Ok(Self {
            top,
            subdir: prefix.trim_end_matches('/').to_string(),
            branch,
            mirror_name: mirror_name(Path::new(&common)),
        })
    }

    /// A worktree known by its path (a step found after a restart): enough to bring
    /// commits back.
    pub fn at(top: impl Into<PathBuf>) -> Self {
        Self {
            top: top.into(),
            subdir: String::new(),
            branch: None,
            mirror_name: String::new(),
        }
    }

    /// True when the worktree has changes that are not committed (they do not travel).
    pub async fn is_dirty(&self) -> bool {
        git(&self.top, &["status", "--porcelain"])
            .await
            .is_ok_and(|s| !s.is_empty())
    }

    /// Pushes HEAD to `branch` at `url` (forced: the remote copy follows this side); `ssh`
    /// is the ssh command git uses, when given.
    pub async fn push(&self, ssh: Option<&str>, url: &str, branch: &str) -> Result<(), String> {
        let refspec = format!("+HEAD:refs/heads/{branch}");
        git_over(ssh, &self.top, &["push", "-q", url, &refspec])
            .await
            .map(drop)
    }

    /// Fetches `branch` from `url` and moves the local branch (and files) to it,
    /// keeping local changes that do not conflict. Returns how many commits came back.
    pub async fn fetch_back(
        &self,
        ssh: Option<&str>,
        url: &str,
        branch: &str,
    ) -> Result<u64, String> {
        let refspec = format!("refs/heads/{branch}");
        git_over(ssh, &self.top, &["fetch", "-q", "--no-tags", url, &refspec]).await?;
        let count = git(&self.top, &["rev-list", "--count", "HEAD..FETCH_HEAD"])
            .await?
            .parse()
            .unwrap_or(0);
        let same = git(&self.top, &["rev-parse", "HEAD"]).await?
            == git(&self.top, &["rev-parse", "FETCH_HEAD"]).await?;
        if !same {
            git(&self.top, &["reset", "-q", "--keep", "FETCH_HEAD"]).await?;
        }
        Ok(count)
    }
}

/// `<folder>-<hash of the path>`: readable on the host, unique per repository.
fn mirror_name(common_dir: &Path) -> String {
    let path = common_dir
        .canonicalize()
        .unwrap_or_else(|_| common_dir.to_path_buf());
    let folder = if path.file_name().is_some_and(|n| n == ".git") {
        path.parent().unwrap_or(&path)
    } else {
        &path
    };
    let base: String = folder
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
        .trim_end_matches(".git")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(40)
        .collect();
    // FNV-1a: stable across builds and platforms, unlike the std hasher.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in path.to_string_lossy().bytes() {
        h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
    }
    format!(
        "{}-{:08x}",
        if base.is_empty() { "repo" } else { &base },
        h as u32
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mirror_names_are_readable_and_distinct() {
        let a = mirror_name(Path::new("/home/me/proj/.git"));
        let b = mirror_name(Path::new("/home/other/proj/.git"));
        assert!(a.starts_with("proj-"), "{a}");
        assert_ne!(a, b);
        assert!(mirror_name(Path::new("/srv/we ird'.git")).starts_with("we_ird_-"));
    }
}
