//! The pipeline *file format* as types, for the JSON Schema editors use
//! (`assets/pipeline.schema.json`). The loader does not use these types: it reads the JSON by
//! hand to give located messages. `tests/schemas.rs` keeps the two in step: every built-in
//! file validates, and the fields each side knows are the same.

#![allow(dead_code)] // The fields exist to be described, never read.

use schemars::JsonSchema;
use std::collections::BTreeMap;

/// A baton pipeline: the board's columns (statuses) and the transitions between them.
/// Keys starting with `_` or `$` are comments and are ignored. Documented in docs/pipelines.md.
#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "baton pipeline", extend("patternProperties" = {"^[_$]": {}}))]
pub struct PipelineFile {
    /// The schema this file follows (for editors; baton ignores it).
    #[serde(rename = "$schema")]
    schema: Option<String>,
    /// The pipeline's id: what `--pipeline`, `baton run` and `start_task` name. The file
    /// name does not matter.
    id: Id,
    /// The tab's title on the board (defaults to the id).
    name: Option<String>,
    /// One line saying what the pipeline is for.
    description: Option<String>,
    /// The board's columns, in order. A task starts in the first one.
    #[schemars(length(min = 1))]
    statuses: Vec<StatusFile>,
    /// The edges of the state machine; a step status without a `success` transition goes to
    /// the next status, `failure`/`error` go to the first `failed` status and `abort` to the
    /// first `cancelled` one.
    transitions: Option<Vec<TransitionFile>>,
    /// Tasks this pipeline creates and starts on its own while an engine runs.
    triggers: Option<Vec<TriggerFile>>,
}

/// An id: ASCII letters, digits, `_` and `-` (ids name files, branches and log paths).
#[derive(JsonSchema)]
pub struct Id(#[schemars(pattern(r"^[A-Za-z0-9_-]+$"))] String);

/// An engine label: a lowercase word (`gpu`, `big-disk`).
#[derive(JsonSchema)]
pub struct Label(#[schemars(pattern(r"^[a-z0-9][a-z0-9_-]*$"))] String);

/// What a status without a step is.
#[derive(JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A backlog: tasks wait here for `start`.
    Queue,
    /// Waits for a person: `approve`, `reject` or a `manual` move.
    Gate,
    /// Runs its `step` on entry (implied by `step`).
    Step,
    /// The run ended well.
    Done,
    /// The run failed.
    Failed,
    /// The run was aborted.
    Cancelled,
}

/// One column. It has a `kind`, or a `step` (which makes it a step status).
#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(extend(
    "patternProperties" = {"^[_$]": {}},
    "anyOf" = [{"required": ["kind"]}, {"required": ["step"]}]
))]
pub struct StatusFile {
    /// The status id, unique in the pipeline (`*` is reserved).
    id: Id,
    /// The column title (defaults to the id).
    label: Option<String>,
    /// queue, gate, done, failed or cancelled; leave it out when the status has a `step`.
    kind: Option<Kind>,
    /// What runs when a task enters this status.
    step: Option<StepFile>,
}

/// The work of a step status: exactly one of `run`, `script`, `agent` or `docker`, plus
/// optional settings. Task text reaches it only through `BATON_*` environment variables.
#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(extend(
    "patternProperties" = {"^_": {}},
    "oneOf" = [
        {"required": ["run"]},
        {"required": ["script"]},
        {"required": ["agent"]},
        {"required": ["docker"]}
    ]
))]
pub struct StepFile {
    /// One shell command line, run with `sh -c` in the task's working tree.
    run: Option<String>,
    /// A multi-line shell script, run with `sh -c` in the task's working tree.
    script: Option<String>,
    /// The id of an agent profile (`pipelines/agents/*.json`, `.baton/agents/*.json`).
    agent: Option<Id>,
    /// A command run in a container.
    docker: Option<DockerFile>,
    /// Per-attempt limit, like "15m" or "1h 30m" (default: `default_timeout` of the config).
    timeout: Option<Duration>,
    /// Extra attempts after an `error` (a crash or a timeout; never after `failure`).
    retries: Option<u32>,
    /// Extra environment variables (literal values); not one of the `BATON_*` variables
    /// baton gives every step (`BATON_TASK_ID`, `BATON_HANDOFF_FILE`, …).
    env: Option<BTreeMap<String, String>>,
    /// Working directory, relative to the task's working tree.
    workdir: Option<String>,
    /// Where the step runs (default: the workspace's `[executor]`, else this machine).
    /// Applies to `run`, `script` and `command`-backend agents. See docs/executors.md.
    executor: Option<ExecutorFile>,
    /// Labels an engine must all have to run this step (`baton engine --labels gpu`); the
    /// task stays queued until such an engine takes it.
    requires: Option<Vec<Label>>,
}

/// Where a step runs: exactly one of `local`, `docker`, `ssh`, `kubernetes`.
#[derive(JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum ExecutorFile {
    /// This machine, `sh -c` in the task's working tree (`{}`).
    Local(LocalFile),
    /// A container on a Docker Engine (local, or `DOCKER_HOST`).
    Docker(DockerExecutorFile),
    /// Another machine through the system `ssh` client; the branch travels by git.
    Ssh(SshFile),
    /// A Kubernetes Job per step; the pod clones and pushes the task branch.
    Kubernetes(KubernetesFile),
}

/// No settings.
#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LocalFile {}

/// Settings of the docker executor.
#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DockerExecutorFile {
    /// The image; it must already be on the daemon unless `pull` is `missing`.
    image: String,
    /// The container network: `none` cuts it off (default: the daemon's bridge).
    network: Option<String>,
    /// Memory limit, like "512m" or "2g".
    #[schemars(pattern(r"^[0-9]+(\.[0-9]+)?\s*([kKmMgGtT][iI]?[bB]?|[bB])?$"))]
    memory: Option<String>,
    /// CPU limit in cores, like 1.5.
    #[schemars(range(min = 0.0))]
    cpus: Option<f64>,
    /// `never` (default: a missing image is an error saying how to get it) or `missing`.
    pull: Option<PullName>,
}

/// Pull policies.
#[derive(JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PullName {
    /// Never pull.
    Never,
    /// Pull when the daemon lacks the image.
    Missing,
}

/// Settings of the ssh executor.
#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SshFile {
    /// A host as `ssh` understands it (`~/.ssh/config` applies).
    host: String,
    /// Where on the host baton keeps its mirrors and worktrees.
    dir: Option<String>,
}

/// Settings of the kubernetes executor.
#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KubernetesFile {
    /// The pod's image (it needs `git` and `sh`).
    image: String,
    /// The namespace (default: the kubeconfig's).
    namespace: Option<String>,
    /// `cpu` ("500m", "2") and `memory` ("2Gi"), as Kubernetes writes them.
    resources: Option<KubeResources>,
    /// Node labels the pod must match.
    node_selector: Option<BTreeMap<String, String>>,
    /// The git remote both sides reach (usually set under `[executor.kubernetes]`).
    git_remote: Option<String>,
}

/// Requests and limits of a step's pod.
#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KubeResources {
    /// CPU, like "500m" or "2".
    cpu: Option<String>,
    /// Memory, like "2Gi".
    memory: Option<String>,
}

/// A duration in humantime form: "90s", "15m", "1h 30m".
#[derive(JsonSchema)]
pub struct Duration(#[schemars(pattern(r"^\s*[0-9]"))] String);

/// `{"image": "rust:1", "run": "cargo test"}`.
#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DockerFile {
    /// The container image.
    image: String,
    /// The command line run in it.
    run: String,
}

/// An edge: from a status, on a trigger, to a status, if every guard passes; then its hooks.
#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(extend("patternProperties" = {"^[_$]": {}}))]
pub struct TransitionFile {
    /// A status id, or `*` for every non-terminal status.
    from: String,
    /// A status id.
    to: Id,
    /// start, approve, reject, manual, success, failure, error, abort, pr_merged, pr_closed,
    /// ci_failed, changes_requested or outcome:<name>.
    #[schemars(pattern(
        r"^(start|approve|reject|manual|success|failure|error|abort|pr_merged|pr_closed|ci_failed|changes_requested|outcome:.*[A-Za-z0-9].*)$"
    ))]
    on: String,
    /// What the move is called in menus (`m` on the board).
    label: Option<String>,
    /// Conditions that must all pass; a failing one is shown as what blocks the move.
    guards: Option<Vec<Guard>>,
    /// What runs after the move commits (`merge` runs before, and can refuse the move).
    hooks: Option<Vec<Hook>>,
}

/// One guard: an object with one key.
#[derive(JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Guard {
    /// Allowed while the task entered the target status fewer than N times in this run.
    MaxVisits(u32),
    /// Allowed only when no step of the task is running.
    NoRunningStep(bool),
    /// Allowed only when the last handoff has this field.
    HasHandoffField(String),
    /// Allowed only when the task's worktree has no uncommitted changes.
    CleanWorktree(bool),
    /// Allowed only while the task's cost (dollars) is below this.
    Budget(#[schemars(range(min = 0.0))] f64),
    /// true: allowed only when the workspace has a usable forge ([forge] with a remote);
    /// false: only when it has none.
    Forge(bool),
}

/// One hook: an object with one key.
#[derive(JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Hook {
    /// Records an event (and notifies the board).
    Notify(NotifyHook),
    /// A shell command line, run like a step (60 s limit, output redacted).
    Run(String),
    /// Creates and starts a task on another pipeline.
    StartTask(StartTaskHook),
    /// POSTs the move as JSON.
    Webhook(WebhookHook),
    /// Merges the task's branch into its base before the move commits.
    Merge(MergeHook),
    /// Pushes the task branch to the forge's remote with `--force-with-lease`.
    Push(MergeHook),
    /// Pushes, then opens the branch's pull request or updates the open one.
    Pr(PrHook),
    /// Posts the handoff, or a template, on the task's pull request.
    Comment(CommentHook),
}

/// `{"body": "Done: {{title}}"}`.
#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CommentHook {
    /// The comment; `{{id}}`, `{{title}}`, `{{status}}` and `{{handoff}}` are filled in.
    /// Default: the latest handoff's sections and the test counts.
    body: Option<String>,
    /// Where it goes: the task's pull request (`pr`, the default while it has one) or the
    /// issue the task came from (`issue`, the default when it has no pull request).
    on: Option<CommentOn>,
}

/// Where a comment goes.
#[derive(JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CommentOn {
    Pr,
    Issue,
}

/// `{"draft": true, "base": "main", "labels": ["baton"], "reviewers": ["ana"]}`.
#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PrHook {
    /// Open it as a draft.
    draft: Option<bool>,
    /// The branch it goes into (default: the task's base branch).
    base: Option<String>,
    /// Labels to add.
    labels: Option<Vec<String>>,
    /// User names asked to review.
    reviewers: Option<Vec<String>>,
}

/// `{"message": "…"}`.
#[derive(JsonSchema)]
pub struct NotifyHook {
    /// The text of the event.
    message: Option<String>,
}

/// `{"pipeline": "deploy", "title": "Deploy {{title}}"}`.
#[derive(JsonSchema)]
pub struct StartTaskHook {
    /// The id of the pipeline the new task runs on.
    pipeline: Id,
    /// Title template: `{{id}}`, `{{title}}`, `{{prompt}}`, `{{status}}` of the moved task.
    title: Option<String>,
    /// Prompt template, same placeholders.
    prompt: Option<String>,
    /// `"siblings"`: the new task waits for the tasks made by the `start_task` hooks before
    /// it in the same transition, and starts once they are all done.
    after: Option<StartAfter>,
}

/// What a `start_task` hook's task waits for.
#[derive(JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StartAfter {
    /// The tasks made by the `start_task` hooks listed before it.
    Siblings,
}

/// `{"url": "https://hooks.example/x", "headers": {"X-Token": "…"}}`.
#[derive(JsonSchema)]
pub struct WebhookHook {
    /// Where to POST; shown only as scheme and host.
    url: String,
    /// Extra request headers (sent, never shown).
    headers: Option<BTreeMap<String, String>>,
}

/// `{}`: merge into the task's base branch.
#[derive(JsonSchema)]
pub struct MergeHook {}

/// A task creator: exactly one of `schedule`, `push`, `task_done` or `issue`, with templates.
#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(extend(
    "patternProperties" = {"^[_$]": {}},
    "oneOf" = [
        {"required": ["schedule"]},
        {"required": ["push"]},
        {"required": ["task_done"]},
        {"required": ["issue"]}
    ]
))]
pub struct TriggerFile {
    /// Cron in local time: five fields, or six with seconds ("0 3 * * *").
    schedule: Option<String>,
    /// A new commit on a matching branch of the workspace repository.
    push: Option<PushTrigger>,
    /// Another task reached done.
    task_done: Option<TaskDoneTrigger>,
    /// An issue opened or labelled on the forge with one of these labels.
    issue: Option<IssueTrigger>,
    /// Title template (`{{date}}`; `{{branch}}`, `{{sha}}`; `{{title}}`, `{{id}}`; an
    /// issue's `{{title}}`, `{{body}}`, `{{number}}`, `{{url}}`).
    title: Option<String>,
    /// Prompt template.
    prompt: Option<String>,
    /// `"previous"`: each task waits for the task this trigger made last, and starts once
    /// it is done, so runs never overlap.
    after: Option<TriggerAfter>,
}

/// What a trigger's task waits for.
#[derive(JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TriggerAfter {
    /// The task this trigger made last.
    Previous,
}

/// `{"branches": ["main", "release/*"]}` (`*` matches any run of characters).
#[derive(JsonSchema)]
pub struct PushTrigger {
    /// Branch patterns.
    #[schemars(length(min = 1))]
    branches: Vec<String>,
}

/// `{"labels": ["baton"]}`: an open issue carrying one of the labels becomes a task.
#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IssueTrigger {
    /// Label names.
    #[schemars(length(min = 1))]
    labels: Vec<String>,
}

/// `{"pipeline": "feature"}`.
#[derive(JsonSchema)]
pub struct TaskDoneTrigger {
    /// The pipeline whose tasks are watched.
    pipeline: Id,
}

/// The JSON Schema of pipeline files (draft 7, which editors support best), as pretty JSON
/// ending in a newline: what `assets/pipeline.schema.json` must hold.
pub fn pipeline_schema_json() -> String {
    render::<PipelineFile>()
}

/// Renders the draft-7 root schema of `T` as pretty JSON with a final newline.
pub fn render<T: JsonSchema>() -> String {
    let schema = schemars::generate::SchemaSettings::draft07()
        .into_generator()
        .into_root_schema_for::<T>();
    let mut text = serde_json::to_string_pretty(&schema).unwrap_or_default();
    text.push('\n');
    text
}
