//! Where a step runs: the `"executor"` field of a step or agent profile, and the `[executor]`
//! table of `.baton/config.toml`. One parser serves all three; each caller places its errors.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// The executor a step names, with its settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExecutorSpec {
    /// `{"local": {}}`: `sh -c` (or the argv) on this machine, in the task's worktree.
    Local,
    /// `{"docker": {"image": "rust:1.91"}}`: a container of a Docker Engine.
    Docker(DockerSpec),
    /// `{"ssh": {"host": "buildbox"}}`: another machine through the system `ssh` client.
    Ssh(SshSpec),
    /// `{"kubernetes": {"image": "..."}}`: a Job on a cluster.
    Kubernetes(KubeSpec),
}

impl ExecutorSpec {
    /// The executor's name as written in files.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Local => "local",
            Self::Docker(_) => "docker",
            Self::Ssh(_) => "ssh",
            Self::Kubernetes(_) => "kubernetes",
        }
    }

    /// A short human description: `docker rust:1.91`, `ssh buildbox`.
    pub fn describe(&self) -> String {
        match self {
            Self::Local => "local".into(),
            Self::Docker(d) => format!("docker {}", d.image),
            Self::Ssh(s) => format!("ssh {}", s.host),
            Self::Kubernetes(k) => format!("kubernetes {}", k.image),
        }
    }
}

/// What to do when a docker image is not on the daemon.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PullPolicy {
    /// Never pull: a missing image fails the step with a sentence saying how to get it.
    #[default]
    Never,
    /// Pull the image when the daemon does not have it.
    Missing,
}

/// Settings of the docker executor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DockerSpec {
    pub image: String,
    /// The container network (`bridge` when absent; `none` cuts it off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<String>,
    /// Memory limit in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<u64>,
    /// CPU limit in cores (`1.5`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<f64>,
    #[serde(default)]
    pub pull: PullPolicy,
}

/// Settings of the ssh executor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SshSpec {
    /// A host as `ssh` understands it (`~/.ssh/config` applies).
    pub host: String,
    /// Where on the host baton keeps its mirrors and worktrees.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dir: Option<String>,
}

/// Settings of the kubernetes executor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KubeSpec {
    pub image: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Requests and limits: `cpu` (`"500m"`, `"2"`) and `memory` (`"2Gi"`), as Kubernetes
    /// writes them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub resources: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    /// The git remote the pod clones the task branch from and pushes back to (usually set
    /// once under `[executor.kubernetes]` in config.toml).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git_remote: Option<String>,
}

/// A problem in an executor object: the path below it (JSON pointer pieces) and what is
/// wrong.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecutorProblem {
    pub at: Vec<String>,
    pub message: String,
}

const KINDS: &str = "local, docker, ssh or kubernetes";

fn problem(at: &[&str], message: impl Into<String>) -> ExecutorProblem {
    ExecutorProblem {
        at: at.iter().map(|s| s.to_string()).collect(),
        message: message.into(),
    }
}

/// Parses `{"docker": {...}}` and its siblings. Unknown settings are errors (a typo in a
/// sandbox's settings must not silently widen it).
pub fn parse_executor(v: &Value) -> Result<ExecutorSpec, ExecutorProblem> {
    let example = r#"{"docker": {"image": "rust:1.91"}}"#;
    let Some(obj) = v.as_object() else {
        return Err(problem(
            &[],
            format!("`executor` must be an object like {example}"),
        ));
    };
    let mut keys = obj.keys().filter(|k| !k.starts_with('_'));
    let (Some(kind), None) = (keys.next(), keys.next()) else {
        return Err(problem(
            &[],
            format!("`executor` names exactly one of {KINDS}, like {example}"),
        ));
    };
    let body = &obj[kind];
    let Some(b) = body.as_object() else {
        return Err(problem(
            &[kind],
            format!("executor `{kind}` takes an object of settings (`{{}}` for none)"),
        ));
    };
    let known: &[&str] = match kind.as_str() {
        "local" => &[],
        "docker" => &["image", "network", "memory", "cpus", "pull"],
        "ssh" => &["host", "dir"],
        "kubernetes" => &[
            "image",
            "namespace",
            "resources",
            "node_selector",
            "git_remote",
        ],
        other => {
            return Err(problem(
                &[other],
                format!("unknown executor `{other}` (expected {KINDS})"),
            ));
        }
    };
    if let Some(k) = b
        .keys()
        .find(|k| !known.contains(&k.as_str()) && !k.starts_with('_'))
    {
        return Err(problem(
            &[kind, k],
            format!(
                "executor `{kind}`: unknown setting `{k}` (known: {})",
                if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                }
            ),
        ));
    }
    Ok(match kind.as_str() {
        "local" => ExecutorSpec::Local,
        "docker" => ExecutorSpec::Docker(DockerSpec {
            image: req(b, kind, "image")?,
            network: opt(b, kind, "network")?,
            memory: match opt(b, kind, "memory")? {
                Some(m) => Some(parse_memory(&m).ok_or_else(|| {
                    problem(
                        &[kind, "memory"],
                        format!(
                            "executor `docker`: memory `{m}` is not a size; write it like \"512m\" or \"2g\""
                        ),
                    )
                })?),
                None => None,
            },
            cpus: match b.get("cpus") {
                None | Some(Value::Null) => None,
                Some(c) => match c.as_f64().filter(|c| *c > 0.0 && c.is_finite()) {
                    Some(c) => Some(c),
                    None => {
                        return Err(problem(
                            &[kind, "cpus"],
                            format!("executor `docker`: `cpus` must be a number above 0 like 1.5, not {c}"),
                        ));
                    }
                },
            },
            pull: match opt(b, kind, "pull")?.as_deref() {
                None | Some("never") => PullPolicy::Never,
                Some("missing") => PullPolicy::Missing,
                Some(other) => {
                    return Err(problem(
                        &[kind, "pull"],
                        format!("executor `docker`: unknown pull policy `{other}` (expected never or missing)"),
                    ));
                }
            },
        }),
        "ssh" => ExecutorSpec::Ssh(SshSpec {
            host: req(b, kind, "host")?,
            dir: opt(b, kind, "dir")?,
        }),
        _ => ExecutorSpec::Kubernetes(KubeSpec {
            image: req(b, kind, "image")?,
            namespace: opt(b, kind, "namespace")?,
            resources: string_map(b, kind, "resources", &["cpu", "memory"])?,
            node_selector: string_map(b, kind, "node_selector", &[])?,
            git_remote: match opt(b, kind, "git_remote")? {
                Some(r) if r.starts_with('-') => {
                    return Err(problem(
                        &[kind, "git_remote"],
                        "executor `kubernetes`: `git_remote` starts with `-`, which git would read as an option; give a URL or a path".to_string(),
                    ));
                }
                other => other,
            },
        }),
    })
}

fn req(b: &Map<String, Value>, kind: &str, key: &str) -> Result<String, ExecutorProblem> {
    match opt(b, kind, key)? {
        Some(s) if !s.trim().is_empty() => Ok(s),
        Some(_) => Err(problem(
            &[kind, key],
            format!("executor `{kind}`: `{key}` is empty"),
        )),
        None => Err(problem(
            &[kind],
            format!("executor `{kind}`: missing required setting `{key}`"),
        )),
    }
}

fn opt(b: &Map<String, Value>, kind: &str, key: &str) -> Result<Option<String>, ExecutorProblem> {
    match b.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(problem(
            &[kind, key],
            format!(
                "executor `{kind}`: `{key}` must be a string, not {}",
                super::parse::type_name(other)
            ),
        )),
    }
}

fn string_map(
    b: &Map<String, Value>,
    kind: &str,
    key: &str,
    only: &[&str],
) -> Result<BTreeMap<String, String>, ExecutorProblem> {
    let Some(v) = b.get(key).filter(|v| !v.is_null()) else {
        return Ok(BTreeMap::new());
    };
    let Some(m) = v.as_object() else {
        return Err(problem(
            &[kind, key],
            format!("executor `{kind}`: `{key}` must be an object of strings"),
        ));
    };
    let mut out = BTreeMap::new();
    for (k, v) in m {
        if !only.is_empty() && !only.contains(&k.as_str()) {
            return Err(problem(
                &[kind, key, k],
                format!(
                    "executor `{kind}`: unknown `{key}` entry `{k}` (known: {})",
                    only.join(", ")
                ),
            ));
        }
        let Some(s) = v.as_str() else {
            return Err(problem(
                &[kind, key, k],
                format!("executor `{kind}`: `{key}.{k}` must be a string like \"2Gi\""),
            ));
        };
        out.insert(k.clone(), s.to_string());
    }
    Ok(out)
}

/// `"512m"`, `"2g"`, `"1.5g"`, `"1024"` (bytes) → bytes.
pub fn parse_memory(s: &str) -> Option<u64> {
    let s = s.trim().to_ascii_lowercase();
    let s = s.strip_suffix('b').unwrap_or(&s);
    let s = s.strip_suffix('i').unwrap_or(s);
    let (num, mult) = match s.char_indices().last()? {
        (i, 'k') => (&s[..i], 1u64 << 10),
        (i, 'm') => (&s[..i], 1 << 20),
        (i, 'g') => (&s[..i], 1 << 30),
        (i, 't') => (&s[..i], 1 << 40),
        _ => (s, 1),
    };
    let n: f64 = num.trim().parse().ok()?;
    (n.is_finite() && n > 0.0).then_some((n * mult as f64) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_all_four_shapes() {
        assert_eq!(
            parse_executor(&json!({"local": {}})).unwrap(),
            ExecutorSpec::Local
        );
        let d = parse_executor(&json!({"docker": {"image": "rust:1.91", "network": "none", "memory": "2g", "cpus": 1.5, "pull": "missing"}})).unwrap();
        assert_eq!(
            d,
            ExecutorSpec::Docker(DockerSpec {
                image: "rust:1.91".into(),
                network: Some("none".into()),
                memory: Some(2 << 30),
                cpus: Some(1.5),
                pull: PullPolicy::Missing,
            })
        );
        let s = parse_executor(&json!({"ssh": {"host": "box", "dir": "/srv/baton"}})).unwrap();
        assert_eq!(s.describe(), "ssh box");
        let k = parse_executor(&json!({"kubernetes": {"image": "x", "namespace": "ci", "resources": {"cpu": "2", "memory": "4Gi"}, "node_selector": {"pool": "fast"}}})).unwrap();
        match k {
            ExecutorSpec::Kubernetes(k) => {
                assert_eq!(k.resources["memory"], "4Gi");
                assert_eq!(k.node_selector["pool"], "fast");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn problems_name_their_place() {
        let cases = [
            (json!("docker"), vec![], "must be an object"),
            (json!({}), vec![], "exactly one of"),
            (
                json!({"docker": {"image": "a"}, "ssh": {"host": "b"}}),
                vec![],
                "exactly one of",
            ),
            (
                json!({"podman": {}}),
                vec!["podman"],
                "unknown executor `podman`",
            ),
            (
                json!({"docker": {}}),
                vec!["docker"],
                "missing required setting `image`",
            ),
            (
                json!({"docker": {"image": "a", "memory": "lots"}}),
                vec!["docker", "memory"],
                "not a size",
            ),
            (
                json!({"docker": {"image": "a", "cpus": 0}}),
                vec!["docker", "cpus"],
                "above 0",
            ),
            (
                json!({"docker": {"image": "a", "pull": "always"}}),
                vec!["docker", "pull"],
                "unknown pull policy",
            ),
            (
                json!({"docker": {"image": "a", "volumes": []}}),
                vec!["docker", "volumes"],
                "unknown setting `volumes`",
            ),
            (
                json!({"ssh": {"host": ""}}),
                vec!["ssh", "host"],
                "is empty",
            ),
            (
                json!({"kubernetes": {"image": "a", "resources": {"gpu": "1"}}}),
                vec!["kubernetes", "resources", "gpu"],
                "unknown `resources` entry",
            ),
            (
                json!({"kubernetes": {"image": "a", "git_remote": "--upload-pack=x"}}),
                vec!["kubernetes", "git_remote"],
                "starts with `-`",
            ),
        ];
        for (v, at, msg) in cases {
            let p = parse_executor(&v).expect_err(&v.to_string());
            assert_eq!(p.at, at, "{v}");
            assert!(p.message.contains(msg), "{v}: {}", p.message);
        }
    }

    #[test]
    fn memory_sizes() {
        assert_eq!(parse_memory("512m"), Some(512 << 20));
        assert_eq!(parse_memory("2G"), Some(2 << 30));
        assert_eq!(parse_memory("2gi"), Some(2 << 30));
        assert_eq!(parse_memory("1.5g"), Some(3 << 29));
        assert_eq!(parse_memory("1024"), Some(1024));
        assert_eq!(parse_memory("-1g"), None);
        assert_eq!(parse_memory("g"), None);
    }
}
