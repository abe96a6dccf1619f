//! The `command` backend: a CLI agent from an argv array, started on the step's executor
//! (its own process group here, or a container), its stdout read as `text`,
//! `claude-stream-json` or `codex-json`.

use super::claude::ClaudeStream;
use super::codex::CodexStream;
use super::gemini::GeminiStream;
use super::log::Log;
use super::talk::{Talk, is_result, next_said, user_line};
use super::{AgentFinish, AgentJob, AgentRun, Hooks};
use crate::agents::{Format, PromptVia};
use crate::exec::executor::{Identity, Program, Stdin, StdinWay};
use crate::exec::{Finish, Spawned};
use crate::store::Stream;
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// The most of a `text` agent's output kept as its answer (the tail, where conclusions are).
const MAX_TEXT: usize = 1024 * 1024;
/// Stderr lines quoted in the error of a failed run.
const STDERR_TAIL: usize = 5;

/// Where `program` would be found, started in `dir`: itself (in `dir`) if it contains a
/// `/`, else the first executable file of that name on `path` (default: this process's
/// `PATH`), a relative entry (`node_modules/.bin`) being `dir`'s, as for a step's program.
pub fn find_program(program: &str, dir: &Path, path: Option<&str>) -> Option<PathBuf> {
    let path = path
        .map(std::ffi::OsString::from)
        .or_else(|| std::env::var_os("PATH"));
    crate::exec::executor::lookup::find(program, dir, path.as_deref()).ok()
}

/// Reads a format's stdout lines and keeps what the answer needs.
pub(super) enum Reader {
    Text(String),
    Claude(ClaudeStream),
    Codex(CodexStream),
    Gemini(GeminiStream),
}

impl Reader {
    /// A reader for `format` (the replay-only formats read as text).
    pub(super) fn new(format: Format) -> Self {
        match format {
            Format::ClaudeStreamJson => Self::Claude(ClaudeStream::default()),
            Format::CodexJson => Self::Codex(CodexStream::default()),
            Format::GeminiStreamJson => Self::Gemini(GeminiStream::default()),
            _ => Self::Text(String::new()),
        }
    }

    pub(super) fn feed(&mut self, line: String) -> Vec<(Stream, String)> {
        match self {
            Self::Text(acc) => {
                acc.push_str(&line);
                acc.push('\n');
                if acc.len() > MAX_TEXT {
                    let mut cut = acc.len() - MAX_TEXT;
                    while !acc.is_char_boundary(cut) {
                        cut += 1;
                    }
                    acc.drain(..cut);
                }
                vec![(Stream::Stdout, line)]
            }
            Self::Claude(c) => c.feed(&line),
            Self::Codex(c) => c.feed(&line),
            Self::Gemini(g) => g.feed(&line),
        }
    }

    pub(super) fn session(&self) -> Option<&str> {
        match self {
            Self::Text(_) => None,
            Self::Claude(c) => c.session.as_deref(),
            Self::Codex(c) => c.session.as_deref(),
            Self::Gemini(g) => g.session.as_deref(),
        }
    }
}

pub(super) async fn run(
    job: &AgentJob<'_>,
    log: &Log,
    stop: &CancellationToken,
    hooks: &Hooks<'_>,
) -> AgentFinish {
    let p = job.profile;
    let Some(program) = job.argv.first() else {
        return AgentFinish::error(format!("agent `{}`: `argv` is empty", p.id), false);
    };
    let who = format!("agent `{}` (command `{program}`)", p.id);
    // The PATH the program will have: the step's, else its profile's (see below).
    let path_var = job
        .env
        .var("PATH")
        .map(str::to_string)
        .or_else(|| p.env.get("PATH").cloned());
    // On this machine the program is looked up here, so a missing one gets a clear
    // sentence; elsewhere (a container) it is looked up there.
    let local = job.place.executor.name() == "local";
    let mut argv = job.argv.clone();
    if local && !job.place.reattach {
        let Some(resolved) = find_program(program, &job.env.workdir, path_var.as_deref()) else {
            let why = if program.contains('/') {
                crate::exec::executor::lookup::why_not_found(program, &job.env.workdir)
            } else {
                format!("`{program}` is not on PATH")
            };
            return AgentFinish::error(
                format!(
                    "{who}: {why} — install it, or put its full path in `argv` {}",
                    p.fix_in()
                ),
                false,
            );
        };
        argv[0] = resolved.display().to_string();
    }
    let mut env = job.env.clone();
    env.vars = p.env_under(env.vars);
    let (tx, mut rx) = mpsc::channel(1024);
    // `stop` also fires at the step's time limit, so a slow start (an image pull) ends then.
    let program = Program::Argv(argv.clone());
    // A profile that reads stream-json input gets the prompt as its first user message and
    // every message said while it runs after it; its input stays open until a turn ends
    // with nothing more sent.
    // Only input this machine pipes can take messages mid-run: a container's input is a
    // file written once, and a step followed after a restart has no input of ours.
    let piped = job.place.executor.stdin() == StdinWay::Pipe && !job.place.reattach;
    let mut talk = p
        .takes_input()
        .then(|| Talk::new(job.inbox.as_ref().filter(|_| piped)));
    let stdin = (p.prompt_via == PromptVia::Stdin).then(|| match &talk {
        Some(t) => Stdin(user_line(&job.prompt).into(), Some(t.input.clone())),
        None => Stdin::bytes(job.prompt.as_bytes()),
    });
    let mut child = match job
        .place
        .start_fed_until(program, stdin, &env, tx, stop.cancelled())
        .await
    {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => return AgentFinish::error(format!("{who}: {e}"), false),
        Err(()) => return AgentFinish::Cancelled,
    };
    let identity = child.identity();
    if let Identity::Process { pid, start_time } = identity {
        (hooks.spawned)(Spawned { pid, start_time });
    }
    let how = if job.place.reattach {
        "following"
    } else {
        "started"
    };
    log.system(format!("{how} {} ({})", argv[0], identity.describe()))
        .await;

    let mut reader = Reader::new(p.format);
    let mut session_told = false;
    let mut stderr_tail: VecDeque<String> = VecDeque::new();
    // The line saying a session to continue was not found, kept whatever follows it (codex
    // prints a backtrace after it).
    let mut lost_line = None;
    let mut exited = None;
    loop {
        tokio::select! {
            _ = stop.cancelled() => {
                child.abort(job.env.kill_grace).await;
                return AgentFinish::Cancelled;
            }
            mut said = next_said(&mut talk) => {
                if let Some(t) = talk.as_mut() {
                    let short = super::log::one_line(&said.text, 80);
                    if t.send(&said.text) {
                        (hooks.delivered)(said.id);
                        said.answer(Ok(()));
                        log.system(format!("said to the agent: {short}")).await;
                    } else {
                        said.answer(Err("its turn had ended before the message could be written to its input".into()));
                        log.system(format!("its turn has ended; kept for the next step: {short}")).await;
                    }
                }
            }
            line = rx.recv() => match line {
                Some((Stream::Stderr, l)) => {
                    if stderr_tail.len() == STDERR_TAIL {
                        stderr_tail.pop_front();
                    }
                    stderr_tail.push_back(log.clean(&l));
                    if job.resume.is_some() && lost_line.is_none() && super::session::says_lost(&l) {
                        lost_line = Some(log.clean(&l));
                    }
                    log.err(l).await;
                }
                Some((_, l)) => {
                    if let Some(t) = talk.as_mut()
                        && is_result(&l)
                    {
                        t.turn_ended();
                    }
                    for (stream, text) in reader.feed(l) {
                        log.send(stream, text).await;
                    }
                    if !session_told && let Some(s) = reader.session() {
                        (hooks.session)(s);
                        session_told = true;
                    }
                }
                None => break,
            },
            // The executor drains what is left of the output before it reports the end
            // (a background child still holding the pipes is ended), so the lines then stop.
            finish = child.wait(), if exited.is_none() => exited = Some(finish),
        }
    }
    let ended = match exited {
        Some(f) => f,
        None => child.wait().await,
    };
    let exit = match ended {
        Finish::Exited(c) => c,
        Finish::Signalled(sig) => {
            return AgentFinish::error(format!("{who}: killed by signal {sig}"), true);
        }
        Finish::SpawnFailed(e) => {
            return AgentFinish::error(format!("{who}: {e}"), true);
        }
        Finish::TimedOut | Finish::Cancelled => return AgentFinish::Cancelled,
    };
    let tail = stderr_tail.into_iter().collect::<Vec<_>>().join(" | ");
    let mut end = finish(&who, reader, exit, &tail);
    if let (AgentFinish::Failed { error, .. }, Some(line)) = (&mut end, lost_line)
        && !super::session::says_lost(error)
    {
        error.push_str(&format!(" — {}", super::log::one_line(&line, 300)));
    }
    end
}

/// The end of a run, from what was read and how the process exited.
pub(super) fn finish(who: &str, reader: Reader, exit: i32, stderr_tail: &str) -> AgentFinish {
    let exited = |what: &str| {
        let mut s = format!("{who}: {what}");
        if !stderr_tail.is_empty() {
            s.push_str(&format!(" — stderr: {stderr_tail}"));
        }
        s
    };
    match reader {
        Reader::Text(text) => {
            let run = AgentRun {
                text,
                ..Default::default()
            };
            if exit == 0 {
                AgentFinish::Done(run)
            } else {
                AgentFinish::Failed {
                    error: exited(&format!("exited with code {exit}")),
                    exit_code: Some(exit.into()),
                    run,
                }
            }
        }
        Reader::Claude(c) => {
            let run = AgentRun {
                text: c.answer(),
                usage: c.result.as_ref().and_then(|r| r.usage.clone()),
                cost: c.result.as_ref().and_then(|r| r.cost),
                session: c.session.clone(),
                events: c.result.iter().filter_map(|r| r.denial_event()).collect(),
            };
            let said = c.result.as_ref().map(|r| {
                r.failed()
                    .then(|| format!("{who}: claude reported an error: {}", r.reason()))
            });
            result_finish(
                run,
                said,
                exit,
                exited,
                "--output-format stream-json --verbose",
            )
        }
        Reader::Gemini(g) => g.finish(who, exit, exited),
        Reader::Codex(c) => {
            let run = AgentRun {
                text: c.answer.clone().unwrap_or_default(),
                usage: c.usage.clone(),
                cost: None,
                session: c.session.clone(),
                events: Vec::new(),
            };
            match (&c.error, &c.answer) {
                (Some(e), _) => AgentFinish::Failed {
                    error: format!("{who}: codex reported an error: {e}"),
                    exit_code: Some(exit.into()),
                    run,
                },
                (None, _) if exit != 0 => AgentFinish::Failed {
                    error: exited(&format!("exited with code {exit}")),
                    exit_code: Some(exit.into()),
                    run,
                },
                (None, Some(_)) => AgentFinish::Done(run),
                (None, None) => AgentFinish::error(
                    exited("ended without an agent message — does `argv` include `exec --json`?"),
                    false,
                ),
            }
        }
    }
}

/// The end of a CLI whose stream closes with a `result` event (Claude Code, Gemini CLI):
/// `said` is `None` when no such event came, else the CLI's own error sentence if it
/// reported one. Its error wins, then a non-zero exit; a missing result names the `flags`
/// that make the CLI print one.
pub(super) fn result_finish(
    run: AgentRun,
    said: Option<Option<String>>,
    exit: i32,
    exited: impl Fn(&str) -> String,
    flags: &str,
) -> AgentFinish {
    match said {
        Some(Some(error)) => AgentFinish::Failed {
            error,
            exit_code: Some(exit.into()),
            run,
        },
        _ if exit != 0 => AgentFinish::Failed {
            error: exited(&format!("exited with code {exit}")),
            exit_code: Some(exit.into()),
            run,
        },
        Some(None) => AgentFinish::Done(run),
        None => AgentFinish::error(
            exited(&format!(
                "ended without a `result` event — does `argv` include `{flags}`?"
            )),
            false,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_programs_on_a_path() {
        let here = Path::new(".");
        assert!(find_program("sh", here, Some("/usr/bin:/bin")).is_some());
        assert!(find_program("surely-not-a-program-xyz", here, Some("/usr/bin:/bin")).is_none());
        assert!(find_program("/bin/sh", here, None).is_some());
    }

    #[test]
    fn a_relative_path_entry_is_the_steps_folder() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let bin = tmp.path().join("node_modules/.bin");
        std::fs::create_dir_all(&bin).unwrap();
        let agent = bin.join("baton-test-agent");
        std::fs::write(&agent, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = Some("node_modules/.bin:/usr/bin:/bin");
        assert_eq!(
            find_program("baton-test-agent", tmp.path(), path),
            Some(agent)
        );
        // Not this process's folder, which has no such entry.
        assert_eq!(find_program("baton-test-agent", Path::new("."), path), None);
        // A name with a folder in it is the step's folder's too.
        let script = find_program("./node_modules/.bin/baton-test-agent", tmp.path(), None);
        assert!(script.is_some_and(|p| p.starts_with(tmp.path())));
    }

    #[test]
    fn text_exit_codes_decide() {
        let r = finish("a", Reader::Text("hi\n".into()), 0, "");
        assert!(matches!(r, AgentFinish::Done(ref run) if run.text == "hi\n"));
        let r = finish("a", Reader::Text(String::new()), 3, "boom");
        match r {
            AgentFinish::Failed {
                error, exit_code, ..
            } => {
                assert_eq!(exit_code, Some(3));
                assert!(
                    error.contains("exited with code 3 — stderr: boom"),
                    "{error}"
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn claude_without_result_is_an_error_naming_the_flags() {
        let r = finish("a", Reader::Claude(ClaudeStream::default()), 0, "");
        assert!(
            matches!(r, AgentFinish::Error { ref error, retryable: false } if error.contains("--verbose"))
        );
    }
}
