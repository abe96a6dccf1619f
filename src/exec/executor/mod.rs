//! Where a step runs.

pub mod ssh;
