//! The local side of a remote step's git trip (ssh, kubernetes): which repository and
//! branch, push it, fetch the step's commits back.

use super::ssh::last_line;
use std::path::{Path, PathBuf};
use tokio::process::Command;

/// Variables whose local value is a local path that means nothing on another machine.
pub const LOCAL_PATHS: &[&str] = &[
    "BATON_CONTEXT_DIR",
    "BATON_WORKSPACE",
    "BATON_TASK_PROMPT_FILE",
    "BATON_HANDOFF_FILE",
    "BATON_TRIGGER_PAYLOAD_FILE",
];

/// The last value of `name` in a step's variables.
pub fn var<'a>(vars: &'a [(String, String)], name: &str) -> Option<&'a str> {
    vars.iter()
        .rev()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// `exec "$BATON_ARGV_0" …`: the shell script that runs an argv on another machine. The
/// argv itself travels in variables (`BATON_ARGV_0`…, appended to `vars`), so no element
/// is ever read by a shell as code.
pub fn argv_script(argv: &[String], vars: &mut Vec<(String, String)>) -> String {
    let mut script = String::from("exec");
    for (i, a) in argv.iter().enumerate() {
        script.push_str(&format!(" \"$BATON_ARGV_{i}\""));
        vars.push((format!("BATON_ARGV_{i}"), a.clone()));
    }
    script
}

/// A git URL fit for logs, messages and annotations: without a query string or fragment,
/// without `user:password@`, and over http(s) without any user part (a bare token before
/// `@`). An ssh user (`ssh://git@host/…`, scp-like `git@host:path`) is no secret and stays.
pub fn display_url(url: &str) -> String {
    let cut = url.find(['?', '#']).unwrap_or(url.len());
    let url = &url[..cut];
    let Some(scheme_end) = url.find("://") else {
        return url.to_string();
    };
    let rest = &url[scheme_end + 3..];
    let host_end = rest.find('/').unwrap_or(rest.len());
    let http = url[..scheme_end].to_ascii_lowercase().starts_with("http");
    match rest[..host_end].rfind('@') {
        Some(at) if http || rest[..at].contains(':') => {
            format!("{}{}", &url[..scheme_end + 3], &rest[at + 1..])
        }
        _ => url.to_string(),
    }
}

/// Why a git remote cannot be used, when it starts with `-` (git would read it as an option).
pub fn check_remote(url: &str) -> Result<(), String> {
    if url.starts_with('-') {
        Err(format!(
            "the git remote `{}` starts with `-`, which git would read as an option; give a URL or a path",
            display_url(url)
        ))
    } else {
        Ok(())
    }
}

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

    /// Pushes HEAD to `branch` at `url` (forced: the remote copy follows this side, so
    /// `branch` must be baton's own, never a branch people share); `ssh` is the ssh command
    /// git uses, when given.
    pub async fn push(&self, ssh: Option<&str>, url: &str, branch: &str) -> Result<(), String> {
        check_remote(url)?;
        let refspec = format!("+HEAD:refs/heads/{branch}");
        git_over(
            ssh,
            &self.top,
            &["push", "-q", "--end-of-options", url, &refspec],
        )
        .await
        .map(drop)
    }

    /// Fetches `branch` from `url` and fast-forwards the local branch (and files) to it,
    /// keeping local changes that do not conflict. Returns how many commits came back; an
    /// error sentence when the local branch has moved on in a way that cannot fast-forward.
    pub async fn fetch_back(
        &self,
        ssh: Option<&str>,
        url: &str,
        branch: &str,
    ) -> Result<u64, String> {
        check_remote(url)?;
        let refspec = format!("refs/heads/{branch}");
        git_over(
            ssh,
            &self.top,
            &[
                "fetch",
                "-q",
                "--no-tags",
                "--end-of-options",
                url,
                &refspec,
            ],
        )
        .await?;
        let count = git(&self.top, &["rev-list", "--count", "HEAD..FETCH_HEAD"])
            .await?
            .parse()
            .unwrap_or(0);
        if count > 0 {
            git(&self.top, &["merge", "-q", "--ff-only", "FETCH_HEAD"])
                .await
                .map_err(|e| {
                    format!(
                        "the local branch has commits the step's branch lacks, or changes in the way, so its {count} commit(s) were not applied ({e}); merge FETCH_HEAD by hand"
                    )
                })?;
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

    #[test]
    fn display_urls_hide_credentials_and_queries() {
        assert_eq!(
            display_url("https://user:tok3n@git.example.com/team/app.git?x=secret"),
            "https://git.example.com/team/app.git"
        );
        assert_eq!(
            display_url("https://ghp_abc@github.com/a/b.git"),
            "https://github.com/a/b.git"
        );
        assert_eq!(
            display_url("git@git.example.com:team/app.git"),
            "git@git.example.com:team/app.git"
        );
        assert_eq!(
            display_url("ssh://git@host:22/a@b.git"),
            "ssh://git@host:22/a@b.git"
        );
        assert_eq!(display_url("ssh://me:pw@host/a.git"), "ssh://host/a.git");
        assert_eq!(display_url("/srv/git/app.git"), "/srv/git/app.git");
        assert!(check_remote("--upload-pack=touch x").is_err());
        assert!(check_remote("/srv/a.git").is_ok());
    }

    fn sh_git(dir: &Path, args: &[&str]) {
        let ok = std::process::Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .current_dir(dir)
            .output()
            .unwrap()
            .status
            .success();
        assert!(ok, "git {args:?}");
    }

    /// An older remote branch never rewinds local commits; a newer one fast-forwards.
    #[tokio::test]
    async fn fetch_back_fast_forwards_and_never_drops_local_commits() {
        let tmp = tempfile::tempdir().unwrap();
        let wt = tmp.path().join("wt");
        std::fs::create_dir(&wt).unwrap();
        sh_git(&wt, &["init", "-q", "-b", "main"]);
        sh_git(&wt, &["commit", "-q", "--allow-empty", "-m", "one"]);
        sh_git(tmp.path(), &["init", "-q", "--bare", "r.git"]);
        let remote = tmp.path().join("r.git").display().to_string();
        let repo = LocalRepo::at(&wt);
        repo.push(None, &remote, "b").await.unwrap();
        // A local commit after the push: the remote copy is older.
        sh_git(&wt, &["commit", "-q", "--allow-empty", "-m", "two"]);
        let head = git(&wt, &["rev-parse", "HEAD"]).await.unwrap();
        assert_eq!(repo.fetch_back(None, &remote, "b").await, Ok(0));
        assert_eq!(git(&wt, &["rev-parse", "HEAD"]).await.unwrap(), head);
        // The remote copy moves on from the local one: a fast-forward.
        repo.push(None, &remote, "b").await.unwrap();
        let other = tmp.path().join("other");
        sh_git(
            tmp.path(),
            &["clone", "-q", "-b", "b", &remote, other.to_str().unwrap()],
        );
        sh_git(&other, &["commit", "-q", "--allow-empty", "-m", "three"]);
        sh_git(&other, &["push", "-q", "origin", "b"]);
        assert_eq!(repo.fetch_back(None, &remote, "b").await, Ok(1));
        // Diverged: a sentence, the local commit kept.
        sh_git(&wt, &["commit", "-q", "--allow-empty", "-m", "local"]);
        sh_git(&other, &["commit", "-q", "--allow-empty", "-m", "four"]);
        sh_git(&other, &["push", "-q", "origin", "b"]);
        let head = git(&wt, &["rev-parse", "HEAD"]).await.unwrap();
        let err = repo.fetch_back(None, &remote, "b").await.unwrap_err();
        assert!(err.contains("merge FETCH_HEAD"), "{err}");
        assert_eq!(git(&wt, &["rev-parse", "HEAD"]).await.unwrap(), head);
    }
}
