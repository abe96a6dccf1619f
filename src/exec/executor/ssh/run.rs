//! Running one step on an ssh host: push the branch, run it there, stream its output, bring
//! its commits back. Abort and timeout end the step's process group on the host.

use super::host::SshHost;
use super::job::{BOOTSTRAP, ContextFile, Marker, RemoteJob, parse_line, stdin_for};
use super::quote::sh_quote;
use crate::exec::executor::remote_git::{LocalRepo, display_url, var};
use crate::exec::executor::{BoxFuture, Identity, Started};
use crate::exec::lines::pump;
use crate::exec::process::{signal_group, start_time};
use crate::exec::redact::Redactor;
use crate::exec::{Finish, LogSender, StepEnv};
use crate::store::Stream;
use nix::sys::signal::Signal;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::process::{Child, ChildStdin};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// How long a short ssh command (make the mirror, signal a group) may take.
const QUICK: Duration = Duration::from_secs(30);
/// How long output may keep arriving after the ssh client exits.
const DRAIN: Duration = Duration::from_secs(5);
/// Context files larger than this stay behind (their variable is not set on the host).
const MAX_CONTEXT_FILE: u64 = 4 * 1024 * 1024;

/// The host folder of one step run, from its execution key: the same after a restart, so
/// a later engine can find the run's process group.
pub fn run_dir(host: &SshHost, mirror_name: &str, execution_key: &str) -> String {
    let key: String = execution_key
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{}/runs/{mirror_name}/{key}", host.dir)
}

/// Sends `sig` to the step recorded in a run folder on the host: its process group (`-PGID`)
/// or, where none could be made, its process. (`kill -SIG -PGID` without `--`: dash's `kill`
/// takes no `--`.)
pub async fn signal_remote(host: &SshHost, run_dir: &str, sig: &str) -> Result<(), String> {
    let inner = format!(
        "p=$(cat {}/pid 2>/dev/null) && kill -{sig} \"$p\" 2>/dev/null; exit 0",
        sh_quote(run_dir)
    );
    host.quick(&format!("sh -c {}", sh_quote(&inner)), QUICK)
        .await
        .map(drop)
}

/// A fresh marker for baton's own lines in one run's output.
fn nonce() -> String {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("@@baton-{:x}{:x}@@", t, std::process::id())
}

/// Prompt, handoff and trigger payload files, read so they can be recreated on the host.
fn context_files(vars: &[(String, String)]) -> Vec<ContextFile> {
    [
        "BATON_TASK_PROMPT_FILE",
        "BATON_HANDOFF_FILE",
        "BATON_TRIGGER_PAYLOAD_FILE",
    ]
    .iter()
    .filter_map(|name| {
        let path = std::path::Path::new(var(vars, name)?);
        // Never a link an earlier step left in the context folder.
        let bytes = crate::exec::safe_file::read_plain(path, MAX_CONTEXT_FILE).ok()?;
        Some(ContextFile {
            var: name.to_string(),
            name: path.file_name()?.to_string_lossy().into_owned(),
            content: String::from_utf8(bytes).ok()?,
        })
    })
    .collect()
}

async fn note(log: &LogSender, text: String) {
    let _ = log.send((Stream::System, text)).await;
}

/// Pushes the branch to the host's mirror and starts `script` there in a worktree of it.
/// Errors are one sentence naming the host.
pub async fn start_ssh(
    host: &SshHost,
    script: &str,
    env: &StepEnv,
    log: LogSender,
) -> Result<SshStep, String> {
    let prepare = async {
        let repo = LocalRepo::find(&env.workdir).await?;
        let key = var(&env.vars, "BATON_EXECUTION_KEY")
            .map(str::to_string)
            .unwrap_or_else(nonce);
        let branch = repo
            .branch
            .clone()
            .unwrap_or_else(|| format!("baton-ssh/{}", key.replace(':', "-")));
        let mirror = format!("{}/{}.git", host.dir, repo.mirror_name);
        let make = format!(
            "mkdir -p {dir} && {{ test -d {m} || git init -q --bare {m}; }}",
            dir = sh_quote(&host.dir),
            m = sh_quote(&mirror)
        );
        host.quick(&format!("sh -c {}", sh_quote(&make)), QUICK)
            .await?;
        if repo.is_dirty().await {
            note(&log, "uncommitted changes in the local worktree do not travel to the host; only commits do".into()).await;
        }
        repo.push(
            Some(&host.git_ssh_command()),
            &host.git_url(&mirror),
            &branch,
        )
        .await
        .map_err(|e| {
            format!(
                "could not push {branch} to {}: {e}",
                display_url(&host.git_url(&mirror))
            )
        })?;
        note(
            &log,
            format!(
                "→ {branch} pushed to {}",
                display_url(&host.git_url(&mirror))
            ),
        )
        .await;
        Ok::<_, String>((repo, key, branch, mirror))
    };
    let (repo, key, branch, mirror) = tokio::time::timeout(env.timeout, prepare)
        .await
        .map_err(|_| "preparing the step took longer than its timeout".to_string())
        .and_then(|r| r)
        .map_err(|e| format!("ssh host `{}`: {e}", host.host))?;
    let run = run_dir(host, &repo.mirror_name, &key);
    let nonce = nonce();
    let files = {
        let vars = env.vars.clone();
        tokio::task::spawn_blocking(move || context_files(&vars))
            .await
            .unwrap_or_default()
    };
    let job = RemoteJob {
        mirror: &mirror,
        run_dir: &run,
        branch: &branch,
        subdir: &repo.subdir,
        nonce: &nonce,
        script,
        vars: &env.vars,
        files: &files,
        grace_secs: env.kill_grace.as_secs(),
    };

    let mut cmd = host.command(BOOTSTRAP);
    cmd.stdin(std::process::Stdio::piped());
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("could not run `ssh`: {e}; is the OpenSSH client installed?"))?;
    let pid = child
        .id()
        .ok_or_else(|| "the ssh client vanished at start".to_string())?;
    let mut stdin = child.stdin.take();
    if let Some(input) = stdin.as_mut() {
        // The job is small; a host that does not read it shows up as a lost connection.
        let _ = input.write_all(stdin_for(&job.render()).as_bytes()).await;
        let _ = input.flush().await;
    }

    let secrets = Arc::new(Redactor::from_vars(
        crate::exec::redact::env_secrets().chain(env.vars.iter().cloned()),
    ));
    let (raw_tx, raw_rx) = mpsc::channel::<(Stream, String)>(1024);
    let readers = [
        child
            .stdout
            .take()
            .map(|s| tokio::spawn(pump(s, Stream::Stdout, raw_tx.clone(), secrets.clone()))),
        child
            .stderr
            .take()
            .map(|s| tokio::spawn(pump(s, Stream::Stderr, raw_tx.clone(), secrets.clone()))),
    ];
    drop(raw_tx);
    let filter = tokio::spawn(filter_lines(raw_rx, log.clone(), nonce));
    Ok(SshStep {
        host: host.clone(),
        repo,
        mirror,
        branch,
        run,
        start_time: start_time(pid),
        child,
        pid,
        stdin,
        readers: readers.into_iter().flatten().collect(),
        filter: Some(filter),
        seen: None,
        exited: None,
        log,
    })
}

/// Forwards the step's lines to the log and keeps baton's markers out of it.
async fn filter_lines(
    mut raw: mpsc::Receiver<(Stream, String)>,
    log: LogSender,
    nonce: String,
) -> Seen {
    let mut seen = Seen::default();
    while let Some((stream, line)) = raw.recv().await {
        let (text, marker) = match stream {
            Stream::Stdout => parse_line(&line, &nonce),
            _ => (line.as_str(), None),
        };
        if stream == Stream::Stderr && !text.trim().is_empty() {
            seen.last_stderr = text.to_string();
        }
        if marker.is_none() || !text.is_empty() {
            // Before the step starts the host writes only markers to stdout: any other
            // line there is the step's.
            seen.started |= stream == Stream::Stdout;
            let _ = log.send((stream, text.to_string())).await;
        }
        match marker {
            Some(Marker::Pgid(_)) => seen.started = true,
            Some(Marker::Exit(c)) => seen.exit = Some(c),
            Some(Marker::Dirty(n)) => seen.dirty = n,
            Some(Marker::Setup(s)) => seen.setup = Some(s),
            None => {}
        }
    }
    seen
}

/// What baton's markers said during a run.
#[derive(Debug, Default, Clone)]
struct Seen {
    /// The step began on the host.
    started: bool,
    exit: Option<i32>,
    dirty: u64,
    setup: Option<String>,
    last_stderr: String,
}

/// A step running on an ssh host, seen through its local `ssh` client.
pub struct SshStep {
    host: SshHost,
    repo: LocalRepo,
    mirror: String,
    branch: String,
    run: String,
    child: Child,
    pid: u32,
    start_time: Option<u64>,
    /// Held open while the step runs: the host ends the step when it closes.
    stdin: Option<ChildStdin>,
    readers: Vec<JoinHandle<()>>,
    filter: Option<JoinHandle<Seen>>,
    seen: Option<(Seen, String)>,
    exited: Option<Finish>,
    log: LogSender,
}

impl SshStep {
    /// Lets the output drain after the client ended, then collects the markers.
    async fn drain(&mut self) -> (Seen, String) {
        for r in self.readers.drain(..) {
            let abort = r.abort_handle();
            if tokio::time::timeout(DRAIN, r).await.is_err() {
                abort.abort();
            }
        }
        signal_group(self.pid, Signal::SIGKILL);
        self.stdin = None;
        let seen = match self.filter.take() {
            Some(f) => f.await.unwrap_or_default(),
            None => Seen::default(),
        };
        (seen, String::new())
    }

    /// How the run ended, from the markers; the commits brought back on success.
    async fn conclude(&self, seen: &Seen, ssh_status: &str) -> Finish {
        let host = &self.host.host;
        let Some(code) = seen.exit else {
            if let Some(setup) = &seen.setup {
                return Finish::SpawnFailed(format!(
                    "ssh host `{host}` could not prepare the step: {setup}"
                ));
            }
            if seen.started {
                // The host ends the step when the connection closes; say so again in case
                // it did not notice.
                let (again, run) = (self.host.clone(), self.run.clone());
                tokio::spawn(async move { signal_remote(&again, &run, "TERM").await });
                return Finish::SpawnFailed(format!(
                    "lost the connection to ssh host `{host}` while the step ran ({ssh_status}: {})",
                    seen.last_stderr
                ));
            }
            return Finish::SpawnFailed(format!(
                "could not run the step on ssh host `{host}` ({ssh_status}: {}); check that `ssh {host}` logs in without a prompt",
                seen.last_stderr
            ));
        };
        if seen.dirty > 0 {
            note(&self.log, format!("{} uncommitted change(s) were left on the host and dropped: only commits come back, so commit in the step", seen.dirty)).await;
        }
        match self
            .repo
            .fetch_back(
                Some(&self.host.git_ssh_command()),
                &self.host.git_url(&self.mirror),
                &self.branch,
            )
            .await
        {
            Ok(0) => {}
            Ok(n) => {
                note(
                    &self.log,
                    format!("← {n} commit(s) brought back to {}", self.branch),
                )
                .await
            }
            Err(e) => {
                return Finish::SpawnFailed(format!(
                    "the step ended on ssh host `{host}` (exit {code}) but its commits could not be brought back: {e}"
                ));
            }
        }
        Finish::Exited(code)
    }
}

impl Started for SshStep {
    fn identity(&self) -> Identity {
        Identity::Process {
            pid: self.pid,
            start_time: self.start_time,
        }
    }

    fn wait(&mut self) -> BoxFuture<'_, Finish> {
        Box::pin(async move {
            if let Some(f) = &self.exited {
                return f.clone();
            }
            if self.seen.is_none() {
                let status = self.child.wait().await;
                let (seen, _) = self.drain().await;
                let status = status
                    .map(|s| s.to_string())
                    .unwrap_or_else(|e| e.to_string());
                self.seen = Some((seen, status));
            }
            let (seen, status) = self.seen.clone().unwrap_or_default();
            let finish = self.conclude(&seen, &status).await;
            self.exited = Some(finish.clone());
            finish
        })
    }

    /// SIGTERM to the step's group on the host; SIGKILL if the run has not ended after
    /// `grace`; then the local client goes too.
    fn abort(&mut self, grace: Duration) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            if self.exited.is_some() {
                return;
            }
            let _ = signal_remote(&self.host, &self.run, "TERM").await;
            if tokio::time::timeout(grace, self.child.wait())
                .await
                .is_err()
            {
                let _ = signal_remote(&self.host, &self.run, "KILL").await;
                signal_group(self.pid, Signal::SIGKILL);
                let _ = self.child.wait().await;
            }
            self.drain().await;
            self.exited = Some(Finish::Cancelled);
        })
    }
}
