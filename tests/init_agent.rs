//! `baton init --agent …` for each backend: the files it writes validate, and the check that
//! follows says what is missing and how to fix it. Fake binaries and loopback stub servers
//! stand in for the agents, and the real CLIs from npm show that `agents check` reads their
//! versions and login state.

mod common;
mod infra;
mod stubs;
use common::Ws;
use std::os::unix::fs::PermissionsExt;
use std::process::Output;

fn text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr)
}

/// `baton init --agent SPEC` with PATH = `extra` (if any) + the system folders, a HOME of
/// its own, no agent keys, and `vars` on top.
fn init_with(
    ws: &Ws,
    spec: &str,
    extra: Option<&std::path::Path>,
    vars: &[(&str, &str)],
) -> Output {
    let path = match extra {
        Some(dir) => format!("{}:/usr/bin:/bin", dir.display()),
        None => "/usr/bin:/bin".into(),
    };
    let mut cmd = ws.baton(&["init", "--agent", spec]);
    cmd.env("PATH", path)
        .env("HOME", ws.dir.path().join("home"));
    for var in [
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "CLAUDE_CODE_OAUTH_TOKEN",
        "CLAUDE_CONFIG_DIR",
        "CODEX_API_KEY",
        "GEMINI_API_KEY",
        "GOOGLE_API_KEY",
    ] {
        cmd.env_remove(var);
    }
    for (k, v) in vars {
        cmd.env(k, v);
    }
    cmd.timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap()
}

fn init(ws: &Ws, spec: &str, extra: Option<&std::path::Path>) -> Output {
    init_with(ws, spec, extra, &[])
}

/// A fake CLI `name` in the test's `bin/`: `--version` prints `version`, `login status`
/// exits with $FAKE_LOGIN (0 if unset), anything else exits 0.
fn fake_cli(ws: &Ws, name: &str, version: &str) -> std::path::PathBuf {
    let dir = ws.dir.path().join("bin");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(name);
    std::fs::write(
        &file,
        format!(
            "#!/bin/sh\ncase \"$1\" in\n--version) echo '{version}';;\nlogin) echo 'Logged in using ChatGPT'; exit ${{FAKE_LOGIN:-0}};;\nesac\nexit 0\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// The written files validate, and every non-demo profile uses `backend`.
fn assert_written(ws: &Ws, backend: &str) {
    assert_written_as(ws, [backend; 3])
}

/// The written files validate, and the planner, coder and reviewer use `backends`.
fn assert_written_as(ws: &Ws, backends: [&str; 3]) {
    let out = ws.ok(&["pipelines", "validate"]);
    assert!(!out.contains("error"), "{out}");
    let agents = ws.ok(&["agents", "list"]);
    for (role, backend) in ["planner", "coder", "reviewer"].into_iter().zip(backends) {
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

/// The role's profile as JSON.
fn profile(ws: &Ws, role: &str) -> serde_json::Value {
    let text =
        std::fs::read_to_string(ws.root().join(format!(".baton/agents/{role}.json"))).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn argv(p: &serde_json::Value) -> Vec<String> {
    p["argv"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect()
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

        let bin = fake_cli(&ws, program, "9.9.9 (fake)");
        let key = if kind == "claude" {
            ("ANTHROPIC_API_KEY", "sk-ant-not-to-be-printed")
        } else {
            ("CODEX_API_KEY", "sk-codex-not-to-be-printed")
        };
        let out = init_with(&ws, kind, Some(&bin), &[key]);
        assert!(out.status.success(), "{kind}: {}", text(&out));
        let said = text(&out);
        assert!(said.contains("kept .baton/agents/coder.json"), "{said}");
        assert!(
            said.contains(&format!("`{program}` 9.9.9 (fake) at {}", bin.display())),
            "{said}"
        );
        assert!(said.contains(&format!("key in ${}", key.0)), "{said}");
        assert!(!said.contains(key.1), "a secret was printed: {said}");
    }
}

#[test]
fn claude_profiles_can_edit_and_read_their_prompt_on_stdin() {
    let ws = Ws::new();
    let said = text(&init(&ws, "claude", None));
    assert!(said.contains("--permission-mode acceptEdits"), "{said}");
    for (role, mode) in [
        ("planner", "plan"),
        ("coder", "acceptEdits"),
        ("reviewer", "plan"),
    ] {
        let p = profile(&ws, role);
        let argv = argv(&p);
        let at = argv.iter().position(|a| a == "--permission-mode").unwrap();
        assert_eq!(argv[at + 1], mode, "{role}: {argv:?}");
        assert_eq!(p["prompt_via"], "stdin", "{role}: {p}");
        assert!(!argv.iter().any(|a| a.contains("{{message}}")), "{argv:?}");
        let prompt = p["prompt_template"].as_str().unwrap();
        assert!(!prompt.contains("commit it"), "{role}: {prompt}");
    }
    let coder = profile(&ws, "coder")["prompt_template"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        coder.contains("do not commit them: baton commits what this step leaves"),
        "{coder}"
    );
    // A second init keeps every file and says so instead of describing a setup.
    let said = text(&init(&ws, "claude", None));
    assert!(said.contains("every file existed and was kept"), "{said}");
    assert!(!said.contains("--permission-mode acceptEdits"), "{said}");
}

#[test]
fn codex_profiles_sandbox_the_coder_to_the_worktree_and_read_stdin() {
    let ws = Ws::new();
    init(&ws, "codex", None);
    for (role, sandbox) in [
        ("planner", "read-only"),
        ("coder", "workspace-write"),
        ("reviewer", "read-only"),
    ] {
        let p = profile(&ws, role);
        let argv = argv(&p);
        assert_eq!(&argv[..3], ["codex", "exec", "--json"], "{argv:?}");
        let at = argv.iter().position(|a| a == "--sandbox").unwrap();
        assert_eq!(argv[at + 1], sandbox, "{role}: {argv:?}");
        assert_eq!(
            argv.last().map(String::as_str),
            Some("-"),
            "stdin: {argv:?}"
        );
        assert_eq!(p["prompt_via"], "stdin", "{role}: {p}");
        assert!(!p["prompt_template"].as_str().unwrap().contains("commit it"));
    }
}

#[test]
fn agents_check_says_how_to_authenticate() {
    // claude: no key and no login.
    let ws = Ws::new();
    let bin = fake_cli(&ws, "claude", "2.1.332 (Claude Code)");
    let out = init(&ws, "claude", Some(&bin));
    assert!(!out.status.success(), "{}", text(&out));
    let said = text(&out);
    assert!(
        said.contains("`claude` 2.1.332 (Claude Code) at")
            && said.contains("but it has no credentials — set ANTHROPIC_API_KEY where the engine runs, or run `claude` once and log in"),
        "{said}"
    );
    // Its own login state is enough.
    let creds = ws.dir.path().join("home/.claude");
    std::fs::create_dir_all(&creds).unwrap();
    std::fs::write(creds.join(".credentials.json"), "{}").unwrap();
    let out = init(&ws, "claude", Some(&bin));
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("logged in ("), "{}", text(&out));

    // codex: `codex login status` decides.
    let ws = Ws::new();
    let bin = fake_cli(&ws, "codex", "codex-cli 0.169.0");
    let out = init_with(&ws, "codex", Some(&bin), &[("FAKE_LOGIN", "1")]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("but it is not logged in (`codex login status` failed) — run `codex login`, or set CODEX_API_KEY"),
        "{}",
        text(&out)
    );
    let out = init_with(&ws, "codex", Some(&bin), &[("FAKE_LOGIN", "0")]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("logged in (`codex login status`)") && !text(&out).contains("ChatGPT"),
        "{}",
        text(&out)
    );

    // A model provider of its own in ~/.codex/config.toml reads the key its env_key names.
    let codex_home = ws.dir.path().join("home/.codex");
    std::fs::create_dir_all(&codex_home).unwrap();
    std::fs::write(
        codex_home.join("config.toml"),
        "model_provider = \"stub\"\n[model_providers.stub]\nbase_url = \"http://127.0.0.1:9/v1\"\nwire_api = \"responses\"\nenv_key = \"STUB_OPENAI_KEY\"\n",
    )
    .unwrap();
    let out = init_with(&ws, "codex", Some(&bin), &[("FAKE_LOGIN", "1")]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("takes its key from $STUB_OPENAI_KEY, which is not set"),
        "{}",
        text(&out)
    );
    let out = init_with(
        &ws,
        "codex",
        Some(&bin),
        &[("FAKE_LOGIN", "1"), ("STUB_OPENAI_KEY", "sk-stub")],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("key in $STUB_OPENAI_KEY"),
        "{}",
        text(&out)
    );
    assert!(!text(&out).contains("sk-stub"), "{}", text(&out));

    // A CLI whose --version fails is broken, whatever PATH says.
    let ws = Ws::new();
    let dir = ws.dir.path().join("bin");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("claude"),
        "#!/bin/sh\necho 'Error: cannot find module' >&2\nexit 1\n",
    )
    .unwrap();
    std::fs::set_permissions(dir.join("claude"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = init_with(&ws, "claude", Some(&dir), &[("ANTHROPIC_API_KEY", "x")]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("`claude --version` failed (Error: cannot find module) — reinstall it (`npm install -g @anthropic-ai/claude-code`)"),
        "{}",
        text(&out)
    );
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
fn opencode_by_default_is_a_server_baton_starts() {
    let ws = Ws::new();
    let out = init(&ws, "opencode", None);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("baton starts `opencode serve` itself when a step needs it"),
        "{}",
        text(&out)
    );
    assert!(
        text(&out)
            .contains("`opencode` is not on PATH — install it (`npm install -g opencode-ai`)"),
        "{}",
        text(&out)
    );
    assert_written(&ws, "opencode");
    for role in ["planner", "coder", "reviewer"] {
        let p = profile(&ws, role);
        assert_eq!(p["serve"], true, "{p}");
        assert!(p.get("url").is_none(), "{p}");
    }
    assert_eq!(profile(&ws, "coder")["agent"], "build");
    assert_eq!(profile(&ws, "planner")["agent"], "plan");

    let bin = fake_cli(&ws, "opencode", "1.18.33");
    let out = init(&ws, "opencode", Some(&bin));
    assert!(out.status.success(), "{}", text(&out));
    let said = text(&out);
    assert!(
        said.contains("`opencode` 1.18.33 at")
            && said.contains("baton starts `opencode serve` when a step needs it"),
        "{said}"
    );
}

#[test]
fn openai_plans_and_reviews_and_opencode_codes_against_the_same_server() {
    let ws = Ws::new();
    let (server, _) = stubs::openai(&[]);
    let url = format!("{}/v1", server.url);
    let bin = fake_cli(&ws, "opencode", "1.18.33");
    let out = init(&ws, &format!("openai={url}"), Some(&bin));
    assert!(out.status.success(), "{}", text(&out));
    assert_written_as(&ws, ["openai", "opencode", "openai"]);
    let planner = std::fs::read_to_string(ws.root().join(".baton/agents/planner.json")).unwrap();
    assert!(
        !planner.contains("api_key_env"),
        "a local server needs no key: {planner}"
    );
    // The coder can edit: OpenCode, which baton starts, on the same model server.
    let coder = profile(&ws, "coder");
    assert_eq!(coder["serve"], true, "{coder}");
    assert_eq!(coder["model"], "baton/qwen2.5-coder", "{coder}");
    let config: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(ws.root().join(".baton/opencode.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        config["provider"]["baton"]["options"]["baseURL"],
        url.as_str(),
        "{config}"
    );
    assert_eq!(
        config["provider"]["baton"]["npm"],
        "@ai-sdk/openai-compatible"
    );
    let said = text(&out);
    assert!(
        said.contains("has no tools and cannot edit files, so the coder is OpenCode"),
        "{said}"
    );

    let ws = Ws::new();
    let bin = fake_cli(&ws, "opencode", "1.18.33");
    let out = init(&ws, "openai=https://api.example.invalid/v1", Some(&bin));
    assert!(!out.status.success());
    assert!(
        text(&out).contains("$OPENAI_API_KEY is not set — export it"),
        "{}",
        text(&out)
    );
    let config = std::fs::read_to_string(ws.root().join(".baton/opencode.json")).unwrap();
    assert!(config.contains("{env:OPENAI_API_KEY}"), "{config}");

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

/// The real CLIs from npm: `agents check` reads their versions and their login state, with
/// a HOME of their own (no login) and then with a key.
#[test]
fn agents_check_runs_the_real_clis() {
    let clis = ["claude", "codex", "gemini", "opencode"];
    if clis.iter().any(|c| infra::agent_cli(c).is_none()) {
        return;
    }
    let ws = Ws::new();
    for cli in clis {
        std::fs::write(
            ws.root().join(format!(".baton/agents/real-{cli}.json")),
            format!(
                r#"{{"id": "real-{cli}", "backend": "command", "argv": ["{cli}", "-p", "x"]}}"#
            ),
        )
        .unwrap();
    }
    let home = ws.dir.path().join("home");
    let check = |vars: &[(&str, &str)]| -> String {
        let mut cmd = ws.baton(&["agents", "check"]);
        cmd.env(
            "PATH",
            format!("{}:/usr/bin:/bin", infra::agent_clis_dir().display()),
        )
        .env("HOME", &home)
        .env("CODEX_HOME", home.join(".codex"))
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("OPENCODE_DISABLE_AUTOUPDATE", "1")
        .env("OPENCODE_DISABLE_MODELS_FETCH", "1");
        for var in [
            "ANTHROPIC_API_KEY",
            "CODEX_API_KEY",
            "GEMINI_API_KEY",
            "GOOGLE_API_KEY",
        ] {
            cmd.env_remove(var);
        }
        for (k, v) in vars {
            cmd.env(k, v);
        }
        let out = cmd
            .timeout(std::time::Duration::from_secs(120))
            .output()
            .unwrap();
        text(&out)
    };
    let line = |said: &str, cli: &str| -> String {
        said.lines()
            .find(|l| l.contains(&format!("real-{cli} ")))
            .unwrap_or_else(|| panic!("{said}"))
            .to_string()
    };
    let version = |l: &str| {
        l.split(['`', ' '])
            .any(|w| w.split('.').count() == 3 && w.split('.').all(|n| n.parse::<u32>().is_ok()))
    };
    std::fs::create_dir_all(home.join(".codex")).unwrap();
    let said = check(&[]);
    for cli in clis {
        let l = line(&said, cli);
        assert!(version(&l), "{cli} --version: {l}");
    }
    assert!(
        line(&said, "claude").starts_with("FAIL") && said.contains("set ANTHROPIC_API_KEY"),
        "{said}"
    );
    assert!(
        line(&said, "codex").starts_with("FAIL") && said.contains("run `codex login`"),
        "{said}"
    );
    assert!(
        line(&said, "gemini").starts_with("FAIL") && said.contains("set GEMINI_API_KEY"),
        "{said}"
    );
    assert!(line(&said, "opencode").starts_with("ok"), "{said}");

    let said = check(&[
        ("ANTHROPIC_API_KEY", "sk-ant-never-shown"),
        ("CODEX_API_KEY", "sk-never-shown"),
        ("GEMINI_API_KEY", "never-shown"),
    ]);
    for cli in clis {
        assert!(line(&said, cli).starts_with("ok"), "{said}");
    }
    assert!(!said.contains("never-shown"), "{said}");
}
