//! The ssh executor: a step runs on another machine through the system `ssh` client, so the
//! user's `~/.ssh/config`, agent and keys apply. The task's branch travels by git: pushed to
//! a bare mirror on the host, checked out in a worktree there, its new commits fetched back.
//! See docs/executors.md.

mod executor;
mod host;
mod job;
pub mod quote;
mod run;

pub use executor::Ssh;
pub use host::{CONFIG_ENV, DEFAULT_DIR, HostError, SshHost, last_line};
pub use run::{SshStep, run_dir, signal_remote, start_ssh};
