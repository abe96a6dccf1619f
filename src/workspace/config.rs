//! `.baton/config.toml`.

use super::WorkspaceError;
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What a graceful engine shutdown does with running steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ShutdownMode {
    /// Interrupt running steps so the next start can resume them.
    #[default]
    Interrupt,
    /// Wait for running steps to finish; start no new ones.
    Drain,
}

/// Workspace configuration. Every field has a default.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Steps running at once.
    pub max_parallel: usize,
    /// Resume interrupted steps at engine start without asking.
    pub auto_resume: bool,
    /// What a graceful shutdown does with running steps.
    pub shutdown: ShutdownMode,
    /// Time between SIGTERM and SIGKILL when a step is stopped.
    #[serde(with = "humantime_serde_compat")]
    pub kill_grace: Duration,
    /// Step timeout when the pipeline gives none.
    #[serde(with = "humantime_serde_compat")]
    pub default_timeout: Duration,
    /// Where task worktrees go (default: beside the checkout).
    pub worktree_root: Option<PathBuf>,
    /// The branch task branches start from (default: the branch checked out at init).
    pub base_branch: Option<String>,
    /// A `schedule` trigger missed while no engine ran fires once at start when its slot is
    /// at most this old; older slots are skipped with an event.
    #[serde(with = "humantime_serde_compat")]
    pub schedule_grace: Duration,
    /// Bytes of one step's log kept (database and context folder); later lines are dropped
    /// with a marker and a warning event. A number of bytes or a size like `"100MiB"`.
    #[serde(deserialize_with = "super::config_size::deserialize")]
    pub max_step_log: u64,
    /// The `[executor]` table as written (see `config_executor.rs`).
    #[serde(rename = "executor")]
    pub executor_table: Option<toml::Table>,
    /// Where steps run when neither the step nor its agent profile says (local when `None`).
    #[serde(skip)]
    pub default_executor: Option<crate::pipeline::ExecutorSpec>,
    /// `baton serve`'s settings (`[serve]`).
    pub serve: ServeConfig,
    /// The forge pull requests go to (`[forge]`); none when the table is absent.
    pub forge: Option<crate::forge::ForgeSettings>,
    /// Where the board lives (`[store]`): SQLite in `.baton/baton.db` unless it names a
    /// PostgreSQL URL.
    pub store: StoreSettings,
    /// How this machine's engine is named and labelled, and how often it says it still runs
    /// (`[engine]`).
    pub engine: EngineSettings,
}

/// `[engine]`: the engine this workspace runs (`baton engine`, or the board's own).
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EngineSettings {
    /// Its name on the board (default: the host name); `baton engine --name` wins.
    pub name: Option<String>,
    /// Its labels (`["gpu"]`); `baton engine --labels` wins.
    pub labels: Vec<String>,
    /// How often it renews its heartbeat; it counts as gone three of these after the last.
    #[serde(with = "humantime_serde_compat")]
    pub heartbeat: Duration,
    /// On a shared board, how long a task waits for its home engine (the one holding its
    /// worktree) once that engine is gone, before another engine takes the task over.
    #[serde(with = "humantime_serde_compat")]
    pub takeover_after: Duration,
}

impl Default for EngineSettings {
    fn default() -> Self {
        Self {
            name: None,
            labels: Vec::new(),
            heartbeat: Duration::from_secs(5),
            takeover_after: Duration::from_secs(30),
        }
    }
}

/// `[store]`: the board's database.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StoreSettings {
    /// `postgres://USER@HOST:PORT/DATABASE`, without a password (that comes from
    /// `PGPASSWORD` or `~/.pgpass`). `BATON_DATABASE_URL` wins over it.
    pub store: Option<String>,
}

/// `[serve]`: the HTTP API's settings.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServeConfig {
    /// The environment variable holding the GitHub webhook secret (never the secret itself).
    pub github_secret_env: String,
    /// The largest request body accepted, in bytes.
    pub max_body_bytes: usize,
}

impl Default for ServeConfig {
    fn default() -> Self {
        Self {
            github_secret_env: "BATON_GITHUB_SECRET".into(),
            max_body_bytes: 1024 * 1024,
        }
    }
}

/// 100 MiB: a build's or a test suite's log is a few MiB at most; a hundred times that is
/// output nobody reads (a loop printing), and the cap bounds what one step costs on disk
/// (the database keeps it once more in its write-ahead log until a checkpoint).
pub const DEFAULT_MAX_STEP_LOG: u64 = 100 << 20;

impl Default for Config {
    fn default() -> Self {
        Self {
            max_parallel: 4,
            auto_resume: false,
            shutdown: ShutdownMode::Interrupt,
            kill_grace: Duration::from_secs(5),
            default_timeout: Duration::from_secs(60 * 60),
            worktree_root: None,
            base_branch: None,
            schedule_grace: Duration::from_secs(60 * 60),
            max_step_log: DEFAULT_MAX_STEP_LOG,
            executor_table: None,
            default_executor: None,
            serve: ServeConfig::default(),
            forge: None,
            store: StoreSettings::default(),
            engine: EngineSettings::default(),
        }
    }
}

impl Config {
    /// Loads a config file; a missing file gives the defaults.
    pub fn load(path: &Path) -> Result<Self, WorkspaceError> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(source) => {
                return Err(WorkspaceError::Io {
                    path: path.to_path_buf(),
                    source,
                });
            }
        };
        // (A leading byte-order mark, which some editors write, is accepted by the parser.)
        let text = text.as_str();
        let mut cfg: Config = toml::from_str(text).map_err(|e| {
            // Name the setting the error is about: the key on the line it points at.
            let at = e.span().map(|s| line_of(text, s.start));
            let key = at
                .and_then(|n| text.lines().nth(n - 1))
                .and_then(|l| l.split_once('='))
                .map(|(k, _)| k.trim().to_string())
                .filter(|k| !k.is_empty() && !k.starts_with('#'));
            let message = match (key, at) {
                (Some(k), Some(n)) => format!("{k} (line {n}): {}", e.message()),
                (None, Some(n)) => format!("{} (at line {n})", e.message()),
                _ => e.message().to_string(),
            };
            WorkspaceError::Config {
                path: path.to_path_buf(),
                message,
            }
        })?;
        let refuse = |key: &str, why: &str| WorkspaceError::Config {
            path: path.to_path_buf(),
            message: format!("{key} {why}{}", key_line(text, key)),
        };
        if cfg.max_parallel == 0 {
            return Err(refuse("max_parallel", "must be at least 1"));
        }
        // A zero timeout would stop every step the moment it starts.
        if cfg.default_timeout.is_zero() {
            return Err(refuse(
                "default_timeout",
                "must be more than zero (leave it out for 1h)",
            ));
        }
        if cfg.max_step_log == 0 {
            return Err(refuse(
                "max_step_log",
                "must be more than zero (leave it out for 100MiB)",
            ));
        }
        if let Some(problem) = cfg
            .forge
            .as_ref()
            .and_then(|f| f.problems().into_iter().next())
        {
            return Err(WorkspaceError::Config {
                path: path.to_path_buf(),
                message: problem,
            });
        }
        if cfg.engine.heartbeat < Duration::from_secs(1) {
            return Err(refuse(
                "heartbeat",
                "under [engine] must be at least 1s (leave it out for 5s)",
            ));
        }
        if let Some(problem) = cfg
            .engine
            .name
            .as_deref()
            .and_then(crate::pipeline::engine_name_problem)
        {
            return Err(refuse("name", &format!("under [engine]: {problem}")));
        }
        if let Some(problem) = cfg
            .engine
            .labels
            .iter()
            .find_map(|l| crate::pipeline::label_problem(l))
        {
            return Err(refuse(
                "labels",
                &format!("under [engine]: label {problem}"),
            ));
        }
        if let Some(url) = &cfg.store.store {
            crate::store::pg::target::check_setting(url, path).map_err(|m| {
                WorkspaceError::Config {
                    path: path.to_path_buf(),
                    message: format!("{m}{}", key_line(text, "store")),
                }
            })?;
        }
        if let Some(table) = &cfg.executor_table {
            cfg.default_executor = super::config_executor::default_executor(table)
                .map_err(|m| refuse("[executor]", &m))?;
        }
        Ok(cfg)
    }
}

/// `[store] store` as written in the workspace's config file, else the user's, with the
/// file it came from; read apart from the other settings, so a board in PostgreSQL is
/// never taken for the SQLite one because some other setting is wrong. A file that is not
/// TOML at all is refused, since it may name a store.
pub fn store_setting(
    workspace: &Path,
    user: Option<&Path>,
) -> Result<Option<(String, PathBuf)>, WorkspaceError> {
    for file in std::iter::once(workspace).chain(super::layered::readable(user)) {
        let text = match std::fs::read_to_string(file) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(source) => {
                return Err(WorkspaceError::Io {
                    path: file.to_path_buf(),
                    source,
                });
            }
        };
        let table: toml::Table = match toml::from_str(&text) {
            Ok(t) => t,
            Err(_) => {
                // Config::load words the error with its line.
                Config::load(file)?;
                continue;
            }
        };
        if let Some(url) = table
            .get("store")
            .and_then(|s| s.get("store"))
            .and_then(toml::Value::as_str)
        {
            return Ok(Some((url.to_string(), file.to_path_buf())));
        }
    }
    Ok(None)
}

/// ` (at line N)` for the line that sets `key`, when one does.
fn key_line(text: &str, key: &str) -> String {
    text.lines()
        .position(|l| {
            l.trim_start()
                .strip_prefix(key)
                .is_some_and(|rest| rest.trim_start().starts_with('='))
        })
        .map(|i| format!(" (at line {})", i + 1))
        .unwrap_or_default()
}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

/// The commented example `baton init` writes.
pub(super) const EXAMPLE: &str = r#"# baton workspace configuration. Every setting is optional.

# Steps running at once.
# max_parallel = 4

# Resume interrupted steps when an engine starts, without asking.
# auto_resume = false

# On SIGTERM/SIGINT: "interrupt" running steps (resume them later) or "drain" (let them finish).
# shutdown = "interrupt"

# Time between SIGTERM and SIGKILL when a step is aborted or times out.
# kill_grace = "5s"

# Step timeout when a pipeline gives none.
# default_timeout = "1h"

# A schedule trigger missed while no engine ran fires once at start if its time is at most
# this old; older runs are skipped (an event says so).
# schedule_grace = "1h"

# The most of one step's log that is kept (in the database and the context folder); past
# it, lines are dropped with one marker line and a warning event, and the step goes on.
# max_step_log = "100MiB"

# This machine's engine on the board: its name (default: the host name), its labels (a
# step with "requires": ["gpu"] runs only on an engine labelled gpu), and how often it says
# it still runs. `baton engine --name N --labels a,b` wins over name and labels.
# [engine]
# name = "devbox"
# labels = ["gpu"]
# heartbeat = "5s"
# On a board several engines share, a task's steps run on the engine holding its worktree;
# once that engine has been gone this long, another takes the task over.
# takeover_after = "30s"

# Where steps run when neither the step nor its agent profile names an executor
# (docs/executors.md): "local" (the default), "docker", "ssh" or "kubernetes", with that
# executor's settings in the table below it.
# [executor]
# default = "docker"
# [executor.docker]
# image = "rust:1.91"
# network = "none"
"#;

/// Durations written as humantime strings ("5s", "15m").
mod humantime_serde_compat {
    use serde::{Deserialize, Deserializer};
    use std::time::Duration;

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let s = String::deserialize(d)?;
        humantime::parse_duration(&s).map_err(|_| {
            serde::de::Error::custom(format!(
                "`{s}` is not a duration; write it like \"30s\", \"5m\" or \"1h\""
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &[u8]) -> Result<Config, WorkspaceError> {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("config.toml");
        std::fs::write(&path, text).expect("write");
        Config::load(&path)
    }

    #[test]
    fn a_byte_order_mark_is_accepted() {
        let cfg = load(b"\xef\xbb\xbfmax_parallel = 2\n").expect("loads");
        assert_eq!(cfg.max_parallel, 2);
    }

    #[test]
    fn a_zero_default_timeout_is_refused_with_its_line() {
        let err = load(b"max_parallel = 2\ndefault_timeout = \"0s\"\n")
            .expect_err("refused")
            .to_string();
        assert!(
            err.contains("default_timeout must be more than zero") && err.contains("(at line 2)"),
            "{err}"
        );
        assert!(load(b"default_timeout = \"1s\"\nkill_grace = \"0s\"\n").is_ok());
    }

    #[test]
    fn a_bad_value_names_its_setting_and_line() {
        for (text, want) in [
            (
                &b"max_parallel = 2\nkill_grace = \"abc\"\n"[..],
                "kill_grace (line 2): `abc` is not a duration",
            ),
            (
                &b"max_parallel = \"8\"\n"[..],
                "max_parallel (line 1): invalid type",
            ),
            (
                &b"\nmax_paralel = 8\n"[..],
                "max_paralel (line 2): unknown field",
            ),
        ] {
            let err = load(text).expect_err("refused").to_string();
            assert!(err.contains(want), "{err}");
        }
    }
}
