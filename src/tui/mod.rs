//! The terminal UI: a live kanban of a workspace's tasks with a step/log pane.
//!
//! Roles: `event` (what reaches the reducer and what it asks for), `app` + `keys` (the
//! state and its one reducer), `board`/`logview`/`modal` (state by area), `keymap` +
//! `action` (keys as data), `ui` (pure drawing), `loader` (reads on a thread),
//! `runner` (the event loop, with the engine client), `terminal`,
//! `notify`, `theme`, `logging`, `demo`.

pub mod agent_health;
pub mod answer_form;
pub mod app;
pub mod board;
pub mod demo;
mod diff_stat;
pub mod discard;
pub mod event;
mod frame_writer;
pub mod graph_view;
pub mod intent;
pub mod keymap;
pub mod keymap_doc;
mod keys;
pub mod keys_file;
pub mod launch;
pub mod loader;
mod logging;
pub mod logview;
pub mod modal;
pub mod notify;
pub mod pager;
pub mod playground;
pub mod playground_run;
mod runner;
pub mod settings;
pub mod suspend;
mod takeover;
pub mod task_menus;
pub mod terminal;
pub mod theme;
pub mod ui;

use std::path::PathBuf;

/// `baton` with no subcommand: opens the TUI on the workspace (or on a throwaway demo
/// workspace with `demo`). Returns the process exit code.
/// The person the board's changes are recorded under (decided when the board starts).
pub(crate) fn person() -> String {
    crate::workspace::person::known()
        .unwrap_or("tui")
        .to_string()
}

pub fn main(dir: Option<&PathBuf>, demo: bool) -> i32 {
    let out = if demo {
        crate::engine::board::sqlite_only();
        demo::create().and_then(|d| runner::run(&d.ws))
    } else {
        crate::workspace::Workspace::find(dir.map(PathBuf::as_path)).and_then(|ws| runner::run(&ws))
    };
    match out {
        Ok(()) => 0,
        Err(e) => {
            // stderr may be a terminal that has gone away: never panic over it.
            use std::io::Write;
            let _ = writeln!(std::io::stderr(), "baton: {e}");
            1
        }
    }
}
