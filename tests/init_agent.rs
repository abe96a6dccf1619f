//! `baton init --agent …` for each backend: the files it writes validate, and the check that
//! follows says what is missing and how to fix it. Fake binaries and loopback stub servers
//! stand in for the real agents.

mod common;
mod stubs;
use common::Ws;
use std::os::unix::fs::PermissionsExt;
use std::process::Output;

fn text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr)
}

/// `baton init --agent SPEC` with PATH = `extra` (if any) + the system folders.
fn init(ws: &Ws, spec: &str, extra: Option<&std::path::Path>) -> Output {
    let path = match extra {
        Some(dir) => format!("{}:/usr/bin:/bin", dir.display()),
        None => "/usr/bin:/bin".into(),
    };
    ws.baton(&["init", "--agent", spec])
        .env("PATH", path)
        .env_remove("OPENAI_API_KEY")
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap()
}

fn fake_bin(ws: &Ws, name: &str) -> std::path::PathBuf {
    let dir = ws.dir.path().join("bin");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(name);
    std::fs::write(&file, "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// The written files validate, and every non-demo profile uses `backend`.
fn assert_written(ws: &Ws, backend: &str) {
    let out = ws.ok(&["pipelines", "validate"]);
    assert!(!out.contains("error"), "{out}");
    let agents = ws.ok(&["agents", "list"]);
    for role in ["planner", "coder", "reviewer"] {
        let line = agents
            .lines()
            .find(|l| l.starts_with(role))
            .unwrap_or_else(|| panic!("{agents}"));
        assert!(line.contains(backend), "{role}: {line}");
        assert!(
            line.contains(".baton/agents"),
            "{role} comes from the workspace: {line}"
        );
        let file =
            std::fs::read_to_string(ws.root().join(format!(".baton/agents/{role}.json"))).unwrap();
        assert!(file.contains("\"$schema\": \"../schemas/agent.schema.json\""));
    }
    // And they validate against the schemas init wrote beside them (what editors use).
    for (schema, file) in [
        ("agent", "agents/planner.json"),
        ("agent", "agents/coder.json"),
        ("agent", "agents/reviewer.json"),
        ("pipeline", "pipelines/feature.json"),
    ] {
        let read = |p: &str| -> serde_json::Value {
            serde_json::from_str(
                &std::fs::read_to_string(ws.root().join(".baton").join(p)).unwrap(),
            )
            .unwrap()
        };
        let v = jsonschema::validator_for(&read(&format!("schemas/{schema}.schema.json"))).unwrap();
        let doc = read(file);
        let errors: Vec<String> = v.iter_errors(&doc).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{file}: {errors:?}");
    }
    let feature = ws.ok(&["pipelines", "show", "feature"]);
    assert!(feature.contains("agent_review"), "{feature}");
}

#[test]
fn claude_and_codex_need_their_binary_on_path() {
    for (kind, program, format) in [
        ("claude", "claude", "claude-stream-json"),
        ("codex", "codex", "codex-json"),
    ] {
        let ws = Ws::new();
        let out = init(&ws, kind, None);
        assert!(!out.status.success(), "{kind}: {}", text(&out));
        let said = text(&out);
        assert!(
            said.contains(&format!(
                "`{program}` is not on PATH — install it (`npm install -g"
            )),
            "{said}"
        );
        assert_written(&ws, "command");
        let coder = std::fs::read_to_string(ws.root().join(".baton/agents/coder.json")).unwrap();
        assert!(coder.contains(format), "{coder}");

        let bin = fake_bin(&ws, program);
        let out = init(&ws, kind, Some(&bin));
        assert!(out.status.success(), "{kind}: {}", text(&out));
        let said = text(&out);
        assert!(said.contains("kept .baton/agents/coder.json"), "{said}");
        assert!(
            said.contains(&format!("`{program}` found at {}", bin.display())),
            "{said}"
        );
    }
}

#[test]
fn opencode_needs_its_server() {
    let ws = Ws::new();
    let (server, _) = stubs::opencode(&[]);
    let out = init(&ws, &format!("opencode={}", server.url), None);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("OpenCode stub answers"),
        "{}",
        text(&out)
    );
    assert_written(&ws, "opencode");

    let ws = Ws::new();
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let out = init(&ws, &format!("opencode={url}"), None);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("start it with `opencode serve`"),
        "{}",
        text(&out)
    );
}

#[test]
fn openai_needs_its_server_and_a_key_off_this_machine() {
    let ws = Ws::new();
    let (server, _) = stubs::openai(&[]);
    let out = init(&ws, &format!("openai={}/v1", server.url), None);
    assert!(out.status.success(), "{}", text(&out));
    assert_written(&ws, "openai");
    let planner = std::fs::read_to_string(ws.root().join(".baton/agents/planner.json")).unwrap();
    assert!(
        !planner.contains("api_key_env"),
        "a local server needs no key: {planner}"
    );

    let ws = Ws::new();
    let out = init(&ws, "openai=https://api.example.invalid/v1", None);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("$OPENAI_API_KEY is not set — export it"),
        "{}",
        text(&out)
    );

    let ws = Ws::new();
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", closed.local_addr().unwrap());
    drop(closed);
    let out = init(&ws, &format!("openai={url}"), None);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("is the server running?"),
        "{}",
        text(&out)
    );
}

#[test]
fn an_unknown_backend_is_one_sentence() {
    let ws = Ws::new();
    let out = init(&ws, "telepathy", None);
    assert!(!out.status.success());
    let said = text(&out);
    assert!(
        said.contains(
            "unknown agent `telepathy` (use claude, codex, opencode[=URL] or openai[=URL])"
        ),
        "{said}"
    );
    assert!(!ws.root().join(".baton/agents/planner.json").exists());
}
