//! Running processes with a time limit (a stuck row is killed, never waited on forever),
//! and reading a live process's CPU time and context switches from `/proc`.
//!
//! Children stay in the bench's process group, so a Ctrl-C reaches them too (a `baton
//! engine` left running in a deleted temp dir would be worse than a less thorough kill).

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::io::Read;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// What a finished command left behind.
pub struct Done {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
    /// From just before the spawn to the moment `wait` returned.
    pub elapsed: Duration,
}

impl Done {
    /// The output, or a sentence naming the command when it did not exit 0.
    pub fn ok(self, what: &str) -> Result<Self, String> {
        if self.status.success() {
            Ok(self)
        } else {
            Err(format!(
                "{what} exited with {}: {}",
                self.status,
                last_line(&self.stderr)
            ))
        }
    }
}

fn last_line(text: &str) -> &str {
    text.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("(no stderr)")
}

/// Runs `cmd` to the end; past `limit` it is killed and the answer says so.
pub fn run(cmd: &mut Command, limit: Duration, what: &str) -> Result<Done, String> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let start = Instant::now();
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {what}: {e}"))?;
    let out = drain(child.stdout.take());
    let err = drain(child.stderr.take());
    let status = wait_within(child, limit, what)?;
    let elapsed = start.elapsed();
    Ok(Done {
        status,
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
        elapsed,
    })
}

/// Waits for `child` up to `limit`; kills it past that.
pub fn wait_within(mut child: Child, limit: Duration, what: &str) -> Result<ExitStatus, String> {
    let pid = child.id() as i32;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait());
    });
    match rx.recv_timeout(limit) {
        Ok(Ok(status)) => Ok(status),
        Ok(Err(e)) => Err(format!("waiting for {what} failed: {e}")),
        Err(_) => {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            let _ = rx.recv_timeout(Duration::from_secs(5));
            Err(format!(
                "{what} did not finish within {} s and was killed",
                limit.as_secs()
            ))
        }
    }
}

fn drain<R: Read + Send + 'static>(pipe: Option<R>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(mut p) = pipe {
            let _ = p.read_to_string(&mut text);
        }
        text
    })
}

/// A long-running process (`baton engine`), stopped when dropped.
pub struct Background {
    child: Option<Child>,
    what: String,
}

impl Background {
    /// Starts `cmd`, output discarded.
    pub fn start(cmd: &mut Command, what: &str) -> Result<Self, String> {
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start {what}: {e}"))?;
        Ok(Self {
            child: Some(child),
            what: what.into(),
        })
    }

    /// The process id.
    pub fn pid(&self) -> i32 {
        self.child.as_ref().map_or(0, |c| c.id() as i32)
    }

    /// Fails when the process has already exited (it should still be running).
    pub fn alive(&mut self) -> Result<(), String> {
        match self.child.as_mut().map(Child::try_wait) {
            Some(Ok(None)) => Ok(()),
            Some(Ok(Some(status))) => Err(format!("{} exited early with {status}", self.what)),
            _ => Err(format!("{} is gone", self.what)),
        }
    }

    /// SIGTERM, then SIGKILL if it has not exited within `grace`.
    pub fn stop(&mut self, grace: Duration) {
        let Some(child) = self.child.take() else {
            return;
        };
        let pid = Pid::from_raw(child.id() as i32);
        let _ = kill(pid, Signal::SIGTERM);
        let _ = wait_within(child, grace, &self.what);
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        self.stop(Duration::from_secs(10));
    }
}

/// Nanoseconds on a CPU so far, summed over the live threads of `pid`
/// (`/proc/PID/task/*/schedstat`: nanosecond resolution, where `stat` counts 10 ms ticks).
pub fn cpu_ns(pid: i32) -> Result<u64, String> {
    sum_threads(pid, "schedstat", |text| {
        text.split_whitespace().next()?.parse().ok()
    })
}

/// Context switches so far (voluntary and not), summed over the live threads of `pid`:
/// each one is a thread going to sleep or being woken, so their rate counts wake-ups.
pub fn switches(pid: i32) -> Result<u64, String> {
    sum_threads(pid, "status", |text| {
        let field = |name: &str| -> Option<u64> {
            let line = text.lines().find(|l| l.starts_with(name))?;
            line.split_whitespace().nth(1)?.parse().ok()
        };
        Some(field("voluntary_ctxt_switches:")? + field("nonvoluntary_ctxt_switches:")?)
    })
}

fn sum_threads(pid: i32, file: &str, read: impl Fn(&str) -> Option<u64>) -> Result<u64, String> {
    let dir = format!("/proc/{pid}/task");
    let threads = std::fs::read_dir(&dir).map_err(|e| format!("cannot read {dir}: {e}"))?;
    let mut total = 0;
    for t in threads.flatten() {
        // A thread that ended between the listing and the read simply adds nothing.
        if let Ok(text) = std::fs::read_to_string(t.path().join(file)) {
            total += read(&text).ok_or_else(|| format!("cannot parse {dir}/*/{file}"))?;
        }
    }
    Ok(total)
}

/// The helper mode behind [`peak_rss`]: run `args` as a child of this fresh process, wait,
/// then print the largest resident set any reaped descendant had (kB) as the last line.
/// A fresh process is needed because `RUSAGE_CHILDREN` keeps the maximum over every child
/// a process ever reaped.
pub fn rss_helper(args: &[String]) -> i32 {
    use nix::sys::resource::{UsageWho, getrusage};
    let Some((prog, rest)) = args.split_first() else {
        return 2;
    };
    let code = match Command::new(prog).args(rest).status() {
        Ok(s) => s.code().unwrap_or(1),
        Err(e) => {
            eprintln!("cannot start {prog}: {e}");
            return 2;
        }
    };
    match getrusage(UsageWho::RUSAGE_CHILDREN) {
        Ok(u) => println!("\npeak_rss_kb {}", u.max_rss()),
        Err(e) => eprintln!("getrusage failed: {e}"),
    }
    code
}

/// Runs `cmd` (a program and its arguments, in `cwd`) through [`rss_helper`]; returns the
/// run and its peak RSS in kB (the largest of the program and the steps it spawned).
pub fn peak_rss(
    cmd: &[&str],
    cwd: &std::path::Path,
    limit: Duration,
    what: &str,
) -> Result<(Done, u64), String> {
    let me = std::env::current_exe().map_err(|e| format!("cannot find this bench: {e}"))?;
    let mut c = Command::new(me);
    c.arg("__rss").args(cmd).current_dir(cwd);
    let done = run(&mut c, limit, what)?.ok(what)?;
    let kb = done
        .stdout
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("peak_rss_kb "))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| format!("{what}: no peak RSS reported"))?;
    Ok((done, kb))
}
