//! The documentation stays true: the keymap page is generated from the keymap, the README
//! links only inside the repository, and every example profile in docs/agents.md loads.
//!
//! After changing a key: `BATON_BLESS=1 cargo test --test docs` rewrites docs/keymap.md.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn the_keymap_page_is_generated_from_the_keymap() {
    let generated = baton::tui::keymap_doc::markdown();
    let path = root().join("docs/keymap.md");
    if std::env::var_os("BATON_BLESS").is_some() {
        std::fs::write(&path, &generated).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "docs/keymap.md is not what src/tui/keymap.rs binds; run \
         `BATON_BLESS=1 cargo test --test docs` and commit the result"
    );
}

/// The targets of the Markdown links and images in `text` (`[x](target)`, `<a href=…>`).
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("](") {
        let after = &rest[i + 2..];
        let end = after.find(')').unwrap_or(after.len());
        out.push(after[..end].trim().to_string());
        rest = &after[end..];
    }
    for marker in ["href=\"", "src=\""] {
        let mut rest = text;
        while let Some(i) = rest.find(marker) {
            let after = &rest[i + marker.len()..];
            let end = after.find('"').unwrap_or(after.len());
            out.push(after[..end].to_string());
            rest = &after[end..];
        }
    }
    out
}

/// Why `target` (a link in `file`) leaves the repository or points nowhere.
fn problem(file: &Path, target: &str) -> Option<String> {
    let path = target.split('#').next().unwrap_or("");
    if path.is_empty() {
        return None; // An anchor in the same file.
    }
    if path.contains("://") || path.starts_with("mailto:") || path.starts_with('/') {
        return Some(format!("{target} leaves the repository"));
    }
    let full = file.parent().unwrap().join(path);
    let Ok(real) = full.canonicalize() else {
        return Some(format!("{target} does not exist"));
    };
    if !real.starts_with(root().canonicalize().unwrap()) {
        return Some(format!("{target} leaves the repository"));
    }
    None
}

#[test]
fn the_readme_links_only_inside_the_repository() {
    let readme = root().join("README.md");
    let text = std::fs::read_to_string(&readme).unwrap();
    let found = links(&text);
    assert!(found.iter().any(|l| l == "docs/agents.md"), "{found:?}");
    let bad: Vec<String> = found.iter().filter_map(|l| problem(&readme, l)).collect();
    assert!(bad.is_empty(), "README.md: {bad:#?}");
    // The detector itself catches what it must.
    for bad in [
        "https://example.com",
        "../outside.md",
        "/etc/passwd",
        "docs/nope.md",
    ] {
        assert!(problem(&readme, bad).is_some(), "{bad}");
    }
}

#[test]
fn relative_links_in_the_docs_point_at_files() {
    for entry in std::fs::read_dir(root().join("docs")).unwrap() {
        let file = entry.unwrap().path();
        let text = std::fs::read_to_string(&file).unwrap();
        for l in links(&text) {
            if l.contains("://") {
                continue; // The docs may cite the agents' own sites.
            }
            assert!(problem(&file, &l).is_none(), "{}: {l}", file.display());
        }
    }
}

#[test]
fn every_example_profile_in_the_agents_page_loads() {
    let text = std::fs::read_to_string(root().join("docs/agents.md")).unwrap();
    let schema: serde_json::Value =
        serde_json::from_str(&baton::agents::schema::agent_schema_json()).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let mut backends = Vec::new();
    for block in text.split("```json\n").skip(1) {
        let json = block.split("\n```").next().unwrap();
        let (profile, diags) = baton::agents::parse_profile("docs/agents.md", json);
        let profile = profile.unwrap_or_else(|| panic!("{json}\n{diags:?}"));
        assert!(diags.is_empty(), "{json}\n{diags:?}");
        let doc: serde_json::Value = serde_json::from_str(json).unwrap();
        let errors: Vec<String> = validator.iter_errors(&doc).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{json}\n{errors:?}");
        backends.push(format!(
            "{} {}",
            profile.backend.as_str(),
            profile.argv.first().map_or("", |s| s)
        ));
    }
    for want in [
        "opencode ",
        "openai ",
        "command claude",
        "command codex",
        "command gemini",
        "replay ",
    ] {
        assert!(
            backends.iter().any(|b| b == want),
            "no {want:?} example: {backends:?}"
        );
    }
}

#[test]
fn the_complete_pipeline_example_validates() {
    let text = std::fs::read_to_string(root().join("docs/pipelines.md")).unwrap();
    let example = text
        .split("```json\n")
        .nth(1)
        .and_then(|b| b.split("\n```").next())
        .unwrap();
    let (pipeline, diags) = baton::pipeline::parse_pipeline("docs/pipelines.md", example, None);
    assert!(pipeline.is_some() && diags.is_empty(), "{diags:#?}");
    let schema: serde_json::Value =
        serde_json::from_str(&baton::pipeline::schema::pipeline_schema_json()).unwrap();
    let doc: serde_json::Value = serde_json::from_str(example).unwrap();
    let errors: Vec<String> = jsonschema::validator_for(&schema)
        .unwrap()
        .iter_errors(&doc)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{errors:?}");
}
