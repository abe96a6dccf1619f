//! `baton serve` answering bad input: malformed ids and query parameters, bodies that are not
//! JSON or of the wrong shape, unknown methods and plain-text failures of `/mcp` all get one
//! JSON sentence with the status that fits; the GitHub webhook takes a tunnel's `Host`; an old
//! workspace's `.gitignore` learns to ignore the token.

mod api_common;
mod infra;

use api_common::Server;
use reqwest::StatusCode;
use reqwest::blocking::{Client, RequestBuilder};
use serde_json::Value;

fn client() -> Client {
    Client::builder().build().unwrap()
}

/// Sends the request; returns its status and its `error` sentence (the test fails when the
/// body is not `{"error": "..."}`).
fn refused(req: RequestBuilder) -> (StatusCode, String) {
    let res = req.send().unwrap();
    let status = res.status();
    let text = res.text().unwrap();
    let body: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{status}: the body is not JSON ({e}): {text}"));
    let sentence = body["error"].as_str().unwrap_or_else(|| panic!("{body}"));
    (status, sentence.to_string())
}

#[test]
fn bad_ids_queries_bodies_and_methods_get_a_json_sentence() {
    let ws = api_common::workspace();
    let s = Server::start(ws.path(), &[]);
    let c = client();
    let t = s.token();
    let get = |path: &str| c.get(s.url(path)).bearer_auth(&t);
    let post = |path: &str, body: &str| c.post(s.url(path)).bearer_auth(&t).body(body.to_string());

    let (status, m) = refused(get("/api/tasks/abc"));
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(m.contains("task ids are whole numbers"), "{m}");
    let (status, m) = refused(get("/api/tasks/-4"));
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(m.contains("task -4 does not exist"), "{m}");
    let (status, m) = refused(post("/api/tasks/seven/approve", ""));
    assert_eq!(status, StatusCode::BAD_REQUEST, "{m}");
    for query in ["tail=-1", "tail=99999999999999999999999", "after=x"] {
        let (status, m) = refused(get(&format!("/api/tasks/1/logs?{query}")));
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}");
        assert!(m.contains("the query string is wrong"), "{query}: {m}");
    }
    let (status, m) = refused(get("/api/tasks/1/logs?tail=0"));
    assert_eq!(status, StatusCode::BAD_REQUEST, "{m}");
    assert!(m.contains("`tail` counts lines from 1"), "{m}");
    let (status, m) = refused(get("/api/events?task=abc"));
    assert_eq!(status, StatusCode::BAD_REQUEST, "{m}");

    // Not JSON is 400; JSON of the wrong shape is 422; neither creates a task.
    let (status, m) = refused(post("/api/tasks", "{bad"));
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(m.contains("must be JSON like"), "{m}");
    for body in [
        "{}",
        r#"{"title": 5}"#,
        r#"{"title": "x", "start": "yes"}"#,
        "[]",
    ] {
        let (status, m) = refused(post("/api/tasks", body));
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}: {m}");
    }
    let (status, m) = refused(post("/api/tasks", r#"{"title": "x", "pipeline": "nope"}"#));
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(m.contains("no pipeline `nope`"), "{m}");
    let tasks: Value = get("/api/tasks").send().unwrap().json().unwrap();
    assert_eq!(tasks, serde_json::json!([]));

    let (status, m) = refused(c.delete(s.url("/api/tasks")).bearer_auth(&t));
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    assert!(m.contains("does not take that method"), "{m}");

    // rmcp's plain-text transport failures on /mcp, as sentences.
    let mcp = |body: &str| {
        post("/mcp", body)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream")
    };
    let (status, m) = refused(mcp("{bad"));
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(m.contains("not a JSON-RPC message"), "{m}");
    let list = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
    let (status, m) = refused(mcp(list));
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(m.contains("Mcp-Session-Id"), "{m}");
    let (status, m) = refused(mcp(list).header("Mcp-Session-Id", "no-such-session"));
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(m.contains("send initialize again"), "{m}");
}

/// GitHub's signature of a body.
fn sign(secret: &str, body: &[u8]) -> String {
    use hmac::{Hmac, Mac};
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(body);
    let hex: String = mac
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha256={hex}")
}

#[test]
fn github_deliveries_through_a_tunnel_are_checked_by_signature_not_host() {
    let ws = api_common::workspace();
    let s = Server::start(ws.path(), &[("BATON_GITHUB_SECRET", "hush")]);
    let c = client();
    let body = br#"{"zen": "Keep it logically awesome."}"#;
    let deliver = |signature: &str| {
        c.post(s.url("/hooks/github"))
            .header("Host", "abc123.ngrok-free.app")
            .header("X-GitHub-Event", "ping")
            .header("X-GitHub-Delivery", "tunnel-1")
            .header("X-Hub-Signature-256", signature)
            .body(body.to_vec())
            .send()
            .unwrap()
    };
    let bad = deliver(&sign("wrong", body));
    assert_eq!(bad.status(), StatusCode::UNAUTHORIZED);
    let said: Value = bad.json().unwrap();
    assert!(said.to_string().contains("does not match"), "{said}");
    // A delivery with no signature at all is told so, not that it "does not match".
    let unsigned = c
        .post(s.url("/hooks/github"))
        .header("X-GitHub-Event", "ping")
        .header("X-GitHub-Delivery", "tunnel-0")
        .body(body.to_vec())
        .send()
        .unwrap();
    assert_eq!(unsigned.status(), StatusCode::UNAUTHORIZED);
    let said: Value = unsigned.json().unwrap();
    assert!(
        said.to_string()
            .contains("has no X-Hub-Signature-256 header"),
        "{said}"
    );
    let good = deliver(&sign("hush", body));
    assert_eq!(good.status(), StatusCode::OK);
    let answer: Value = good.json().unwrap();
    assert_eq!(answer["event"], "ping", "{answer}");
    // The token-protected routes still refuse the tunnel's Host.
    let api = c
        .get(s.url("/api/tasks"))
        .bearer_auth(s.token())
        .header("Host", "abc123.ngrok-free.app")
        .send()
        .unwrap();
    assert_eq!(api.status(), StatusCode::FORBIDDEN);
}

#[test]
fn serving_an_old_workspace_adds_the_token_to_its_gitignore() {
    let ws = api_common::workspace();
    let ignore = ws.path().join(".baton/.gitignore");
    // `.gitignore` as workspaces made before the API have it.
    std::fs::write(
        &ignore,
        "baton.db*\nengine.lock\nengine.sock\nlogs/\ncontext/\n",
    )
    .unwrap();
    let s = Server::start(ws.path(), &[]);
    assert_eq!(s.token().len(), 64);
    let text = std::fs::read_to_string(&ignore).unwrap();
    assert!(text.lines().any(|l| l == "token"), "{text}");
    assert!(text.starts_with("baton.db*\n"), "{text}");
}
