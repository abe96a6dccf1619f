//! The Kubernetes executor: each step runs as a Job (through kube-rs). The pod clones the
//! task branch from a git remote both sides reach (`git_remote` under
//! `[executor.kubernetes]` in config.toml), runs the step, and pushes its commits back;
//! baton fetches them. See docs/executors.md.

mod check;
mod executor;
pub mod job;
mod step;

pub use check::check_cluster;
pub use executor::{Kubernetes, Settings};
pub use step::KubeStep;
