//! Process groups: identity and signalling.

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

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
