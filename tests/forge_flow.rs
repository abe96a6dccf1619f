//! The pull request loop through the real binary: a task's branch is pushed to a bare
//! repository over file://, its pull request opened on a forge stub (written from the
//! forge's documented REST API — a stub, not the service), and what the forge sends back by
//! webhook moves the task: failed checks send it back to work with the failure as its note,
//! the next approval updates the same pull request, the merge ends it. Signatures are
//! computed as each forge documents them; a bad one changes nothing; a delivery sent twice
//! acts once.

mod api_common;
mod common;
#[path = "support/forge_setup.rs"]
mod forge_setup;
mod infra;
mod stubs;

use api_common::Server;
use common::{Ws, git, task_branch};
use forge_setup::{hmac_hex, push_origin, show, workspace_and_bare};
use reqwest::StatusCode;
use reqwest::blocking::Client;
use serde_json::{Value, json};
use std::time::Duration;
use stubs::forge::ForgeStub;

const TOKEN: &str = "forge-flow-token-0123456789";
const SECRET: &str = "forge-flow-secret";

const PIPELINE: &str = r#"{
  "id": "prflow",
  "name": "PR flow",
  "statuses": [
    {"id": "todo", "kind": "queue"},
    {"id": "build", "step": {"script": "printf '%s\n' \"note:$BATON_NOTE\" >> work.txt"}},
    {"id": "review", "kind": "gate"},
    {"id": "in_pr", "label": "Pull request", "kind": "gate"},
    {"id": "done", "kind": "done"},
    {"id": "failed", "kind": "failed"},
    {"id": "cancelled", "kind": "cancelled"}
  ],
  "transitions": [
    {"from": "review", "to": "in_pr", "on": "approve", "hooks": [{"pr": {"labels": ["baton"]}}]},
    {"from": "in_pr", "to": "done", "on": "pr_merged", "hooks": [{"comment": {"body": "Task {{id}} ({{title}}) is {{status}}"}}]},
    {"from": "in_pr", "to": "cancelled", "on": "pr_closed"},
    {"from": "in_pr", "to": "build", "on": "ci_failed"},
    {"from": "in_pr", "to": "build", "on": "changes_requested"}
  ]
}"#;

/// A git workspace whose `origin` is a bare repository over file://, with `[forge]`
/// pointing at `api`.
fn setup(kind: &str, api: &str) -> (Ws, std::path::PathBuf) {
    let (ws, bare) = workspace_and_bare();
    push_origin(&ws, &bare);
    ws.baton(&["init"]).assert().success();
    ws.pipeline("prflow.json", PIPELINE);
    ws.config(&format!(
        "[forge]\nkind = \"{kind}\"\napi_url = \"{api}\"\nrepo = \"acme/app\"\ntoken_env = \"FORGE_FLOW_TOKEN\"\nwebhook_secret_env = \"FORGE_FLOW_SECRET\"\n"
    ));
    (ws, bare)
}

fn wait_status(ws: &Ws, id: i64, status: &str) -> Value {
    forge_setup::wait_status(ws, id, status, Duration::from_secs(60))
}

/// A task at `review` with its branch built.
fn task_at_review(ws: &Ws) -> i64 {
    let out = ws.ok(&["new", "Add login", "--pipeline", "prflow", "--start"]);
    let id: i64 = out.trim().parse().unwrap();
    ws.drain();
    assert_eq!(show(ws, id)["status"], "review");
    id
}

fn remote_head(bare: &std::path::Path, branch: &str) -> String {
    git(bare, &["rev-parse", &format!("refs/heads/{branch}")])
        .trim()
        .to_string()
}

fn github_answers(stub: &ForgeStub) {
    let pr = json!({"number": 12, "html_url": "https://github.com/acme/app/pull/12",
        "state": "open", "draft": false, "merged": false, "head": {"sha": "abc", "ref": "x"}});
    stub.answer("GET", "/repos/acme/app/pulls", 200, json!([]));
    stub.answer("POST", "/repos/acme/app/pulls", 201, pr.clone());
    stub.answer("PATCH", "/repos/acme/app/pulls/12", 200, pr.clone());
    stub.answer("POST", "/repos/acme/app/issues/12/labels", 200, json!([]));
    stub.answer(
        "POST",
        "/repos/acme/app/issues/12/comments",
        201,
        json!({"id": 1}),
    );
    stub.answer(
        "GET",
        "/repos/acme/app/commits/abc/check-runs",
        200,
        json!({"total_count": 1, "check_runs": [{"name": "test", "status": "queued"}]}),
    );
}

#[test]
fn github_pull_request_loop_fails_ci_reworks_updates_the_same_pr_and_merges() {
    let (api, stub) = stubs::forge::start();
    github_answers(&stub);
    let (ws, bare) = setup("github", &api.url);
    let id = task_at_review(&ws);
    ws.baton(&["approve", &id.to_string()])
        .env("FORGE_FLOW_TOKEN", TOKEN)
        .assert()
        .success();
    let t = show(&ws, id);
    assert_eq!(t["status"], "in_pr", "{t}");
    assert_eq!(t["pr"]["number"], 12, "{t}");
    assert_eq!(t["pr"]["state"], "open");
    assert_eq!(t["pr"]["url"], "https://github.com/acme/app/pull/12");
    assert_eq!(t["pr"]["checks"], "pending");
    let branch = task_branch(ws.root());
    let first_push = remote_head(&bare, &branch);
    assert_eq!(first_push, git(ws.root(), &["rev-parse", &branch]).trim());
    let post = &stub.calls("POST", "/repos/acme/app/pulls")[0];
    assert_eq!(post.body["title"], "Add login");
    assert_eq!(post.body["head"], branch.as_str());
    assert_eq!(post.body["base"], "main");
    assert!(!show(&ws, id).to_string().contains(TOKEN));

    let server = Server::start(
        ws.root(),
        &[
            ("FORGE_FLOW_TOKEN", TOKEN),
            ("FORGE_FLOW_SECRET", SECRET),
            ("BATON_GITHUB_SECRET", SECRET),
        ],
    );
    let client = Client::new();
    let deliver = |event: &str, delivery: &str, body: &Value, secret: &str| {
        let bytes = serde_json::to_vec(body).unwrap();
        client
            .post(server.url("/hooks/github"))
            .header("X-GitHub-Event", event)
            .header("X-GitHub-Delivery", delivery)
            .header(
                "X-Hub-Signature-256",
                format!("sha256={}", hmac_hex(secret, &bytes)),
            )
            .body(bytes)
            .send()
            .unwrap()
    };
    let failed = json!({"action": "completed", "check_run": {"name": "test", "head_sha": "abc",
        "conclusion": "failure", "output": {"title": "1 test failed", "summary": "login::empty panicked"},
        "pull_requests": [{"number": 12, "head": {"ref": branch}}]}});
    // A bad signature changes nothing.
    assert_eq!(
        deliver("check_run", "c0", &failed, "wrong").status(),
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(show(&ws, id)["status"], "in_pr");
    let answer: Value = deliver("check_run", "c1", &failed, SECRET).json().unwrap();
    assert_eq!(answer["moved"], true, "{answer}");
    // The same delivery again, and another delivery of the same failure: acted on once.
    let again: Value = deliver("check_run", "c1", &failed, SECRET).json().unwrap();
    assert_eq!(again["duplicate"], true, "{again}");
    let other: Value = deliver("check_run", "c2", &failed, SECRET).json().unwrap();
    assert_eq!(other["duplicate"], true, "{other}");

    // The step got the failure as its note and the task came back to review.
    let t = wait_status(&ws, id, "review");
    let history = t["history"].as_array().unwrap();
    let ci: Vec<&Value> = history
        .iter()
        .filter(|h| h["trigger"] == "ci_failed")
        .collect();
    assert_eq!(ci.len(), 1, "{t}");
    let builds = t["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["status"] == "build")
        .count();
    assert_eq!(builds, 2, "{t}");
    assert_eq!(t["pr"]["checks"], "failed");

    // The next approval pushes the rework and updates the same pull request.
    stub.answer("GET", "/repos/acme/app/pulls", 200, json!([{"number": 12,
        "html_url": "https://github.com/acme/app/pull/12", "state": "open", "head": {"sha": "abc"}}]));
    ws.baton(&["approve", &id.to_string()]).assert().success();
    common::wait_within("the PR update", Duration::from_secs(60), || {
        !stub.calls("PATCH", "/repos/acme/app/pulls/12").is_empty()
    });
    wait_status(&ws, id, "in_pr");
    assert_eq!(
        stub.calls("POST", "/repos/acme/app/pulls").len(),
        1,
        "a second PR was opened"
    );
    common::wait_within("the rework on the remote", Duration::from_secs(30), || {
        remote_head(&bare, &branch) != first_push
    });
    // The rework on the remote holds what the failed check said.
    let work = git(&bare, &["show", &format!("{branch}:work.txt")]);
    assert!(
        work.contains("check `test` failed: 1 test failed: login::empty panicked"),
        "{work}"
    );

    let merged = json!({"action": "closed", "number": 12, "pull_request": {"number": 12,
        "merged": true, "head": {"ref": branch}}});
    let answer: Value = deliver("pull_request", "m1", &merged, SECRET)
        .json()
        .unwrap();
    assert_eq!(answer["moved"], true, "{answer}");
    let t = wait_status(&ws, id, "done");
    assert_eq!(t["pr"]["state"], "merged");
    // The comment hook of the merge posts on the pull request.
    common::wait_within("the comment", Duration::from_secs(60), || {
        !stub
            .calls("POST", "/repos/acme/app/issues/12/comments")
            .is_empty()
    });
    let comment = &stub.calls("POST", "/repos/acme/app/issues/12/comments")[0];
    assert_eq!(comment.body["body"], "Task 1 (Add login) is done");
    // The merged branch is deleted on the remote.
    common::wait_within("the branch deletion", Duration::from_secs(30), || {
        git(&bare, &["branch", "--list", &branch]).trim().is_empty()
    });
    let again: Value = deliver("pull_request", "m2", &merged, SECRET)
        .json()
        .unwrap();
    assert_eq!(again["duplicate"], true, "{again}");
}

/// Opens the task's pull request on a stub of `kind`, then returns the task and a server.
fn opened(kind: &str, stub: &ForgeStub, api: &str) -> (Ws, i64) {
    let pr = json!({"number": 3, "iid": 3, "html_url": "u", "web_url": "u", "state": "open",
        "head": {"sha": "f00", "ref": "b"}, "sha": "f00"});
    stub.answer("GET", "/repos/acme/app/pulls", 200, json!([]));
    stub.answer("POST", "/repos/acme/app/pulls", 201, pr.clone());
    stub.answer(
        "GET",
        "/repos/acme/app/labels",
        200,
        json!([{"id": 7, "name": "baton"}]),
    );
    stub.answer("POST", "/repos/acme/app/issues/3/labels", 200, json!([]));
    stub.answer("GET", "/projects/acme%2Fapp/merge_requests", 200, json!([]));
    stub.answer(
        "POST",
        "/projects/acme%2Fapp/merge_requests",
        201,
        pr.clone(),
    );
    stub.answer("PUT", "/projects/acme%2Fapp/merge_requests/3", 200, pr);
    let (ws, _bare) = setup(kind, api);
    let id = task_at_review(&ws);
    ws.baton(&["approve", &id.to_string()])
        .env("FORGE_FLOW_TOKEN", TOKEN)
        .assert()
        .success();
    let t = show(&ws, id);
    assert_eq!(t["pr"]["number"], 3, "{t}");
    (ws, id)
}

#[test]
fn gitea_and_forgejo_signatures_are_checked_and_a_merge_ends_the_task_once() {
    for (kind, sig, ev, del) in [
        (
            "gitea",
            "X-Gitea-Signature",
            "X-Gitea-Event",
            "X-Gitea-Delivery",
        ),
        (
            "forgejo",
            "X-Forgejo-Signature",
            "X-Forgejo-Event",
            "X-Forgejo-Delivery",
        ),
    ] {
        let (api, stub) = stubs::forge::start();
        let (ws, id) = opened(kind, &stub, &api.url);
        let server = Server::start(ws.root(), &[("FORGE_FLOW_SECRET", SECRET)]);
        let body = serde_json::to_vec(&json!({"action": "closed", "number": 3,
            "pull_request": {"number": 3, "merged": true}}))
        .unwrap();
        let send = |secret: &str, delivery: &str| {
            Client::new()
                .post(server.url("/hooks/gitea"))
                .header(ev, "pull_request")
                .header(del, delivery)
                .header(sig, hmac_hex(secret, &body))
                .body(body.clone())
                .send()
                .unwrap()
        };
        assert_eq!(
            send("wrong", "g0").status(),
            StatusCode::UNAUTHORIZED,
            "{kind}"
        );
        assert_eq!(show(&ws, id)["status"], "in_pr", "{kind}");
        let first: Value = send(SECRET, "g1").json().unwrap();
        assert_eq!(first["moved"], true, "{kind}: {first}");
        let again: Value = send(SECRET, "g1").json().unwrap();
        assert_eq!(again["duplicate"], true, "{kind}: {again}");
        let t = wait_status(&ws, id, "done");
        assert_eq!(t["pr"]["state"], "merged");
        let merges = t["history"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|h| h["trigger"] == "pr_merged")
            .count();
        assert_eq!(merges, 1, "{kind}");
    }
}

#[test]
fn gitlab_token_is_checked_and_a_closed_merge_request_cancels_the_task() {
    let (api, stub) = stubs::forge::start();
    let (ws, id) = opened("gitlab", &stub, &api.url);
    let server = Server::start(ws.root(), &[("FORGE_FLOW_SECRET", SECRET)]);
    let body = json!({"object_kind": "merge_request", "object_attributes": {"iid": 3,
        "action": "close", "state": "closed"}});
    let send = |token: &str, uuid: &str| {
        Client::new()
            .post(server.url("/hooks/gitlab"))
            .header("X-Gitlab-Event", "Merge Request Hook")
            .header("X-Gitlab-Token", token)
            .header("X-Gitlab-Event-UUID", uuid)
            .json(&body)
            .send()
            .unwrap()
    };
    assert_eq!(send("wrong", "u0").status(), StatusCode::UNAUTHORIZED);
    assert_eq!(show(&ws, id)["status"], "in_pr");
    let first: Value = send(SECRET, "u1").json().unwrap();
    assert_eq!(first["moved"], true, "{first}");
    assert_eq!(
        send(SECRET, "u1").json::<Value>().unwrap()["duplicate"],
        true
    );
    let t = wait_status(&ws, id, "cancelled");
    assert_eq!(t["pr"]["state"], "closed");
}

#[test]
fn polling_sees_failed_checks_once_and_the_late_webhook_for_them_acts_on_nothing() {
    let (api, stub) = stubs::forge::start();
    github_answers(&stub);
    let (ws, _bare) = setup("github", &api.url);
    std::fs::write(
        ws.root().join(".baton/config.toml"),
        std::fs::read_to_string(ws.root().join(".baton/config.toml")).unwrap() + "poll = \"1s\"\n",
    )
    .unwrap();
    let id = task_at_review(&ws);
    ws.baton(&["approve", &id.to_string()])
        .env("FORGE_FLOW_TOKEN", TOKEN)
        .assert()
        .success();
    assert_eq!(show(&ws, id)["status"], "in_pr");
    // Checks fail on the forge: the poll sends the task back to work, once.
    stub.answer(
        "GET",
        "/repos/acme/app/pulls/12",
        200,
        json!({"number": 12, "html_url": "u",
        "state": "open", "merged": false, "head": {"sha": "abc"}}),
    );
    stub.answer(
        "GET",
        "/repos/acme/app/commits/abc/check-runs",
        200,
        json!({"total_count": 1,
        "check_runs": [{"name": "lint", "status": "completed", "conclusion": "failure",
            "output": {"title": "clippy", "summary": "unused variable"}}]}),
    );
    let server = Server::start(
        ws.root(),
        &[
            ("FORGE_FLOW_TOKEN", TOKEN),
            ("FORGE_FLOW_SECRET", SECRET),
            ("BATON_GITHUB_SECRET", SECRET),
        ],
    );
    let t = wait_status(&ws, id, "review");
    let ci = t["history"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|h| h["trigger"] == "ci_failed")
        .count();
    assert_eq!(ci, 1, "{t}");
    assert_eq!(t["pr"]["checks"], "failed");
    // The webhook for the same failure comes late: nothing more happens.
    let failed = serde_json::to_vec(&json!({"action": "completed", "check_run": {"name": "lint",
        "head_sha": "abc", "conclusion": "failure", "output": {},
        "pull_requests": [{"number": 12}]}}))
    .unwrap();
    let late: Value = Client::new()
        .post(server.url("/hooks/github"))
        .header("X-GitHub-Event", "check_run")
        .header("X-GitHub-Delivery", "late-1")
        .header(
            "X-Hub-Signature-256",
            format!("sha256={}", hmac_hex(SECRET, &failed)),
        )
        .body(failed)
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(late["duplicate"], true, "{late}");
    assert_eq!(show(&ws, id)["status"], "review");
}

#[test]
fn a_review_asking_for_changes_sends_its_comments_to_the_coder() {
    let (api, stub) = stubs::forge::start();
    github_answers(&stub);
    stub.answer(
        "GET",
        "/repos/acme/app/pulls/12/reviews/88/comments",
        200,
        json!([
        {"path": "src/login.rs", "line": 14, "body": "check for empty input"},
        {"path": "src/login.rs", "original_line": 30, "line": null, "body": "name this better"}]),
    );
    let (ws, _bare) = setup("github", &api.url);
    let id = task_at_review(&ws);
    ws.baton(&["approve", &id.to_string()])
        .env("FORGE_FLOW_TOKEN", TOKEN)
        .assert()
        .success();
    let server = Server::start(
        ws.root(),
        &[("FORGE_FLOW_TOKEN", TOKEN), ("BATON_GITHUB_SECRET", SECRET)],
    );
    let review = |who: &str, delivery: &str| -> Value {
        let body = serde_json::to_vec(&json!({"action": "submitted",
            "review": {"id": 88, "state": "changes_requested", "body": "A few things.",
                "author_association": who},
            "pull_request": {"number": 12}}))
        .unwrap();
        Client::new()
            .post(server.url("/hooks/github"))
            .header("X-GitHub-Event", "pull_request_review")
            .header("X-GitHub-Delivery", delivery)
            .header(
                "X-Hub-Signature-256",
                format!("sha256={}", hmac_hex(SECRET, &body)),
            )
            .body(body)
            .send()
            .unwrap()
            .json()
            .unwrap()
    };
    // A passer-by's review of a public repository asks for nothing.
    let stranger = review("NONE", "r0");
    assert_eq!(stranger["task"], Value::Null, "{stranger}");
    assert_eq!(show(&ws, id)["status"], "in_pr");
    let answer = review("MEMBER", "r1");
    assert_eq!(answer["moved"], true, "{answer}");
    let t = wait_status(&ws, id, "review");
    let back = t["history"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["trigger"] == "outcome:changes_requested")
        .cloned()
        .unwrap_or_else(|| panic!("{t}"));
    let note = back["reason"].as_str().unwrap_or("");
    assert!(note.contains("A few things."), "{back}");
    assert!(
        note.contains("- src/login.rs:14: check for empty input"),
        "{back}"
    );
    assert!(
        note.contains("- src/login.rs:30: name this better"),
        "{back}"
    );
    assert!(!t.to_string().contains(TOKEN));
}

#[test]
fn a_forks_pull_request_from_a_branch_of_the_same_name_leaves_the_task_alone() {
    let (api, stub) = stubs::forge::start();
    github_answers(&stub);
    let (ws, bare) = setup("github", &api.url);
    let id = task_at_review(&ws);
    ws.baton(&["approve", &id.to_string()])
        .env("FORGE_FLOW_TOKEN", TOKEN)
        .assert()
        .success();
    let branch = task_branch(ws.root());
    let server = Server::start(ws.root(), &[("BATON_GITHUB_SECRET", SECRET)]);
    let deliver = |delivery: &str, body: Value| -> Value {
        let bytes = serde_json::to_vec(&body).unwrap();
        Client::new()
            .post(server.url("/hooks/github"))
            .header("X-GitHub-Event", "pull_request")
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
    // Someone's fork opens pull request #99 from a branch named like the task's, then
    // merges or closes it.
    for (delivery, merged) in [("f1", true), ("f2", false)] {
        let answer = deliver(
            delivery,
            json!({"action": "closed", "number": 99, "pull_request": {"number": 99,
                "merged": merged, "head": {"ref": branch, "repo": {"full_name": "stranger/app"}}}}),
        );
        assert_eq!(answer["task"], Value::Null, "{answer}");
    }
    // Without a number, a branch of another repository is not the task's either.
    let answer = deliver(
        "f3",
        json!({"action": "closed", "pull_request": {"merged": false,
            "head": {"ref": branch, "repo": {"full_name": "stranger/app"}}}}),
    );
    assert_eq!(answer["task"], Value::Null, "{answer}");
    let t = show(&ws, id);
    assert_eq!(
        (&t["status"], &t["pr"]["state"]),
        (&json!("in_pr"), &json!("open")),
        "{t}"
    );
    assert!(!remote_head(&bare, &branch).is_empty());

    // The task's own pull request, from this repository, still acts.
    let answer = deliver(
        "f4",
        json!({"action": "closed", "number": 12, "pull_request": {"number": 12,
            "merged": false, "head": {"ref": branch, "repo": {"full_name": "acme/app"}}}}),
    );
    assert_eq!(answer["moved"], true, "{answer}");
    wait_status(&ws, id, "cancelled");
}
