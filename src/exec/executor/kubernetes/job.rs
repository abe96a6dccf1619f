//! The Job object for one step, and how its pod's state reads: pure, tested without a cluster.

use crate::exec::executor::remote_git::{LOCAL_PATHS, display_url};
use crate::exec::executor::ssh::quote::is_env_name;
use crate::pipeline::executor_spec::KubeSpec;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Pod, Secret};
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// Label keys baton puts on its Jobs and their pods.
pub const LABEL_TASK: &str = "baton.dev/task";
pub const LABEL_STEP_RUN: &str = "baton.dev/step-run";
pub const LABEL_KEY: &str = "baton.dev/execution-key";
/// A short tag of the workspace: two workspaces on one cluster never see each other's Jobs.
pub const LABEL_WORKSPACE: &str = "baton.dev/workspace";
/// Annotations recovery needs to bring a found step's commits back.
pub const ANNOTATION_WORKTREE: &str = "baton.dev/worktree";
pub const ANNOTATION_BRANCH: &str = "baton.dev/branch";
/// The git remote for people, without credentials (recovery reads the full one from config).
pub const ANNOTATION_REMOTE: &str = "baton.dev/git-remote";
/// The container that runs the step.
pub const CONTAINER: &str = "step";

/// The container's command: clone the branch, run the step, push its commits back. The
/// step's script and everything else that varies arrive as environment variables.
pub const ENTRY: &str = r#"set -u
fail() { echo "baton: $*" >&2; exit 97; }
git clone -q --single-branch --branch "$BATON_GIT_BRANCH" "$BATON_GIT_REMOTE" "$BATON_WORKSPACE" || fail "could not clone $BATON_GIT_BRANCH from the git remote"
cd "$BATON_WORKSPACE" || fail "no $BATON_WORKSPACE"
start=$(git rev-parse HEAD)
mkdir -p "$BATON_CONTEXT_DIR"
if [ -n "${BATON_TRIGGER_PAYLOAD-}" ]; then
  printf '%s' "$BATON_TRIGGER_PAYLOAD" >"$BATON_CONTEXT_DIR/trigger.json"
  export BATON_TRIGGER_PAYLOAD_FILE="$BATON_CONTEXT_DIR/trigger.json"
fi
unset BATON_TRIGGER_PAYLOAD
cd "$BATON_WORKSPACE/$BATON_SUBDIR" || fail "no folder $BATON_SUBDIR in the branch"
sh -c "$BATON_STEP_SCRIPT" </dev/null
code=$?
cd "$BATON_WORKSPACE"
if [ "$(git rev-parse HEAD)" != "$start" ]; then
  git push -q origin "HEAD:refs/heads/$BATON_GIT_BRANCH" || fail "could not push the step's commits to the git remote"
fi
exit $code
"#;

/// Everything a step's Job is made of.
#[derive(Debug, Clone)]
pub struct JobPlan<'a> {
    pub spec: &'a KubeSpec,
    /// [`crate::exec::executor::Labels::workspace_tag`].
    pub workspace_tag: &'a str,
    pub task_id: i64,
    pub step_run_id: i64,
    pub execution_key: &'a str,
    /// The full git remote: it reaches the pod only through the Job's Secret.
    pub git_remote: &'a str,
    /// The branch on the git remote (baton's own, per workspace).
    pub branch: &'a str,
    pub subdir: &'a str,
    pub script: &'a str,
    pub vars: &'a [(String, String)],
    /// The trigger's payload (the file `BATON_TRIGGER_PAYLOAD_FILE` names locally), if any.
    pub trigger_payload: Option<&'a str>,
    pub timeout_secs: u64,
    /// The local worktree, so a later engine can bring the commits back.
    pub worktree: &'a str,
}

/// A label value from free text: letters, digits, `-`, `_`, `.`, at most 63, alphanumeric
/// at both ends.
pub fn label_value(s: &str) -> String {
    let v: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '.'
            }
        })
        .take(63)
        .collect();
    v.trim_matches(|c: char| !c.is_ascii_alphanumeric())
        .to_string()
}

/// The Job's name: unique per workspace and step run, a valid DNS label.
pub fn job_name(workspace_tag: &str, task_id: i64, step_run_id: i64) -> String {
    format!("baton-{workspace_tag}-t{task_id}-s{step_run_id}")
}

/// The label selector of one step run's Job and pod.
pub fn selector(workspace_tag: &str, step_run_id: i64) -> String {
    format!("{LABEL_WORKSPACE}={workspace_tag},{LABEL_STEP_RUN}={step_run_id}")
}

impl JobPlan<'_> {
    fn labels(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            (LABEL_WORKSPACE.to_string(), label_value(self.workspace_tag)),
            (LABEL_TASK.to_string(), self.task_id.to_string()),
            (LABEL_STEP_RUN.to_string(), self.step_run_id.to_string()),
            (LABEL_KEY.to_string(), label_value(self.execution_key)),
            (
                "app.kubernetes.io/managed-by".to_string(),
                "baton".to_string(),
            ),
        ])
    }

    /// The Job's (and its Secret's) name.
    pub fn name(&self) -> String {
        job_name(self.workspace_tag, self.task_id, self.step_run_id)
    }

    /// The step's variables with their values: the step's own (task text, the agent
    /// profile's `env`, often an API key), the git remote (it may hold a token) and the
    /// trigger's payload. They go in the Job's Secret, never in the Job itself.
    fn secret_vars(&self) -> BTreeMap<String, String> {
        let mut vars: BTreeMap<String, String> = self
            .vars
            .iter()
            .filter(|(k, _)| is_env_name(k) && !LOCAL_PATHS.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        vars.insert("BATON_GIT_REMOTE".into(), self.git_remote.into());
        vars.insert("BATON_STEP_SCRIPT".into(), self.script.into());
        if let Some(p) = self.trigger_payload {
            vars.insert("BATON_TRIGGER_PAYLOAD".into(), p.into());
        }
        vars
    }

    /// The Secret holding the step's variables, named and labelled like its Job (which
    /// then owns it, so the cluster deletes it with the Job).
    pub fn secret(&self) -> Secret {
        let value = json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": self.name(), "labels": self.labels()},
            "type": "Opaque",
            "stringData": self.secret_vars(),
        });
        serde_json::from_value(value).expect("the Secret literal matches the Secret schema")
    }

    fn env(&self) -> Vec<Value> {
        let secret = self.name();
        let mut env: Vec<Value> = self
            .secret_vars()
            .into_keys()
            .map(|k| json!({"name": k, "valueFrom": {"secretKeyRef": {"name": secret, "key": k}}}))
            .collect();
        for (k, v) in [
            ("BATON_CONTEXT_DIR", "/tmp/baton-context"),
            ("BATON_WORKSPACE", "/workspace"),
            ("BATON_GIT_BRANCH", self.branch),
            ("BATON_SUBDIR", self.subdir),
        ] {
            env.push(json!({"name": k, "value": v}));
        }
        env
    }

    /// The Job: one pod, never restarted, ended by the cluster at the step's timeout.
    pub fn job(&self) -> Job {
        let labels = self.labels();
        let mut container = json!({
            "name": CONTAINER,
            "image": self.spec.image,
            "command": ["sh", "-c", ENTRY],
            "env": self.env(),
        });
        if !self.spec.resources.is_empty() {
            container["resources"] =
                json!({"requests": self.spec.resources, "limits": self.spec.resources});
        }
        let mut pod_spec = json!({"restartPolicy": "Never", "containers": [container]});
        if !self.spec.node_selector.is_empty() {
            pod_spec["nodeSelector"] = json!(self.spec.node_selector);
        }
        let value = json!({
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": self.name(),
                "labels": labels,
                "annotations": {
                    ANNOTATION_WORKTREE: self.worktree,
                    ANNOTATION_BRANCH: self.branch,
                    ANNOTATION_REMOTE: display_url(self.git_remote),
                },
            },
            "spec": {
                "backoffLimit": 0,
                "activeDeadlineSeconds": self.timeout_secs.max(1),
                "ttlSecondsAfterFinished": 3600,
                "template": {"metadata": {"labels": labels}, "spec": pod_spec},
            },
        });
        serde_json::from_value(value).expect("the Job literal matches the Job schema")
    }
}

/// Where a step's pod is, as far as baton cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodState {
    /// Not started yet (scheduling, pulling the image).
    Waiting,
    /// Its container runs: logs can be followed.
    Running,
    /// Its container ended with this code.
    Ended(i32),
    /// It cannot start: the reason and message Kubernetes gives.
    Stuck(String),
}

/// Waiting reasons that will not resolve by waiting.
const STUCK: &[&str] = &[
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "CreateContainerConfigError",
    "CreateContainerError",
];

/// Reads a pod's state from its status.
pub fn pod_state(pod: &Pod) -> PodState {
    let Some(status) = &pod.status else {
        return PodState::Waiting;
    };
    let container = status
        .container_statuses
        .iter()
        .flatten()
        .find(|c| c.name == CONTAINER);
    if let Some(state) = container.and_then(|c| c.state.as_ref()) {
        if let Some(t) = &state.terminated {
            return PodState::Ended(t.exit_code);
        }
        if state.running.is_some() {
            return PodState::Running;
        }
        if let Some(w) = &state.waiting {
            let reason = w.reason.clone().unwrap_or_default();
            if STUCK.contains(&reason.as_str()) {
                let message = w.message.clone().unwrap_or_default();
                return PodState::Stuck(
                    format!("{reason}: {message}")
                        .trim_end_matches([':', ' '])
                        .to_string(),
                );
            }
        }
    }
    match status.phase.as_deref() {
        Some("Running") => PodState::Running,
        Some("Failed") => PodState::Stuck(format!(
            "the pod failed before its container ran: {}",
            status
                .message
                .clone()
                .or(status.reason.clone())
                .unwrap_or_default()
        )),
        _ => PodState::Waiting,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> KubeSpec {
        KubeSpec {
            image: "rust:1.91".into(),
            namespace: None,
            resources: BTreeMap::from([
                ("cpu".into(), "2".into()),
                ("memory".into(), "4Gi".into()),
            ]),
            node_selector: BTreeMap::from([("pool".into(), "ci".into())]),
            git_remote: None,
        }
    }

    #[test]
    fn the_job_has_labels_limits_and_task_text_only_in_env() {
        let spec = spec();
        let vars = vec![
            ("BATON_TASK_TITLE".to_string(), "it's $(id)".to_string()),
            ("BATON_CONTEXT_DIR".to_string(), "/home/me/ctx".to_string()),
            ("ANTHROPIC_API_KEY".to_string(), "sk-ant-secret".to_string()),
        ];
        let plan = JobPlan {
            spec: &spec,
            workspace_tag: "0a1b2c3d",
            task_id: 7,
            step_run_id: 42,
            execution_key: "3:build:1",
            git_remote: "https://bot:t0ken@git.example.com/team/repo.git",
            branch: "baton/7-x",
            subdir: "",
            script: "cargo test",
            vars: &vars,
            trigger_payload: Some("{\"a\":1}"),
            timeout_secs: 600,
            worktree: "/wt/7-x",
        };
        let v = serde_json::to_value(plan.job()).unwrap();
        assert_eq!(v["metadata"]["name"], "baton-0a1b2c3d-t7-s42");
        assert_eq!(v["metadata"]["labels"][LABEL_WORKSPACE], "0a1b2c3d");
        assert_eq!(v["metadata"]["labels"][LABEL_KEY], "3.build.1");
        assert_eq!(
            v["spec"]["template"]["metadata"]["labels"][LABEL_STEP_RUN],
            "42"
        );
        assert_eq!(v["spec"]["backoffLimit"], 0);
        assert_eq!(v["spec"]["activeDeadlineSeconds"], 600);
        let pod = &v["spec"]["template"]["spec"];
        assert_eq!(pod["restartPolicy"], "Never");
        assert_eq!(pod["nodeSelector"]["pool"], "ci");
        let c = &pod["containers"][0];
        assert_eq!(c["image"], "rust:1.91");
        assert_eq!(c["resources"]["limits"]["memory"], "4Gi");
        assert_eq!(c["command"][2], ENTRY);
        let env = c["env"].as_array().unwrap();
        let get = |k: &str| env.iter().find(|e| e["name"] == k).cloned().unwrap();
        assert_eq!(get("BATON_CONTEXT_DIR")["value"], "/tmp/baton-context");
        let secret = serde_json::to_value(plan.secret()).unwrap();
        assert_eq!(secret["metadata"]["name"], "baton-0a1b2c3d-t7-s42");
        for (k, value) in [
            ("BATON_TASK_TITLE", "it's $(id)"),
            ("ANTHROPIC_API_KEY", "sk-ant-secret"),
            ("BATON_STEP_SCRIPT", "cargo test"),
            ("BATON_TRIGGER_PAYLOAD", "{\"a\":1}"),
            (
                "BATON_GIT_REMOTE",
                "https://bot:t0ken@git.example.com/team/repo.git",
            ),
        ] {
            let e = get(k);
            assert_eq!(
                e["valueFrom"]["secretKeyRef"]["name"],
                "baton-0a1b2c3d-t7-s42"
            );
            assert_eq!(e["valueFrom"]["secretKeyRef"]["key"], k);
            assert_eq!(secret["stringData"][k], value, "{k}");
        }
        // No value, credential or local path in the Job itself.
        let text = v.to_string();
        for hidden in ["/home/me/ctx", "sk-ant-secret", "t0ken", "it's $(id)"] {
            assert!(!text.contains(hidden), "{hidden} in {text}");
        }
        assert_eq!(
            v["metadata"]["annotations"][ANNOTATION_REMOTE],
            "https://git.example.com/team/repo.git"
        );
    }

    #[test]
    fn label_values_are_valid() {
        assert_eq!(label_value("12:build:3"), "12.build.3");
        assert_eq!(label_value(":x:"), "x");
        assert_eq!(label_value(&"a".repeat(80)).len(), 63);
    }

    fn pod(status: Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p"}, "status": status})).unwrap()
    }

    #[test]
    fn pod_states_read_from_status() {
        assert_eq!(
            pod_state(&pod(json!({"phase": "Pending"}))),
            PodState::Waiting
        );
        assert_eq!(
            pod_state(&pod(
                json!({"phase": "Running", "containerStatuses": [{"name": "step", "image": "i", "imageID": "", "ready": true, "restartCount": 0, "state": {"running": {}}}]})
            )),
            PodState::Running
        );
        assert_eq!(
            pod_state(&pod(
                json!({"phase": "Failed", "containerStatuses": [{"name": "step", "image": "i", "imageID": "", "ready": false, "restartCount": 0, "state": {"terminated": {"exitCode": 3}}}]})
            )),
            PodState::Ended(3)
        );
        assert_eq!(
            pod_state(&pod(
                json!({"phase": "Pending", "containerStatuses": [{"name": "step", "image": "i", "imageID": "", "ready": false, "restartCount": 0, "state": {"waiting": {"reason": "ImagePullBackOff", "message": "no such image"}}}]})
            )),
            PodState::Stuck("ImagePullBackOff: no such image".into())
        );
    }
}
