//! Where PostgreSQL's programs are and whom its server runs as: shared by the tests'
//! server (`tests/pg_support`) and the benchmark's (`benches/engine/pg.rs`).

use std::path::PathBuf;
use std::process::Command;

/// The folder holding `initdb` and `pg_ctl`, if PostgreSQL is installed: `BATON_PG_BIN`,
/// else the newest `/usr/lib/postgresql/*/bin`, else `PATH`.
pub fn bin_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("BATON_PG_BIN") {
        let d = PathBuf::from(d);
        return d.join("initdb").exists().then_some(d);
    }
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").exists().then_some((v, bin))
        })
        .collect();
    found.sort();
    if let Some((_, bin)) = found.pop() {
        return Some(bin);
    }
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p).find(|d| d.join("initdb").exists() && d.join("pg_ctl").exists())
    })
}

/// Runs `cmd` as the server's owner: `nobody` when this process is root.
pub fn as_owner(cmd: &mut Command) -> &mut Command {
    use std::os::unix::process::CommandExt;
    if nix::unistd::geteuid().is_root() {
        cmd.uid(65534).gid(65534).env("HOME", "/");
    }
    cmd
}
