//! What the forge tests set up alike: a git workspace beside a bare repository that is its
//! `origin` over file://, executable fake agents, webhook signatures, and waits on a task's
//! status. Shared by the forge tests, which declare `mod common;` beside it.
#![allow(dead_code)]

use crate::common::{self, Ws, git, git_init};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// HMAC-SHA256 of `body` under `secret`, in lowercase hex (how the forges sign deliveries).
pub fn hmac_hex(secret: &str, body: &[u8]) -> String {
    use hmac::{Hmac, Mac};
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(body);
    mac.finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A git workspace (`repo` in a temp dir) and, beside it, an empty bare repository
/// `remote.git` on `main`; the workspace does not point at it yet ([`push_origin`] does).
pub fn workspace_and_bare() -> (Ws, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let bare = dir.path().join("remote.git");
    std::fs::create_dir_all(&bare).unwrap();
    git(&bare, &["init", "-q", "--bare", "-b", "main"]);
    let ws = Ws::at(dir, "repo");
    git_init(ws.root());
    (ws, bare)
}

/// Makes `bare` the workspace's `origin` over file:// and pushes `main` there.
pub fn push_origin(ws: &Ws, bare: &Path) {
    let url = format!("file://{}", bare.display());
    git(ws.root(), &["remote", "add", "origin", &url]);
    git(ws.root(), &["push", "-q", "origin", "main"]);
}

/// `text` as the executable script `name` in the workspace's temp dir; its path.
pub fn script(ws: &Ws, name: &str, text: &str) -> PathBuf {
    let path = ws.dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    std::process::Command::new("chmod")
        .arg("+x")
        .arg(&path)
        .status()
        .unwrap();
    path
}

/// `baton show ID --json`, or null where it printed no JSON.
pub fn show(ws: &Ws, id: i64) -> Value {
    let out = ws
        .baton(&["show", &id.to_string(), "--json"])
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
}

/// Waits (at most `limit`) for task `id` to be at `status`; the task as last shown.
pub fn wait_status(ws: &Ws, id: i64, status: &str, limit: Duration) -> Value {
    let mut last = Value::Null;
    common::wait_within(&format!("task {id} at {status}"), limit, || {
        last = show(ws, id);
        last["status"] == status
    });
    last
}
