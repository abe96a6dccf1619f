//! Process groups and execution keys: identity and signalling. A step's process group is
//! not all of it: a program may start a child in a session of its own (Claude runs each
//! shell command so), which no group signal reaches. Every process a step starts inherits
//! its `BATON_EXECUTION_KEY`, so the key finds them all.

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::sync::{Mutex, OnceLock};

/// This process's environment, read once: nothing in baton sets a variable while it runs,
/// and every step's start reads it (what the step inherits, which secrets to mask).
pub fn process_env() -> &'static [(OsString, OsString)] {
    static ENV: OnceLock<Vec<(OsString, OsString)>> = OnceLock::new();
    ENV.get_or_init(|| std::env::vars_os().collect())
}

/// Field 22 of `/proc/<pid>/stat`: the process start time in clock ticks since boot.
pub fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may contain spaces and parentheses: skip past the last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Sends `sig` to every process in the group; false when the group no longer exists.
pub fn signal_group(pgid: u32, sig: Signal) -> bool {
    killpg(Pid::from_raw(pgid as i32), sig).is_ok()
}

/// True while any process of the group is alive. Zombies do not count: a group whose
/// members have all exited but not yet been reaped (by an init that reaps lazily) is gone.
pub fn group_alive(pgid: u32) -> bool {
    if killpg(Pid::from_raw(pgid as i32), None).is_err() {
        return false;
    }
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return true;
    };
    dir.filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| std::fs::read_to_string(format!("/proc/{pid}/stat")).ok())
        .any(|stat| {
            // Fields after the command name: state (3), ppid (4), pgrp (5).
            let Some(close) = stat.rfind(')') else {
                return false;
            };
            let mut f = stat[close + 2..].split_whitespace();
            let state = f.next();
            let pgrp = f.nth(1).and_then(|p| p.parse::<u32>().ok());
            pgrp == Some(pgid) && state != Some("Z")
        })
}

/// The process-group leader whose environment holds `name=value`, with its start time: a
/// step's group found by its execution key when its engine died before recording its pid.
/// Only this user's processes can be read, which are the only ones a step can be.
pub fn find_group_by_env(name: &str, value: &str) -> Option<(u32, Option<u64>)> {
    let needle = format!("{name}={value}");
    let dir = std::fs::read_dir("/proc").ok()?;
    dir.filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| *pid != std::process::id())
        .find(|pid| {
            let leader = std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|stat| {
                    let close = stat.rfind(')')?;
                    let mut f = stat[close + 2..].split_whitespace();
                    let state = f.next()?;
                    let pgrp = f.nth(1)?.parse::<u32>().ok()?;
                    Some(pgrp == *pid && state != "Z")
                })
                .unwrap_or(false);
            leader
                && std::fs::read(format!("/proc/{pid}/environ"))
                    .is_ok_and(|env| env.split(|b| *b == 0).any(|kv| kv == needle.as_bytes()))
        })
        .map(|pid| (pid, start_time(pid)))
}

/// The variable every process of a step (or `run` hook) carries in its environment.
pub const KEY_VAR: &str = "BATON_EXECUTION_KEY";
/// The variable that tells a hook's attempts apart (they share its key).
const HOOK_ATTEMPT_VAR: &str = "BATON_HOOK_ATTEMPT";
/// The workspace root, also in every step's environment: keys are unique only within one.
pub const WORKSPACE_VAR: &str = "BATON_WORKSPACE";

/// What marks the processes of one step (or hook) of one workspace: its execution key and
/// its workspace's root, as found in their environments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mark {
    needles: Vec<Vec<u8>>,
    /// Processes started before this (a start time as [`start_time`] reads it) are passed
    /// over: none of them can carry a key given out after it.
    since: Option<u64>,
}

impl Mark {
    /// The mark of `key` in the workspace whose root is `workspace`.
    pub fn new(key: &str, workspace: &str) -> Self {
        Self {
            needles: vec![
                format!("{KEY_VAR}={key}").into_bytes(),
                format!("{WORKSPACE_VAR}={workspace}").into_bytes(),
            ],
            since: None,
        }
    }

    /// The same mark, looked for only in processes started no earlier than `ticks` (the
    /// start time of the first process that carried it): a scan then reads the environment
    /// of new processes only.
    pub fn since(mut self, ticks: Option<u64>) -> Self {
        self.since = ticks;
        self
    }

    /// The mark a step's environment gives its processes; None unless it names both its
    /// key and its workspace (a key alone, such as `1:build:1`, repeats across workspaces).
    /// A hook's attempts share its key: its attempt is part of the mark, so that what ends
    /// the leftovers of one attempt (the warden of an engine that died) spares the next.
    pub fn from_vars<K: AsRef<OsStr>, V: AsRef<OsStr>>(
        vars: impl IntoIterator<Item = (K, V)>,
    ) -> Option<Self> {
        let (mut key, mut workspace, mut attempt) = (None, None, None);
        for (k, v) in vars {
            match k.as_ref().as_bytes() {
                b"BATON_EXECUTION_KEY" => key = Some(v.as_ref().as_bytes().to_vec()),
                b"BATON_WORKSPACE" => workspace = Some(v.as_ref().as_bytes().to_vec()),
                b"BATON_HOOK_ATTEMPT" => attempt = Some(v.as_ref().as_bytes().to_vec()),
                _ => {}
            }
        }
        let needle = |name: &str, value: Vec<u8>| [format!("{name}=").into_bytes(), value].concat();
        let mut needles = vec![needle(KEY_VAR, key?), needle(WORKSPACE_VAR, workspace?)];
        needles.extend(attempt.map(|a| needle(HOOK_ATTEMPT_VAR, a)));
        Some(Self {
            needles,
            since: None,
        })
    }

    /// True when a process environment (`/proc/<pid>/environ`) carries the mark.
    fn on(&self, environ: &[u8]) -> bool {
        self.needles
            .iter()
            .all(|n| environ.split(|b| *b == 0).any(|kv| kv == n.as_slice()))
    }
}

/// Every live process of this user, other than this one, that carries `mark`. Other
/// users' environments cannot be read, and a step's processes are all this user's.
pub fn marked(mark: &Mark) -> Vec<u32> {
    let me = std::process::id();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| *pid != me && live_since(*pid, mark.since))
        .filter(|pid| std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|e| mark.on(&e)))
        .collect()
}

/// The process-group leader that carries `mark`, with its start time: a step's group found
/// by its execution key and workspace when its engine died before recording its pid.
pub fn find_group_by_mark(mark: &Mark) -> Option<(u32, Option<u64>)> {
    marked(mark)
        .into_iter()
        .find(|pid| {
            nix::unistd::getpgid(Some(Pid::from_raw(*pid as i32)))
                .is_ok_and(|g| g.as_raw() as u32 == *pid)
        })
        .map(|pid| (pid, start_time(pid)))
}

/// True for a live process (not a zombie) started no earlier than `since`, if given.
fn live_since(pid: u32, since: Option<u64>) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let Some(close) = stat.rfind(')') else {
        return false;
    };
    let mut fields = stat[close + 2..].split_whitespace();
    if fields
        .next()
        .is_none_or(|state| state.starts_with(['Z', 'X']))
    {
        return false;
    }
    // The start time is field 22; the state (field 3) was taken.
    let started = fields.nth(18).and_then(|f| f.parse::<u64>().ok());
    match (since, started) {
        (Some(since), Some(started)) => started >= since,
        _ => true,
    }
}

/// Sends `sig` to every process that carries `mark`; how many there were.
pub fn signal_marked(mark: &Mark, sig: Signal) -> usize {
    let pids = marked(mark);
    for pid in &pids {
        let _ = nix::sys::signal::kill(Pid::from_raw(*pid as i32), sig);
    }
    pids.len()
}

/// SIGKILL to every process that carries `mark`, scanning until two scans in a row find
/// none: one caught mid-`exec` (no environment for a moment) or forked just after a scan is
/// found by the next. Bounded, so a process that keeps forking cannot hold the caller.
/// Every step that ends runs this: when nothing carries the mark (nearly always) it costs
/// two scans 2 ms apart, not a sleep after each.
pub fn kill_marked_blocking(mark: &Mark) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let mut empty = 0;
    loop {
        if signal_marked(mark, Signal::SIGKILL) == 0 {
            empty += 1;
        } else {
            empty = 0;
        }
        if empty == 2 || std::time::Instant::now() >= deadline {
            return;
        }
        // Killed processes get a moment to go; between two empty scans a shorter one is
        // enough for a process caught mid-`exec` to show its environment.
        let pause = if empty == 0 { 10 } else { 2 };
        std::thread::sleep(std::time::Duration::from_millis(pause));
    }
}

/// Names of variables beyond the `BATON_…` secrets that the engine holds for itself (the
/// webhook secret under a name the workspace chose): steps and servers do not inherit them.
static ENGINE_SECRETS: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Marks `name` as one of the engine's own secrets (see [`engine_secret_names`]).
pub fn keep_from_children(name: &str) {
    let mut names = ENGINE_SECRETS.lock().unwrap_or_else(|e| e.into_inner());
    if !names.iter().any(|n| n == name) {
        names.push(name.to_string());
    }
}

/// The variables of this process that its children must not inherit: the engine's own
/// secrets (a webhook secret, an API token). Pass each to `env_remove` on a std or tokio
/// `Command`; a value the child's own `env` sets afterwards is its own.
pub fn engine_secret_names() -> Vec<OsString> {
    // The `BATON_…` ones are found once; a name kept since is looked for each time (by
    // comparing names: the built-in test, which upper-cases each, runs on a match only).
    static BUILT_IN: OnceLock<Vec<OsString>> = OnceLock::new();
    let names = || process_env().iter().map(|(name, _)| name.as_os_str());
    let built_in = BUILT_IN.get_or_init(|| built_in_secrets(names()));
    let mut out = built_in.clone();
    out.extend(kept_secrets(names(), &kept_names()));
    out
}

/// Which of `names` are the engine's own secrets.
#[cfg(test)]
fn secret_names<'a>(names: impl Iterator<Item = &'a OsStr> + Clone) -> Vec<OsString> {
    let mut out = built_in_secrets(names.clone());
    out.extend(kept_secrets(names, &kept_names()));
    out
}

/// The `BATON_…` secrets among `names`.
fn built_in_secrets<'a>(names: impl Iterator<Item = &'a OsStr>) -> Vec<OsString> {
    names
        .filter(|n| is_built_in(n))
        .map(OsStr::to_owned)
        .collect()
}

/// The names of `names` that [`keep_from_children`] was given (`extra`), but for the
/// built-in ones ([`built_in_secrets`] has those).
fn kept_secrets<'a>(
    names: impl Iterator<Item = &'a OsStr>,
    extra: &[String],
) -> impl Iterator<Item = OsString> {
    names
        .filter(|n| extra.iter().any(|e| OsStr::new(e) == *n) && !is_built_in(n))
        .map(OsStr::to_owned)
}

/// The names [`keep_from_children`] was given.
fn kept_names() -> Vec<String> {
    ENGINE_SECRETS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone()
}

/// One of the `BATON_…` secrets.
fn is_built_in(name: &OsStr) -> bool {
    name.to_str()
        .is_some_and(crate::exec::redact::is_engine_secret)
}

/// SIGTERM to every process that carries `mark`, up to `grace` for them to go, then
/// SIGKILL to what is left. Blocks: for recovery's and the guard's threads.
///
/// Each process gets one SIGTERM (a second could cut its clean-up short), and the scan is
/// repeated: a process in the middle of `exec` reads as having no environment for a moment,
/// and one found only then still gets its SIGTERM. Ends after two empty scans in a row.
pub fn end_marked_blocking(mark: &Mark, grace: std::time::Duration) {
    let deadline = std::time::Instant::now() + grace;
    let mut told = std::collections::HashSet::new();
    let mut empty = 0;
    loop {
        let pids = marked(mark);
        if pids.is_empty() {
            empty += 1;
            if empty == 2 {
                return;
            }
        } else {
            empty = 0;
        }
        for pid in pids {
            if told.insert(pid) {
                let _ = nix::sys::signal::kill(Pid::from_raw(pid as i32), Signal::SIGTERM);
            }
        }
        if std::time::Instant::now() >= deadline {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(25));
    }
    kill_marked_blocking(mark);
}

/// [`end_marked_blocking`] off the async threads.
pub async fn end_marked(mark: &Mark, grace: std::time::Duration) {
    let mark = mark.clone();
    let _ = tokio::task::spawn_blocking(move || end_marked_blocking(&mark, grace)).await;
}

/// What recovery may do with a group recorded by a dead engine.
#[derive(Debug, PartialEq, Eq)]
pub enum Orphan {
    /// The group is ours and still has members: end it.
    Ours,
    /// Nothing of it is left.
    Gone,
    /// The pid now belongs to another process (pid reuse): leave it alone.
    Reused,
}

/// Decides whether a recorded group (leader pid + start time) still belongs to that step.
pub fn classify_orphan(pgid: u32, recorded_start: Option<u64>) -> Orphan {
    match start_time(pgid) {
        // The leader is alive: it is ours only if its start time matches.
        Some(now) => match recorded_start {
            Some(then) if then == now => Orphan::Ours,
            _ => Orphan::Reused,
        },
        // The leader is gone. The kernel does not reuse a pid while a group of that id has
        // members, so any member left is one of ours.
        None if group_alive(pgid) => Orphan::Ours,
        None => Orphan::Gone,
    }
}

/// SIGTERM to the group, then SIGKILL once `grace` has passed if anything is left.
pub async fn terminate_group(pgid: u32, grace: std::time::Duration) {
    if !signal_group(pgid, Signal::SIGTERM) {
        return;
    }
    let deadline = tokio::time::Instant::now() + grace;
    while tokio::time::Instant::now() < deadline {
        if !group_alive(pgid) {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    signal_group(pgid, Signal::SIGKILL);
}

/// Stops a child we spawned as a group leader: SIGTERM to the group, SIGKILL after `grace`,
/// and the leader reaped; what is left of the group gets the rest of the grace period.
pub async fn stop_child(child: &mut tokio::process::Child, pgid: u32, grace: std::time::Duration) {
    let started = tokio::time::Instant::now();
    signal_group(pgid, Signal::SIGTERM);
    if tokio::time::timeout(grace, child.wait()).await.is_err() {
        signal_group(pgid, Signal::SIGKILL);
        let _ = child.wait().await;
        return;
    }
    terminate_group(pgid, grace.saturating_sub(started.elapsed())).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_finds_a_process_in_another_session_and_ends_it() {
        let key = format!("test-key-{}", std::process::id());
        // `setsid` puts the sleeper out of reach of any group signal.
        let mut child = std::process::Command::new("setsid")
            .args(["sleep", "300"])
            .env(KEY_VAR, &key)
            .env(WORKSPACE_VAR, "/ws/a")
            .spawn()
            .expect("setsid runs");
        let pid = child.id();
        // Until `setsid` has become `sleep`, its pid may read as unmarked mid-exec.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let comm = || std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        while comm().trim() != "sleep" {
            assert!(
                std::time::Instant::now() < deadline,
                "setsid never ran sleep"
            );
            std::thread::yield_now();
        }
        let mark = Mark::new(&key, "/ws/a");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !marked(&mark).contains(&pid) {
            assert!(
                std::time::Instant::now() < deadline,
                "the mark was never found"
            );
            std::thread::yield_now();
        }
        // The same key in another workspace is another step.
        assert!(marked(&Mark::new(&key, "/ws/b")).is_empty());
        end_marked_blocking(&mark, std::time::Duration::from_secs(5));
        let status = child.wait().unwrap();
        assert!(!status.success(), "the sleeper was ended, not finished");
        assert!(marked(&mark).is_empty());
    }

    /// A mark given a start time passes over processes older than it (their environments
    /// are not read) and still finds those started since.
    #[test]
    fn a_mark_since_a_start_time_looks_only_at_newer_processes() {
        let key = format!("test-since-{}", std::process::id());
        let mut child = std::process::Command::new("sleep")
            .arg("300")
            .env(KEY_VAR, &key)
            .env(WORKSPACE_VAR, "/ws/since")
            .spawn()
            .expect("sleep runs");
        let pid = child.id();
        let mark = Mark::new(&key, "/ws/since");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !marked(&mark).contains(&pid) {
            assert!(std::time::Instant::now() < deadline, "never found");
            std::thread::yield_now();
        }
        let started = start_time(pid).expect("its start time");
        assert!(marked(&mark.clone().since(Some(started))).contains(&pid));
        assert!(
            !marked(&mark.clone().since(Some(started + 1))).contains(&pid),
            "a process older than the mark's start time is passed over"
        );
        assert!(marked(&mark.clone().since(None)).contains(&pid));
        let _ = child.kill();
        let _ = child.wait();
    }

    #[test]
    fn a_mark_needs_both_its_key_and_its_workspace() {
        use std::os::unix::ffi::OsStringExt;
        let key = || (OsString::from(KEY_VAR), OsString::from("1:build:1"));
        let ws = |v: &[u8]| {
            (
                OsString::from(WORKSPACE_VAR),
                OsString::from_vec(v.to_vec()),
            )
        };
        // `1:build:1` alone is a step of every workspace.
        assert_eq!(Mark::from_vars([key()]), None);
        assert_eq!(Mark::from_vars([ws(b"/ws/a")]), None);
        assert_eq!(
            Mark::from_vars([key(), ws(b"/ws/a")]),
            Some(Mark::new("1:build:1", "/ws/a"))
        );
        // A root that is not UTF-8 is still a root: matched byte for byte.
        let odd = Mark::from_vars([
            key(),
            ws(b"/ws/\xff"),
            (OsString::from("OTHER"), OsString::from_vec(vec![0xfe])),
        ])
        .expect("a mark");
        assert!(odd.on(b"A=1\0BATON_WORKSPACE=/ws/\xff\0BATON_EXECUTION_KEY=1:build:1\0"));
        assert!(!odd.on(b"BATON_WORKSPACE=/ws/a\0BATON_EXECUTION_KEY=1:build:1\0"));
        // A hook's attempts share the key; the attempt tells them apart.
        let hook = |n: &str| {
            Mark::from_vars([
                key(),
                ws(b"/ws/a"),
                (OsString::from("BATON_HOOK_ATTEMPT"), OsString::from(n)),
            ])
            .expect("a mark")
        };
        let second =
            b"BATON_WORKSPACE=/ws/a\0BATON_EXECUTION_KEY=1:build:1\0BATON_HOOK_ATTEMPT=2\0";
        assert!(!hook("1").on(second));
        assert!(hook("2").on(second));
    }

    #[test]
    fn the_engines_secrets_and_its_webhook_secrets_name_are_kept_from_children() {
        keep_from_children("TEST_ONLY_HOOK_SIGNING");
        // A kept name that is a built-in one as well is said once.
        keep_from_children("BATON_API_TOKEN");
        let names = [
            "BATON_API_TOKEN",
            "TEST_ONLY_HOOK_SIGNING",
            "OPENAI_API_KEY",
            "BATON_EXECUTION_KEY",
            "PATH",
        ];
        let kept = secret_names(names.iter().map(OsStr::new));
        assert_eq!(kept, ["BATON_API_TOKEN", "TEST_ONLY_HOOK_SIGNING"]);
    }

    #[test]
    fn a_kill_by_mark_catches_a_process_started_after_the_first_scan() {
        let key = format!("test-late-{}", std::process::id());
        let mark = Mark::new(&key, "/ws/late");
        // A parent that keeps starting marked children in sessions of their own: one
        // forked while a scan runs (or caught mid-exec) is missed by it, found by the next.
        let script = "while :; do setsid sleep 300 & sleep 0.01; done";
        let mut parent = std::process::Command::new("sh")
            .args(["-c", script])
            .env(KEY_VAR, &key)
            .env(WORKSPACE_VAR, "/ws/late")
            .spawn()
            .expect("sh runs");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while marked(&mark).len() < 3 {
            assert!(std::time::Instant::now() < deadline, "no children started");
            std::thread::yield_now();
        }
        kill_marked_blocking(&mark);
        let _ = parent.wait();
        assert!(
            marked(&mark).is_empty(),
            "something marked outlived the kill"
        );
    }

    #[test]
    fn reads_own_start_time() {
        assert!(start_time(std::process::id()).is_some());
    }

    #[test]
    fn a_mismatched_start_time_is_reuse() {
        let me = std::process::id();
        let real = start_time(me).unwrap();
        assert_eq!(classify_orphan(me, Some(real + 1)), Orphan::Reused);
        assert_eq!(classify_orphan(me, None), Orphan::Reused);
    }
}
