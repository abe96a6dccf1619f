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

/// The three roles of the `feature` pipeline: id, what it is told, its outcomes.
const ROLES: [(&str, &str, &[&str]); 3] = [
    (
        "planner",
        "You are planning a change to this repository. Do not edit files.",
        &["success", "failure", "needs_info"],
    ),
    (
        "coder",
        "Implement this change in the current working tree and commit it.",
        &["success", "failure", "needs_info"],
    ),
    (
        "reviewer",
        "Review the change on this branch (`git diff` against its base). List concrete problems with file and line, most serious first. End with `OUTCOME: success` if it can be merged as is, or `OUTCOME: changes_requested`.",
        &["success", "failure", "changes_requested"],
    ),
];

/// The profile of `role` for backend `spec` (`claude`, `codex`, `opencode[=URL]`,
/// `openai[=URL]`), or why `spec` is not one.
pub fn profile(spec: &str, role: &str) -> Result<serde_json::Value, String> {
    use serde_json::json;
    let (kind, url) = match spec.split_once('=') {
        Some((k, u)) => (k.trim(), Some(u.trim())),
        None => (spec.trim(), None),
    };
    let (instructions, outcomes) = ROLES
        .iter()
        .find(|(id, _, _)| *id == role)
        .map(|(_, i, o)| (*i, *o))
        .ok_or_else(|| format!("no role `{role}`"))?;
    let template = format!(
        "{instructions}\n\n# {{{{title}}}}\n\n{{{{prompt}}}}\n\n{{{{handoff}}}}\n\n{{{{note}}}}\n\n{HANDOFF} If you cannot go on without more information, end with the line `OUTCOME: needs_info`."
    );
    let edits = role == "coder";
    let mut p = json!({"$schema": AGENT_SCHEMA, "id": role});
    let backend = match (kind, url) {
        ("claude", None) => {
            let mode = if edits { "acceptEdits" } else { "plan" };
            json!({"backend": "command", "format": "claude-stream-json",
                "argv": ["claude", "-p", "--output-format", "stream-json", "--verbose",
                         "--permission-mode", mode, "{{message}}"]})
        }
        ("codex", None) => {
            let sandbox = if edits {
                "workspace-write"
            } else {
                "read-only"
            };
            json!({"backend": "command", "format": "codex-json",
                "argv": ["codex", "exec", "--json", "--sandbox", sandbox, "{{message}}"]})
        }
        ("opencode", url) => json!({"backend": "opencode",
            "url": url.unwrap_or(crate::agents::DEFAULT_OPENCODE_URL),
            "agent": if edits { "build" } else { "plan" }}),
        ("openai", url) => {
            let url = url.unwrap_or("http://127.0.0.1:11434/v1");
            let local = ["//127.0.0.1", "//localhost", "//[::1]"]
                .iter()
                .any(|h| url.contains(h));
            let mut b = json!({"backend": "openai", "url": url, "model": "qwen2.5-coder"});
            if !local {
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
    Ok(p)
}

/// The `feature` pipeline `init --agent` writes: plan, a human look at the plan, build, an
/// agent review that can send the work back, a human review, done.
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
            {"from": "review", "to": "done", "on": "approve", "label": "Merge", "hooks": [{"merge": {}}]},
            {"from": "review", "to": "build", "on": "reject", "label": "Changes requested"}
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
    for (path, doc) in files {
        let shown = path
            .strip_prefix(ws.root())
            .unwrap_or(&path)
            .display()
            .to_string();
        if path.exists() {
            println!("kept {shown} (it exists; remove it to have it rewritten)");
            continue;
        }
        let mut text = serde_json::to_string_pretty(&doc).unwrap_or_default();
        text.push('\n');
        std::fs::write(&path, text)
            .map_err(|e| Failure::new(format!("cannot write {}: {e}", path.display())))?;
        println!("wrote {shown}");
    }
    Ok(())
}

/// `init --agent SPEC`: writes the setup, then checks every profile.
pub fn set_up_agent(ws: &Workspace, spec: &str) -> super::Outcome {
    write_agent_setup(ws, spec)?;
    println!("checking the agents (baton agents check):");
    let root = ws.root().to_path_buf();
    super::pipelines::agents(Some(&root), super::AgentsCmd::Check)
}
