//! The forge clients against stub servers written from each forge's documented REST API
//! (GitHub REST v3, GitLab v4, Gitea/Forgejo v1): these are stubs, not the real services.
//! Opening and updating a pull request, labels and reviewers, checks, review comments, a
//! merge, comments, the auth header each forge documents, and errors that never carry the
//! token.

mod stubs;

use baton::forge::{ChecksState, Forge, Kind, PrRequest, PrState, Target};
use serde_json::json;

const TOKEN: &str = "tok-s3cret-value-123";

fn client(kind: Kind, url: &str, repo: &str) -> Box<dyn Forge> {
    let target = Target {
        kind,
        api_url: url.to_string(),
        repo: repo.to_string(),
        token_env: "UNUSED".into(),
    };
    target.connect_with(TOKEN).expect("client")
}

fn request() -> PrRequest {
    PrRequest {
        head: "baton/7-add-login".into(),
        base: "main".into(),
        title: "Add login".into(),
        body: "## What Was Done\nadded it\n\nCloses #4".into(),
        draft: false,
        labels: vec!["baton".into()],
        reviewers: vec!["ana".into()],
    }
}

#[test]
fn github_opens_then_updates_the_same_pull_request_and_reads_checks_reviews_and_merge() {
    let (server, stub) = stubs::forge::start();
    let gh = client(Kind::Github, &server.url, "acme/app");
    let pr = json!({"number": 12, "html_url": "https://github.com/acme/app/pull/12",
        "state": "open", "draft": false, "merged": false, "head": {"sha": "abc123", "ref": "baton/7-add-login"}});
    stub.answer("GET", "/repos/acme/app/pulls", 200, json!([]));
    stub.answer("POST", "/repos/acme/app/pulls", 201, pr.clone());
    stub.answer("POST", "/repos/acme/app/issues/12/labels", 200, json!([]));
    stub.answer(
        "POST",
        "/repos/acme/app/pulls/12/requested_reviewers",
        201,
        pr.clone(),
    );
    let (got, created) = gh.open_or_update(&request()).expect("opened");
    assert!(created);
    assert_eq!((got.number, got.state), (12, PrState::Open));
    let post = &stub.calls("POST", "/repos/acme/app/pulls")[0];
    assert_eq!(post.body["head"], "baton/7-add-login");
    assert_eq!(post.body["base"], "main");
    assert_eq!(post.body["draft"], false);
    assert!(post.body["body"].as_str().unwrap().contains("Closes #4"));
    assert_eq!(post.headers["authorization"], format!("Bearer {TOKEN}"));
    assert_eq!(post.headers["x-github-api-version"], "2022-11-28");
    let list = &stub.calls("GET", "/repos/acme/app/pulls?")[0];
    assert!(
        list.path.contains("head=acme%3Abaton%2F7-add-login"),
        "{}",
        list.path
    );
    assert_eq!(
        stub.calls("POST", "/repos/acme/app/issues/12/labels")[0].body["labels"],
        json!(["baton"])
    );
    assert_eq!(
        stub.calls("POST", "/repos/acme/app/pulls/12/requested_reviewers")[0].body["reviewers"],
        json!(["ana"])
    );

    // A second push: the open one is updated, not duplicated.
    stub.answer("GET", "/repos/acme/app/pulls", 200, json!([pr]));
    stub.answer("PATCH", "/repos/acme/app/pulls/12", 200, pr.clone());
    let (again, created) = gh.open_or_update(&request()).expect("updated");
    assert!(!created);
    assert_eq!(again.number, 12);
    assert_eq!(stub.calls("POST", "/repos/acme/app/pulls").len(), 1);
    assert_eq!(
        stub.calls("PATCH", "/repos/acme/app/pulls/12")[0].body["title"],
        "Add login"
    );

    stub.answer(
        "GET",
        "/repos/acme/app/commits/abc123/check-runs",
        200,
        json!({
        "total_count": 3, "check_runs": [
            {"name": "build", "status": "completed", "conclusion": "success", "output": {}},
            {"name": "test", "status": "completed", "conclusion": "failure",
             "output": {"title": "2 tests failed", "summary": "login::rejects_empty panicked"}},
            {"name": "lint", "status": "in_progress", "conclusion": null, "output": {}}]}),
    );
    let checks = gh.checks(&got).expect("checks");
    assert_eq!(checks.state, ChecksState::Failed);
    assert_eq!((checks.passed, checks.failed, checks.pending), (1, 1, 1));
    assert_eq!(checks.failures[0].name, "test");
    assert!(
        checks.failures[0]
            .summary
            .contains("login::rejects_empty panicked")
    );
    assert_eq!(checks.summary(), "1/3 passed, 1 failed");

    stub.answer(
        "GET",
        "/repos/acme/app/pulls/12/reviews/88/comments",
        200,
        json!([
        {"path": "src/login.rs", "line": 14, "body": "check for empty input"}]),
    );
    let comments = gh.review_comments(12, Some(88)).expect("comments");
    assert_eq!(
        comments[0].line_text(),
        "src/login.rs:14: check for empty input"
    );

    stub.answer(
        "GET",
        "/repos/acme/app/pulls/12",
        200,
        json!({"number": 12,
        "html_url": "u", "state": "closed", "merged": true, "head": {"sha": "abc123"}}),
    );
    assert_eq!(gh.get(12).expect("pr").state, PrState::Merged);

    stub.answer(
        "POST",
        "/repos/acme/app/issues/12/comments",
        201,
        json!({"id": 1}),
    );
    gh.comment(12, "done").expect("comment");
    assert_eq!(
        stub.calls("POST", "/repos/acme/app/issues/12/comments")[0].body["body"],
        "done"
    );
}

#[test]
fn gitlab_uses_merge_requests_pipeline_jobs_and_discussions() {
    let (server, stub) = stubs::forge::start();
    let gl = client(Kind::Gitlab, &server.url, "group/sub/app");
    let p = "/projects/group%2Fsub%2Fapp";
    let mr = json!({"iid": 5, "web_url": "https://gitlab.com/group/sub/app/-/merge_requests/5",
        "state": "opened", "draft": true, "sha": "def456"});
    stub.answer("GET", &format!("{p}/merge_requests"), 200, json!([]));
    stub.answer("POST", &format!("{p}/merge_requests"), 201, mr.clone());
    stub.answer("GET", "/users", 200, json!([{"id": 41, "username": "ana"}]));
    stub.answer("PUT", &format!("{p}/merge_requests/5"), 200, mr.clone());
    let mut req = request();
    req.draft = true;
    let (got, created) = gl.open_or_update(&req).expect("opened");
    assert!(created);
    assert_eq!((got.number, got.state), (5, PrState::Draft));
    let post = &stub.calls("POST", &format!("{p}/merge_requests"))[0];
    assert_eq!(post.headers["private-token"], TOKEN);
    assert_eq!(post.body["source_branch"], "baton/7-add-login");
    assert_eq!(post.body["target_branch"], "main");
    assert_eq!(post.body["title"], "Draft: Add login");
    let put = &stub.calls("PUT", &format!("{p}/merge_requests/5"))[0];
    assert_eq!(put.body["reviewer_ids"], json!([41]));
    assert_eq!(put.body["add_labels"], "baton");
    let list = &stub.calls("GET", &format!("{p}/merge_requests?"))[0];
    assert!(
        list.path.contains("source_branch=baton%2F7-add-login")
            && list.path.contains("state=opened")
    );

    stub.answer("GET", &format!("{p}/merge_requests"), 200, json!([mr]));
    let (again, created) = gl.open_or_update(&request()).expect("updated");
    assert!(!created && again.number == 5);
    assert_eq!(stub.calls("POST", &format!("{p}/merge_requests")).len(), 1);

    stub.answer(
        "GET",
        &format!("{p}/merge_requests/5/pipelines"),
        200,
        json!([{"id": 900, "status": "failed", "sha": "def456"}, {"id": 800, "status": "success"}]),
    );
    stub.answer("GET", &format!("{p}/pipelines/900/jobs"), 200, json!([
        {"id": 1, "name": "build", "stage": "build", "status": "success"},
        {"id": 2, "name": "rspec", "stage": "test", "status": "failed", "failure_reason": "script_failure"},
        {"id": 3, "name": "flaky", "stage": "test", "status": "failed", "allow_failure": true}]));
    let checks = gl.checks(&got).expect("checks");
    assert_eq!(checks.state, ChecksState::Failed);
    assert_eq!((checks.passed, checks.failed), (2, 1));
    assert_eq!(checks.failures[0].name, "rspec");
    assert_eq!(checks.failures[0].summary, "test: script_failure");

    stub.answer(
        "GET",
        &format!("{p}/merge_requests/5/discussions"),
        200,
        json!([
        {"id": "d1", "notes": [{"body": "rename this", "resolvable": true, "resolved": false,
            "position": {"new_path": "lib/a.rb", "new_line": 3, "old_path": "lib/a.rb"}}]},
        {"id": "d2", "notes": [{"body": "fixed", "resolvable": true, "resolved": true,
            "position": {"new_path": "lib/b.rb", "new_line": 9}}]},
        {"id": "d3", "notes": [{"body": "a plain comment", "resolvable": false}]}]),
    );
    let comments = gl.review_comments(5, None).expect("discussions");
    assert_eq!(comments.len(), 1);
    assert_eq!(comments[0].line_text(), "lib/a.rb:3: rename this");

    stub.answer(
        "GET",
        &format!("{p}/merge_requests/5"),
        200,
        json!({"iid": 5, "web_url": "u", "state": "merged", "sha": "def456"}),
    );
    assert_eq!(gl.get(5).expect("mr").state, PrState::Merged);
    stub.answer(
        "POST",
        &format!("{p}/merge_requests/5/notes"),
        201,
        json!({"id": 1}),
    );
    gl.comment(5, "hello").expect("note");
}

#[test]
fn gitea_and_forgejo_use_pulls_commit_statuses_and_label_ids() {
    for kind in [Kind::Gitea, Kind::Forgejo] {
        let (server, stub) = stubs::forge::start();
        let gt = client(kind, &server.url, "acme/app");
        let pr = json!({"number": 3, "html_url": "https://git.example/acme/app/pulls/3",
            "state": "open", "merged": false, "head": {"ref": "baton/7-add-login", "sha": "f00",
            "repo": {"full_name": "acme/app"}}});
        // Someone else's open pull request is not ours, nor is a fork's of the same branch.
        let other = json!({"number": 2, "html_url": "x", "state": "open",
            "head": {"ref": "feature/other", "sha": "aaa", "repo": {"full_name": "acme/app"}}});
        let fork = json!({"number": 9, "html_url": "x", "state": "open",
            "head": {"ref": "baton/7-add-login", "sha": "bbb",
            "repo": {"full_name": "stranger/app"}}});
        stub.answer("GET", "/repos/acme/app/pulls", 200, json!([other, fork]));
        stub.answer("POST", "/repos/acme/app/pulls", 201, pr.clone());
        stub.answer(
            "GET",
            "/repos/acme/app/labels",
            200,
            json!([{"id": 7, "name": "baton"}, {"id": 8, "name": "bug"}]),
        );
        stub.answer("POST", "/repos/acme/app/issues/3/labels", 200, json!([]));
        stub.answer(
            "POST",
            "/repos/acme/app/pulls/3/requested_reviewers",
            201,
            json!([]),
        );
        let (got, created) = gt.open_or_update(&request()).expect("opened");
        assert!(created, "{kind}");
        assert_eq!(got.number, 3);
        let post = &stub.calls("POST", "/repos/acme/app/pulls")[0];
        assert_eq!(post.headers["authorization"], format!("token {TOKEN}"));
        assert_eq!(post.body["head"], "baton/7-add-login");
        assert_eq!(
            stub.calls("POST", "/repos/acme/app/issues/3/labels")[0].body["labels"],
            json!([7])
        );

        stub.answer(
            "GET",
            "/repos/acme/app/pulls",
            200,
            json!([fork, other, pr]),
        );
        stub.answer("PATCH", "/repos/acme/app/pulls/3", 200, pr.clone());
        let (again, created) = gt.open_or_update(&request()).expect("updated");
        assert!(!created && again.number == 3, "{kind}");

        stub.answer("GET", "/repos/acme/app/commits/f00/status", 200, json!({"state": "failure",
            "statuses": [{"context": "ci/build", "status": "success", "description": "ok"},
                         {"context": "ci/test", "status": "failure", "description": "3 tests failed"}]}));
        let checks = gt.checks(&got).expect("statuses");
        assert_eq!(checks.state, ChecksState::Failed);
        assert_eq!(checks.failures[0].name, "ci/test");
        assert_eq!(checks.failures[0].summary, "3 tests failed");

        stub.answer(
            "GET",
            "/repos/acme/app/pulls/3/reviews",
            200,
            json!([
            {"id": 50, "state": "APPROVED"}, {"id": 51, "state": "REQUEST_CHANGES", "official": true},
            {"id": 52, "state": "REQUEST_CHANGES", "official": false}]),
        );
        stub.answer(
            "GET",
            "/repos/acme/app/pulls/3/reviews/52/comments",
            200,
            json!([{"path": "main.go", "position": 1, "body": "a stranger's word"}]),
        );
        stub.answer(
            "GET",
            "/repos/acme/app/pulls/3/reviews/51/comments",
            200,
            json!([
            {"path": "main.go", "position": 22, "body": "handle the error"}]),
        );
        let comments = gt.review_comments(3, None).expect("reviews");
        assert_eq!(comments.len(), 1);
        assert_eq!(comments[0].line_text(), "main.go:22: handle the error");

        stub.answer(
            "GET",
            "/repos/acme/app/pulls/3",
            200,
            json!({"number": 3, "html_url": "u",
            "state": "closed", "merged": true}),
        );
        assert_eq!(gt.get(3).expect("pr").state, PrState::Merged);
    }
}

#[test]
fn a_refusal_says_what_to_do_and_never_carries_the_token() {
    let (server, stub) = stubs::forge::start();
    for kind in [Kind::Github, Kind::Gitlab, Kind::Gitea] {
        stub.answer("GET", "/user", 401, json!({"message": "Bad credentials"}));
        let err = client(kind, &server.url, "acme/app")
            .whoami()
            .expect_err("refused")
            .to_string();
        assert!(
            err.contains("answered 401") && err.contains("Bad credentials"),
            "{err}"
        );
        assert!(err.contains("token_env"), "{err}");
        assert!(!err.contains(TOKEN), "{err}");
    }
    // Nothing listens on this port once the listener is dropped.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let err = client(
        Kind::Github,
        &format!("http://127.0.0.1:{port}"),
        "acme/app",
    )
    .whoami()
    .expect_err("unreachable")
    .to_string();
    assert!(
        err.contains("could not be reached") && !err.contains(TOKEN),
        "{err}"
    );
}

/// Open issues by label, as each forge's issue list documents them, and comments on an
/// issue (GitLab keeps them apart from merge request notes).
#[test]
fn open_issues_by_label_and_issue_comments_on_each_forge() {
    let (server, stub) = stubs::forge::start();
    let gh = client(Kind::Github, &server.url, "acme/app");
    stub.answer(
        "GET",
        "/repos/acme/app/issues",
        200,
        json!([
            {"number": 7, "title": "Crash", "body": "It crashes", "state": "open",
             "html_url": "https://github.com/acme/app/issues/7", "labels": [{"name": "baton"}]},
            {"number": 12, "title": "A pull request", "body": "", "state": "open",
             "html_url": "u", "labels": [{"name": "baton"}], "pull_request": {"url": "x"}}
        ]),
    );
    let issues = gh.open_issues("good first").expect("listed");
    assert_eq!(issues.len(), 1, "pull requests are left out: {issues:?}");
    assert_eq!(
        (issues[0].number, issues[0].body.as_str()),
        (7, "It crashes")
    );
    assert_eq!(issues[0].key(), "issue:github:acme/app:7");
    let asked = &stub.calls("GET", "/repos/acme/app/issues?")[0];
    assert!(asked.path.contains("state=open"), "{}", asked.path);
    assert!(asked.path.contains("labels=good%20first"), "{}", asked.path);

    let gl = client(Kind::Gitlab, &server.url, "acme/app");
    stub.answer(
        "GET",
        "/projects/acme%2Fapp/issues",
        200,
        json!([{"iid": 3, "title": "T", "description": "D", "state": "opened",
            "web_url": "https://gitlab.com/acme/app/-/issues/3", "labels": ["baton"]}]),
    );
    let issues = gl.open_issues("baton").expect("listed");
    assert_eq!(issues.len(), 1);
    assert_eq!(
        (issues[0].number, issues[0].labels.clone()),
        (3, vec!["baton".to_string()])
    );
    let asked = &stub.calls("GET", "/projects/acme%2Fapp/issues?")[0];
    assert!(
        asked.path.contains("state=opened&labels=baton"),
        "{}",
        asked.path
    );
    stub.answer(
        "POST",
        "/projects/acme%2Fapp/issues/3/notes",
        201,
        json!({"id": 1}),
    );
    gl.comment_issue(3, "on it").expect("commented");
    assert_eq!(
        stub.calls("POST", "/projects/acme%2Fapp/issues/3/notes")[0].body["body"],
        "on it"
    );

    let gt = client(Kind::Forgejo, &server.url, "acme/app");
    stub.answer(
        "GET",
        "/repos/acme/app/issues",
        200,
        json!([{"number": 5, "title": "T", "body": "B", "state": "open", "html_url": "u",
            "labels": [{"name": "baton"}]}]),
    );
    let issues = gt.open_issues("baton").expect("listed");
    assert_eq!((issues[0].number, issues[0].forge.as_str()), (5, "forgejo"));
    let asked = stub.calls("GET", "/repos/acme/app/issues?");
    assert!(
        asked.last().unwrap().path.contains("type=issues"),
        "{:?}",
        asked.last()
    );
    stub.answer(
        "POST",
        "/repos/acme/app/issues/5/comments",
        201,
        json!({"id": 1}),
    );
    gt.comment_issue(5, "on it").expect("commented");
    assert_eq!(
        stub.calls("POST", "/repos/acme/app/issues/5/comments")
            .len(),
        1
    );
}
