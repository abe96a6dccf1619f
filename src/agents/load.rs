//! The catalog of agent profiles: built-ins, then `.baton/agents/*.json` (same id wins).

use super::profile::{Profile, parse_profile};
use crate::pipeline::{Diagnostic, builtin_agent_sources};
use std::path::Path;

/// Every profile available to a workspace, plus what went wrong loading the rest.
#[derive(Debug, Clone, Default)]
pub struct AgentCatalog {
    /// Built-ins (replaced in place by a workspace profile of the same id), then the
    /// workspace's own in file-name order.
    pub profiles: Vec<Profile>,
    /// Errors and warnings of every file read, including files left out.
    pub diagnostics: Vec<Diagnostic>,
}

/// Why a step could not get its profile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ProfileError(pub String);

impl AgentCatalog {
    /// The profile with this id, or an error naming it (and the file's errors, if a file
    /// with that id was left out).
    pub fn get(&self, id: &str) -> Result<&Profile, ProfileError> {
        if let Some(p) = self.profiles.iter().find(|p| p.id == id) {
            return Ok(p);
        }
        let errors: Vec<String> = self
            .diagnostics
            .iter()
            .filter(|d| d.is_error() && d.message.contains(&format!("`{id}`")))
            .map(|d| d.to_string())
            .collect();
        if !errors.is_empty() {
            return Err(ProfileError(format!(
                "agent profile `{id}` has errors: {} — fix it and run `baton agents list`",
                errors.join("; ")
            )));
        }
        let known: Vec<&str> = self.profiles.iter().map(|p| p.id.as_str()).collect();
        Err(ProfileError(format!(
            "unknown agent profile `{id}` (known: {}) — add .baton/agents/{id}.json or fix the pipeline",
            known.join(", ")
        )))
    }

    /// True when some file had an error.
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }
}

/// Loads the built-in profiles, then `*.json` in `workspace_agents_dir` (a missing folder is
/// fine). A file with errors is left out; its diagnostics are kept.
pub fn load_agents(workspace_agents_dir: Option<&Path>) -> AgentCatalog {
    let mut cat = AgentCatalog::default();
    for (file, text) in builtin_agent_sources() {
        add(&mut cat, file, text, None);
    }
    let builtin_count = cat.profiles.len();
    let Some(dir) = workspace_agents_dir else {
        return cat;
    };
    let mut paths: Vec<_> = match std::fs::read_dir(dir) {
        Ok(entries) => entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "json") && p.is_file())
            .collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => {
            cat.diagnostics.push(file_error(
                &dir.display().to_string(),
                format!("cannot list agent profiles: {e}"),
            ));
            Vec::new()
        }
    };
    paths.sort();
    for path in paths {
        let file = path.display().to_string();
        match std::fs::read_to_string(&path) {
            Ok(text) => add(&mut cat, &file, &text, Some(builtin_count)),
            Err(e) => cat
                .diagnostics
                .push(file_error(&file, format!("cannot read: {e}"))),
        }
    }
    cat
}

fn add(cat: &mut AgentCatalog, file: &str, text: &str, builtins: Option<usize>) {
    let (profile, diags) = parse_profile(file, text);
    cat.diagnostics.extend(diags);
    let Some(profile) = profile else { return };
    let Some(builtin_count) = builtins else {
        cat.profiles.push(profile);
        return;
    };
    // A workspace file defines an id once: the first file (in name order) wins, whether the
    // id is new or overrides a built-in (which then no longer sits among the built-ins).
    let builtin = |p: &Profile| builtin_agent_sources().iter().any(|(f, _)| *f == p.file);
    if let Some(other) = cat
        .profiles
        .iter()
        .find(|p| p.id == profile.id && !builtin(p))
    {
        let msg = format!(
            "agent id `{}` is already defined by {}; this file is ignored",
            profile.id, other.file
        );
        cat.diagnostics.push(file_error(file, msg));
        return;
    }
    match cat.profiles[..builtin_count]
        .iter()
        .position(|p| p.id == profile.id)
    {
        Some(i) => cat.profiles[i] = profile,
        None => cat.profiles.push(profile),
    }
}

fn file_error(file: &str, message: String) -> Diagnostic {
    Diagnostic {
        file: file.to_string(),
        line: None,
        column: None,
        severity: crate::pipeline::Severity::Error,
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agents::Backend;

    #[test]
    fn builtins_load_cleanly() {
        let cat = load_agents(None);
        assert!(cat.diagnostics.is_empty(), "{:?}", cat.diagnostics);
        let ids: Vec<&str> = cat.profiles.iter().map(|p| p.id.as_str()).collect();
        assert!(
            ids.contains(&"planner") && ids.contains(&"coder"),
            "{ids:?}"
        );
    }

    #[test]
    fn workspace_overrides_and_errors_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("planner.json"),
            r#"{"id": "planner", "backend": "command", "argv": ["echo", "{{message}}"]}"#,
        )
        .unwrap();
        std::fs::write(
            dir.path().join("bad.json"),
            r#"{"id": "bad", "backend": "telepathy"}"#,
        )
        .unwrap();
        let cat = load_agents(Some(dir.path()));
        assert_eq!(cat.get("planner").unwrap().backend, Backend::Command);
        let err = cat.get("bad").unwrap_err().to_string();
        assert!(err.contains("bad.json"), "{err}");
        assert!(err.contains("unknown backend `telepathy`"), "{err}");
        let err = cat.get("nobody").unwrap_err().to_string();
        assert!(err.contains("unknown agent profile `nobody`"), "{err}");
    }

    #[test]
    fn two_files_overriding_one_builtin_keep_the_first_and_name_the_other() {
        let dir = tempfile::tempdir().unwrap();
        for (file, word) in [("a.json", "first"), ("b.json", "second")] {
            std::fs::write(
                dir.path().join(file),
                format!(r#"{{"id": "coder", "backend": "command", "argv": ["echo", "{word}", "{{{{message}}}}"]}}"#),
            )
            .unwrap();
        }
        let cat = load_agents(Some(dir.path()));
        assert_eq!(cat.get("coder").unwrap().argv[1], "first");
        let said: Vec<String> = cat.diagnostics.iter().map(|d| d.to_string()).collect();
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(said[0].contains("b.json"), "{said:?}");
        assert!(
            said[0].contains("already defined by") && said[0].contains("a.json"),
            "{said:?}"
        );
    }

    /// A profile's file is read as a pipeline's is: a BOM skipped, duplicate keys and bad
    /// ids located errors.
    #[test]
    fn agent_profiles_get_the_same_checks() {
        let parse = |t: &str| crate::agents::parse_profile("a.json", t);
        let ok = r#"{"id": "c", "backend": "command", "argv": ["x"]}"#;
        assert!(
            parse(&format!("\u{feff}{ok}")).0.is_some(),
            "a BOM is skipped"
        );
        let (p, d) = parse(r#"{"id": "c", "backend": "command", "argv": ["x"], "argv": ["y"]}"#);
        assert!(p.is_none());
        assert!(d[0].to_string().contains("duplicate key `argv`"), "{d:?}");
        let (p, d) = parse(r#"{"id": "../c", "backend": "command", "argv": ["x"]}"#);
        assert!(p.is_none());
        assert!(
            d[0].to_string()
                .starts_with("a.json:1:2: error: agent id `../c` contains `.`"),
            "{d:?}"
        );
    }
}
