//! Watching a workspace's definitions: `.baton/pipelines/*.json`, `.baton/agents/*.json`
//! and `.baton/config.toml`. The operating system reports changes (inotify, FSEvents,
//! kqueue through the notify crate); a burst of them (an editor's write-then-rename) is
//! folded into one call after a short quiet time. Nothing polls.

use notify::{EventKind, RecursiveMode, Watcher};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

/// How long the files must stay quiet before a change is reported.
pub const DEBOUNCE: Duration = Duration::from_millis(150);

/// Watches a workspace's definition files until dropped.
pub struct DefinitionWatcher {
    tx: mpsc::Sender<Msg>,
    _folder: FolderWatch,
}

enum Msg {
    Fs(notify::Result<notify::Event>),
    Stop,
}

impl Drop for DefinitionWatcher {
    fn drop(&mut self) {
        let _ = self.tx.send(Msg::Stop);
    }
}

/// True when `path` is a definition file of the workspace folder `baton_dir` (or one of
/// its two folders, created or removed as a whole).
pub fn is_definition(baton_dir: &Path, path: &Path) -> bool {
    let Some(parent) = path.parent() else {
        return false;
    };
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if parent == baton_dir {
        return name == "config.toml" || name == "pipelines" || name == "agents";
    }
    let in_defs = parent == baton_dir.join("pipelines") || parent == baton_dir.join("agents");
    in_defs && name.ends_with(".json") && !name.starts_with('.')
}

/// Starts watching `baton_dir`; `on_change` gets the changed paths of each quiet burst, on
/// the watcher's own thread. The error is a sentence saying what cannot be watched.
pub fn watch(
    baton_dir: &Path,
    on_change: impl Fn(Vec<PathBuf>) + Send + 'static,
) -> Result<DefinitionWatcher, String> {
    let (tx, rx) = mpsc::channel();
    let fs_tx = tx.clone();
    let own = baton_dir.to_path_buf();
    let mut watcher = notify::recommended_watcher(move |ev: notify::Result<notify::Event>| {
        // Only changes of definition files (and errors) go on to the thread below.
        if let Ok(e) = &ev
            && (matches!(e.kind, EventKind::Access(_))
                || !e.paths.iter().any(|p| is_definition(&own, p)))
        {
            return;
        }
        let _ = fs_tx.send(Msg::Fs(ev));
    })
    .map_err(|e| format!("cannot watch {}: {e}", baton_dir.display()))?;
    let folder = watch_folder(baton_dir, tx.clone())
        .map_err(|e| format!("cannot watch {}: {e}", baton_dir.display()))?;
    let dir = baton_dir.to_path_buf();
    for sub in ["pipelines", "agents"] {
        let _ = watcher.watch(&dir.join(sub), RecursiveMode::NonRecursive);
    }
    std::thread::Builder::new()
        .name("baton-watch-defs".into())
        .spawn(move || run(watcher, &dir, &rx, on_change))
        .map_err(|e| format!("cannot start the file watcher: {e}"))?;
    Ok(DefinitionWatcher {
        tx,
        _folder: folder,
    })
}

/// What a workspace's definition files looked like at one moment (size, inode and change
/// time of each: no program can set a change time back), so that a watch started later can
/// tell what changed before it.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Snapshot(Vec<(PathBuf, Option<Stamp>)>);

/// A file's size, inode and change time (seconds, nanoseconds); a folder's inode alone.
type Stamp = (u64, u64, i64, i64);

impl Snapshot {
    /// The definition entries of `baton_dir` now: `config.toml`, the two folders and the
    /// files in them. Unreadable entries count as absent.
    pub fn take(baton_dir: &Path) -> Self {
        use std::os::unix::fs::MetadataExt;
        // A folder changes with every file made in it: only whether it is there counts.
        let stamp = |p: &Path| {
            std::fs::metadata(p).ok().map(|m| match m.is_dir() {
                true => (0, m.ino(), 0, 0),
                false => (m.len(), m.ino(), m.ctime(), m.ctime_nsec()),
            })
        };
        let mut entries = Vec::new();
        for top in ["config.toml", "pipelines", "agents"] {
            let path = baton_dir.join(top);
            entries.push((path.clone(), stamp(&path)));
            let Ok(dir) = std::fs::read_dir(&path) else {
                continue;
            };
            for entry in dir.flatten() {
                let file = entry.path();
                if is_definition(baton_dir, &file) {
                    let s = stamp(&file);
                    entries.push((file, s));
                }
            }
        }
        entries.sort();
        Snapshot(entries)
    }

    /// The entries that differ between `self` and `now` (made, removed or changed).
    pub fn changed(&self, now: &Snapshot) -> Vec<PathBuf> {
        let stamp = |s: &Snapshot, path: &PathBuf| {
            s.0.iter().find(|(p, _)| p == path).and_then(|(_, st)| *st)
        };
        let mut out: Vec<PathBuf> = Vec::new();
        for (path, _) in self.0.iter().chain(&now.0) {
            if stamp(self, path) != stamp(now, path) && !out.contains(path) {
                out.push(path.clone());
            }
        }
        out
    }
}

/// The watch on the workspace folder itself, ended when dropped.
struct FolderWatch {
    watches: inotify::Watches,
    wd: inotify::WatchDescriptor,
}

impl Drop for FolderWatch {
    fn drop(&mut self) {
        // The kernel then says the watch is gone, which ends the thread reading it.
        let _ = self.watches.remove(self.wd.clone());
    }
}

/// Watches the workspace folder for its definition entries (`config.toml`, the two
/// folders): made, removed, renamed, or written and closed (an editor's save). Not for
/// every write: the database and its write-ahead log sit beside them, and a watch that
/// took modifications would wake at (and slow) every commit.
fn watch_folder(baton_dir: &Path, tx: mpsc::Sender<Msg>) -> std::io::Result<FolderWatch> {
    use inotify::{EventMask, Inotify, WatchMask};
    let mut inotify = Inotify::init()?;
    let mask = WatchMask::CREATE
        | WatchMask::DELETE
        | WatchMask::MOVED_FROM
        | WatchMask::MOVED_TO
        | WatchMask::CLOSE_WRITE
        | WatchMask::ONLYDIR;
    let watches = inotify.watches();
    let wd = inotify.watches().add(baton_dir, mask)?;
    let dir = baton_dir.to_path_buf();
    std::thread::Builder::new()
        .name("baton-watch-dir".into())
        .spawn(move || {
            let mut buf = [0u8; 4096];
            loop {
                let events = match inotify.read_events_blocking(&mut buf) {
                    Ok(events) => events,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => {
                        let _ = tx.send(Msg::Fs(Err(notify::Error::io(e))));
                        return;
                    }
                };
                for event in events {
                    if event.mask.contains(EventMask::IGNORED) {
                        return;
                    }
                    let Some(name) = event.name else { continue };
                    let path = dir.join(name);
                    if !is_definition(&dir, &path) {
                        continue;
                    }
                    let kind = if event
                        .mask
                        .intersects(EventMask::CREATE | EventMask::MOVED_TO)
                    {
                        EventKind::Create(notify::event::CreateKind::Any)
                    } else if event
                        .mask
                        .intersects(EventMask::DELETE | EventMask::MOVED_FROM)
                    {
                        EventKind::Remove(notify::event::RemoveKind::Any)
                    } else {
                        EventKind::Modify(notify::event::ModifyKind::Any)
                    };
                    let _ = tx.send(Msg::Fs(Ok(notify::Event::new(kind).add_path(path))));
                }
            }
        })?;
    Ok(FolderWatch { watches, wd })
}

fn run(
    mut watcher: notify::RecommendedWatcher,
    dir: &Path,
    rx: &mpsc::Receiver<Msg>,
    on_change: impl Fn(Vec<PathBuf>),
) {
    let mut pending: Vec<PathBuf> = Vec::new();
    loop {
        let msg = if pending.is_empty() {
            rx.recv().ok()
        } else {
            match rx.recv_timeout(DEBOUNCE) {
                Ok(m) => Some(m),
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    on_change(std::mem::take(&mut pending));
                    continue;
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => None,
            }
        };
        let event = match msg {
            None | Some(Msg::Stop) => return,
            Some(Msg::Fs(Err(e))) => {
                tracing::warn!("watching {} failed: {e}", dir.display());
                continue;
            }
            Some(Msg::Fs(Ok(event))) => event,
        };
        if matches!(event.kind, EventKind::Access(_)) {
            continue;
        }
        for path in event.paths {
            if !is_definition(dir, &path) {
                continue;
            }
            // A folder made after the start is watched from now on.
            if matches!(event.kind, EventKind::Create(_)) && path.is_dir() {
                let _ = watcher.watch(&path, RecursiveMode::NonRecursive);
            }
            if !pending.contains(&path) {
                pending.push(path);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_definition_files_count() {
        let d = Path::new("/w/.baton");
        for (p, want) in [
            ("/w/.baton/config.toml", true),
            ("/w/.baton/pipelines/x.json", true),
            ("/w/.baton/agents/a.json", true),
            ("/w/.baton/pipelines", true),
            ("/w/.baton/baton.db-wal", false),
            ("/w/.baton/pipelines/x.json~", false),
            ("/w/.baton/pipelines/.x.json.swp", false),
            ("/w/.baton/pipelines/4913", false),
            ("/w/.baton/logs/engine.log", false),
            ("/w/.baton/context/1/plan.log", false),
        ] {
            assert_eq!(is_definition(d, Path::new(p)), want, "{p}");
        }
    }

    #[test]
    fn a_burst_of_writes_is_reported_together() {
        let dir = tempfile::tempdir().unwrap();
        let baton = dir.path().to_path_buf();
        std::fs::create_dir(baton.join("pipelines")).unwrap();
        let (tx, rx) = mpsc::channel();
        let _w = watch(&baton, move |paths| {
            let _ = tx.send(paths);
        })
        .unwrap();
        let file = baton.join("pipelines/p.json");
        // An editor's save (a temporary file renamed over the target), many times over,
        // with the database's noise in between.
        for i in 0..50 {
            let tmp = baton.join("pipelines/p.json.tmp");
            std::fs::write(&tmp, format!("{{\"n\": {i}}}")).unwrap();
            std::fs::rename(&tmp, &file).unwrap();
            std::fs::write(baton.join("baton.db-wal"), "noise").unwrap();
        }
        let first = rx.recv_timeout(Duration::from_secs(10)).expect("a change");
        assert_eq!(first, vec![file.clone()]);
        let mut reports = 1;
        while let Ok(paths) = rx.recv_timeout(DEBOUNCE * 4) {
            assert_eq!(paths, vec![file.clone()], "only the definition file");
            reports += 1;
        }
        assert!(reports <= 5, "50 saves in a burst gave {reports} reports");
    }

    /// `config.toml` saved in place (opened, written, closed) is a change; writes to the
    /// database's files beside it are not, however many.
    #[test]
    fn config_saved_in_place_is_seen_and_database_writes_are_not() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let baton = dir.path().to_path_buf();
        let cfg = baton.join("config.toml");
        std::fs::write(&cfg, "max_parallel = 2\n").unwrap();
        let (tx, rx) = mpsc::channel();
        let _w = watch(&baton, move |paths| {
            let _ = tx.send(paths);
        })
        .unwrap();
        let mut wal = std::fs::File::create(baton.join("baton.db-wal")).unwrap();
        for _ in 0..100 {
            wal.write_all(b"a frame").unwrap();
        }
        assert!(
            rx.recv_timeout(DEBOUNCE * 4).is_err(),
            "the database's writes are no change"
        );
        let mut f = std::fs::OpenOptions::new().append(true).open(&cfg).unwrap();
        f.write_all(b"auto_resume = true\n").unwrap();
        drop(f);
        let seen = rx.recv_timeout(Duration::from_secs(10)).expect("a change");
        assert_eq!(seen, vec![cfg]);
    }

    #[test]
    fn a_snapshot_names_what_changed_since() {
        let dir = tempfile::tempdir().unwrap();
        let baton = dir.path().to_path_buf();
        std::fs::create_dir(baton.join("pipelines")).unwrap();
        std::fs::write(baton.join("pipelines/a.json"), "{}").unwrap();
        std::fs::write(baton.join("pipelines/b.json"), "{}").unwrap();
        std::fs::write(baton.join("baton.db"), "").unwrap();
        let before = Snapshot::take(&baton);
        assert!(before.changed(&Snapshot::take(&baton)).is_empty());
        std::fs::write(baton.join("pipelines/a.json"), "{\"id\": 1}").unwrap();
        std::fs::remove_file(baton.join("pipelines/b.json")).unwrap();
        std::fs::create_dir(baton.join("agents")).unwrap();
        std::fs::write(baton.join("config.toml"), "").unwrap();
        std::fs::write(baton.join("baton.db"), "noise").unwrap();
        let mut changed = before.changed(&Snapshot::take(&baton));
        changed.sort();
        assert_eq!(
            changed,
            [
                "agents",
                "config.toml",
                "pipelines/a.json",
                "pipelines/b.json"
            ]
            .map(|p| baton.join(p))
        );
    }
}
