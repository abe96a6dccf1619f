//! An ssh step through the whole product: `baton run` with a pipeline whose step runs on the
//! loopback host (a real sshd), its commit landing on the task branch; a connection lost
//! mid-step is an `error`, retried per the step's `retries`.

mod common;
mod infra;
mod support_sshd;

use common::{Ws, git, task_branch, wait_within};
use std::path::Path;
use std::time::Duration;
use support_sshd::{HOST, Proxy, Sshd};

fn pipeline(remote_dir: &Path, script: &str, retries: u32) -> String {
    serde_json::json!({
        "id": "remote",
        "name": "Remote",
        "statuses": [
            {"id": "todo", "kind": "queue"},
            {"id": "build", "step": {
                "script": script,
                "retries": retries,
                "env": {"GIT_AUTHOR_NAME": "Remote", "GIT_AUTHOR_EMAIL": "r@example.com",
                        "GIT_COMMITTER_NAME": "Remote", "GIT_COMMITTER_EMAIL": "r@example.com"},
                "executor": {"ssh": {"host": HOST, "dir": remote_dir.display().to_string()}}
            }},
            {"id": "done", "kind": "done"},
            {"id": "failed", "kind": "failed"},
            {"id": "cancelled", "kind": "cancelled"}
        ],
        "transitions": []
    })
    .to_string()
}

fn repo() -> Ws {
    let dir = tempfile::tempdir().unwrap();
    common::git_init(&dir.path().join("repo"));
    let ws = Ws::at(dir, "repo");
    ws.baton(&["init"]).assert().success();
    ws.config("worktree_root = \"../worktrees\"\n");
    ws
}

#[test]
fn an_ssh_step_runs_on_the_loopback_host_and_its_commit_lands_on_the_task_branch() {
    let Some(sshd) = Sshd::start() else { return };
    let ws = repo();
    let script = "printf '%s\\n' \"$BATON_TASK_TITLE\" > remote.txt\nhostname > where.txt\ngit add remote.txt && git commit -qm \"remote $BATON_TASK_ID\"\necho ran-remotely";
    ws.pipeline("remote.json", &pipeline(&sshd.remote_dir(), script, 0));
    let title = "it's \"quoted\" $(id)";
    let out = ws
        .baton(&["run", "remote", "--title", title, "--wait", "--json"])
        .env(baton::exec::executor::ssh::CONFIG_ENV, &sshd.client_config)
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    let shown: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{shown:#} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(shown["state"], "done");
    let branch = task_branch(ws.root());
    let branch = branch.as_str();
    assert_eq!(
        git(ws.root(), &["log", "-1", "--format=%s", branch]).trim(),
        "remote 1"
    );
    assert_eq!(
        git(ws.root(), &["show", &format!("{branch}:remote.txt")]),
        format!("{title}\n")
    );
    let logs = ws.ok(&["logs", "1"]);
    assert!(logs.contains("ran-remotely"), "{logs}");
    assert!(logs.contains("pushed to"), "{logs}");
}

#[test]
fn a_lost_connection_is_an_error_and_the_step_is_retried() {
    let Some(sshd) = Sshd::start() else { return };
    let proxy = Proxy::start(sshd.port);
    let user = std::env::var("USER").unwrap_or_else(|_| "root".into());
    sshd.write_client_config(proxy.port, &user);
    let ws = repo();
    let flag = ws.dir.path().join("first-attempt-running");
    // The first attempt waits (to be cut off); the second commits and ends.
    let script = format!(
        "if [ \"$BATON_ATTEMPT\" = 1 ]; then echo first attempt running; touch '{}'; exec sleep 300; fi\necho second > second.txt\ngit add second.txt && git commit -qm second",
        flag.display()
    );
    ws.pipeline("remote.json", &pipeline(&sshd.remote_dir(), &script, 1));
    let id = ws.new_task("remote", "retry me");
    ws.ok(&["start", &id.to_string()]);
    let mut engine = ws.baton(&["engine", "--exit-when-idle"]);
    engine
        .env(baton::exec::executor::ssh::CONFIG_ENV, &sshd.client_config)
        .timeout(Duration::from_secs(120));
    // Cut only once the step's first line has crossed the connection and been stored, so
    // baton knows the step had started (the host ends it when the connection closes).
    let mut logs = ws.baton(&["logs", &id.to_string()]);
    let cutter = std::thread::spawn({
        let flag = flag.clone();
        move || {
            wait_within(
                "the first attempt to start on the host",
                Duration::from_secs(60),
                || {
                    flag.exists()
                        && logs.output().is_ok_and(|o| {
                            String::from_utf8_lossy(&o.stdout).contains("first attempt running")
                        })
                },
            );
            proxy.cut();
            proxy
        }
    });
    engine.assert().success();
    let _proxy = cutter.join().unwrap();
    let shown = ws.show(id);
    assert_eq!(shown["state"], "done", "{shown:#}");
    let steps = shown["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2, "{shown:#}");
    assert_eq!(steps[0]["state"], "failed", "{shown:#}");
    assert!(
        steps[0]["error"]
            .as_str()
            .unwrap_or("")
            .contains("lost the connection"),
        "{shown:#}"
    );
    assert_eq!(steps[1]["state"], "succeeded");
}

#[test]
fn an_engine_killed_mid_step_leaves_no_remote_process_and_the_step_is_interrupted() {
    let Some(sshd) = Sshd::start() else { return };
    let ws = repo();
    let pid_file = ws.dir.path().join("remote-sleep.pid");
    let script = format!(
        "sleep 300 & echo $! > '{}.tmp' && mv '{0}.tmp' '{0}'; wait",
        pid_file.display()
    );
    ws.pipeline("remote.json", &pipeline(&sshd.remote_dir(), &script, 0));
    let id = ws.new_task("remote", "killed engine");
    ws.ok(&["start", &id.to_string()]);
    let mut engine = std::process::Command::new(assert_cmd::cargo::cargo_bin("baton"))
        .current_dir(ws.root())
        .env_remove("BATON_DIR")
        .env(baton::exec::executor::ssh::CONFIG_ENV, &sshd.client_config)
        .arg("engine")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_within(
        "the step to run on the host",
        Duration::from_secs(60),
        || pid_file.exists(),
    );
    let sleeper: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(common::alive(sleeper));
    engine.kill().unwrap();
    engine.wait().unwrap();
    // The engine's end of the connection is gone, so the host ends the step.
    wait_within("the remote step to end", Duration::from_secs(20), || {
        !common::alive(sleeper)
    });
    ws.baton(&["engine", "--exit-when-idle"])
        .env(baton::exec::executor::ssh::CONFIG_ENV, &sshd.client_config)
        .timeout(Duration::from_secs(60))
        .assert()
        .success();
    assert_eq!(ws.show(id)["state"], "interrupted");
}
