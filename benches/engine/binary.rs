//! Finding the release `baton` binary (benches get no `CARGO_BIN_EXE_*`), building it first,
//! and naming the machine the figures come from.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The release binary next to this bench executable (`target/release/deps/engine-…` →
/// `target/release/baton`), built or rebuilt first unless `no_build`.
pub fn baton(no_build: bool) -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("BATON_BENCH_BIN") {
        return Ok(PathBuf::from(p));
    }
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this bench: {e}"))?;
    let profile_dir = exe
        .ancestors()
        .find(|d| d.file_name().is_some_and(|n| n == "deps"))
        .and_then(Path::parent)
        .ok_or_else(|| {
            format!(
                "{} is not under a target/<profile>/deps folder",
                exe.display()
            )
        })?;
    let bin = profile_dir.join("baton");
    if !no_build {
        build(profile_dir)?;
    }
    if bin.is_file() {
        Ok(bin)
    } else {
        Err(format!(
            "{} is missing — run `cargo build --release --bin baton --bin baton-guard` first",
            bin.display()
        ))
    }
}

/// `cargo build --release --bin baton --bin baton-guard` (the engine starts each local step
/// under `baton-guard`, found next to `baton`) into the target folder this bench runs from;
/// cargo itself decides whether the binaries are stale, so this is a no-op when they are fresh.
fn build(profile_dir: &Path) -> Result<(), String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args([
        "build",
        "--release",
        "--bin",
        "baton",
        "--bin",
        "baton-guard",
    ])
    .current_dir(env!("CARGO_MANIFEST_DIR"));
    if let Some(target) = profile_dir.parent() {
        cmd.env("CARGO_TARGET_DIR", target);
    }
    eprintln!(
        "building the release binaries (cargo build --release --bin baton --bin baton-guard)…"
    );
    let status = cmd
        .status()
        .map_err(|e| format!("cannot run cargo to build baton: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!(
            "`cargo build --release --bin baton --bin baton-guard` failed ({status}) — fix the build or pass --no-build"
        ))
    }
}

/// "2 cores, AMD EPYC …" from `nproc` and `/proc/cpuinfo`.
pub fn machine() -> String {
    let cores = Command::new("nproc")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|| "?".into());
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, m)| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    format!("{cores} cores, {model}")
}

/// The commit the measured binary was built from (`git describe`), for the report header.
pub fn revision() -> String {
    Command::new("git")
        .args(["describe", "--always", "--dirty"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|| "unknown revision".into())
}
