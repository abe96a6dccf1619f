//! `say` to a running step whose agent reads input mid-run: the message is recorded and
//! handed to the step, which marks it delivered once its agent took it (one it cannot give
//! stays queued for the next step), and the answer says which.

use super::error::EngineError;
use super::say::{check_text, via};
use super::session::agent_of;
use crate::agents::Backend;

/// How long `say` waits for a running step to tell whether its agent took a message
/// (a pipe takes it at once; an OpenCode server answers within a moment).
const HEARD_WITHIN: std::time::Duration = std::time::Duration::from_secs(10);

/// The answer to a message handed to a running step whose engine stopped before the step
/// said whether its agent took it.
pub(super) const CUT_OFF: &str = "handed to the running agent, but the engine stopped before its step said whether the agent took it — `baton show` tells whether it was delivered (if not, the task's next agent step gets it)";

/// What became of a message handed to a running step, for the answer.
enum Word {
    /// Its agent has it.
    Heard,
    /// Its agent did not take it (why, in a clause).
    NotHeard(String),
    /// The step takes no more input (its turn or run ended).
    Closed,
    /// Handed to an OpenCode step that has not opened its session yet.
    Starting,
    /// Handed over; the step has not said in time whether its agent took it.
    NoWordYet,
}

/// What the live path did with a message inside its transaction.
enum Handed {
    /// Already answered (a forge comment delivered before): the command is finished.
    Before(Box<super::Applied>),
    /// Recorded and handed to the running step of `agent` at `status` (`wait`: the step
    /// reads its inbox, so its word on it comes at once), or refused at once (`None`).
    To {
        agent: String,
        status: String,
        wait: Option<bool>,
    },
}

impl super::Engine {
    /// Says `text` to the task's running step when its agent reads input mid-run. None: no
    /// such step, so the request goes the usual way.
    pub(super) async fn say_live(
        &mut self,
        req: &super::Request,
        text: &str,
        command: Option<i64>,
    ) -> Option<std::result::Result<super::Answer, String>> {
        let task_id = req.task_id;
        let (step_id, said, hearing) = self
            .running
            .iter()
            .find(|(_, r)| r.task_id == task_id && r.reason.is_none())
            .map(|(id, r)| (*id, r.said.clone(), listening(&r.inbox)))?;
        check_text(text, "the message").ok()?;
        let agents = self.agents.clone();
        let (said_text, actor) = (text.to_string(), req.actor.clone());
        let action = req.action.clone();
        let forge = action
            .is_forge()
            .then_some(super::forge_events::ForgeOutcome::Said);
        let (heard, told) = tokio::sync::oneshot::channel();
        let out = self
            .store
            .write(move |db| {
                let task = db.task(task_id)?;
                let pipeline = super::pipeline_of(db, &task)?;
                let step = db.step_run(step_id)?;
                let Some(agent) = agent_of(&pipeline, &step.status) else {
                    return Ok(None);
                };
                let Ok(profile) = agents.get(agent) else {
                    return Ok(None);
                };
                // A step reads its inbox once its agent runs: a CLI's input is open at
                // once (one that never takes it runs where baton cannot write to it), and an
                // OpenCode step takes it once its session is open, so what is said while its
                // server starts waits there for it.
                if !profile.takes_input() || !(hearing || profile.backend == Backend::Opencode) {
                    return Ok(None);
                }
                // A forge comment's delivery is noted with it, so a redelivery says nothing.
                if let super::Action::ForgeSay {
                    number,
                    author,
                    seen,
                    ..
                } = &action
                {
                    if let Some(before) = super::forge_events::note(db, task_id, seen, None)? {
                        if let Some(c) = command {
                            db.finish_command(
                                c,
                                crate::store::CommandState::Done,
                                &before.command_result(),
                            )?;
                        }
                        return Ok(Some(Handed::Before(Box::new(before))));
                    }
                    super::forge_say::record(
                        db, task_id, *number, author, &said_text, None, &actor,
                    )?;
                }
                let id = db.insert_message(task_id, &said_text, &actor, via::LIVE)?;
                // Handed over inside the transaction: a step that ended (or closed its
                // input) meanwhile has dropped its end, and the message stays queued for
                // the next step (marked delivered only once its agent took it).
                let handed = said
                    .send(crate::exec::agent::LiveMessage {
                        id,
                        text: said_text.clone(),
                        heard: Some(heard),
                    })
                    .is_ok();
                let wait = handed.then_some(hearing);
                let to = (agent.to_string(), step.status.clone());
                // A message the step reads now is answered once its agent has it (below):
                // its command is applied now and never taken again, and one whose answer
                // an engine's end cut off is finished at the next start (the message stays
                // queued unless the step marked it delivered).
                if let Some(c) = command.filter(|_| wait == Some(true)) {
                    db.finish_command(c, crate::store::CommandState::Answering, "")?;
                }
                if let Some(c) = command.filter(|_| wait != Some(true)) {
                    let word = match wait {
                        None => Word::Closed,
                        _ => Word::Starting,
                    };
                    let answer = answer(summary(task_id, &to, word), forge);
                    db.finish_command(
                        c,
                        crate::store::CommandState::Done,
                        &answer.command_result(),
                    )?;
                }
                Ok::<_, EngineError>(Some(Handed::To {
                    agent: to.0,
                    status: to.1,
                    wait,
                }))
            })
            .await;
        let out = match out {
            Ok(None) => return None,
            Ok(Some(Handed::Before(before))) => Ok(super::Answer::Applied {
                summary: before.summary,
                queued: false,
                forge: before.forge,
            }),
            Ok(Some(Handed::To {
                agent,
                status,
                wait,
            })) => {
                let to = (agent, status);
                match wait {
                    None => Ok(answer(summary(task_id, &to, Word::Closed), forge)),
                    Some(false) => Ok(answer(summary(task_id, &to, Word::Starting), forge)),
                    Some(true) => {
                        // The step's word comes from its agent (a pipe at once, an OpenCode
                        // server within a moment): waited for beside the engine, which goes
                        // on meanwhile; the caller gets the answer when it comes.
                        let store = self.store.clone();
                        let (tell, later) = tokio::sync::oneshot::channel();
                        let meanwhile = summary(task_id, &to, Word::NoWordYet);
                        tokio::spawn(async move {
                            let word = match tokio::time::timeout(HEARD_WITHIN, told).await {
                                Ok(Ok(Ok(()))) => Word::Heard,
                                Ok(Ok(Err(why))) => Word::NotHeard(why),
                                Ok(Err(_)) => Word::NotHeard(
                                    "its step ended before it could take the message".into(),
                                ),
                                Err(_) => Word::NoWordYet,
                            };
                            let answer = answer(summary(task_id, &to, word), forge);
                            if let Some(c) = command {
                                let result = answer.command_result();
                                let _ = store
                                    .write(move |db| db.finish_answered_command(c, &result))
                                    .await;
                            }
                            let _ = tell.send(Ok(answer));
                        });
                        self.later = Some(later);
                        Ok(answer(meanwhile, forge))
                    }
                }
            }
            Err(e) => {
                let e = e.to_string();
                self.fail_command(command, &e, "a failed message").await;
                Err(e)
            }
        };
        let _ = self
            .events
            .send(super::EngineEvent::TaskChanged { task_id });
        Some(out)
    }
}

/// The engine's answer to a message, `forge` saying so when it was a forge comment.
fn answer(summary: String, forge: Option<super::forge_events::ForgeOutcome>) -> super::Answer {
    super::Answer::Applied {
        summary,
        queued: false,
        forge,
    }
}

/// The answer to a message for the running step of `agent` at `status`.
fn summary(task_id: i64, (agent, status): &(String, String), word: Word) -> String {
    let step = format!("its step at `{status}`");
    match word {
        Word::Heard => format!("task {task_id}: said to the running agent `{agent}` ({step})"),
        Word::NotHeard(why) => format!(
            "task {task_id}: not said to the running agent `{agent}` ({step}): {why}; it is kept for the task's next agent step"
        ),
        Word::Closed => format!(
            "task {task_id}: {step} takes no more input (its turn or run ended); kept for the next step"
        ),
        Word::Starting => format!(
            "task {task_id}: handed to the agent `{agent}`, whose step at `{status}` is starting: it gets the message once its session is open (`baton show {task_id}` tells when; if it cannot, the next step gets it)"
        ),
        Word::NoWordYet => format!(
            "task {task_id}: handed to the running agent `{agent}` ({step}), which has not said yet that it took it — `baton show {task_id}` tells"
        ),
    }
}

/// True when a running step's backend took its inbox: it writes what is said to the
/// agent's open standard input (a pipe this machine holds) or to its OpenCode session. A
/// step whose input is a file (a container) or that reads none leaves the inbox, and a
/// message waits for the next step.
fn listening(inbox: &crate::exec::agent::Inbox) -> bool {
    inbox.lock().is_ok_and(|i| i.is_none())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_step_that_took_its_inbox_is_listening() {
        let (_tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let inbox: crate::exec::agent::Inbox = std::sync::Arc::new(std::sync::Mutex::new(Some(rx)));
        assert!(
            !listening(&inbox),
            "a step that left its inbox hears nothing"
        );
        drop(inbox.lock().unwrap().take());
        assert!(listening(&inbox));
    }
}
