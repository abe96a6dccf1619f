//! Step executors. An executor runs one step and reports lines and a result; it never
//! touches the store — the engine does that.

pub mod agent;
pub mod executor;
pub mod guard;
mod lines;
pub mod process;
pub mod redact;
pub mod safe_file;
mod script;
pub mod sigpipe;
pub mod warden;

pub use script::run_shell;

use crate::store::Stream;
use std::path::PathBuf;
use std::time::Duration;
use tokio::sync::mpsc;

/// One line of output on its way to the log writer.
pub type LogSender = mpsc::Sender<(Stream, String)>;

/// Everything an executor needs besides the step itself.
#[derive(Debug, Clone)]
pub struct StepEnv {
    /// Environment variables for the step (task text travels only here).
    pub vars: Vec<(String, String)>,
    /// The directory the step runs in.
    pub workdir: PathBuf,
    /// Per-attempt limit.
    pub timeout: Duration,
    /// Time between SIGTERM and SIGKILL.
    pub kill_grace: Duration,
}

impl StepEnv {
    /// The value the step gets for `name`: the last one given, as the step sees it.
    pub fn var(&self, name: &str) -> Option<&str> {
        self.vars
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// The identity of a started process, persisted for orphan cleanup.
#[derive(Debug, Clone, Copy)]
pub struct Spawned {
    pub pid: u32,
    /// Field 22 of `/proc/<pid>/stat` (clock ticks since boot), where readable.
    pub start_time: Option<u64>,
}

/// How a step's process ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finish {
    /// Exited with this code.
    Exited(i32),
    /// Killed by a signal it did not ask for.
    Signalled(i32),
    /// Ran past its timeout and was stopped.
    TimedOut,
    /// Stopped on request (abort or engine shutdown).
    Cancelled,
    /// Could not be started.
    SpawnFailed(String),
}
