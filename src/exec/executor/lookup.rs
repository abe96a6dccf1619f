//! Where a step's program is: its name looked up on the step's `PATH`, as a shell does.
//!
//! Like a shell's `hash`, a name found is remembered, here for a second: a run of short
//! steps starting `sh` looks through the `PATH` once a second rather than once a step
//! (each directory before the one holding it is a failed `stat`). A remembered file is
//! checked again before it is used, and a program installed earlier on the `PATH` is
//! found at the latest a second later.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a name found stays remembered.
const FRESH: Duration = Duration::from_secs(1);

/// Names remembered at most; past that the memory starts over (a board of many worktrees
/// with relative `PATH` entries would otherwise grow it for ever).
const MOST: usize = 256;

/// A name, the `PATH` it was looked up on, and the folder its relative entries are in.
type Key = (String, OsString, PathBuf);

static FOUND: Mutex<Option<HashMap<Key, (PathBuf, Instant)>>> = Mutex::new(None);

/// Where `program` is, started in `dir` with the search path `path`: a name holding a `/`
/// is the folder's; a bare name is the first executable file of that name on the path (a
/// relative entry, `node_modules/.bin` or an empty one, is the folder's).
pub fn find(program: &str, dir: &Path, path: Option<&OsStr>) -> std::io::Result<PathBuf> {
    let missing = || std::io::Error::from_raw_os_error(nix::libc::ENOENT);
    if program.contains('/') {
        let p = dir.join(program);
        return if executable(&p) {
            Ok(p)
        } else {
            Err(missing())
        };
    }
    let path = path.ok_or_else(missing)?;
    let key = (program.to_string(), path.to_os_string(), dir.to_path_buf());
    if let Some(p) = remembered(&key) {
        return Ok(p);
    }
    let found = std::env::split_paths(path)
        .map(|d| dir.join(d).join(program))
        .find(|p| executable(p))
        .ok_or_else(missing)?;
    remember(key, found.clone());
    Ok(found)
}

/// A file of the key's name found less than [`FRESH`] ago, if it is still executable.
fn remembered(key: &Key) -> Option<PathBuf> {
    let (path, at) = {
        let found = FOUND.lock().unwrap_or_else(|e| e.into_inner());
        found.as_ref()?.get(key)?.clone()
    };
    (at.elapsed() < FRESH && executable(&path)).then_some(path)
}

fn remember(key: Key, path: PathBuf) {
    let mut found = FOUND.lock().unwrap_or_else(|e| e.into_inner());
    let map = found.get_or_insert_with(HashMap::new);
    if map.len() >= MOST {
        map.clear();
    }
    map.insert(key, (path, Instant::now()));
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
    fn the_first_executable_on_the_path_is_found_and_a_removed_one_is_not_remembered() {
        let tmp = tempfile::tempdir().unwrap();
        let (early, late) = (tmp.path().join("early"), tmp.path().join("late"));
        std::fs::create_dir_all(&early).unwrap();
        let name = "baton-lookup-test-tool";
        let in_late = program(&late, name);
        let path = std::env::join_paths([&early, &late]).unwrap();
        assert_eq!(find(name, tmp.path(), Some(&path)).unwrap(), in_late);
        // Remembered: the same answer again.
        assert_eq!(find(name, tmp.path(), Some(&path)).unwrap(), in_late);
        // A remembered file that is gone is looked for again, and is then missing.
        std::fs::remove_file(&in_late).unwrap();
        let gone = find(name, tmp.path(), Some(&path)).unwrap_err();
        assert_eq!(gone.kind(), std::io::ErrorKind::NotFound);
        // Then the one installed earlier on the path is found.
        let in_early = program(&early, name);
        assert_eq!(find(name, tmp.path(), Some(&path)).unwrap(), in_early);
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
        assert_eq!(find(name, tmp.path(), Some(&path)).unwrap(), bin);
        // Another folder has no such entry: nothing found there, whatever was remembered.
        let other = tempfile::tempdir().unwrap();
        assert!(find(name, other.path(), Some(&path)).is_err());
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
