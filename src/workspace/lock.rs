//! One engine per workspace: an exclusive OS lock on `.baton/engine.lock`.

use super::{Workspace, WorkspaceError};
use std::fs::{File, OpenOptions, TryLockError};
use std::time::{Duration, Instant};

/// Held while an engine runs; released when dropped (or when the process dies).
#[derive(Debug)]
pub struct EngineLock {
    _file: File,
}

fn open(ws: &Workspace) -> Result<File, WorkspaceError> {
    let path = ws.lock_path();
    OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|source| WorkspaceError::Io { path, source })
}

impl EngineLock {
    /// Takes the lock, waiting up to `patience` for a client's brief probe to end.
    pub fn acquire(ws: &Workspace, patience: Duration) -> Result<Self, WorkspaceError> {
        let file = open(ws)?;
        let deadline = Instant::now() + patience;
        loop {
            match file.try_lock() {
                Ok(()) => return Ok(Self { _file: file }),
                Err(TryLockError::WouldBlock) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(TryLockError::WouldBlock) => {
                    return Err(WorkspaceError::EngineRunning(ws.root().to_path_buf()));
                }
                Err(TryLockError::Error(source)) => {
                    return Err(WorkspaceError::Io {
                        path: ws.lock_path(),
                        source,
                    });
                }
            }
        }
    }

    /// Takes the lock, blocking until the process holding it lets go (an engine handing
    /// over); nothing polls meanwhile.
    pub fn wait(ws: &Workspace) -> Result<Self, WorkspaceError> {
        let file = open(ws)?;
        file.lock().map_err(|source| WorkspaceError::Io {
            path: ws.lock_path(),
            source,
        })?;
        Ok(Self { _file: file })
    }

    /// Whether an engine holds the lock now, asked without making the lock file (a reading
    /// command may run where it cannot write): None when it cannot be told.
    pub fn held_now(ws: &Workspace) -> Option<bool> {
        let file = match File::open(ws.lock_path()) {
            Ok(f) => f,
            // No engine has ever run here.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Some(false),
            Err(_) => return None,
        };
        match file.try_lock_shared() {
            Ok(()) => {
                let _ = file.unlock();
                Some(false)
            }
            Err(TryLockError::WouldBlock) => Some(true),
            Err(TryLockError::Error(_)) => None,
        }
    }

    /// True when some process holds the engine lock.
    pub fn is_held(ws: &Workspace) -> bool {
        let Ok(file) = open(ws) else { return false };
        match file.try_lock_shared() {
            Ok(()) => {
                let _ = file.unlock();
                false
            }
            Err(_) => true,
        }
    }
}
