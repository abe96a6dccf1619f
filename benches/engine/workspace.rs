//! A throwaway workspace in a temp dir (removed when dropped): `baton init`, pipelines
//! written as files, optionally inside a fresh git repository, its board in
//! `.baton/baton.db` or, with [`Ws::with_env`] naming `BATON_DATABASE_URL`, in PostgreSQL.

use crate::proc::{self, Done};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use tempfile::TempDir;

/// Setup commands (init, git, task creation) get this long each.
const SETUP: Duration = Duration::from_secs(120);

/// A workspace under a temp dir. Task worktrees (git) land beside it, inside the same dir.
pub struct Ws {
    pub root: PathBuf,
    pub bin: PathBuf,
    /// Set for every `baton` command run here (the board's URL and password).
    env: Vec<(String, String)>,
    _dir: TempDir,
}

impl Ws {
    /// A plain (non-git) workspace after `baton init`.
    pub fn new(bin: &Path) -> Result<Self, String> {
        Self::with_env(bin, Vec::new())
    }

    /// The same, with `env` set for every `baton` command run in it (`init` included).
    pub fn with_env(bin: &Path, env: Vec<(String, String)>) -> Result<Self, String> {
        let mut dir = tempfile::Builder::new()
            .prefix("baton-bench-")
            .tempdir()
            .map_err(|e| format!("cannot make a temp dir: {e}"))?;
        if std::env::var_os("BATON_BENCH_KEEP").is_some() {
            eprintln!("  keeping {}", dir.path().display());
            dir.disable_cleanup(true);
        }
        let root = dir.path().join("ws");
        std::fs::create_dir(&root).map_err(|e| format!("cannot make {}: {e}", root.display()))?;
        let ws = Self {
            root,
            bin: bin.to_path_buf(),
            env,
            _dir: dir,
        };
        ws.cli(&["init"])?;
        Ok(ws)
    }

    /// A workspace at the root of a fresh git repository with one commit on `main`.
    pub fn git(bin: &Path) -> Result<Self, String> {
        let ws = Self::new(bin)?;
        std::fs::write(ws.root.join("README.md"), "bench\n").map_err(|e| e.to_string())?;
        for args in [
            &["init", "-q", "-b", "main"][..],
            &["config", "user.email", "bench@example.com"],
            &["config", "user.name", "bench"],
            &["add", "-A"],
            &["commit", "-q", "-m", "initial"],
        ] {
            ws.git_cmd(args)?;
        }
        Ok(ws)
    }

    /// Runs git in the workspace.
    pub fn git_cmd(&self, args: &[&str]) -> Result<Done, String> {
        let what = format!("git {}", args.join(" "));
        proc::run(
            Command::new("git").args(args).current_dir(&self.root),
            SETUP,
            &what,
        )?
        .ok(&what)
    }

    /// `baton ARGS` in the workspace, ready to run. A `BATON_DATABASE_URL` of the caller's
    /// own never reaches it: the board is the workspace's file unless [`Ws::with_env`] says.
    pub fn baton(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.bin);
        c.args(args)
            .current_dir(&self.root)
            .env_remove("BATON_DIR")
            .env_remove("BATON_DATABASE_URL")
            .env("NO_COLOR", "1")
            .envs(self.env.iter().map(|(k, v)| (k, v)));
        c
    }

    /// Runs `baton ARGS` as setup (not timed); fails unless it exits 0.
    pub fn cli(&self, args: &[&str]) -> Result<Done, String> {
        let what = format!("baton {}", args.join(" "));
        proc::run(&mut self.baton(args), SETUP, &what)?.ok(&what)
    }

    /// Writes `.baton/config.toml`.
    pub fn config(&self, text: &str) -> Result<(), String> {
        let path = self.root.join(".baton/config.toml");
        std::fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
    }

    /// Writes a pipeline file `.baton/pipelines/<id>.json`.
    pub fn pipeline(&self, p: &Value) -> Result<(), String> {
        let id = p["id"].as_str().unwrap_or("bench");
        let path = self.root.join(format!(".baton/pipelines/{id}.json"));
        std::fs::write(&path, p.to_string())
            .map_err(|e| format!("cannot write {}: {e}", path.display()))
    }

    /// The database, opened directly.
    pub fn db(&self) -> Result<rusqlite::Connection, String> {
        let path = self.root.join(".baton/baton.db");
        let conn = rusqlite::Connection::open(&path)
            .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
        conn.busy_timeout(Duration::from_secs(10))
            .map_err(|e| e.to_string())?;
        Ok(conn)
    }

    /// How many tasks are in each state, from `baton list --json`.
    pub fn states(&self) -> Result<Vec<(String, usize)>, String> {
        let out = self.cli(&["list", "--json"])?;
        let rows: Vec<Value> = serde_json::from_str(&out.stdout)
            .map_err(|e| format!("`baton list --json` printed something else: {e}"))?;
        let mut counts: Vec<(String, usize)> = Vec::new();
        for r in rows {
            let state = r["state"].as_str().unwrap_or("?").to_string();
            match counts.iter_mut().find(|(s, _)| *s == state) {
                Some((_, n)) => *n += 1,
                None => counts.push((state, 1)),
            }
        }
        counts.sort();
        Ok(counts)
    }
}

/// A pipeline: a queue status `q`, then one status per step (named `s1`, `s2`, …), then
/// done, failed and cancelled. `start` goes to the first step; each step goes on to the next
/// status by default.
pub fn pipeline(id: &str, steps: &[Value]) -> Value {
    let mut statuses = vec![json!({"id": "q", "label": "Queue", "kind": "queue"})];
    for (i, step) in steps.iter().enumerate() {
        let n = i + 1;
        statuses.push(json!({"id": format!("s{n}"), "label": format!("Step {n}"), "step": step}));
    }
    for kind in ["done", "failed", "cancelled"] {
        statuses.push(json!({"id": kind, "label": kind, "kind": kind}));
    }
    json!({
        "id": id,
        "name": id,
        "statuses": statuses,
        "transitions": [{"from": "q", "to": "s1", "on": "start"}],
    })
}

/// `n` steps running `true`.
pub fn true_steps(n: usize) -> Vec<Value> {
    vec![json!({"run": "true"}); n]
}
