//! The raw floors: the least a program could spend doing the same work as baton.

use crate::proc;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// A tokio program spawning `sh -c true` `n` times, one after the other; the time each.
pub fn sequential_spawns(n: usize) -> Result<Duration, String> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start a tokio runtime: {e}"))?;
    rt.block_on(async {
        let start = Instant::now();
        for _ in 0..n {
            let status = tokio::process::Command::new("sh")
                .args(["-c", "true"])
                .status()
                .await
                .map_err(|e| format!("cannot spawn sh: {e}"))?;
            if !status.success() {
                return Err(format!("`sh -c true` exited with {status}"));
            }
        }
        Ok(start.elapsed() / n as u32)
    })
}

/// A shell command line (run by `sh -c` in `cwd`) and its wall time; fails unless it
/// exits 0.
pub fn shell(script: &str, cwd: &Path, limit: Duration, what: &str) -> Result<proc::Done, String> {
    let mut cmd = Command::new("sh");
    cmd.args(["-c", script]).current_dir(cwd);
    proc::run(&mut cmd, limit, what)?.ok(what)
}

/// `jobs` × `steps` `sh -c true` at `parallel` at once through `xargs -P`.
pub fn xargs(
    jobs: usize,
    steps: usize,
    parallel: usize,
    limit: Duration,
) -> Result<Duration, String> {
    let script = format!("seq {} | xargs -P {parallel} -n1 sh -c true", jobs * steps);
    Ok(shell(&script, Path::new("/"), limit, "the xargs floor")?.elapsed)
}
