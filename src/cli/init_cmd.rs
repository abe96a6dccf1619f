//! What `baton init` writes besides the bare `.baton/` folder: the JSON Schemas editors use
//! to check and complete the workspace's pipeline and agent files.

use super::Failure;
use crate::workspace::Workspace;
use std::path::PathBuf;

/// `.baton/schemas/`.
pub fn schemas_dir(ws: &Workspace) -> PathBuf {
    ws.dir().join("schemas")
}

/// Writes (or refreshes, after an upgrade) `.baton/schemas/{pipeline,agent}.schema.json`, the
/// schemas of this baton's file formats. Returns true when a file changed.
pub fn write_schemas(ws: &Workspace) -> Result<bool, Failure> {
    let dir = schemas_dir(ws);
    std::fs::create_dir_all(&dir)
        .map_err(|e| Failure::new(format!("cannot create {}: {e}", dir.display())))?;
    let mut changed = false;
    for (name, text) in [
        (
            "pipeline.schema.json",
            crate::pipeline::schema::pipeline_schema_json(),
        ),
        (
            "agent.schema.json",
            crate::agents::schema::agent_schema_json(),
        ),
    ] {
        let path = dir.join(name);
        if std::fs::read_to_string(&path).ok().as_deref() == Some(text.as_str()) {
            continue;
        }
        std::fs::write(&path, text)
            .map_err(|e| Failure::new(format!("cannot write {}: {e}", path.display())))?;
        changed = true;
    }
    Ok(changed)
}

/// The `$schema` of a file in `.baton/pipelines/`.
const PIPELINE_SCHEMA: &str = "../schemas/pipeline.schema.json";
/// The `$schema` of a file in `.baton/agents/`.
const AGENT_SCHEMA: &str = "../schemas/agent.schema.json";

/// The backends `init --agent` sets up.
const KINDS: &str = "claude, codex, opencode[=URL] or openai[=URL]";

/// Closing words of every prompt: the handoff headings the next agent reads.
const HANDOFF: &str = "End with the headings `What Was Done`, `Decisions Made`, `Open Questions` and `Next Agent Context`.";

/// The three roles of the `feature` pipeline: id, what it is told, its outcomes. The coder
/// is not told to commit: the CLIs' sandboxes forbid it (a codex `workspace-write` sandbox
/// cannot write the worktree's git folder; claude under `acceptEdits` refuses `git commit`),
/// and baton commits what a step leaves anyway.
const ROLES: [(&str, &str, &[&str]); 3] = [
    (
        "planner",
        "You are planning a change to this repository. Do not edit files.",
        &["success", "failure", "needs_info"],
    ),
    (
        "coder",
        "Implement this change in the current working tree. Leave your changes there and do not commit them: baton commits what this step leaves.",
        &["success", "failure", "needs_info"],
    ),
    (
        "reviewer",
        "Review the change on this branch (`git diff` against its base). Do not edit files. List concrete problems with file and line, most serious first. End with `OUTCOME: success` if it can be merged as is, or `OUTCOME: changes_requested`.",
        &["success", "failure", "changes_requested"],
    ),
];

/// The model `init --agent openai` names (Ollama's tag; change it in the files).
const OPENAI_MODEL: &str = "qwen2.5-coder";

/// The provider name under which `.baton/opencode.json` gives OpenCode the user's
/// OpenAI-compatible server.
const OPENCODE_PROVIDER: &str = "baton";

/// `spec` split into the backend kind and its URL, if any.
fn split_spec(spec: &str) -> (&str, Option<&str>) {
    match spec.split_once('=') {
        Some((k, u)) => (k.trim(), Some(u.trim())),
        None => (spec.trim(), None),
    }
}

/// The URL `openai[=URL]` talks to.
fn openai_url(url: Option<&str>) -> &str {
    url.unwrap_or("http://127.0.0.1:11434/v1")
}

/// True for a server on this machine, which needs no key.
fn is_local(url: &str) -> bool {
    ["//127.0.0.1", "//localhost", "//[::1]"]
        .iter()
        .any(|h| url.contains(h))
}

/// The profile of `role` for backend `spec` (`claude`, `codex`, `opencode[=URL]`,
/// `openai[=URL]`), or why `spec` is not one.
pub fn profile(spec: &str, role: &str) -> Result<serde_json::Value, String> {
    use serde_json::json;
    let (kind, url) = split_spec(spec);
    let (instructions, outcomes) = ROLES
        .iter()
        .find(|(id, _, _)| *id == role)
        .map(|(_, i, o)| (*i, *o))
        .ok_or_else(|| format!("no role `{role}`"))?;
    let edits = role == "coder";
    let template = format!(
        "{instructions}\n\n# {{{{title}}}}\n\n{{{{prompt}}}}\n\n{{{{handoff}}}}\n\n{{{{failure}}}}\n\n{{{{note}}}}\n\n{{{{messages}}}}\n\n{HANDOFF} If you cannot go on without more information, end with the line `OUTCOME: needs_info`."
    );
    let mut p = json!({"$schema": AGENT_SCHEMA, "id": role});
    let backend = match (kind, url) {
        // The prompt goes on stdin (one argv element is capped at 128 KiB on Linux), as
        // the first user message of a stream-json input that `baton say` adds to mid-run.
        ("claude", None) => {
            let mode = if edits { "acceptEdits" } else { "plan" };
            json!({"backend": "command", "format": "claude-stream-json", "prompt_via": "stdin",
                "input": "stream-json",
                "argv": ["claude", "-p", "--input-format", "stream-json", "--output-format",
                         "stream-json", "--verbose", "--permission-mode", mode],
                "resume_argv": ["claude", "-p", "--resume", "{{session}}", "--input-format",
                                "stream-json", "--output-format", "stream-json", "--verbose",
                                "--permission-mode", mode],
                "attach_argv": ["claude", "--resume", "{{session}}"]})
        }
        ("codex", None) => {
            let sandbox = if edits {
                "workspace-write"
            } else {
                "read-only"
            };
            // `exec resume` takes the exec's own options before it (it has no `--sandbox`).
            json!({"backend": "command", "format": "codex-json", "prompt_via": "stdin",
                "argv": ["codex", "exec", "--json", "--skip-git-repo-check", "--sandbox", sandbox, "-"],
                "resume_argv": ["codex", "exec", "--json", "--skip-git-repo-check", "--sandbox",
                                sandbox, "resume", "{{session}}", "-"],
                "attach_argv": ["codex", "resume", "{{session}}"]})
        }
        ("opencode", None) => json!({"backend": "opencode", "serve": true,
            "agent": if edits { "build" } else { "plan" },
            "attach_argv": ["opencode", "--session", "{{session}}"]}),
        ("opencode", Some(url)) => json!({"backend": "opencode", "url": url,
            "agent": if edits { "build" } else { "plan" },
            "attach_argv": ["opencode", "attach", url, "--session", "{{session}}"]}),
        // A chat endpoint has no tool loop and cannot edit files: the coder is OpenCode,
        // started by baton, with the same server as its model provider.
        ("openai", _) if edits => json!({"backend": "opencode", "serve": true, "agent": "build",
            "model": format!("{OPENCODE_PROVIDER}/{OPENAI_MODEL}"),
            "attach_argv": ["opencode", "--session", "{{session}}"]}),
        ("openai", url) => {
            let url = openai_url(url);
            let mut b = json!({"backend": "openai", "url": url, "model": OPENAI_MODEL});
            if !is_local(url) {
                b["api_key_env"] = json!("OPENAI_API_KEY");
            }
            b
        }
        ("claude" | "codex", Some(_)) => {
            return Err(format!("`{kind}` takes no URL; use --agent {kind}"));
        }
        _ => return Err(format!("unknown agent `{spec}` (use {KINDS})")),
    };
    for (k, v) in backend.as_object().into_iter().flatten() {
        p[k] = v.clone();
    }
    p["prompt_template"] = json!(template);
    p["outcomes"] = json!(outcomes);
    // The coder and planner continue their session on rework; a reviewer stays independent,
    // and a chat endpoint keeps no session.
    let session = if role == "reviewer" || p["backend"] == "openai" {
        "fresh"
    } else {
        "continue"
    };
    p["session"] = json!(session);
    Ok(p)
}

/// `.baton/opencode.json` for `init --agent openai`: the OpenCode configuration baton's
/// OpenCode server reads, naming the user's OpenAI-compatible server as a provider.
pub fn opencode_config(spec: &str) -> Option<serde_json::Value> {
    let (kind, url) = split_spec(spec);
    if kind != "openai" {
        return None;
    }
    let url = openai_url(url);
    let mut options = serde_json::json!({"baseURL": url});
    if !is_local(url) {
        options["apiKey"] = serde_json::json!("{env:OPENAI_API_KEY}");
    }
    Some(serde_json::json!({
        "$schema": "https://opencode.ai/config.json",
        "model": format!("{OPENCODE_PROVIDER}/{OPENAI_MODEL}"),
        "small_model": format!("{OPENCODE_PROVIDER}/{OPENAI_MODEL}"),
        "permission": {"edit": "allow", "bash": "allow"},
        "provider": {OPENCODE_PROVIDER: {
            "npm": "@ai-sdk/openai-compatible",
            "name": "baton: your OpenAI-compatible server",
            "options": options,
            "models": {OPENAI_MODEL: {"name": OPENAI_MODEL}}
        }}
    }))
}

/// What `init --agent SPEC` set up, in a sentence or two.
fn summary(spec: &str) -> String {
    let (kind, url) = split_spec(spec);
    match (kind, url) {
        ("claude", _) => "planner and reviewer run `claude -p` in plan mode; the coder runs it with `--permission-mode acceptEdits`; prompts go on stdin, and baton commits what the coder leaves.".into(),
        ("codex", _) => "planner and reviewer run `codex exec` in a read-only sandbox; the coder in a `workspace-write` sandbox; prompts go on stdin, and baton commits what the coder leaves.".into(),
        ("opencode", None) => "baton starts `opencode serve` itself when a step needs it (one per workspace, stopped with the engine); planner and reviewer use OpenCode's `plan` agent, the coder its `build` agent.".into(),
        ("opencode", Some(u)) => format!("the agents talk to the OpenCode server you run at {u} (start it in the repository with `opencode serve`)."),
        (_, url) => format!(
            "planner and reviewer talk to {} directly; that backend has no tools and cannot edit files, so the coder is OpenCode (baton starts `opencode serve`) using the same server as its model provider, set in .baton/opencode.json (model `{OPENAI_MODEL}`: change it there and in the profiles). Install OpenCode (`npm install -g opencode-ai`) for the coder.",
            openai_url(url)
        ),
    }
}

/// The `feature` pipeline `init --agent` writes: plan, a human look at the plan, build, an
/// agent review that can send the work back, a human review, then a local merge — or, in a
/// workspace with a forge, a pull request the task follows until it is merged.
pub fn feature_pipeline() -> serde_json::Value {
    serde_json::json!({
        "$schema": PIPELINE_SCHEMA,
        "id": "feature",
        "name": "Feature",
        "description": "Plan, approve the plan, implement, agent review, human review",
        "statuses": [
            {"id": "todo", "label": "To do", "kind": "queue"},
            {"id": "plan", "label": "Planning", "step": {"agent": "planner", "timeout": "15m"}},
            {"id": "plan_review", "label": "Plan review", "kind": "gate"},
            {"id": "build", "label": "Implementing", "step": {"agent": "coder", "timeout": "45m"}},
            {"id": "agent_review", "label": "Agent review", "step": {"agent": "reviewer", "timeout": "15m"}},
            {"id": "review", "label": "Review", "kind": "gate"},
            {"id": "in_pr", "label": "Pull request", "kind": "gate"},
            {"id": "done", "label": "Done", "kind": "done"},
            {"id": "failed", "label": "Failed", "kind": "failed"},
            {"id": "cancelled", "label": "Cancelled", "kind": "cancelled"}
        ],
        "transitions": [
            {"from": "todo", "to": "plan", "on": "start"},
            {"from": "plan", "to": "todo", "on": "outcome:needs_info", "label": "Needs more information"},
            {"from": "plan_review", "to": "build", "on": "approve", "label": "Approve plan"},
            {"from": "plan_review", "to": "plan", "on": "reject", "label": "Re-plan"},
            {"from": "build", "to": "todo", "on": "outcome:needs_info", "label": "Needs more information"},
            {"from": "agent_review", "to": "build", "on": "outcome:changes_requested", "label": "Changes requested", "guards": [{"max_visits": 3}]},
            {"from": "review", "to": "in_pr", "on": "approve", "label": "Open a pull request", "guards": [{"forge": true}], "hooks": [{"pr": {}}]},
            {"from": "review", "to": "done", "on": "approve", "label": "Merge", "hooks": [{"merge": {}}]},
            {"from": "review", "to": "build", "on": "reject", "label": "Changes requested"},
            {"from": "in_pr", "to": "done", "on": "pr_merged", "label": "Merged"},
            {"from": "in_pr", "to": "cancelled", "on": "pr_closed", "label": "Closed without merging"},
            {"from": "in_pr", "to": "build", "on": "ci_failed", "label": "CI failed"},
            {"from": "in_pr", "to": "build", "on": "changes_requested", "label": "Changes requested on the pull request"}
        ]
    })
}

/// Writes the profiles and the `feature` pipeline for `spec`, keeping files that exist.
pub fn write_agent_setup(ws: &Workspace, spec: &str) -> Result<(), Failure> {
    let mut files = Vec::new();
    for (role, _, _) in ROLES {
        let p = profile(spec, role).map_err(Failure::new)?;
        files.push((ws.agents_dir().join(format!("{role}.json")), p));
    }
    files.push((ws.pipelines_dir().join("feature.json"), feature_pipeline()));
    if let Some(config) = opencode_config(spec) {
        files.push((ws.dir().join("opencode.json"), config));
    }
    let mut kept = 0;
    let total = files.len();
    for (path, doc) in files {
        let shown = path
            .strip_prefix(ws.root())
            .unwrap_or(&path)
            .display()
            .to_string();
        if path.exists() {
            outln!("kept {shown} (it exists; remove it to have it rewritten)");
            kept += 1;
            continue;
        }
        let mut text = serde_json::to_string_pretty(&doc).unwrap_or_default();
        text.push('\n');
        std::fs::write(&path, text)
            .map_err(|e| Failure::new(format!("cannot write {}: {e}", path.display())))?;
        outln!("wrote {shown}");
    }
    if kept == 0 {
        outln!("{}", summary(spec));
    } else if kept < total {
        outln!(
            "some files were kept as they were, so the agents are not all set up for `{spec}` — the check below says what each one runs"
        );
    } else {
        outln!(
            "every file existed and was kept: nothing is set up for `{spec}` — remove the files above to have them written for it"
        );
    }
    Ok(())
}

/// `init --agent SPEC`: writes the setup, then checks every profile.
pub fn set_up_agent(ws: &Workspace, spec: &str) -> super::Outcome {
    write_agent_setup(ws, spec)?;
    outln!("checking the agents (baton agents check):");
    let root = ws.root().to_path_buf();
    super::pipelines::agents(Some(&root), super::AgentsCmd::Check)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_written_profile_parses_and_says_how_its_session_carries_on() {
        for kind in [
            "claude",
            "codex",
            "opencode",
            "opencode=http://127.0.0.1:4096",
            "openai",
        ] {
            for (role, _, _) in ROLES {
                let p = profile(kind, role).unwrap();
                let file = format!("{kind}/{role}.json");
                let (parsed, diags) = crate::agents::parse_profile(&file, &p.to_string());
                assert!(diags.is_empty(), "{file}: {diags:?}");
                let parsed = parsed.unwrap();
                // A reviewer stays independent; the others continue where they can.
                let continues =
                    role != "reviewer" && parsed.backend != crate::agents::Backend::Openai;
                assert_eq!(parsed.continues(), continues, "{file}: {p}");
                assert!(
                    parsed.prompt_template.contains("{{failure}}"),
                    "{file}: {p}"
                );
                // Every backend that keeps a session can be taken over interactively.
                let keeps_session = parsed.backend != crate::agents::Backend::Openai;
                assert_eq!(!parsed.attach_argv.is_empty(), keeps_session, "{file}: {p}");
                if parsed.backend == crate::agents::Backend::Command {
                    let resume = &parsed.resume_argv;
                    assert!(resume.iter().any(|a| a == "{{session}}"), "{file}: {p}");
                    // The same program, permissions and sandbox as a fresh run.
                    assert_eq!(resume[0], parsed.argv[0], "{file}");
                    for flag in ["--permission-mode", "--sandbox"] {
                        let value = |argv: &[String]| {
                            argv.iter()
                                .position(|a| a == flag)
                                .map(|i| argv[i + 1].clone())
                        };
                        assert_eq!(value(resume), value(&parsed.argv), "{file}: {flag}");
                    }
                }
            }
        }
    }
}
