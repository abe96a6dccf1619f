//! Shared helpers for tests that drive the real `baton` binary.
#![allow(dead_code)]

use assert_cmd::Command;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// A temporary workspace with `.baton/` initialised.
pub struct Ws {
    pub dir: tempfile::TempDir,
    root: PathBuf,
}

impl Ws {
    /// `baton init` in a fresh temp dir.
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().to_path_buf();
        let ws = Self { dir, root };
        ws.baton(&["init"]).assert().success();
        ws
    }

    /// A workspace in `sub` of a temp dir the caller prepared (not initialised).
    pub fn at(dir: tempfile::TempDir, sub: &str) -> Self {
        let root = dir.path().join(sub);
        Self { dir, root }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The board's bytes on disk, as text: the database and its write-ahead log, which
    /// holds the newest writes between commands.
    pub fn board_bytes(&self) -> String {
        ["baton.db", "baton.db-wal"]
            .iter()
            .filter_map(|f| std::fs::read(self.root.join(".baton").join(f)).ok())
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
            .collect()
    }

    /// A `baton` command running in the workspace.
    pub fn baton(&self, args: &[&str]) -> Command {
        let mut cmd = Command::cargo_bin("baton").expect("binary");
        cmd.current_dir(&self.root)
            .env_remove("BATON_DIR")
            // The user's own ~/.config/baton never leaks into a test.
            .env("XDG_CONFIG_HOME", self.dir.path().join("xdg"))
            .env("NO_COLOR", "1")
            .args(args);
        cmd
    }

    /// Gives task `id` a title no front end takes any more (control characters, escape
    /// sequences), as a board written by an older baton, or imported, may hold.
    pub fn store_raw_title(&self, id: i64, title: &str) {
        let db = rusqlite::Connection::open(self.root.join(".baton/baton.db")).expect("board");
        let n = db
            .execute(
                "UPDATE tasks SET title = ?1 WHERE id = ?2",
                rusqlite::params![title, id],
            )
            .expect("title written");
        assert_eq!(n, 1, "task {id} exists");
    }

    /// Adds a pipeline file to `.baton/pipelines/`.
    pub fn pipeline(&self, file: &str, json: &str) -> PathBuf {
        let path = self.root.join(".baton/pipelines").join(file);
        std::fs::write(&path, json).expect("write pipeline");
        path
    }

    /// Writes `.baton/config.toml`.
    pub fn config(&self, toml: &str) {
        std::fs::write(self.root.join(".baton/config.toml"), toml).expect("config");
    }

    /// Runs `baton` and returns stdout, asserting success.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.baton(args).output().expect("run baton");
        assert!(
            out.status.success(),
            "baton {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("utf8")
    }

    /// `baton new TITLE --pipeline P`, returning the id.
    pub fn new_task(&self, pipeline: &str, title: &str) -> i64 {
        self.ok(&["new", title, "--pipeline", pipeline])
            .trim()
            .parse()
            .expect("new prints the id")
    }

    /// `show --json`.
    pub fn show(&self, id: i64) -> Value {
        serde_json::from_str(&self.ok(&["show", &id.to_string(), "--json"])).expect("json")
    }

    /// Runs an engine until nothing runs or is queued.
    pub fn drain(&self) {
        self.baton(&["engine", "--exit-when-idle"])
            .timeout(std::time::Duration::from_secs(60))
            .assert()
            .success();
    }
}

/// A pipeline with one script step before a review gate.
pub const GATE: &str = r#"{
  "id": "gate",
  "name": "Gate test",
  "statuses": [
    {"id": "todo", "kind": "queue"},
    {"id": "build", "step": {"script": "echo out-line\necho err-line >&2\nprintf '%s' \"$BATON_TASK_TITLE\" > title.txt\nprintf '%s' \"$BATON_NOTE\" > note.txt"}},
    {"id": "review", "kind": "gate"},
    {"id": "done", "kind": "done"},
    {"id": "failed", "kind": "failed"},
    {"id": "cancelled", "kind": "cancelled"}
  ],
  "transitions": [
    {"from": "review", "to": "build", "on": "reject"}
  ]
}"#;

/// Starts `baton engine` in the workspace as a child process (output discarded).
pub fn spawn_engine(ws: &Ws) -> std::process::Child {
    std::process::Command::new(assert_cmd::cargo::cargo_bin("baton"))
        .current_dir(ws.root())
        .env_remove("BATON_DIR")
        .args(["engine"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("engine starts")
}

/// Stops an engine gracefully (SIGTERM) and reaps it.
pub fn stop(mut engine: std::process::Child) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(engine.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    engine.wait().unwrap();
}

/// Polls another process's progress until `cond` holds (at most 30 s).
pub fn wait_for(what: &str, cond: impl FnMut() -> bool) {
    wait_within(what, std::time::Duration::from_secs(30), cond)
}

/// Polls another process's progress until `cond` holds, failing after `limit`.
pub fn wait_within(what: &str, limit: std::time::Duration, mut cond: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    while !cond() {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// True while the process runs (a zombie is not alive).
pub fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| !s[s.rfind(')').unwrap() + 2..].starts_with('Z'))
        .unwrap_or(false)
}

/// Runs git in `dir`; its stdout, or the test fails with git's stderr.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A bare repository (`remote.git` in `dir`) holding one commit on `main`, as a team's
/// shared remote.
pub fn bare_remote(dir: &Path) -> std::path::PathBuf {
    let seed = dir.join("seed");
    git_init(&seed);
    let bare = dir.join("remote.git");
    git(
        dir,
        &["init", "-q", "--bare", "-b", "main", bare.to_str().unwrap()],
    );
    git(&seed, &["push", "-q", bare.to_str().unwrap(), "main"]);
    bare
}

/// The task branches (`baton/…`) of the repository at `dir`, one a line, trimmed: the one
/// branch a test with one task made.
pub fn task_branch(dir: &Path) -> String {
    git(
        dir,
        &[
            "for-each-ref",
            "--format=%(refname:short)",
            "refs/heads/baton/",
        ],
    )
    .trim()
    .to_string()
}

/// A new git repository at `root` on `main` with one commit.
pub fn git_init(root: &Path) {
    std::fs::create_dir_all(root).unwrap();
    git(root, &["init", "-q", "-b", "main"]);
    git(root, &["config", "user.name", "Test"]);
    git(root, &["config", "user.email", "test@example.com"]);
    std::fs::write(root.join("README"), "hello\n").unwrap();
    git(root, &["add", "."]);
    git(root, &["commit", "-qm", "init"]);
}

/// The `baton` binary at a path every user can run, for tests that run it as `nobody`: the
/// build's own copy may sit under a folder other users cannot enter (a clone in `/root`, or
/// in a private temporary folder). One copy per build, in a world-readable temporary folder,
/// written under a temporary name and renamed, so runs side by side never see half a file.
pub fn baton_for_any_user() -> PathBuf {
    use std::hash::{Hash, Hasher};
    use std::os::unix::fs::PermissionsExt;
    static COPY: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    COPY.get_or_init(|| {
        let built = assert_cmd::cargo::cargo_bin("baton");
        let mut h = std::collections::hash_map::DefaultHasher::new();
        built.hash(&mut h);
        std::fs::metadata(&built)
            .and_then(|m| m.modified())
            .expect("the built baton")
            .hash(&mut h);
        let dir = std::env::temp_dir().join("baton-any-user");
        std::fs::create_dir_all(&dir).expect("a folder for the copy");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let bin = dir.join(format!("baton-{:016x}", h.finish()));
        if !bin.exists() {
            let part = dir.join(format!("part-{}", std::process::id()));
            std::fs::copy(&built, &part).expect("copy baton");
            std::fs::set_permissions(&part, std::fs::Permissions::from_mode(0o755)).unwrap();
            std::fs::rename(&part, &bin).expect("rename the copy");
        }
        bin
    })
    .clone()
}
