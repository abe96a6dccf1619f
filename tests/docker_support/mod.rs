//! Shared by the real-daemon docker tests: the test images (built locally FROM scratch with
//! a static busybox, so no registry is needed), pipelines, and container queries.
#![allow(dead_code)]

use crate::common::Ws;
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

pub const IMAGE: &str = "baton-test-busybox:1";

/// The test image, built once; `None` (with a message) where no daemon can be used.
pub fn image() -> Option<&'static str> {
    static READY: OnceLock<Option<&'static str>> = OnceLock::new();
    *READY.get_or_init(|| {
        let version = Command::new("docker")
            .args(["version", "--format", "{{.Server.Version}}"])
            .output();
        if !version.as_ref().is_ok_and(|o| o.status.success()) {
            crate::infra::missing(
                "a Docker daemon",
                "start one with `dockerd`, or run .ci/run",
            );
            return None;
        }
        let have = Command::new("docker")
            .args(["image", "inspect", IMAGE])
            .output()
            .is_ok_and(|o| o.status.success());
        if have {
            return Some(IMAGE);
        }
        let busybox = ["/bin/busybox", "/usr/bin/busybox"]
            .into_iter()
            .find(|p| std::path::Path::new(p).exists());
        let Some(busybox) = busybox else {
            crate::infra::missing(
                "a static busybox to build the docker test image",
                "apt-get install busybox-static",
            );
            return None;
        };
        let dir = tempfile::tempdir().unwrap();
        std::fs::copy(busybox, dir.path().join("busybox")).unwrap();
        std::fs::write(
            dir.path().join("Dockerfile"),
            "FROM scratch\nCOPY busybox /bin/busybox\nRUN [\"/bin/busybox\",\"--install\",\"-s\",\"/bin\"]\n",
        )
        .unwrap();
        let built = Command::new("docker")
            .args(["build", "-q", "-t", IMAGE])
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(
            built.status.success(),
            "building the test image failed: {}",
            String::from_utf8_lossy(&built.stderr)
        );
        Some(IMAGE)
    })
}

/// A pipeline whose `work` step runs `script` in the test image, then waits at a gate.
pub fn pipeline(script: &str, extra: &str) -> String {
    let step = serde_json::json!({
        "run": script,
        "executor": {"docker": {"image": IMAGE, "network": "none"}},
    });
    pipeline_of(step, extra)
}

/// A pipeline whose `work` step is `step` (plus the `extra` members), then a gate.
pub fn pipeline_of(step: serde_json::Value, extra: &str) -> String {
    let mut step = step.to_string();
    if !extra.is_empty() {
        step.insert_str(step.len() - 1, &format!(", {extra}"));
    }
    format!(
        r#"{{"id": "d", "name": "Docker",
  "statuses": [
    {{"id": "todo", "kind": "queue"}},
    {{"id": "work", "step": {step}}},
    {{"id": "review", "kind": "gate"}},
    {{"id": "done", "kind": "done"}},
    {{"id": "failed", "kind": "failed"}},
    {{"id": "cancelled", "kind": "cancelled"}}
  ],
  "transitions": [{{"from": "review", "to": "done", "on": "approve", "hooks": [{{"merge": {{}}}}]}}]
}}"#
    )
}

/// Removes what a failed test left on the daemon, so a panic never leaves a container
/// waiting for ever.
pub struct Cleanup(pub std::path::PathBuf);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let filter = format!("label=baton.workspace={}", self.0.display());
        let out = Command::new("docker")
            .args(["ps", "-aq", "--filter", &filter])
            .output();
        if let Ok(out) = out {
            for id in String::from_utf8_lossy(&out.stdout).lines() {
                let _ = Command::new("docker").args(["rm", "-f", id]).output();
            }
        }
    }
}

/// Containers of this workspace's task `id`, running or not.
pub fn containers(ws: &Ws, id: i64, running_only: bool) -> Vec<String> {
    let mut args = vec!["ps", "-q", "--no-trunc"];
    if !running_only {
        args.push("-a");
    }
    let task = format!("label=baton.task={id}");
    let root = format!("label=baton.workspace={}", ws.root().display());
    args.extend(["--filter", &task, "--filter", &root]);
    let out = Command::new("docker").args(&args).output().unwrap();
    assert!(
        out.status.success(),
        "docker ps: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

pub fn run_wait(ws: &Ws, title: &str) -> (Option<i32>, serde_json::Value) {
    let out = ws
        .baton(&["run", "d", "--title", title, "--wait", "--json"])
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    let shown = serde_json::from_slice(&out.stdout).unwrap_or_else(|_| {
        panic!(
            "no json: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code(), shown)
}

/// A stand-in for a CLI coding agent, baked into an image of its own: it says where it
/// runs, quotes its prompt, leaves a file in the worktree and names its outcome.
const FAKE_AGENT: &str = r#"#!/bin/sh
echo "agent in $(pwd) as $(id -u) on $(hostname)"
printf '%s\n' "$1" | head -n 2
if [ -e /work ] || [ -e /root/.cargo ]; then echo "sees the host"; else echo "sees only its sandbox"; fi
echo "notes by the sandboxed agent" > AGENT_NOTES.md
echo "OUTCOME: success"
"#;

pub const AGENT_IMAGE: &str = "baton-test-agent:1";

/// The agent image, built once on top of the test image.
pub fn agent_image() -> Option<&'static str> {
    static READY: OnceLock<Option<&'static str>> = OnceLock::new();
    *READY.get_or_init(|| {
        image()?;
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("fake-agent"), FAKE_AGENT).unwrap();
        std::fs::write(
            dir.path().join("Dockerfile"),
            format!("FROM {IMAGE}\nCOPY fake-agent /bin/fake-agent\nRUN [\"/bin/chmod\",\"755\",\"/bin/fake-agent\"]\n"),
        )
        .unwrap();
        let built = Command::new("docker")
            .args(["build", "-q", "-t", AGENT_IMAGE])
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(
            built.status.success(),
            "building the agent image failed: {}",
            String::from_utf8_lossy(&built.stderr)
        );
        Some(AGENT_IMAGE)
    })
}
