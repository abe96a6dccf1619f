//! Why git failed, and whether trying again can help. git prints progress ("Preparing
//! worktree …") before its reason, so the reason is picked out of its `fatal:`/`error:` lines;
//! and a command that lost a race for one of the repository's lock files (or read another
//! process's half-written worktree files) is tried again after a short, bounded wait.

use super::git::GitError;
use std::cell::RefCell;
use std::process::Output;
use std::time::Duration;

/// How many times a transient failure is tried again before it is reported.
pub const RETRIES: u32 = 5;

/// The first wait; each later one doubles it (20, 40, 80, 160, 320 ms).
const FIRST_WAIT: Duration = Duration::from_millis(20);

/// What git says when another git process holds a lock it needs, or when it read the admin
/// files of a worktree another process is still creating. Nothing else is retried.
const TRANSIENT_SIGNS: &[&str] = &[
    ".lock': File exists",
    "cannot lock ref",
    "could not lock config file",
    "is already locked",
    "Another git process seems to be running",
];

/// True when `text` (git's stderr, or the reason taken from it) says the command lost a race
/// with another git process rather than failed for a reason that would stay.
pub fn is_transient(text: &str) -> bool {
    TRANSIENT_SIGNS.iter().any(|s| text.contains(s))
        || text.lines().any(|l| {
            // Another `git worktree add` half-way through writing its admin files, or a
            // `git worktree prune` deleting them under this one.
            l.contains("worktrees/")
                && (l.contains("failed to read") || l.contains("No such file or directory"))
        })
}

/// git's reason for a failure: its `fatal:`/`error:` messages (each with the lines that
/// continue it), joined; else the whole stderr; else stdout; else the exit code.
pub fn failure_reason(out: &Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    reason_from(&stderr, &stdout, out.status.code())
}

fn reason_from(stderr: &str, stdout: &str, code: Option<i32>) -> String {
    let mut messages: Vec<String> = Vec::new();
    let mut continuing = false;
    for line in stderr.lines() {
        let line = line.trim_end();
        if let Some(msg) = ["fatal:", "error:"]
            .iter()
            .find_map(|p| line.strip_prefix(p))
        {
            messages.push(msg.trim().to_string());
            continuing = true;
        } else if line.trim().is_empty() || line.starts_with("hint:") {
            continuing = false;
        } else if continuing && let Some(last) = messages.last_mut() {
            last.push(' ');
            last.push_str(line.trim());
        }
    }
    if !messages.is_empty() {
        return messages.join("; ");
    }
    let (stderr, stdout) = (stderr.trim(), stdout.trim());
    if !stderr.is_empty() {
        stderr.to_string()
    } else if !stdout.is_empty() {
        stdout.to_string()
    } else {
        match code {
            Some(c) => format!("exit code {c}"),
            None => "killed by a signal".to_string(),
        }
    }
}

/// The wait before retry number `retry` (0-based): doubling from 20 ms, plus up to a quarter
/// more that depends on the process id, so two baton processes that collided do not collide
/// again in step.
fn wait_before(retry: u32) -> Duration {
    let base = FIRST_WAIT * 2u32.pow(retry);
    let spread = (std::process::id().wrapping_mul(2_654_435_761) >> 7) % 1024;
    base + base / 4 * spread / 1024
}

type Observer = Box<dyn FnMut(u32, &GitError)>;

thread_local! {
    static OBSERVER: RefCell<Option<Observer>> = const { RefCell::new(None) };
}

/// Runs `body` on this thread with `observer` told of every retry: the retry's number (from 1)
/// and the failure that caused it, before the wait. For tests, which use it to change the
/// world (release a lock) at a known point instead of guessing with sleeps.
#[doc(hidden)]
pub fn with_retry_observer<T>(
    observer: impl FnMut(u32, &GitError) + 'static,
    body: impl FnOnce() -> T,
) -> T {
    struct Restore(Option<Observer>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let previous = self.0.take();
            OBSERVER.with(|o| *o.borrow_mut() = previous);
        }
    }
    let previous = OBSERVER.with(|o| o.borrow_mut().replace(Box::new(observer)));
    let _restore = Restore(previous);
    body()
}

fn observe(retry: u32, error: &GitError) {
    // Taken out while it runs, so an observer that runs git itself cannot re-enter it.
    let taken = OBSERVER.with(|o| o.borrow_mut().take());
    if let Some(mut f) = taken {
        f(retry, error);
        OBSERVER.with(|o| {
            let mut slot = o.borrow_mut();
            if slot.is_none() {
                *slot = Some(f);
            }
        });
    }
}

/// Runs `op` until it succeeds, fails for a reason that would stay, or has been retried
/// [`RETRIES`] times. `op` must be safe to run again after a transient failure.
pub fn retrying<T>(mut op: impl FnMut() -> Result<T, GitError>) -> Result<T, GitError> {
    let mut retry = 0;
    loop {
        match op() {
            Err(e) if retry < RETRIES && e.is_transient() => {
                retry += 1;
                observe(retry, &e);
                tracing::debug!("git lost a race ({e}); retry {retry} of {RETRIES}");
                std::thread::sleep(wait_before(retry - 1));
            }
            done => return done,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOCK_TAIL: &str = "\n\nAnother git process seems to be running in this repository, e.g.\n\
an editor opened by 'git commit'. Please make sure all processes\n\
are terminated then try again. If it still fails, a git process\n\
may have crashed in this repository earlier:\n\
remove the file manually to continue.\n";

    #[test]
    fn the_reason_is_gits_fatal_or_error_lines_not_its_progress() {
        let index_lock =
            format!("fatal: Unable to create '/r/.git/index.lock': File exists.{LOCK_TAIL}");
        let cases: &[(&str, &str, Option<i32>, &str)] = &[
            (
                "Preparing worktree (new branch 'baton/12-x')\n\
                 fatal: failed to read .git/worktrees/48-x/commondir: Success\n",
                "",
                Some(128),
                "failed to read .git/worktrees/48-x/commondir: Success",
            ),
            (
                "Preparing worktree (new branch 'main')\nfatal: a branch named 'main' already exists\n",
                "",
                Some(128),
                "a branch named 'main' already exists",
            ),
            (
                "Preparing worktree (checking out 'b1')\n\
                 fatal: '../w4' is a missing but already registered worktree;\n\
                 use 'add -f' to override, or 'prune' or 'remove' to clear\n",
                "",
                Some(128),
                "'../w4' is a missing but already registered worktree; use 'add -f' to override, or 'prune' or 'remove' to clear",
            ),
            (
                &index_lock,
                "",
                Some(128),
                "Unable to create '/r/.git/index.lock': File exists.",
            ),
            (
                "HEAD is now at 1234abc init\nerror: pathspec 'x' did not match any file(s) known to git\n\
                 error: pathspec 'y' did not match any file(s) known to git\n",
                "",
                Some(1),
                "pathspec 'x' did not match any file(s) known to git; pathspec 'y' did not match any file(s) known to git",
            ),
            (
                "error: The branch 'b' is not fully merged.\n\
                 hint: If you are sure you want to delete it, run 'git branch -D b'\n",
                "",
                Some(1),
                "The branch 'b' is not fully merged.",
            ),
            (
                "usage: git worktree add [<options>] <path> [<commit-ish>]\n",
                "",
                Some(129),
                "usage: git worktree add [<options>] <path> [<commit-ish>]",
            ),
            ("  \n", "nothing to commit\n", Some(1), "nothing to commit"),
            ("", "", Some(3), "exit code 3"),
            ("", "", None, "killed by a signal"),
        ];
        for (stderr, stdout, code, want) in cases {
            assert_eq!(
                &reason_from(stderr, stdout, *code),
                want,
                "stderr: {stderr}"
            );
        }
    }

    #[test]
    fn only_lost_races_count_as_transient() {
        let transient = [
            "fatal: Unable to create '/r/.git/index.lock': File exists.",
            "error: cannot lock ref 'refs/heads/baton/1-x': Unable to create '/r/.git/refs/heads/baton/1-x.lock': File exists.",
            "error: could not lock config file .git/config: File exists",
            "fatal: '/r/.git/packed-refs' is already locked",
            "Another git process seems to be running in this repository, e.g.",
            "fatal: failed to read .git/worktrees/48-x/commondir: Success",
            "fatal: could not open '.git/worktrees/0-x/locked' for writing: No such file or directory",
        ];
        for t in transient {
            assert!(is_transient(t), "{t}");
        }
        let lasting = [
            "fatal: invalid reference: nope",
            "fatal: a branch named 'main' already exists",
            "fatal: '../w3' already exists",
            "fatal: Unable to create '/r/.git/index.lock': Permission denied",
            "fatal: not a git repository (or any of the parent directories): .git",
            "CONFLICT (content): Merge conflict in a.txt",
            "fatal: failed to read object 1234: Input/output error",
            "fatal: could not create directory of '.git/worktrees/x': Permission denied",
            "fatal: '/r/x' does not exist: No such file or directory",
        ];
        for t in lasting {
            assert!(!is_transient(t), "{t}");
        }
    }

    fn failed(message: &str) -> GitError {
        GitError::Failed {
            args: "x".into(),
            message: message.into(),
        }
    }

    #[test]
    fn a_lasting_failure_is_not_retried_and_a_transient_one_is_bounded() {
        let mut calls = 0;
        let r: Result<(), _> = retrying(|| {
            calls += 1;
            Err(failed("invalid reference: nope"))
        });
        assert!(r.is_err());
        assert_eq!(calls, 1);

        let seen = std::rc::Rc::new(RefCell::new(Vec::new()));
        let log = seen.clone();
        let mut calls = 0;
        let r: Result<(), _> = with_retry_observer(
            move |n, _| log.borrow_mut().push(n),
            || {
                retrying(|| {
                    calls += 1;
                    Err(failed("Unable to create 'x/index.lock': File exists."))
                })
            },
        );
        assert!(r.unwrap_err().is_transient());
        assert_eq!(calls, 1 + RETRIES);
        assert_eq!(*seen.borrow(), (1..=RETRIES).collect::<Vec<_>>());
    }

    #[test]
    fn waits_double_and_stay_bounded() {
        let waits: Vec<Duration> = (0..RETRIES).map(wait_before).collect();
        for (i, w) in waits.iter().enumerate() {
            let base = FIRST_WAIT * 2u32.pow(i as u32);
            assert!(*w >= base && *w <= base + base / 4, "{w:?}");
        }
        assert!(waits.iter().sum::<Duration>() < Duration::from_millis(800));
    }
}
