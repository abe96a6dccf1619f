//! The local side of an ssh step's git trip: which repository and branch, push, fetch back.

use super::host::{SshHost, last_line};
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

/// `git` with the host's ssh options, for push and fetch.
async fn git_over(host: &SshHost, dir: &Path, args: &[&str]) -> Result<String, String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_SSH_COMMAND", host.git_ssh_command())
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
                "an ssh step needs a git repository (its branch travels to the host by git), but {} is not in one",
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

    /// True when the worktree has changes that are not committed (they do not travel).
    pub async fn is_dirty(&self) -> bool {
        git(&self.top, &["status", "--porcelain"])
            .await
            .is_ok_and(|s| !s.is_empty())
    }

    /// Pushes HEAD to `branch` in the host's mirror (forced: the mirror follows this side).
    pub async fn push(&self, host: &SshHost, mirror: &str, branch: &str) -> Result<(), String> {
        let refspec = format!("+HEAD:refs/heads/{branch}");
        git_over(
            host,
            &self.top,
            &["push", "-q", &host.git_url(mirror), &refspec],
        )
        .await
        .map(drop)
    }

    /// Fetches `branch` from the mirror and moves the local branch (and files) to it,
    /// keeping local changes that do not conflict. Returns how many commits came back.
    pub async fn fetch_back(
        &self,
        host: &SshHost,
        mirror: &str,
        branch: &str,
    ) -> Result<u64, String> {
        let refspec = format!("refs/heads/{branch}");
        git_over(
            host,
            &self.top,
            &["fetch", "-q", "--no-tags", &host.git_url(mirror), &refspec],
        )
        .await?;
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
