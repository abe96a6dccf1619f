//! `baton config show`: every setting's effective value and where it came from.

use super::{Failure, Outcome, exit, workspace};
use crate::workspace::layered::{explain, user_config_path};
use clap::Subcommand;
use std::path::PathBuf;

/// `baton config …`.
#[derive(Debug, Subcommand)]
pub enum ConfigCmd {
    /// Each setting's effective value and its source: default, your user config, or the
    /// workspace's `.baton/config.toml` (which wins).
    Show,
}

/// Runs `baton config show`.
pub fn run(dir: Option<&PathBuf>, cmd: ConfigCmd) -> Outcome {
    let ConfigCmd::Show = cmd;
    let user = user_config_path();
    let ws = workspace(dir).ok();
    let ws_file = match &ws {
        Some(w) => w.config_path(),
        // No workspace: only the user's file and the defaults apply.
        None => PathBuf::from(".baton/config.toml (no workspace here)"),
    };
    let mut shown = explain(user.as_deref(), &ws_file).map_err(|e| Failure::new(e.to_string()))?;
    // `baton init` records the branch checked out then; it applies when no file sets one.
    let recorded = ws
        .as_ref()
        .filter(|w| w.db_path().exists())
        .and_then(|w| crate::engine::Reader::open(w).ok())
        .and_then(|r| r.recorded_base_branch().ok().flatten());
    if let (Some(branch), Some(slot)) = (
        recorded,
        shown
            .iter_mut()
            .find(|s| s.key == "base_branch" && s.source == "default"),
    ) {
        slot.value = toml::Value::String(branch).to_string();
        slot.source = "recorded by `baton init`".into();
    }
    let readable = crate::workspace::layered::readable(user.as_deref()).is_some();
    match &user {
        Some(u) if !readable => outln!(
            "# user config: {} (not readable here; skipped)",
            u.display()
        ),
        Some(u) if u.is_file() => outln!("# user config: {}", u.display()),
        Some(u) => outln!("# user config: {} (not there)", u.display()),
        None => outln!("# user config: none ($XDG_CONFIG_HOME and $HOME are unset)"),
    }
    match &ws {
        Some(w) => outln!("# workspace config: {} (wins)", w.config_path().display()),
        None => outln!("# workspace config: none (not in a workspace; `baton init` makes one)"),
    }
    let width = shown
        .iter()
        .map(|s| s.key.len() + s.value.len() + 3)
        .max()
        .unwrap_or(0);
    for s in shown {
        let line = format!("{} = {}", s.key, s.value);
        outln!(
            "{:<width$}  # {}",
            crate::ansi::strip(&line),
            crate::ansi::strip(&s.source)
        );
    }
    Ok(exit::OK)
}
