//! An ssh host as the `ssh` and `git` commands see it: argv only, never a local shell.

use super::quote::sh_quote;
use std::process::Stdio;
use std::time::Duration;
use tokio::process::Command;

/// An ssh config file used instead of `~/.ssh/config` (tests, or a team's shared file).
pub const CONFIG_ENV: &str = "BATON_SSH_CONFIG";

/// Where mirrors and step folders live on a host when the step does not say.
pub const DEFAULT_DIR: &str = ".baton-mirror";

/// A host steps run on, reached with the system `ssh` client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshHost {
    /// The destination as `ssh` takes it: a `~/.ssh/config` alias, `host` or `user@host`.
    pub host: String,
    /// The folder on the host for mirrors and step folders, relative to the remote home or
    /// absolute.
    pub dir: String,
    /// Options given to `ssh` before the destination.
    pub options: Vec<String>,
}

/// Why a host name was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum HostError {
    #[error(
        "ssh host `{0}` is not a host name: use an alias from ~/.ssh/config, `host` or `user@host` (letters, digits, `.`, `-`, `_`, `@`), not starting with `-`"
    )]
    BadHost(String),
    #[error("ssh folder `{0}` is not usable: give a folder path without quotes, newlines or `..`")]
    BadDir(String),
}

impl SshHost {
    /// A host from a step's `{"ssh": {"host", "dir"}}`, with the ssh config file named by
    /// `BATON_SSH_CONFIG` when set.
    pub fn new(host: &str, dir: Option<&str>) -> Result<Self, HostError> {
        let ok_host = !host.is_empty()
            && !host.starts_with('-')
            && host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '@'));
        if !ok_host {
            return Err(HostError::BadHost(host.to_string()));
        }
        let dir = dir.unwrap_or(DEFAULT_DIR).trim_end_matches('/');
        let ok_dir = !dir.is_empty()
            && !dir.starts_with('-')
            && !dir.split('/').any(|p| p == "..")
            && !dir
                .chars()
                .any(|c| c.is_control() || matches!(c, '\'' | '"' | ':' | '\\'));
        if !ok_dir {
            return Err(HostError::BadDir(dir.to_string()));
        }
        let mut options = Vec::new();
        if let Some(cfg) = std::env::var_os(CONFIG_ENV).filter(|v| !v.is_empty()) {
            options.push("-F".to_string());
            options.push(cfg.to_string_lossy().into_owned());
        }
        Ok(Self {
            host: host.to_string(),
            dir: dir.to_string(),
            options,
        })
    }

    /// The ssh options every connection gets: never prompt (an engine has no one to ask),
    /// and notice a silent network within about a minute.
    fn fixed_options() -> [&'static str; 6] {
        [
            "-o",
            "BatchMode=yes",
            "-o",
            "ServerAliveInterval=15",
            "-o",
            "ServerAliveCountMax=4",
        ]
    }

    /// `ssh … -- HOST REMOTE_COMMAND`, output piped, in a process group of its own.
    pub fn command(&self, remote: &str) -> Command {
        let mut cmd = Command::new("ssh");
        cmd.arg("-T")
            .args(Self::fixed_options())
            .args(&self.options)
            .arg("--")
            .arg(&self.host)
            .arg(remote)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        cmd
    }

    /// `GIT_SSH_COMMAND` for git's own transport: the same options, each quoted (git runs
    /// this through `sh`).
    pub fn git_ssh_command(&self) -> String {
        let mut s = String::from("ssh");
        for o in Self::fixed_options()
            .iter()
            .copied()
            .chain(self.options.iter().map(String::as_str))
        {
            s.push(' ');
            s.push_str(&sh_quote(o));
        }
        s
    }

    /// A git URL for `path` on the host (relative to the remote home or absolute).
    pub fn git_url(&self, path: &str) -> String {
        format!("{}:{path}", self.host)
    }

    /// Runs a short remote command; its stdout on success, else one sentence of why.
    pub async fn quick(&self, remote: &str, limit: Duration) -> Result<String, String> {
        let out = tokio::time::timeout(limit, self.command(remote).output()).await;
        match out {
            Err(_) => Err(format!(
                "ssh to `{}` did not answer within {}",
                self.host,
                humantime::format_duration(limit)
            )),
            Ok(Err(e)) => Err(format!(
                "could not run `ssh`: {e}; is the OpenSSH client installed?"
            )),
            Ok(Ok(o)) if o.status.success() => Ok(String::from_utf8_lossy(&o.stdout).into_owned()),
            Ok(Ok(o)) => Err(format!(
                "ssh to `{}` failed ({}): {}",
                self.host,
                o.status,
                last_line(&o.stderr)
            )),
        }
    }
}

/// The last non-empty line of a command's output, for an error message.
pub fn last_line(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let line = text
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("no message");
    crate::ansi::strip(line.trim()).chars().take(300).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_that_could_be_options_or_shell_are_refused() {
        for bad in [
            "",
            "-oProxyCommand=x",
            "a b",
            "a;b",
            "a:b",
            "a/b",
            "$(x)",
            "a\nb",
        ] {
            assert!(SshHost::new(bad, None).is_err(), "{bad:?}");
        }
        for ok in ["buildbox", "me@box.example.com", "box-1_a"] {
            assert_eq!(SshHost::new(ok, None).unwrap().host, ok);
        }
    }

    #[test]
    fn folders_are_checked_and_defaulted() {
        assert_eq!(SshHost::new("h", None).unwrap().dir, DEFAULT_DIR);
        assert_eq!(SshHost::new("h", Some("/srv/b/")).unwrap().dir, "/srv/b");
        for bad in ["", "../x", "a/../b", "it's", "a\nb", "-x"] {
            assert!(SshHost::new("h", Some(bad)).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_git_ssh_command_quotes_each_option() {
        let mut h = SshHost::new("h", None).unwrap();
        h.options = vec!["-F".into(), "/tmp/it's here/config".into()];
        assert!(
            h.git_ssh_command()
                .ends_with(r"'-F' '/tmp/it'\''s here/config'"),
            "{}",
            h.git_ssh_command()
        );
    }
}
