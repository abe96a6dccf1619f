//! One agent step end to end: find the profile, render the prompt, run the backend, map
//! the answer to a report, and leave the prompt and handoff as files in the context folder.

use super::log::Log;
use super::outcome::{AgentEvent, AgentReport, report};
use super::{AgentFinish, AgentJob, Hooks};
use crate::agents::{Backend, Profile};
use crate::agents::{TemplateVars, load_agents, render_argv, render_prompt_with_messages};
use crate::exec::executor::{Place, Placement};
use crate::exec::redact::Redactor;
use crate::exec::safe_file::write_fresh_async;
use crate::exec::{LogSender, StepEnv};
use std::path::Path;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// What the engine hands an agent step.
pub struct AgentStep<'a> {
    /// The profile id from `{"agent": "<id>"}`.
    pub profile_id: &'a str,
    /// The workspace's `.baton/agents`.
    pub agents_dir: &'a Path,
    /// The profiles in force, when the engine keeps them (live reload); else the files are
    /// read now.
    pub catalog: Option<&'a crate::agents::AgentCatalog>,
    /// Template values, `handoff` already holding the previous step's context header.
    pub vars: TemplateVars,
    /// Workdir, environment and kill grace; `timeout` is the engine default.
    pub env: StepEnv,
    /// The pipeline step's own timeout, which wins over the profile's.
    pub step_timeout: Option<Duration>,
    /// The task's context folder.
    pub context_dir: &'a Path,
    /// The step run's attempt number (for file names).
    pub attempt: i64,
    /// Where a `command` agent runs.
    pub placement: Placement,
    /// The workspace's OpenCode server, for profiles with `"serve": true`.
    pub opencode: Option<&'a super::opencode_serve::OpencodeServer>,
    /// The session an earlier step of the same agent left, which this step continues when
    /// its profile says `"session": "continue"`.
    pub earlier: Option<Earlier>,
    /// The messages said to the step while it runs.
    pub inbox: Option<super::Inbox>,
}

/// An earlier step's session and what is new to it since.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Earlier {
    /// The backend's session id.
    pub session: String,
    /// The step run that left it.
    pub step_run: i64,
    /// The context header of a handoff made after that step (`{{handoff}}` when continuing),
    /// else empty.
    pub handoff: String,
    /// `{{failure}}` when the failure came after that step, else empty.
    pub failure: String,
}

/// The prompt sent to a continued session when its template renders nothing new (a resume
/// after a crash, a retry).
const CARRY_ON: &str =
    "Carry on with the task where you left off: your last run was interrupted before it ended.";

/// The prompt and argv of a fresh run.
fn fresh(profile: &Profile, vars: &TemplateVars) -> (String, Vec<String>) {
    let prompt = render_prompt_with_messages(&profile.prompt_template, vars);
    let argv = render_argv(&profile.argv, vars, &prompt);
    (prompt, argv)
}

/// The prompt (only what is new) and argv of a run that continues `earlier`.
fn continued(profile: &Profile, vars: &TemplateVars, earlier: &Earlier) -> (String, Vec<String>) {
    let vars = TemplateVars {
        handoff: earlier.handoff.clone(),
        failure: earlier.failure.clone(),
        session: earlier.session.clone(),
        ..vars.clone()
    };
    let mut prompt = render_prompt_with_messages(&profile.continue_template, &vars);
    if prompt.is_empty() {
        prompt = CARRY_ON.to_string();
    }
    let argv = render_argv(&profile.resume_argv, &vars, &prompt);
    (prompt, argv)
}

/// The handoff file of a step run in the context folder: `id_<status>_<NNN>.md`.
pub fn handoff_file_name(status: &str, attempt: i64) -> String {
    format!("id_{status}_{attempt:03}.md")
}

/// Runs an agent step and reports what the engine should record and do next.
pub async fn run_step(
    step: AgentStep<'_>,
    log: LogSender,
    cancel: CancellationToken,
    hooks: &Hooks<'_>,
) -> AgentReport {
    let say = Log::new(log.clone(), Redactor::default());
    let read;
    let catalog = match step.catalog {
        Some(c) => c,
        None => {
            read = load_agents(Some(step.agents_dir));
            &read
        }
    };
    let profile = match catalog.get(step.profile_id) {
        Ok(p) => p.clone(),
        Err(e) => {
            // A profile saved a moment before its task started may not be in the engine's
            // catalog yet (the file watcher waits for writes to settle): the folder is read
            // once more before the step fails.
            let again = match step.catalog {
                Some(_) => reread(step.agents_dir, step.profile_id).await,
                None => None,
            };
            match again {
                Some(p) => p,
                None => {
                    say.err(e.to_string()).await;
                    return AgentReport::error(e.to_string(), false);
                }
            }
        }
    };
    let timeout = step
        .step_timeout
        .or(profile.timeout)
        .unwrap_or(step.env.timeout);
    let resume = step.earlier.as_ref().filter(|_| profile.continues());
    let (prompt, argv) = match resume {
        Some(e) => continued(&profile, &step.vars, e),
        None => fresh(&profile, &step.vars),
    };
    let status = step.vars.status.clone();
    let stem = handoff_file_name(&status, step.attempt);
    let prompt_file = step.context_dir.join(stem.replace(".md", ".prompt.md"));
    say.system(format!(
        "agent `{}` · {} · {} · timeout {}",
        profile.id,
        profile.backend.as_str(),
        profile.target(),
        humantime::format_duration(timeout)
    ))
    .await;
    if let Some(e) = resume {
        say.system(format!(
            "continuing session {} (the prompt is only what is new)",
            e.session
        ))
        .await;
        (hooks.continued)(Some(&e.session));
    }
    write_prompt(&say, &prompt_file, &prompt).await;
    let place = if profile.backend == Backend::Command {
        match step.placement.place(profile.executor.as_ref()) {
            Ok((spec, place)) => {
                if spec != crate::pipeline::ExecutorSpec::Local {
                    let how = if place.reattach {
                        "reattaching to"
                    } else {
                        "on"
                    };
                    say.system(format!("{how} {}", spec.describe())).await;
                }
                place
            }
            Err(e) => {
                say.err(e.to_string()).await;
                return AgentReport::error(e.to_string(), false);
            }
        }
    } else {
        if let Some(spec) = &step.placement.step {
            say.system(format!(
                "`executor` ({}) applies to command agents only; the {} backend talks to its server over HTTP",
                spec.describe(),
                profile.backend.as_str()
            ))
            .await;
        }
        Place::local(step.env.workdir.clone())
    };
    let mut job = AgentJob {
        place,
        opencode: step.opencode,
        profile: &profile,
        prompt,
        argv,
        title: format!("{} · {status}", step.vars.title),
        env: StepEnv {
            timeout,
            ..step.env
        },
        resume: resume.map(|e| e.session.clone()),
        inbox: step.inbox.clone(),
    };
    let mut finish = super::run(&job, log.clone(), cancel.clone(), hooks).await;
    let mut lost = None;
    if let Some(e) = resume
        && super::session::lost(&finish)
    {
        // The CLI no longer has the session (its files were cleaned, another machine): the
        // step starts over with the whole prompt rather than fail.
        let line = format!(
            "the agent could not find session {} to continue; starting a fresh one",
            e.session
        );
        say.err(line.clone()).await;
        (hooks.continued)(None);
        (job.prompt, job.argv) = fresh(&profile, &step.vars);
        job.resume = None;
        write_prompt(&say, &prompt_file, &job.prompt).await;
        finish = super::run(&job, log, cancel, hooks).await;
        lost = Some(AgentEvent {
            category: "agent",
            kind: "session_lost",
            summary: line,
            data: serde_json::json!({ "session": e.session, "step_run": e.step_run }),
            level: "warn",
        });
    }
    if let Some(line) = price_run(&mut finish, &profile) {
        say.system(line).await;
    }
    // The answer becomes the handoff (stored, written to a file, sent to the next agent),
    // and errors and events are stored and shown by the API: mask known secrets in them as
    // in the log.
    redact_finish(&mut finish, &super::log::secrets_for(&profile, &job.env));
    let mut rep = report(&finish, &profile, timeout);
    rep.events.extend(lost);
    if let AgentFinish::Done(run) = &finish {
        let path = step.context_dir.join(&stem);
        match write_fresh_async(path.clone(), run.text.clone()).await {
            Ok(()) => say.system(format!("handoff in {}", path.display())).await,
            Err(e) => {
                say.err(format!("could not write {}: {e}", path.display()))
                    .await
            }
        }
    }
    for ev in &rep.events {
        let line = format!("{}: {}", ev.kind, ev.summary);
        match ev.level {
            "info" => say.system(line).await,
            _ => say.err(line).await,
        }
    }
    if let Some(o) = &rep.result.outcome {
        say.system(format!("outcome: {o} → {}", rep.trigger)).await;
    }
    rep
}

/// Leaves the prompt sent in the context folder and says where.
async fn write_prompt(say: &Log, file: &Path, prompt: &str) {
    if write_fresh_async(file.to_path_buf(), prompt.to_string())
        .await
        .is_ok()
    {
        say.system(format!(
            "prompt ({} chars) in {}",
            prompt.chars().count(),
            file.display()
        ))
        .await;
    }
}

/// Masks `secrets` in everything of `finish` that is stored or shown: the answer, the
/// error, and each event's summary and the strings in its data (a refused tool call's
/// command may carry a token).
fn redact_finish(finish: &mut AgentFinish, secrets: &Redactor) {
    let run = match finish {
        AgentFinish::Done(run) => run,
        AgentFinish::Failed { error, run, .. } => {
            *error = secrets.apply(std::mem::take(error));
            run
        }
        AgentFinish::Error { error, .. } => {
            *error = secrets.apply(std::mem::take(error));
            return;
        }
        AgentFinish::TimedOut | AgentFinish::Cancelled => return,
    };
    run.text = secrets.apply(std::mem::take(&mut run.text));
    for ev in &mut run.events {
        ev.summary = secrets.apply(std::mem::take(&mut ev.summary));
        redact_json(&mut ev.data, secrets);
    }
}

/// Masks `secrets` in every string of `value`, keys included.
fn redact_json(value: &mut serde_json::Value, secrets: &Redactor) {
    use serde_json::Value;
    match value {
        Value::String(s) => *s = secrets.apply(std::mem::take(s)),
        Value::Array(items) => items.iter_mut().for_each(|v| redact_json(v, secrets)),
        Value::Object(map) => {
            let fields = std::mem::take(map);
            for (k, mut v) in fields {
                redact_json(&mut v, secrets);
                map.insert(secrets.apply(k), v);
            }
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// A backend that reports usage but no cost gets one from the profile's prices; returns
/// the log line saying so.
fn price_run(finish: &mut AgentFinish, profile: &crate::agents::Profile) -> Option<String> {
    let run = match finish {
        AgentFinish::Done(run) | AgentFinish::Failed { run, .. } => run,
        _ => return None,
    };
    let price = profile.price?;
    if run.cost.is_some() {
        return None;
    }
    let cost = price.cost(run.usage.as_ref()?)?;
    run.cost = Some(cost);
    Some(format!(
        "cost ${cost:.4} (usage at ${} / ${} per million input / output tokens)",
        price.input, price.output
    ))
}

/// Profile `id` as the agents folder has it now, read off the async threads.
async fn reread(agents_dir: &Path, id: &str) -> Option<crate::agents::Profile> {
    let (dir, id) = (agents_dir.to_path_buf(), id.to_string());
    tokio::task::spawn_blocking(move || load_agents(Some(&dir)).get(&id).ok().cloned())
        .await
        .ok()
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::agent::AgentRun;
    use crate::exec::agent::outcome::AgentEvent;
    use serde_json::json;

    const SECRET: &str = "sk-test-0123456789abcdef";

    fn secrets() -> Redactor {
        Redactor::from_vars([("MY_API_KEY".to_string(), SECRET.to_string())])
    }

    fn denial() -> AgentEvent {
        AgentEvent {
            category: "agent",
            kind: "permission_denied",
            summary: format!("claude was not allowed 1 tool call: Bash curl -H {SECRET}"),
            data: json!({"denials": [{"tool": "Bash", "input": {"command": format!("curl -H {SECRET}")}}],
                         SECRET: 1}),
            level: "warn",
        }
    }

    fn run() -> AgentRun {
        AgentRun {
            text: format!("used {SECRET}"),
            events: vec![denial()],
            ..Default::default()
        }
    }

    #[test]
    fn a_failed_run_keeps_no_secret_in_its_error_text_or_events() {
        let mut finish = AgentFinish::Failed {
            error: format!("exit 1: token {SECRET} rejected"),
            exit_code: Some(1),
            run: run(),
        };
        redact_finish(&mut finish, &secrets());
        let shown = format!("{finish:?}");
        assert!(!shown.contains(SECRET), "{shown}");
        assert!(shown.contains("[redacted]"), "{shown}");
        let AgentFinish::Failed { run, .. } = &finish else {
            unreachable!()
        };
        assert_eq!(
            run.events[0].data["denials"][0]["input"]["command"],
            "curl -H [redacted]"
        );
    }

    #[test]
    fn a_done_run_and_an_error_keep_no_secret() {
        let mut done = AgentFinish::Done(run());
        redact_finish(&mut done, &secrets());
        let mut error = AgentFinish::Error {
            error: format!("HTTP 401: bad key {SECRET}"),
            retryable: false,
        };
        redact_finish(&mut error, &secrets());
        for f in [done, error] {
            let shown = format!("{f:?}");
            assert!(!shown.contains(SECRET), "{shown}");
        }
    }
}
