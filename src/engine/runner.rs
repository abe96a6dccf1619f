//! Running one claimed step: environment, executor, log forwarding, and the report.

use super::log_cap::Verdict;
use super::log_replay::Replayed;
use super::logwriter::LogMsg;
use super::results::StepReport;
use super::step_report::describe;
pub use super::step_report::{closing_line, opening_line, report_for};
use crate::agents::TemplateVars;
use crate::exec::agent::{AgentStep, Hooks};
use crate::exec::executor::{Identity, Labels, Placement, Program, drive};
use crate::exec::{self, Finish, StepEnv, safe_file};
use crate::pipeline::{STEP_VARS, StepAction, StepSpec, Trigger};
use crate::store::{NewLogLine, StepRun, StepState, StoreHandle, Stream, Task, now_ms};
use crate::testcounts::TestScanner;
use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

/// Everything a step job needs, gathered by the engine when it claims the step.
pub struct Job {
    pub step: StepRun,
    /// The step's position among its task's step runs (names its context files).
    pub seq: i64,
    pub task: Task,
    pub spec: StepSpec,
    pub workdir: PathBuf,
    pub context_dir: PathBuf,
    pub handoff_file: Option<PathBuf>,
    /// The previous handoff's context header (`{{handoff}}` in agent prompts).
    pub handoff_context: Option<String>,
    pub workspace_root: PathBuf,
    /// The agent profiles in force (the last good version of a broken file included).
    pub agents: Option<std::sync::Arc<crate::agents::AgentCatalog>>,
    pub default_timeout: Duration,
    pub kill_grace: Duration,
    /// The workspace's default executor (`[executor]` in config.toml).
    pub default_executor: Option<crate::pipeline::ExecutorSpec>,
    /// The engine restarted while this step ran: find it rather than start it again.
    pub reattach: bool,
    /// Bytes of the step's log kept (`max_step_log`).
    pub max_step_log: u64,
    /// The workspace's OpenCode server (profiles with `"serve": true`).
    pub opencode: Option<std::sync::Arc<crate::exec::agent::opencode_serve::OpencodeServer>>,
    /// The messages said to the step while it runs (agent steps).
    pub inbox: Option<crate::exec::agent::Inbox>,
    /// The step's environment when it was made with the job's other files (off the async
    /// threads already); `None`: made here.
    pub env: Option<StepEnv>,
    /// The step's opening line ([`opening_line`]) was stored with its claim.
    pub announced: bool,
    /// On a shared board: the remote the task branch is pushed to at the step's end, and
    /// the repository's git queue (from the engine's [`super::GitCtx`]).
    pub shared: Option<(String, crate::workspace::GitQueue)>,
}

/// Prompts up to this size are also passed in `BATON_TASK_PROMPT`.
const MAX_ENV_PROMPT: usize = 64 * 1024;

/// The environment a step sees. Task text travels only here, never in the command string.
pub fn step_vars(job: &Job) -> Vec<(String, String)> {
    let t = &job.task;
    let s = &job.step;
    let mut vars: Vec<(String, String)> = vec![
        ("BATON_TASK_ID".into(), t.id.to_string()),
        ("BATON_TASK_TITLE".into(), t.title.clone()),
        ("BATON_PIPELINE".into(), t.pipeline_id.clone()),
        ("BATON_STATUS".into(), s.status.clone()),
        ("BATON_RUN_ID".into(), s.run_id.to_string()),
        ("BATON_ATTEMPT".into(), s.attempt.to_string()),
        ("BATON_EXECUTION_KEY".into(), s.execution_key.clone()),
        (
            "BATON_CONTEXT_DIR".into(),
            job.context_dir.display().to_string(),
        ),
        (
            "BATON_WORKSPACE".into(),
            job.workspace_root.display().to_string(),
        ),
        ("BATON_NOTE".into(), s.note.clone().unwrap_or_default()),
    ];
    // The prompt is always in a file; in the environment too unless it is too large for
    // one (the kernel caps a single variable at 128 KiB).
    let prompt_file = job.context_dir.join("prompt.md");
    // A step can write the context folder: the file is read and made without following
    // a link it may have left under the name.
    let same = safe_file::read_plain(&prompt_file, t.prompt.len() as u64)
        .is_ok_and(|old| old == t.prompt.as_bytes());
    if same || safe_file::write_fresh(&prompt_file, t.prompt.as_bytes()).is_ok() {
        vars.push((
            "BATON_TASK_PROMPT_FILE".into(),
            prompt_file.display().to_string(),
        ));
    }
    if t.prompt.len() <= MAX_ENV_PROMPT {
        vars.push(("BATON_TASK_PROMPT".into(), t.prompt.clone()));
    }
    if let Some(branch) = &t.branch {
        vars.push(("BATON_BRANCH".into(), branch.clone()));
    }
    if let Some(h) = &job.handoff_file {
        vars.push(("BATON_HANDOFF_FILE".into(), h.display().to_string()));
    }
    // The body of the webhook that created the task (`baton serve`'s /hooks/trigger).
    let payload = job.context_dir.join("trigger-payload.json");
    if payload.is_file() {
        let path = payload.display().to_string();
        vars.push(("BATON_TRIGGER_PAYLOAD_FILE".into(), path));
    }
    debug_assert!(
        vars.iter().all(|(k, _)| STEP_VARS.contains(&k.as_str())),
        "every variable baton sets is in STEP_VARS, which a step's `env` may not set"
    );
    vars.extend(job.spec.own_env());
    vars
}

/// Runs the job to its end and returns what happened. `store` is used only to record the
/// process identity the moment it exists.
pub async fn run(
    job: Job,
    store: StoreHandle,
    logs: mpsc::Sender<LogMsg>,
    cancel: CancellationToken,
) -> StepReport {
    let step_id = job.step.id;
    let task_id = job.task.id;
    let (line_tx, mut line_rx) = mpsc::channel::<(Stream, String)>(1024);
    let forward_logs = logs.clone();
    let log_file = job
        .context_dir
        .join(format!("id_{}_{:03}.log", job.step.status, job.seq));
    let redactor = crate::exec::redact::Redactor::from_vars(
        crate::exec::redact::env_secrets()
            .chain(job.spec.env.iter().map(|(k, v)| (k.clone(), v.clone()))),
    );
    // After a restart the executor reads the step's output again from its start: what
    // the first engine stored is not stored again (see docs/executors.md).
    let mut replayed = match job.reattach {
        true => Replayed::load(&store, step_id).await,
        false => Replayed::default(),
    };
    let mut cap = super::log_cap::LogCap::new(job.max_step_log);
    let capped_store = store.clone();
    let forwarder = tokio::spawn(async move {
        // The step's log also goes to a plain file in the context folder, for later steps;
        // made at the first line, so a silent step costs no file.
        let mut file: Option<std::io::BufWriter<std::fs::File>> = None;
        let mut scanner = TestScanner::default();
        // Lines travel on in batches of what has arrived: one message per batch, not per
        // line, however fast the step prints.
        let mut batch = Vec::new();
        let mut forwarded = false;
        while let Some(first) = line_rx.recv().await {
            batch.push(first);
            while batch.len() < 1024 {
                match line_rx.try_recv() {
                    Ok(next) => batch.push(next),
                    Err(_) => break,
                }
            }
            let ts = now_ms();
            let mut lines = Vec::with_capacity(batch.len());
            if file.is_none() {
                file = safe_file::create_fresh(&log_file)
                    .ok()
                    .map(std::io::BufWriter::new);
            }
            for (stream, text) in batch.drain(..) {
                let text = redactor.apply(text);
                scanner.feed(&text);
                let verdict = cap.admit(&text);
                let (stream, text) = match verdict {
                    Verdict::Keep => (stream, text),
                    Verdict::Drop => continue,
                    Verdict::Reached => (Stream::System, cap.marker()),
                };
                if let Some(f) = file.as_mut() {
                    let _ = writeln!(f, "{}", crate::ansi::strip(&text));
                }
                if replayed.repeats(stream, &text) {
                    continue;
                }
                // Once per step: not again when a restarted engine reads the output again.
                if verdict == Verdict::Reached {
                    warn_capped(&capped_store, task_id, step_id, text.clone());
                }
                lines.push(NewLogLine {
                    step_run_id: step_id,
                    stream,
                    ts,
                    text,
                });
            }
            if lines.is_empty() {
                continue;
            }
            forwarded = true;
            if forward_logs
                .send(LogMsg::Lines { task_id, lines })
                .await
                .is_err()
            {
                break;
            }
        }
        (scanner.counts(), forwarded)
    });
    let system = |text: String| {
        let line = NewLogLine {
            step_run_id: step_id,
            stream: Stream::System,
            ts: now_ms(),
            text,
        };
        LogMsg::Lines {
            task_id,
            lines: vec![line],
        }
    };
    // Lines sent to the log writer by this job: its end waits for them to be queued.
    let mut sent = !job.announced;
    if !job.announced {
        let _ = logs.send(system(opening_line(&job.step, &job.spec))).await;
    }

    // Writing the prompt file and looking for a webhook payload touch the disk.
    let mut job = job;
    let (env, job) = match job.env.take() {
        Some(env) => (env, job),
        None => match tokio::task::spawn_blocking(move || (env_for(&job), job)).await {
            Ok(both) => both,
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        },
    };
    let started = Instant::now();
    // Recorded before the step starts (on this machine: with its process group), so a
    // restart looks for it where it ran.
    let (placement, local_record) = super::placement::placement(&job, &store).await;
    let (report, ended) = match &job.spec.action {
        StepAction::Run(script)
        | StepAction::Script(script)
        | StepAction::Docker { run: script, .. } => {
            let (finish, said) = shell_step(
                script,
                (&placement, local_record),
                &env,
                line_tx,
                cancel,
                (&store, &logs),
                &system,
            )
            .await;
            sent |= said;
            (report_for(&finish, &env), describe(&finish))
        }
        StepAction::Agent(profile) => {
            super::placement::record_local(&store, job.step.id, local_record, None);
            let report = agent_step(&job, profile, &env, placement, line_tx, cancel, &store).await;
            let ended = match &report.result.error {
                Some(e) => format!("{}: {e}", report.state),
                None => format!("{} ({})", report.state, report.trigger),
            };
            (report, ended)
        }
    };
    let (tests, forwarded) = forwarder.await.unwrap_or((None, true));
    // On a shared board the step's work leaves this machine before its end is recorded. A
    // step stopped here (aborted, its claim lost to another engine, the engine stopping)
    // pushes nothing: its half-done work must not land on the branch another engine's
    // attempt goes on from.
    let stopped = matches!(report.state, StepState::Cancelled | StepState::Interrupted);
    if !stopped && let Some(line) = super::shared_branch::push_after_step(&job, &store).await {
        sent |= logs.send(system(line)).await.is_ok();
    }
    let mut report = report;
    if report.result.tests.is_none() {
        report.result.tests = tests.and_then(|t| serde_json::to_value(t).ok());
    }
    // The closing line is stored with the step's result, after every line sent before it:
    // a step that printed nothing has nothing to wait for.
    report.closing = Some(closing_line(&ended, started.elapsed()));
    if sent || forwarded {
        let (ack, done) = oneshot::channel();
        if logs.send(LogMsg::Flush(ack)).await.is_ok() {
            let _ = done.await;
        }
    }
    report
}

/// Records the one warning event of a step whose log reached its cap.
fn warn_capped(store: &StoreHandle, task_id: i64, step_id: i64, marker: String) {
    store.write_detached("the log cap's event", move |db| {
        db.insert_event(&crate::store::NewEvent {
            task_id: Some(task_id),
            category: "lifecycle",
            kind: "step.log_capped",
            summary: marker,
            data: serde_json::json!({ "step_run_id": step_id }),
            actor: "engine",
            level: "warn",
        })
        .map(|_| ())
    });
}

/// Where a job's step runs, before its agent profile is known.
pub fn placement_for(job: &Job) -> Placement {
    Placement {
        step: job.spec.own_executor(),
        default: job.default_executor.clone(),
        worktree: job.workdir.clone(),
        context_dir: job.context_dir.clone(),
        labels: Labels {
            task_id: job.task.id,
            step_run_id: job.step.id,
            execution_key: job.step.execution_key.clone(),
            workspace: job.workspace_root.display().to_string(),
        },
        reattach: job.reattach,
    }
}

/// How long a step on this machine runs before its record (where it runs, its process
/// group) is written. One that ends sooner needs none (nothing reads the record of an
/// ended step), which saves a commit on most short steps; a step cut off by a dead engine
/// before then is still found and ended by the mark every process of it carries.
const RECORD_AFTER: Duration = Duration::from_millis(50);

/// A shell step on its executor: started (or found again after a restart), its identity
/// recorded, then waited for. `local` is the record of a step on this machine, written
/// with its process group.
async fn shell_step(
    script: &str,
    (placement, local): (&Placement, Option<String>),
    env: &StepEnv,
    log: exec::LogSender,
    cancel: CancellationToken,
    (store, logs): (&StoreHandle, &mpsc::Sender<LogMsg>),
    system: &(dyn Fn(String) -> LogMsg + Sync),
) -> (Finish, bool) {
    let (spec, place) = match placement.place(None) {
        Ok(p) => p,
        Err(e) => return (Finish::SpawnFailed(e.0), false),
    };
    let said = spec != crate::pipeline::ExecutorSpec::Local;
    if said {
        let how = if placement.reattach {
            "reattaching to"
        } else {
            "on"
        };
        let _ = logs
            .send(system(format!("{how} {}", spec.describe())))
            .await;
    }
    if cancel.is_cancelled() {
        return (Finish::Cancelled, said);
    }
    // Starting (an image pull, say) counts against the time limit and can be aborted.
    let deadline = tokio::time::Instant::now() + env.timeout;
    let stop = async {
        tokio::select! {
            _ = cancel.cancelled() => Finish::Cancelled,
            _ = tokio::time::sleep_until(deadline) => Finish::TimedOut,
        }
    };
    let program = Program::Shell(script.into());
    let mut step = match place.start_until(program, env, log, stop).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return (Finish::SpawnFailed(e.0), said),
        Err(stopped) => return (stopped, said),
    };
    let group = match step.identity() {
        Identity::Process { pid, start_time } => Some((pid, start_time)),
        _ => None,
    };
    let step_id = placement.labels.step_run_id;
    let record = store.clone();
    let recording = tokio::spawn(async move {
        tokio::time::sleep(RECORD_AFTER).await;
        super::placement::record_local(&record, step_id, local, group);
    });
    let left = deadline.saturating_duration_since(tokio::time::Instant::now());
    let finish = drive(step.as_mut(), left, env.kill_grace, &cancel).await;
    recording.abort();
    (finish, said)
}

/// The executor environment of a job.
pub fn env_for(job: &Job) -> StepEnv {
    StepEnv {
        vars: step_vars(job),
        workdir: match &job.spec.workdir {
            Some(w) => job.workdir.join(w),
            None => job.workdir.clone(),
        },
        timeout: time_left(job, job.spec.timeout.unwrap_or(job.default_timeout)),
        kill_grace: job.kill_grace,
    }
}

/// What is left of a step's time limit: all of it, or for a step picked back up after a
/// restart, what its first engine had not used (a second at least, to read its end).
fn time_left(job: &Job, limit: Duration) -> Duration {
    match (job.reattach, job.step.started_at) {
        (true, Some(started)) => {
            let used = Duration::from_millis((now_ms() - started).max(0) as u64);
            limit.saturating_sub(used).max(Duration::from_secs(1))
        }
        _ => limit,
    }
}

/// Runs an agent step: template values from the task, the previous handoff's context
/// header as `{{handoff}}`, and the session id and process recorded as soon as they exist.
async fn agent_step(
    job: &Job,
    profile: &str,
    env: &StepEnv,
    placement: Placement,
    log: exec::LogSender,
    cancel: CancellationToken,
    store: &StoreHandle,
) -> StepReport {
    let (t, s) = (&job.task, &job.step);
    let step_id = s.id;
    let carried = super::session::carry(store, s).await;
    let taking = super::say::Taking::new(store, step_id, carried.split(s.note.as_deref()));
    let messages = super::say::render_messages(&taking.kept);
    let vars = TemplateVars {
        title: t.title.clone(),
        prompt: t.prompt.clone(),
        handoff: job.handoff_context.clone().unwrap_or_default(),
        note: s.note.clone().unwrap_or_default(),
        branch: t.branch.clone().unwrap_or_default(),
        status: s.status.clone(),
        context_dir: job.context_dir.display().to_string(),
        failure: carried.failure,
        session: String::new(),
        messages,
    };
    let session = |id: &str| {
        let id = id.to_string();
        store.write_detached("an agent's session id", move |db| {
            db.set_step_session(step_id, &id)
        });
    };
    let spawned = |sp: exec::Spawned| {
        taking.take();
        let start = sp.start_time.map(|t| t as i64);
        store.write_detached("an agent's process id", move |db| {
            db.set_step_process(step_id, sp.pid as i64, start)
        });
    };
    let continued = |from: Option<&str>| {
        let from = from.map(str::to_string);
        store.write_detached("the session a step continues", move |db| {
            db.set_step_continued(step_id, from.as_deref())
        });
    };
    let agents_dir = crate::workspace::Workspace::at(&job.workspace_root).agents_dir();
    let step = AgentStep {
        profile_id: profile,
        agents_dir: &agents_dir,
        catalog: job.agents.as_deref(),
        vars,
        env: env.clone(),
        step_timeout: job.spec.timeout.map(|t| time_left(job, t)),
        context_dir: &job.context_dir,
        attempt: job.seq,
        placement,
        opencode: job.opencode.as_deref(),
        earlier: carried.earlier,
        inbox: job.inbox.clone(),
    };
    let delivered = |id: i64| {
        store.write_detached("a message said to a running agent", move |db| {
            db.deliver_messages(&[id], step_id, Some(super::say::via::LIVE))
        });
    };
    let hooks = Hooks {
        session: &session,
        spawned: &spawned,
        continued: &continued,
        delivered: &delivered,
    };
    let rep = exec::agent::run_step(step, log, cancel, &hooks).await;
    if rep.state == StepState::Succeeded || rep.trigger == Trigger::Failure {
        taking.take();
    }
    StepReport {
        state: rep.state,
        trigger: rep.trigger,
        result: rep.result,
        events: rep.events,
        retryable: rep.retryable,
        closing: None,
    }
}
