//! baton: a terminal kanban that runs software work through pipelines of AI agents and scripts.
//!
//! Floors, top to bottom: `cli`/`tui` → `engine` → `exec`, `store`, `workspace` →
//! `pipeline`, `handoff`, `testcounts`.

pub mod agents;
pub mod ansi;
pub mod api;
pub mod cli;
pub mod engine;
pub mod exec;
pub mod forge;
pub mod handoff;
pub mod pipeline;
pub mod questions;
pub mod store;
pub mod testcounts;
pub mod tui;
pub mod workspace;
