//! Where a step's program is: its name looked up on the step's `PATH`, as a shell does.
//!
//! The shell a `run` step starts (`sh`) is, like a shell's `hash`, remembered once found,
//! here for a second: a run of short steps looks through the `PATH` once a second rather
//! than once a step (each directory before the one holding it is a failed `stat`). A
//! remembered file is checked again before it is used, and a shell installed earlier on
//! the `PATH` is found at the latest a second later. Other programs (an agent's CLI, which
//! a step before may just have installed) are looked up every time: their steps are long.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a name found stays remembered.
const FRESH: Duration = Duration::from_secs(1);

/// Names remembered at most: past that, only those still fresh are kept.
const MOST: usize = 64;

/// A name, the `PATH` it was looked up on, and the folder its relative entries are in
/// (none when it has none).
type Key = (String, OsString, Option<PathBuf>);

/// Names found lately, with when.
#[derive(Default)]
pub struct Found(Mutex<HashMap<Key, (PathBuf, Instant)>>);

/// The process's memory of where its steps' shells are: one per engine process is what a
/// shell's `hash` is per shell.
static SHELLS: std::sync::LazyLock<Found> = std::sync::LazyLock::new(Found::default);

/// Where `program` is, started in `dir` with the search path `path`: a name holding a `/`
/// is the folder's; a bare name is the first executable file of that name on the path (a
/// relative entry, `node_modules/.bin` or an empty one, is the folder's).
pub fn find(program: &str, dir: &Path, path: Option<&OsStr>) -> std::io::Result<PathBuf> {
    search(program, dir, path).ok_or_else(missing)
}

/// [`find`] for a step's shell, remembered for a second.
pub fn find_shell(program: &str, dir: &Path, path: Option<&OsStr>) -> std::io::Result<PathBuf> {
    SHELLS
        .find(program, dir, path, Instant::now())
        .ok_or_else(missing)
}

impl Found {
    /// [`find`] at `now`, through this memory.
    fn find(
        &self,
        program: &str,
        dir: &Path,
        path: Option<&OsStr>,
        now: Instant,
    ) -> Option<PathBuf> {
        if program.contains('/') {
            return search(program, dir, path);
        }
        let path_os = path?;
        // The folder matters only to a relative entry.
        let relative = std::env::split_paths(path_os).any(|d| d.is_relative());
        let key = (
            program.to_string(),
            path_os.to_os_string(),
            relative.then(|| dir.to_path_buf()),
        );
        if let Some(p) = self.remembered(&key, now) {
            return Some(p);
        }
        let found = search(program, dir, path)?;
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if map.len() >= MOST {
            map.retain(|_, (_, at)| now.saturating_duration_since(*at) < FRESH);
        }
        map.insert(key, (found.clone(), now));
        Some(found)
    }

    /// A file of the key's name found less than [`FRESH`] before `now`, if it is still
    /// executable.
    fn remembered(&self, key: &Key, now: Instant) -> Option<PathBuf> {
        let (path, at) = self
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(key)?
            .clone();
        (now.saturating_duration_since(at) < FRESH && executable(&path)).then_some(path)
    }
}

/// The look-up itself.
fn search(program: &str, dir: &Path, path: Option<&OsStr>) -> Option<PathBuf> {
    if program.contains('/') {
        return Some(dir.join(program)).filter(|p| executable(p));
    }
    std::env::split_paths(path?)
        .map(|d| dir.join(d).join(program))
        .find(|p| executable(p))
}

/// Why `program`, named with a folder, was not found in `dir`: `… does not exist` or
/// `… is not an executable file`, at its path (without a leading `./`).
pub fn why_not_found(program: &str, dir: &Path) -> String {
    let file = dir.join(program.trim_start_matches("./"));
    match file.exists() {
        true => format!("{} is not an executable file", file.display()),
        false => format!("{} does not exist", file.display()),
    }
}

fn missing() -> std::io::Error {
    std::io::Error::from_raw_os_error(nix::libc::ENOENT)
}

/// A regular file someone may execute.
fn executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn program(at: &Path, name: &str) -> PathBuf {
        std::fs::create_dir_all(at).unwrap();
        let p = at.join(name);
        std::fs::write(&p, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    #[test]
    fn a_shell_found_is_used_for_a_second_unless_it_is_gone() {
        let tmp = tempfile::tempdir().unwrap();
        let (early, late) = (tmp.path().join("early"), tmp.path().join("late"));
        std::fs::create_dir_all(&early).unwrap();
        let in_late = program(&late, "sh");
        let path = std::env::join_paths([&early, &late]).unwrap();
        let found = Found::default();
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        assert_eq!(
            found.find("sh", tmp.path(), Some(&path), at(0)),
            Some(in_late.clone())
        );
        // One installed earlier on the path is not looked for within the second…
        let in_early = program(&early, "sh");
        assert_eq!(
            found.find("sh", tmp.path(), Some(&path), at(999)),
            Some(in_late.clone())
        );
        // …and is found once it has passed.
        assert_eq!(
            found.find("sh", tmp.path(), Some(&path), at(1000)),
            Some(in_early.clone())
        );
        // A remembered file that is gone is looked for again at once.
        std::fs::remove_file(&in_early).unwrap();
        assert_eq!(
            found.find("sh", tmp.path(), Some(&path), at(1001)),
            Some(in_late.clone())
        );
        std::fs::remove_file(&in_late).unwrap();
        assert_eq!(found.find("sh", tmp.path(), Some(&path), at(1002)), None);
    }

    #[test]
    fn a_file_that_is_not_executable_is_passed_over_and_relative_entries_are_the_folders() {
        let tmp = tempfile::tempdir().unwrap();
        let name = "baton-lookup-test-relative";
        let plain = tmp.path().join("plain");
        std::fs::create_dir_all(&plain).unwrap();
        std::fs::write(plain.join(name), "not a program").unwrap();
        let bin = program(&tmp.path().join("node_modules/.bin"), name);
        let path = std::env::join_paths([plain.as_path(), Path::new("node_modules/.bin")]).unwrap();
        let found = Found::default();
        let now = Instant::now();
        assert_eq!(found.find(name, tmp.path(), Some(&path), now), Some(bin));
        // Another folder has no such entry: nothing found there, whatever was remembered.
        let other = tempfile::tempdir().unwrap();
        assert_eq!(found.find(name, other.path(), Some(&path), now), None);
        assert!(find(name, tmp.path(), None).is_err());
        assert_eq!(
            find(
                "./node_modules/.bin/baton-lookup-test-relative",
                tmp.path(),
                None
            )
            .unwrap(),
            tmp.path()
                .join("./node_modules/.bin/baton-lookup-test-relative")
        );
    }
}
