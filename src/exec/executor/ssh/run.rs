//! Running one step on an ssh host: push the branch, run it there, stream its output, bring
//! its commits back. Abort and timeout end the step's process group on the host.

use super::host::SshHost;
use super::job::{BOOTSTRAP, ContextFile, Marker, RemoteJob, parse_line};
use super::local_git::LocalRepo;
use super::quote::sh_quote;
use crate::exec::lines::pump;
use crate::exec::process::{signal_group, start_time};
use crate::exec::redact::Redactor;
use crate::exec::{Finish, LogSender, Spawned, StepEnv};
use crate::store::Stream;
use nix::sys::signal::Signal;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

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

/// Sends `sig` to the process group recorded in a run folder on the host. (`kill -SIG -PGID`
/// without `--`: dash's `kill` takes no `--`.)
pub async fn signal_remote(host: &SshHost, run_dir: &str, sig: &str) -> Result<(), String> {
    let inner = format!(
        "p=$(cat {}/pid 2>/dev/null) && kill -{sig} \"-$p\" 2>/dev/null; exit 0",
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

fn var<'a>(env: &'a StepEnv, name: &str) -> Option<&'a str> {
    env.vars
        .iter()
        .rev()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// Prompt and handoff files, read so they can be recreated on the host.
fn context_files(env: &StepEnv) -> Vec<ContextFile> {
    ["BATON_TASK_PROMPT_FILE", "BATON_HANDOFF_FILE"]
        .iter()
        .filter_map(|name| {
            let path = std::path::Path::new(var(env, name)?);
            if std::fs::metadata(path).ok()?.len() > MAX_CONTEXT_FILE {
                return None;
            }
            Some(ContextFile {
                var: name.to_string(),
                name: path.file_name()?.to_string_lossy().into_owned(),
                content: std::fs::read_to_string(path).ok()?,
            })
        })
        .collect()
}

async fn note(log: &LogSender, text: String) {
    let _ = log.send((Stream::System, text)).await;
}

/// Runs `script` on `host` in a worktree of the task's branch. `spawned` gets the local
/// ssh client's identity.
pub async fn run_ssh(
    host: &SshHost,
    script: &str,
    env: &StepEnv,
    log: LogSender,
    cancel: CancellationToken,
    spawned: impl FnOnce(Spawned),
) -> Finish {
    let deadline = tokio::time::Instant::now() + env.timeout;
    let prepare = async {
        let repo = LocalRepo::find(&env.workdir).await?;
        let key = var(env, "BATON_EXECUTION_KEY")
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
        repo.push(host, &mirror, &branch)
            .await
            .map_err(|e| format!("could not push {branch} to {}: {e}", host.git_url(&mirror)))?;
        note(
            &log,
            format!("→ {branch} pushed to {}", host.git_url(&mirror)),
        )
        .await;
        Ok::<_, String>((repo, key, branch, mirror))
    };
    let prepared = tokio::select! {
        biased;
        _ = cancel.cancelled() => return Finish::Cancelled,
        _ = tokio::time::sleep_until(deadline) => return Finish::TimedOut,
        p = prepare => p,
    };
    let (repo, key, branch, mirror) = match prepared {
        Ok(p) => p,
        Err(e) => return Finish::SpawnFailed(format!("ssh host `{}`: {e}", host.host)),
    };
    let run = run_dir(host, &repo.mirror_name, &key);
    let nonce = nonce();
    let files = context_files(env);
    let job = RemoteJob {
        mirror: &mirror,
        run_dir: &run,
        branch: &branch,
        subdir: &repo.subdir,
        nonce: &nonce,
        script,
        vars: &env.vars,
        files: &files,
    };

    let mut cmd = host.command(BOOTSTRAP);
    cmd.stdin(std::process::Stdio::piped());
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            return Finish::SpawnFailed(format!(
                "could not run `ssh`: {e}; is the OpenSSH client installed?"
            ));
        }
    };
    let Some(pid) = child.id() else {
        return Finish::SpawnFailed("the ssh client vanished at start".into());
    };
    spawned(Spawned {
        pid,
        start_time: start_time(pid),
    });
    if let Some(mut stdin) = child.stdin.take() {
        let body = job.render();
        // The job is small; a host that does not read it shows up as a lost connection.
        let _ = stdin.write_all(body.as_bytes()).await;
        drop(stdin);
    }

    let secrets = Arc::new(Redactor::from_vars(
        std::env::vars().chain(env.vars.iter().cloned()),
    ));
    let (raw_tx, mut raw_rx) = mpsc::channel::<(Stream, String)>(1024);
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
    let filter_log = log.clone();
    let filter_nonce = nonce.clone();
    let filter = tokio::spawn(async move {
        let mut seen = Seen::default();
        while let Some((stream, line)) = raw_rx.recv().await {
            let (text, marker) = match stream {
                Stream::Stdout => parse_line(&line, &filter_nonce),
                _ => (line.as_str(), None),
            };
            if stream == Stream::Stderr && !text.trim().is_empty() {
                seen.last_stderr = text.to_string();
            }
            if marker.is_none() || !text.is_empty() {
                let _ = filter_log.send((stream, text.to_string())).await;
            }
            match marker {
                Some(Marker::Pgid(p)) => seen.pgid = Some(p),
                Some(Marker::Exit(c)) => seen.exit = Some(c),
                Some(Marker::Dirty(n)) => seen.dirty = n,
                Some(Marker::Setup(s)) => seen.setup = Some(s),
                None => {}
            }
        }
        seen
    });

    enum Stop {
        Cancel,
        Timeout,
    }
    let status = tokio::select! {
        biased;
        _ = cancel.cancelled() => Err(Stop::Cancel),
        s = child.wait() => Ok(s),
        _ = tokio::time::sleep_until(deadline) => Err(Stop::Timeout),
    };
    if let Err(stop) = status {
        stop_run(host, &run, &mut child, pid, env.kill_grace).await;
        for r in readers.into_iter().flatten() {
            r.abort();
        }
        filter.abort();
        return match stop {
            Stop::Cancel => Finish::Cancelled,
            Stop::Timeout => Finish::TimedOut,
        };
    }
    let status = status.ok().and_then(Result::ok);
    for r in readers.into_iter().flatten() {
        let abort = r.abort_handle();
        if tokio::time::timeout(DRAIN, r).await.is_err() {
            abort.abort();
        }
    }
    signal_group(pid, Signal::SIGKILL);
    let seen = filter.await.unwrap_or_default();

    let Some(code) = seen.exit else {
        let ssh_status = status
            .map(|s| s.to_string())
            .unwrap_or_else(|| "no status".into());
        if let Some(setup) = seen.setup {
            return Finish::SpawnFailed(format!(
                "ssh host `{}` could not prepare the step: {setup}",
                host.host
            ));
        }
        if seen.pgid.is_some() {
            // The step may still run on the host: end it, as far as the host can be reached.
            let (again, run) = (host.clone(), run.clone());
            tokio::spawn(async move { signal_remote(&again, &run, "TERM").await });
            return Finish::SpawnFailed(format!(
                "lost the connection to ssh host `{}` while the step ran ({ssh_status}: {})",
                host.host, seen.last_stderr
            ));
        }
        return Finish::SpawnFailed(format!(
            "could not run the step on ssh host `{}` ({ssh_status}: {}); check that `ssh {}` logs in without a prompt",
            host.host, seen.last_stderr, host.host
        ));
    };
    if seen.dirty > 0 {
        note(&log, format!("{} uncommitted change(s) were left on the host and dropped: only commits come back, so commit in the step", seen.dirty)).await;
    }
    match repo.fetch_back(host, &mirror, &branch).await {
        Ok(0) => {}
        Ok(n) => note(&log, format!("← {n} commit(s) brought back to {branch}")).await,
        Err(e) => {
            return Finish::SpawnFailed(format!(
                "the step ended on ssh host `{}` (exit {code}) but its commits could not be brought back: {e}",
                host.host
            ));
        }
    }
    Finish::Exited(code)
}

/// What baton's markers said during a run.
#[derive(Debug, Default)]
struct Seen {
    pgid: Option<u32>,
    exit: Option<i32>,
    dirty: u64,
    setup: Option<String>,
    last_stderr: String,
}

/// SIGTERM to the step's group on the host; SIGKILL if the run has not ended after `grace`;
/// then the local client goes too.
async fn stop_run(
    host: &SshHost,
    run: &str,
    child: &mut tokio::process::Child,
    pid: u32,
    grace: Duration,
) {
    let _ = signal_remote(host, run, "TERM").await;
    if tokio::time::timeout(grace, child.wait()).await.is_err() {
        let _ = signal_remote(host, run, "KILL").await;
        signal_group(pid, Signal::SIGKILL);
        let _ = child.wait().await;
    }
    signal_group(pid, Signal::SIGKILL);
}
