//! The built-in `feature` pipeline's pull request loop through the real binary: agent steps
//! (a script that speaks the Claude stream format and continues its session), the human
//! approvals, the pull request opened on a forge stub (written from GitHub's documented REST
//! and webhook formats — a stub, not the service), failed checks sending the coder back with
//! the failure, the rework pushed to the same pull request on a bare repository over
//! file://, the merge seen by polling, and the branch deleted on the remote.

mod api_common;
mod common;
#[path = "support/forge_setup.rs"]
mod forge_setup;
mod infra;
mod stubs;

use api_common::Server;
use common::{Ws, git, task_branch};
use forge_setup::{hmac_hex, push_origin, script, show, workspace_and_bare};
use reqwest::blocking::Client;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;
use stubs::forge::ForgeStub;

const TOKEN: &str = "forge-loop-token-0123456789";
const SECRET: &str = "forge-loop-secret";
/// A step that compiles (cargo test) under a loaded machine may take a while.
const LIMIT: Duration = Duration::from_secs(180);

/// A fake agent: a fresh session, or `--resume SESSION`; then the prompt. It records what
/// it was given, and the coder leaves a change in the worktree.
const AGENT: &str = r###"#!/bin/sh
if [ "$1" = "--resume" ]; then s="$2"; shift 2; else s="$AGENT_ROLE-$$"; fi
printf '=== %s %s\n%s\n' "$AGENT_ROLE" "$s" "$1" >> "$PROMPTS"
if [ "$AGENT_ROLE" = coder ]; then echo "coder $s $$" >> work.txt; fi
printf '%s\n' "{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":false,\"num_turns\":1,\"result\":\"## What Was Done\\nWorked on it.\\n\",\"session_id\":\"$s\"}"
"###;

/// A git workspace whose `origin` is a bare repository over file://, with `[forge]`
/// pointing at `api` (polling every second). Returns it, the bare repository and the file
/// the agents write their prompts to.
fn setup(api: &str) -> (Ws, PathBuf, PathBuf) {
    let (ws, bare) = workspace_and_bare();
    // The feature pipeline's test step is `cargo test`: a crate with one test.
    std::fs::write(
        ws.root().join("Cargo.toml"),
        "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .unwrap();
    std::fs::create_dir_all(ws.root().join("src")).unwrap();
    std::fs::write(
        ws.root().join("src/lib.rs"),
        "#[test]\nfn works() {\n    assert_eq!(1 + 1, 2);\n}\n",
    )
    .unwrap();
    std::fs::write(ws.root().join(".gitignore"), "target/\n").unwrap();
    git(ws.root(), &["add", "."]);
    git(ws.root(), &["commit", "-qm", "a crate"]);
    push_origin(&ws, &bare);
    ws.baton(&["init"]).assert().success();
    let prompts = ws.dir.path().join("prompts.txt");
    let script = script(&ws, "agent.sh", AGENT);
    for role in ["planner", "coder"] {
        let profile = json!({"id": role, "backend": "command", "format": "claude-stream-json",
            "argv": [script, "{{message}}"],
            "session": "continue", "resume_argv": [script, "--resume", "{{session}}", "{{message}}"],
            "env": {"AGENT_ROLE": role, "PROMPTS": prompts},
            "prompt_template": "Task: {{title}}\n{{prompt}}\n{{failure}}\n{{note}}"});
        std::fs::write(
            ws.root().join(format!(".baton/agents/{role}.json")),
            profile.to_string(),
        )
        .unwrap();
    }
    ws.config(&format!(
        "[forge]\nkind = \"github\"\napi_url = \"{api}\"\nrepo = \"acme/app\"\ntoken_env = \"FORGE_LOOP_TOKEN\"\nwebhook_secret_env = \"FORGE_LOOP_SECRET\"\npoll = \"1s\"\n"
    ));
    (ws, bare, prompts)
}

fn wait_status(ws: &Ws, id: i64, status: &str) -> Value {
    forge_setup::wait_status(ws, id, status, LIMIT)
}

fn remote_head(bare: &Path, branch: &str) -> Option<String> {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(bare)
        .args([
            "rev-parse",
            "--verify",
            "-q",
            &format!("refs/heads/{branch}"),
        ])
        .output()
        .unwrap();
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The prompts the agent of `role` was given, in order, with the session each one used.
fn prompts_of(file: &Path, role: &str) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    text.split("=== ")
        .filter_map(|chunk| {
            let (head, body) = chunk.split_once('\n')?;
            let (who, session) = head.split_once(' ')?;
            (who == role).then(|| (session.to_string(), body.to_string()))
        })
        .collect()
}

fn pr(state: &str, merged: bool, sha: &str) -> Value {
    json!({"number": 12, "html_url": "https://github.com/acme/app/pull/12", "state": state,
        "draft": false, "merged": merged, "head": {"sha": sha, "ref": "x"}})
}

fn github_answers(stub: &ForgeStub) {
    stub.answer("GET", "/repos/acme/app/pulls", 200, json!([]));
    stub.answer(
        "POST",
        "/repos/acme/app/pulls",
        201,
        pr("open", false, "abc"),
    );
    stub.answer(
        "PATCH",
        "/repos/acme/app/pulls/12",
        200,
        pr("open", false, "def"),
    );
    stub.answer(
        "GET",
        "/repos/acme/app/pulls/12",
        200,
        pr("open", false, "abc"),
    );
    stub.answer("GET", "/repos/acme/app/issues", 200, json!([]));
    for sha in ["abc", "def"] {
        stub.answer(
            "GET",
            &format!("/repos/acme/app/commits/{sha}/check-runs"),
            200,
            json!({"total_count": 1, "check_runs": [{"name": "test", "status": "queued"}]}),
        );
    }
}

#[test]
fn the_feature_pipeline_lands_through_a_pull_request_and_the_coder_reworks_failed_checks() {
    let (api, stub) = stubs::forge::start();
    github_answers(&stub);
    let (ws, bare, prompts) = setup(&api.url);
    let target = ws.dir.path().join("cargo-target");
    let target = target.to_str().unwrap();
    let run = |args: &[&str]| {
        ws.baton(args)
            .env("FORGE_LOOP_TOKEN", TOKEN)
            .env("CARGO_TARGET_DIR", target)
            .timeout(LIMIT)
            .assert()
            .success()
    };
    let out = ws.ok(&["new", "Add login", "--pipeline", "feature", "--start"]);
    let id: i64 = out.trim().parse().unwrap();
    let ids = id.to_string();
    run(&["engine", "--exit-when-idle"]);
    assert_eq!(show(&ws, id)["status"], "plan_review");
    run(&["approve", &ids]);
    run(&["engine", "--exit-when-idle"]);
    let t = show(&ws, id);
    assert_eq!(t["status"], "review", "{t}");

    // With a forge, the approval opens a pull request instead of merging locally.
    run(&["approve", &ids]);
    let t = show(&ws, id);
    assert_eq!(t["status"], "in_pr", "{t}");
    assert_eq!(t["pr"]["number"], 12, "{t}");
    let history = t["history"].as_array().unwrap();
    let approval = history.last().unwrap();
    assert_eq!(approval["to"], "in_pr", "{approval}");
    let branch = task_branch(ws.root());
    let first_push = remote_head(&bare, &branch).expect("the branch is on the remote");
    assert_eq!(first_push, git(ws.root(), &["rev-parse", &branch]).trim());
    assert_eq!(
        remote_head(&bare, "main").unwrap(),
        git(ws.root(), &["rev-parse", "main"]).trim(),
        "nothing was merged locally or pushed to main"
    );
    let opened = &stub.calls("POST", "/repos/acme/app/pulls")[0];
    assert_eq!(opened.body["title"], "Add login");
    assert_eq!(opened.body["head"], branch.as_str());
    let body = opened.body["body"].as_str().unwrap();
    assert!(body.contains("Worked on it."), "{body}");
    assert!(body.contains("1 passed, 0 failed"), "{body}");

    let server = Server::start(
        ws.root(),
        &[
            ("FORGE_LOOP_TOKEN", TOKEN),
            ("FORGE_LOOP_SECRET", SECRET),
            ("BATON_GITHUB_SECRET", SECRET),
            ("CARGO_TARGET_DIR", target),
        ],
    );
    // CI fails on the forge.
    let failed = json!({"action": "completed", "check_run": {"name": "test", "head_sha": "abc",
        "conclusion": "failure", "output": {"title": "1 test failed", "summary": "login::empty panicked"},
        "pull_requests": [{"number": 12, "head": {"ref": branch}}]}});
    let bytes = serde_json::to_vec(&failed).unwrap();
    let answer: Value = Client::new()
        .post(server.url("/hooks/github"))
        .header("X-GitHub-Event", "check_run")
        .header("X-GitHub-Delivery", "ci-1")
        .header(
            "X-Hub-Signature-256",
            format!("sha256={}", hmac_hex(SECRET, &bytes)),
        )
        .body(bytes)
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(answer["moved"], true, "{answer}");

    // The coder continued its session with the failure, the tests ran again, and the task
    // is back at review.
    let t = wait_status(&ws, id, "review");
    let coder = prompts_of(&prompts, "coder");
    assert_eq!(coder.len(), 2, "{coder:?}");
    assert_eq!(
        coder[1].0, coder[0].0,
        "the rework continues the coder's session"
    );
    let rework = &coder[1].1;
    assert!(rework.contains("## What failed"), "{rework}");
    assert!(
        rework.contains("check `test` failed: 1 test failed: login::empty panicked"),
        "{rework}"
    );
    assert!(!coder[0].1.contains("What failed"), "{}", coder[0].1);
    let ci: Vec<&Value> = t["history"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|h| h["trigger"] == "ci_failed")
        .collect();
    assert_eq!(ci.len(), 1, "{t}");

    // Approving again pushes the rework to the same pull request.
    stub.answer(
        "GET",
        "/repos/acme/app/pulls",
        200,
        json!([pr("open", false, "abc")]),
    );
    run(&["approve", &ids]);
    common::wait_within("the pull request's update", LIMIT, || {
        !stub.calls("PATCH", "/repos/acme/app/pulls/12").is_empty()
    });
    wait_status(&ws, id, "in_pr");
    assert_eq!(stub.calls("POST", "/repos/acme/app/pulls").len(), 1);
    let second_push = remote_head(&bare, &branch).unwrap();
    assert_ne!(second_push, first_push);
    assert_eq!(second_push, git(ws.root(), &["rev-parse", &branch]).trim());
    let work = git(&bare, &["show", &format!("{branch}:work.txt")]);
    assert_eq!(work.lines().count(), 2, "{work}");

    // The checks pass and the pull request is merged; the poll sees it.
    stub.answer(
        "GET",
        "/repos/acme/app/commits/def/check-runs",
        200,
        json!({"total_count": 1, "check_runs": [{"name": "test", "status": "completed",
            "conclusion": "success"}]}),
    );
    stub.answer(
        "GET",
        "/repos/acme/app/pulls/12",
        200,
        pr("closed", true, "def"),
    );
    let t = wait_status(&ws, id, "done");
    assert_eq!(t["pr"]["state"], "merged", "{t}");
    let merged = t["history"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|h| h["trigger"] == "pr_merged")
        .count();
    assert_eq!(merged, 1, "{t}");
    common::wait_within("the branch deleted on the remote", LIMIT, || {
        remote_head(&bare, &branch).is_none()
    });
    drop(server);
}

/// A pipeline whose tasks come from issues labelled `baton`: a script step, a comment on
/// the issue, then the pull request path.
const ISSUES: &str = r#"{
  "id": "from_issues",
  "name": "From issues",
  "triggers": [{"issue": {"labels": ["baton"]}}],
  "statuses": [
    {"id": "todo", "kind": "queue"},
    {"id": "build", "step": {"script": "printf '%s\n' \"$BATON_TASK_TITLE\" >> work.txt"}},
    {"id": "review", "kind": "gate"},
    {"id": "in_pr", "kind": "gate"},
    {"id": "done", "kind": "done"},
    {"id": "failed", "kind": "failed"},
    {"id": "cancelled", "kind": "cancelled"}
  ],
  "transitions": [
    {"from": "build", "to": "review", "on": "success", "hooks": [{"comment": {"body": "Task {{id}} is on it"}}]},
    {"from": "review", "to": "in_pr", "on": "approve", "guards": [{"forge": true}], "hooks": [{"pr": {}}]},
    {"from": "in_pr", "to": "done", "on": "pr_merged"}
  ]
}"#;

fn issue(number: u64, title: &str, labels: &[&str], repo: &str) -> Value {
    json!({"number": number, "title": title, "body": format!("The body of {title}."),
        "state": "open", "html_url": format!("https://github.com/{repo}/issues/{number}"),
        "labels": labels.iter().map(|l| json!({"name": l})).collect::<Vec<_>>()})
}

#[test]
fn a_labelled_issue_becomes_one_task_whose_pull_request_closes_it() {
    let (api, stub) = stubs::forge::start();
    github_answers(&stub);
    let (ws, _bare, _) = setup(&api.url);
    ws.pipeline("from_issues.json", ISSUES);
    stub.answer(
        "POST",
        "/repos/acme/app/issues/7/comments",
        201,
        json!({"id": 1}),
    );
    let server = Server::start(
        ws.root(),
        &[
            ("FORGE_LOOP_TOKEN", TOKEN),
            ("FORGE_LOOP_SECRET", SECRET),
            ("BATON_GITHUB_SECRET", SECRET),
        ],
    );
    let client = Client::new();
    let deliver = |event: &str, delivery: &str, body: &Value| -> Value {
        let bytes = serde_json::to_vec(body).unwrap();
        client
            .post(server.url("/hooks/github"))
            .header("X-GitHub-Event", event)
            .header("X-GitHub-Delivery", delivery)
            .header(
                "X-Hub-Signature-256",
                format!("sha256={}", hmac_hex(SECRET, &bytes)),
            )
            .body(bytes)
            .send()
            .unwrap()
            .json()
            .unwrap()
    };
    let labelled = json!({"action": "labeled", "repository": {"full_name": "acme/app"},
        "issue": issue(7, "Crash on start", &["bug", "baton"], "acme/app")});
    let made = deliver("issues", "i1", &labelled);
    assert_eq!(made["summary"], "task 1: created from issue #7", "{made}");
    // The same issue again (edited, or a redelivery): no second task.
    let mut edited = labelled.clone();
    edited["action"] = json!("edited");
    let again = deliver("issues", "i2", &edited);
    assert_eq!(again["summary"], "issue #7 made its task before", "{again}");
    // Without the label, or from another repository: none.
    let unlabelled = json!({"action": "opened", "repository": {"full_name": "acme/app"},
        "issue": issue(9, "Other", &["bug"], "acme/app")});
    let none = deliver("issues", "i3", &unlabelled);
    assert!(
        none["summary"].as_str().unwrap().contains("made no task"),
        "{none}"
    );
    let foreign = json!({"action": "opened", "repository": {"full_name": "mallory/app"},
        "issue": issue(10, "Foreign", &["baton"], "mallory/app")});
    let none = deliver("issues", "i4", &foreign);
    assert_eq!(none["task"], Value::Null, "{none}");

    let t = wait_status(&ws, 1, "review");
    assert_eq!(t["title"], "Crash on start");
    let store = baton::store::Store::open(&ws.root().join(".baton/baton.db")).unwrap();
    let prompt = store.read().task(1).unwrap().prompt;
    assert!(prompt.contains("The body of Crash on start."), "{prompt}");
    // The comment hook posts on the issue while the task has no pull request.
    common::wait_within("the comment on the issue", LIMIT, || {
        !stub
            .calls("POST", "/repos/acme/app/issues/7/comments")
            .is_empty()
    });
    let comment = &stub.calls("POST", "/repos/acme/app/issues/7/comments")[0];
    assert_eq!(comment.body["body"], "Task 1 is on it");

    // The poll finds the same issue and a new one: one new task.
    let issue_calls = || stub.calls("GET", "/repos/acme/app/issues?").len();
    stub.answer(
        "GET",
        "/repos/acme/app/issues",
        200,
        json!([
            issue(7, "Crash on start", &["baton"], "acme/app"),
            issue(8, "Second", &["baton"], "acme/app")
        ]),
    );
    common::wait_within("the polled issue's task", LIMIT, || {
        show(&ws, 2)["title"] == "Second"
    });
    let seen = issue_calls();
    common::wait_within("two more polls", LIMIT, || issue_calls() >= seen + 2);
    assert_eq!(show(&ws, 3), Value::Null, "an issue made a second task");
    let polled = &stub.calls("GET", "/repos/acme/app/issues?")[0];
    assert!(polled.path.contains("labels=baton"), "{}", polled.path);

    // Its pull request closes the issue.
    ws.baton(&["approve", "1"]).assert().success();
    common::wait_within("the pull request", LIMIT, || {
        !stub.calls("POST", "/repos/acme/app/pulls").is_empty()
    });
    let opened = &stub.calls("POST", "/repos/acme/app/pulls")[0];
    let body = opened.body["body"].as_str().unwrap();
    assert!(body.ends_with("Closes #7"), "{body}");
    wait_status(&ws, 1, "in_pr");

    // A `/baton` comment on the pull request from someone the forge does not let write
    // (the stub knows no collaborators) is recorded on the task, once, and not said.
    let said = json!({"action": "created", "issue": {"number": 12, "pull_request": {"url": "u"}},
        "comment": {"body": "/baton please add a test", "user": {"login": "octo"}}});
    let first = deliver("issue_comment", "c1", &said);
    assert_eq!(first["task"], 1, "{first}");
    assert_eq!(first["said"], false, "{first}");
    let again = deliver("issue_comment", "c1", &said);
    assert_eq!(again["duplicate"], true, "{again}");
    let events = store.read().events(1).unwrap();
    let say: Vec<_> = events.iter().filter(|e| e.kind == "forge.say").collect();
    assert_eq!(say.len(), 1, "{events:?}");
    assert!(
        say[0].summary.contains("please add a test"),
        "{}",
        say[0].summary
    );
}

#[test]
fn without_a_forge_the_feature_pipeline_merges_locally() {
    let (api, _stub) = stubs::forge::start();
    let (ws, bare, _) = setup(&api.url);
    ws.config("");
    let target = ws.dir.path().join("cargo-target");
    let run = |args: &[&str]| {
        ws.baton(args)
            .env("CARGO_TARGET_DIR", &target)
            .timeout(LIMIT)
            .assert()
            .success()
    };
    let id = ws.ok(&["new", "Add login", "--pipeline", "feature", "--start"]);
    let id = id.trim();
    run(&["engine", "--exit-when-idle"]);
    run(&["approve", id]);
    run(&["engine", "--exit-when-idle"]);
    run(&["approve", id]);
    let t = ws.show(id.parse().unwrap());
    assert_eq!(t["status"], "done", "{t}");
    let approval = t["history"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(approval["guards"][0]["passed"], false, "{approval}");
    assert_eq!(approval["hooks"][0]["hook"], "merge", "{approval}");
    let main = git(ws.root(), &["show", "main:work.txt"]);
    assert!(main.starts_with("coder "), "{main}");
    // Nothing went to the remote.
    let heads = git(
        &bare,
        &["for-each-ref", "--format=%(refname:short)", "refs/heads"],
    );
    assert_eq!(heads.trim(), "main");
}
