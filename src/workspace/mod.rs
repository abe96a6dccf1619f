//! The `.baton/` folder: discovery, layout, configuration and the engine lock.

mod config;
mod config_executor;
pub mod config_size;
pub mod git;
pub mod git_queue;
mod git_retry;
pub mod git_shared;
pub mod layered;
mod lock;
pub mod logging;
pub mod person;
pub mod scratch;
pub mod watch;

pub use config::{Config, ShutdownMode, StoreSettings, store_setting};
pub use git_queue::GitQueue;
pub use lock::EngineLock;

use std::path::{Path, PathBuf};

/// The name of the workspace folder.
pub const DIR_NAME: &str = ".baton";

/// Problems finding or creating a workspace.
#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    #[error(
        "no baton workspace in {0} or any parent folder — run `baton init` there, or pass --dir"
    )]
    NotFound(PathBuf),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{path}: {message} — fix the file (`baton init` in an empty folder writes a commented example)"
    )]
    Config { path: PathBuf, message: String },
    #[error("{0} exists but is not a folder — move it aside, then run `baton init` again")]
    NotAFolder(PathBuf),
    #[error("another baton engine is running in {0} — attach to it with `baton`, or stop it first")]
    EngineRunning(PathBuf),
}

/// A located workspace: the folder that holds `.baton/`.
#[derive(Debug, Clone)]
pub struct Workspace {
    root: PathBuf,
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> WorkspaceError + '_ {
    move |source| WorkspaceError::Io {
        path: path.to_path_buf(),
        source,
    }
}

impl Workspace {
    /// Walks up from `start` to the nearest folder holding `.baton/`.
    pub fn discover(start: &Path) -> Result<Self, WorkspaceError> {
        let start = start.canonicalize().map_err(io_err(start))?;
        let mut dir = Some(start.as_path());
        while let Some(d) = dir {
            if d.join(DIR_NAME).is_dir() {
                return Ok(Self {
                    root: d.to_path_buf(),
                });
            }
            dir = d.parent();
        }
        Err(WorkspaceError::NotFound(start))
    }

    /// The workspace a front end is pointed at: `dir` (`--dir`, `BATON_DIR`) when given,
    /// else the nearest one up from the current folder; else the sentence saying why not.
    pub fn find(dir: Option<&Path>) -> Result<Self, String> {
        match dir {
            Some(d) if d.join(DIR_NAME).is_dir() => Ok(Self::at(d)),
            Some(d) if !d.exists() => Err(format!(
                "--dir {} does not exist — give the folder that holds .baton",
                d.display()
            )),
            Some(d) if !d.is_dir() => Err(format!(
                "--dir {} is a file, not a folder — give the folder that holds .baton",
                d.display()
            )),
            Some(d) => Err(format!(
                "{} has no .baton folder — run `baton init` there first",
                d.display()
            )),
            None => {
                let cwd = std::env::current_dir()
                    .map_err(|e| format!("cannot read the current folder: {e}"))?;
                Self::discover(&cwd).map_err(|e| e.to_string())
            }
        }
    }

    /// Uses `root` as a workspace whether or not `.baton/` exists yet.
    pub fn at(root: &Path) -> Self {
        let root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
        Self { root }
    }

    /// Creates `.baton/` with a config, a `.gitignore` and example folders. Idempotent:
    /// existing files are left as they are. Returns true when it created the folder.
    pub fn init(root: &Path) -> Result<(Self, bool), WorkspaceError> {
        let ws = Self::at(root);
        let dir = ws.dir();
        if dir.exists() && !dir.is_dir() {
            return Err(WorkspaceError::NotAFolder(dir));
        }
        let created = !dir.exists();
        for d in [dir.clone(), ws.pipelines_dir(), ws.agents_dir()] {
            std::fs::create_dir_all(&d).map_err(|e| {
                if e.kind() == std::io::ErrorKind::AlreadyExists {
                    WorkspaceError::NotAFolder(d.clone())
                } else {
                    io_err(&d)(e)
                }
            })?;
        }
        let files = [
            (dir.join(".gitignore"), GITIGNORE),
            (ws.config_path(), config::EXAMPLE),
        ];
        for (path, text) in files {
            if !path.exists() {
                std::fs::write(&path, text).map_err(io_err(&path))?;
            }
        }
        Ok((ws, created))
    }

    /// The folder holding `.baton/`.
    pub fn root(&self) -> &Path {
        &self.root
    }
    /// `.baton/` itself.
    pub fn dir(&self) -> PathBuf {
        self.root.join(DIR_NAME)
    }
    /// The database file.
    pub fn db_path(&self) -> PathBuf {
        self.dir().join("baton.db")
    }
    /// Workspace pipeline files.
    pub fn pipelines_dir(&self) -> PathBuf {
        self.dir().join("pipelines")
    }
    /// Workspace agent profiles.
    pub fn agents_dir(&self) -> PathBuf {
        self.dir().join("agents")
    }
    /// `config.toml`.
    pub fn config_path(&self) -> PathBuf {
        self.dir().join("config.toml")
    }
    /// Where tracing logs go.
    pub fn logs_dir(&self) -> PathBuf {
        self.dir().join("logs")
    }
    /// The per-task context folder (`BATON_CONTEXT_DIR`).
    pub fn context_dir(&self, task_id: i64) -> PathBuf {
        self.dir().join("context").join(task_id.to_string())
    }
    /// The engine lock file.
    pub fn lock_path(&self) -> PathBuf {
        self.dir().join("engine.lock")
    }

    /// Reads `config.toml` layered over the user's config (defaults when both are absent).
    pub fn config(&self) -> Result<Config, WorkspaceError> {
        layered::load(layered::user_config_path().as_deref(), &self.config_path())
    }
}

const GITIGNORE: &str = "# baton's runtime files; pipelines/ and agents/ are meant to be committed.\n\
baton.db*\nengine.lock\nengine.sock\ntoken\ntokens\nlogs/\ncontext/\n";
