//! The `[executor]` table of `.baton/config.toml`: which executor runs steps that name none.
//!
//! ```toml
//! [executor]
//! default = "docker"
//! [executor.docker]
//! image = "rust:1.91"
//! ```
//!
//! The table under the default's name holds the same settings as a step's
//! `"executor": {"docker": {...}}`; tables for the other executors may sit beside it
//! (switching `default` then needs one edit) and are checked the same way.

use crate::pipeline::{ExecutorSpec, parse_executor};

const KINDS: &[&str] = &["local", "docker", "ssh", "kubernetes"];

/// The default executor the table names; `Err` holds the sentence for the user.
pub(super) fn default_executor(table: &toml::Table) -> Result<Option<ExecutorSpec>, String> {
    if let Some(k) = table
        .keys()
        .find(|k| *k != "default" && !KINDS.contains(&k.as_str()))
    {
        return Err(format!(
            "has an unknown entry `{k}` (expected `default` and tables named local, docker, ssh or kubernetes)"
        ));
    }
    let mut chosen = None;
    for kind in KINDS {
        let Some(settings) = table.get(*kind) else {
            continue;
        };
        let json = serde_json::to_value(settings).map_err(|e| e.to_string())?;
        let spec = parse_executor(&serde_json::json!({ *kind: json }))
            .map_err(|p| format!("[executor.{kind}]: {}", p.message))?;
        if table.get("default").and_then(|d| d.as_str()) == Some(*kind) {
            chosen = Some(spec);
        }
    }
    match table.get("default") {
        None => Err("needs `default = \"docker\"` (or local, ssh, kubernetes) to say which executor steps use".into()),
        Some(toml::Value::String(d)) if d == "local" => Ok(Some(ExecutorSpec::Local)),
        Some(toml::Value::String(d)) if KINDS.contains(&d.as_str()) => match chosen {
            Some(spec) => Ok(Some(spec)),
            None => Err(format!(
                "says default = \"{d}\" but has no [executor.{d}] table with its settings"
            )),
        },
        Some(other) => Err(format!(
            "default = {other} is not an executor (expected \"local\", \"docker\", \"ssh\" or \"kubernetes\")"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Option<ExecutorSpec>, String> {
        let table: toml::Table = toml::from_str(text).expect("toml");
        default_executor(table["executor"].as_table().expect("table"))
    }

    #[test]
    fn a_docker_default_with_its_settings() {
        let spec = parse("[executor]\ndefault = \"docker\"\n[executor.docker]\nimage = \"rust:1.91\"\nmemory = \"2g\"\n")
            .expect("parses")
            .expect("some");
        match spec {
            ExecutorSpec::Docker(d) => {
                assert_eq!(d.image, "rust:1.91");
                assert_eq!(d.memory, Some(2 << 30));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            parse("[executor]\ndefault = \"local\"\n").unwrap(),
            Some(ExecutorSpec::Local)
        );
    }

    #[test]
    fn mistakes_are_sentences() {
        for (text, want) in [
            (
                "[executor]\n[executor.docker]\nimage = \"a\"\n",
                "needs `default",
            ),
            (
                "[executor]\ndefault = \"docker\"\n",
                "no [executor.docker] table",
            ),
            ("[executor]\ndefault = \"podman\"\n", "is not an executor"),
            (
                "[executor]\ndefault = \"docker\"\n[executor.docker]\nimage = \"a\"\nvolume = \"x\"\n",
                "[executor.docker]: executor `docker`: unknown setting `volume`",
            ),
            (
                "[executor]\ndefault = \"local\"\nimage = \"a\"\n",
                "unknown entry `image`",
            ),
        ] {
            let err = parse(text).expect_err(text);
            assert!(err.contains(want), "{text}: {err}");
        }
    }
}
