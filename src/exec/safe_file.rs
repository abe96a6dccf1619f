//! Files baton writes into, or reads from, a folder a step can write too: the task's context
//! folder (step logs, `prompt.md`, handoff files). A step — one in a container above all —
//! may leave a symbolic or hard link there under a name baton is about to use; writing
//! through it would let the step overwrite any file of the engine's user on the host. So a
//! file baton writes is made afresh (the name's old entry removed, the new file created
//! with `O_CREAT | O_EXCL | O_NOFOLLOW`), and a file baton reads is opened without following
//! a link.
//!
//! Only the last component is guarded: the folders above it are baton's own, and no step
//! can reach them (a container sees the context folder itself, not its parent).

use nix::fcntl::OFlag;
use std::fs::{File, OpenOptions};
use std::io::{self, ErrorKind, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// How often a name a step keeps putting back is removed again before giving up.
const ATTEMPTS: usize = 8;

/// Creates `path` as a new, empty plain file that only the returned handle reaches,
/// replacing whatever entry had the name (a planted link is removed, never followed).
pub fn create_fresh(path: &Path) -> io::Result<File> {
    for _ in 0..ATTEMPTS {
        match std::fs::remove_file(path) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        // `create_new` is O_EXCL: it fails on any entry, a dangling link included.
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(OFlag::O_NOFOLLOW.bits())
            .open(path)
        {
            Ok(f) => return Ok(f),
            Err(e) if e.kind() == ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::new(
        ErrorKind::AlreadyExists,
        format!(
            "{} is put back each time it is removed; not writing it",
            path.display()
        ),
    ))
}

/// Writes `contents` to a fresh file at `path` (see [`create_fresh`]).
pub fn write_fresh(path: &Path, contents: &[u8]) -> io::Result<()> {
    create_fresh(path)?.write_all(contents)
}

/// [`write_fresh`] off the async workers.
pub async fn write_fresh_async(path: PathBuf, contents: impl Into<Vec<u8>>) -> io::Result<()> {
    let contents = contents.into();
    tokio::task::spawn_blocking(move || write_fresh(&path, &contents))
        .await
        .map_err(io::Error::other)?
}

/// Reads `path` when it is a plain file of at most `max` bytes; a link (whatever it points
/// at), a folder or a larger file is an error.
pub fn read_plain(path: &Path, max: u64) -> io::Result<Vec<u8>> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags((OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK).bits())
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(io::Error::new(
            ErrorKind::InvalidInput,
            format!("{} is not a plain file", path.display()),
        ));
    }
    if meta.len() > max {
        return Err(io::Error::new(
            ErrorKind::InvalidInput,
            format!("{} is larger than {max} bytes", path.display()),
        ));
    }
    let mut out = Vec::with_capacity(meta.len() as usize);
    file.take(max).read_to_end(&mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn a_planted_link_is_replaced_and_its_target_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("victim");
        std::fs::write(&target, "original").unwrap();
        let name = dir.path().join("id_s_001.log");
        symlink(&target, &name).unwrap();
        write_fresh(&name, b"log line\n").unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "original");
        assert!(std::fs::symlink_metadata(&name).unwrap().is_file());
        assert_eq!(std::fs::read_to_string(&name).unwrap(), "log line\n");
    }

    #[test]
    fn a_dangling_link_and_a_hard_link_are_replaced_too() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("would-be-made");
        let name = dir.path().join("prompt.md");
        symlink(&missing, &name).unwrap();
        write_fresh(&name, b"p").unwrap();
        assert!(!missing.exists(), "the link's target was not created");

        let other = dir.path().join("other");
        std::fs::write(&other, "keep").unwrap();
        let hard = dir.path().join("h.md");
        std::fs::hard_link(&other, &hard).unwrap();
        write_fresh(&hard, b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&other).unwrap(), "keep");
        assert_eq!(std::fs::read_to_string(&hard).unwrap(), "new");
    }

    #[test]
    fn a_folder_in_the_way_is_an_error_not_a_write_into_it() {
        let dir = tempfile::tempdir().unwrap();
        let name = dir.path().join("prompt.md");
        std::fs::create_dir(&name).unwrap();
        assert!(write_fresh(&name, b"p").is_err());
    }

    #[test]
    fn reading_refuses_links_and_oversized_files() {
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("payload.json");
        std::fs::write(&plain, "{}").unwrap();
        assert_eq!(read_plain(&plain, 10).unwrap(), b"{}");
        assert!(read_plain(&plain, 1).is_err());
        let link = dir.path().join("link.json");
        symlink(&plain, &link).unwrap();
        assert!(read_plain(&link, 10).is_err());
    }
}
