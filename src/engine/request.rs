//! What front ends hand the engine: a request about a task, or a task to create. Both
//! travel the same ways (an embedded engine's channel, the commands table, this process in
//! apply-only mode) and are checked by the engine, so every front end gets the same rules.

use super::actions::{Request, nul_problem, title_problem};
use super::error::{EngineError, Result};
use super::forge_events::ForgeOutcome;
use crate::pipeline::Pipeline;
use crate::workspace::Workspace;
use serde::{Deserialize, Serialize};

/// The longest idempotency key, in bytes.
pub const MAX_IDEMPOTENCY_KEY: usize = 255;

/// A task as a front end asks for it: created, and started when asked, in one transaction.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NewTask {
    /// One line for the card.
    pub title: String,
    /// Its prompt (markdown).
    #[serde(default)]
    pub prompt: String,
    /// The pipeline it goes on (default: the workspace's first own pipeline).
    #[serde(default)]
    pub pipeline: Option<String>,
    /// Start it in the same transaction.
    #[serde(default)]
    pub start: bool,
    /// The branch its worktree starts from (default: the workspace's base branch).
    #[serde(default)]
    pub branch: Option<String>,
    /// Who asks (`user`, `api`, `tui`), as the history records it.
    pub actor: String,
    /// A client's key for this creation: a retry with the same key returns the first task.
    #[serde(default)]
    pub idempotency_key: Option<String>,
    /// Tasks it waits for: it starts (when asked to, or when its pipeline starts with a
    /// step) only once every one of them is done.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<i64>,
}

/// What the engine made of a [`NewTask`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Made {
    /// The task's id.
    pub id: i64,
    /// The idempotency key named a task made before: nothing new was made.
    pub existed: bool,
    /// The start's one-line summary, when one was asked for and made.
    pub started: Option<String>,
    /// The start queued a step (it waits for an engine when none runs).
    #[serde(default)]
    pub queued: bool,
    /// It waits for other tasks to be done before it starts.
    #[serde(default)]
    pub waits: bool,
    /// Started (or queued) on a pipeline with an agent that cannot start where the engine
    /// runs: why, in a sentence (its step would fail for that reason).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cannot_start: Option<String>,
}

/// What the engine made of a webhook delivery that reaches no task of its own (a push, a
/// forge event about no task of this board).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Noted {
    /// The delivery was seen before: nothing was done.
    pub duplicate: bool,
    /// The tasks its triggers created.
    #[serde(default)]
    pub tasks: Vec<i64>,
}

/// A forge request's answer as the commands table holds it, so that a front end attached
/// to another process's engine learns the outcome by type too.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ForgeAnswer {
    pub summary: String,
    pub forge: ForgeOutcome,
}

impl super::Applied {
    /// The applied request's answer as a queued command's result holds it.
    pub fn command_result(&self) -> String {
        Answer::Applied {
            summary: self.summary.clone(),
            queued: false,
            forge: self.forge,
        }
        .command_result()
    }
}

/// The engine's answer to an [`Order`].
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// A request was applied: its one-line summary, whether it queued a step, and what
    /// became of it when it was a forge event.
    Applied {
        summary: String,
        queued: bool,
        forge: Option<ForgeOutcome>,
    },
    /// A task was created (and maybe started).
    Made(Made),
    /// A webhook delivery was noted.
    Noted(Noted),
}

impl Answer {
    /// The one-line summary for people.
    pub fn summary(&self) -> String {
        match self {
            Self::Applied { summary, .. } => summary.clone(),
            Self::Made(m) => m
                .started
                .clone()
                .unwrap_or_else(|| format!("task {}: created", m.id)),
            Self::Noted(n) if n.duplicate => "this delivery was seen before".into(),
            Self::Noted(n) => format!("delivery noted: {} task(s) created", n.tasks.len()),
        }
    }

    /// The answer as a queued command's result holds it: a request's summary (with its
    /// outcome, for a forge event), else JSON.
    pub fn command_result(&self) -> String {
        let json = match self {
            Self::Applied {
                summary,
                forge: None,
                ..
            } => return summary.clone(),
            Self::Applied {
                summary,
                forge: Some(forge),
                ..
            } => serde_json::to_string(&ForgeAnswer {
                summary: summary.clone(),
                forge: *forge,
            }),
            Self::Made(m) => serde_json::to_string(m),
            Self::Noted(n) => serde_json::to_string(n),
        };
        json.unwrap_or_default()
    }

    /// The answer to `order` from its queued command's result.
    pub fn from_command(order: &Order, result: String) -> std::result::Result<Self, String> {
        fn parse<T: serde::de::DeserializeOwned>(result: &str) -> std::result::Result<T, String> {
            serde_json::from_str(result).map_err(|e| {
                format!("the engine's answer `{result}` is unreadable ({e}) — is it another baton version?")
            })
        }
        Ok(match order {
            Order::Act(req) if req.action.is_forge() => {
                let a: ForgeAnswer = parse(&result)?;
                Self::Applied {
                    summary: a.summary,
                    queued: false,
                    forge: Some(a.forge),
                }
            }
            Order::Act(_) | Order::Issue { .. } => Self::Applied {
                summary: result,
                queued: false,
                forge: None,
            },
            Order::Create { .. } | Order::Triggered { .. } => Self::Made(parse(&result)?),
            Order::Push { .. } | Order::Stray { .. } => Self::Noted(parse(&result)?),
        })
    }

    /// True when a step was queued (it waits for an engine when none runs).
    pub fn queued(&self) -> bool {
        match self {
            Self::Applied { queued, .. } => *queued,
            Self::Made(m) => m.queued,
            Self::Noted(_) => false,
        }
    }
}

/// One thing handed to the engine; also the JSON body of a queued command (a request's
/// body is the request itself, as engines before creation went through them wrote it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Order {
    /// Create a task.
    Create { create: NewTask },
    /// Act on a task.
    Act(Request),
    /// An issue the forge showed: a task when an `issue` trigger watches it.
    Issue {
        issue: crate::forge::issues::IssueSeen,
    },
    /// A GitHub push delivery: noted once by its id; fires the matching `push` triggers.
    Push { push: super::push_in::Delivery },
    /// A forge delivery about no task of this board (this key): noted, so its redelivery
    /// is told apart.
    Stray { stray: String },
    /// A task a webhook asks for: created, with the delivery (`bytes` long) recorded on it,
    /// in one transaction.
    Triggered { triggered: NewTask, bytes: usize },
}

impl Order {
    /// The task the order is about (none for a creation).
    pub fn task_id(&self) -> Option<i64> {
        match self {
            Self::Create { .. }
            | Self::Issue { .. }
            | Self::Push { .. }
            | Self::Stray { .. }
            | Self::Triggered { .. } => None,
            Self::Act(r) => Some(r.task_id),
        }
    }
}

impl NewTask {
    /// The checks that need nothing but the request: a title to read, of one card's
    /// length, text a step can be given, a usable idempotency key.
    pub fn check(&self) -> Result<()> {
        let invalid = |m: String| Err(EngineError::Invalid(m));
        if let Some(problem) = title_problem(&self.title) {
            return invalid(problem);
        }
        if let Some(problem) = nul_problem("", &self.prompt) {
            return invalid(problem);
        }
        if let Some(key) = &self.idempotency_key
            && (key.is_empty() || key.len() > MAX_IDEMPOTENCY_KEY)
        {
            return invalid(format!(
                "the idempotency key is {} bytes long; give 1 to {MAX_IDEMPOTENCY_KEY} bytes, such as a UUID",
                key.len()
            ));
        }
        Ok(())
    }

    /// Checks the request against the workspace and finds its pipeline: read from the
    /// files now, so a pipeline written a moment ago is found. Runs git (for `branch`):
    /// call it outside any transaction, on a thread that may block.
    pub fn prepare(&self, ws: &Workspace) -> Result<Pipeline> {
        self.check()?;
        let agents = crate::pipeline::agent_ids(Some(&ws.agents_dir()));
        let catalog = crate::pipeline::load_catalog(Some(&ws.pipelines_dir()), Some(&agents));
        let found = match &self.pipeline {
            Some(id) => catalog.get(id),
            // The default is the workspace's first pipeline file: with a file left out, the
            // one meant may be that one, and the fallback an agent pipeline nobody chose.
            None => match catalog.default_in_doubt() {
                Some(d) => {
                    return Err(EngineError::Invalid(format!(
                        "no pipeline was named, and which one is the default is not known while a pipeline file does not load (or name a pipeline): {}",
                        crate::pipeline::Catalog::fix_hint(d)
                    )));
                }
                None => catalog.default_pipeline(),
            },
        };
        let pipeline = found.cloned().ok_or_else(|| {
            let id = self
                .pipeline
                .as_deref()
                .unwrap_or(crate::pipeline::FALLBACK_PIPELINE);
            EngineError::NotFound(catalog.not_found(id))
        })?;
        if let Some(b) = &self.branch {
            check_branch(ws, b)?;
        }
        Ok(pipeline)
    }
}

/// A task's start branch must be a branch of the workspace's repository.
fn check_branch(ws: &Workspace, branch: &str) -> Result<()> {
    let invalid = |m: String| Err(EngineError::Invalid(m));
    let Some(repo) = crate::workspace::git::repo_root(ws.root()) else {
        return invalid(format!(
            "branch `{branch}`: this workspace is not in a git repository, so there is no branch to start from"
        ));
    };
    let heads = crate::workspace::git::branch_heads(&repo).map_err(|e| {
        EngineError::Invalid(format!("branch `{branch}`: cannot list branches: {e}"))
    })?;
    if heads.iter().any(|(name, _)| name == branch) {
        return Ok(());
    }
    invalid(format!(
        "branch `{branch}`: no such branch in {} — `git branch` lists them",
        repo.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::MAX_TITLE;

    #[test]
    fn a_request_body_reads_as_it_did_and_a_creation_as_its_own() {
        let req = Request {
            task_id: 3,
            action: super::super::Action::Start,
            expected_status: None,
            actor: "user".into(),
        };
        let body = serde_json::to_value(Order::Act(req.clone())).unwrap();
        assert_eq!(body, serde_json::to_value(&req).unwrap());
        let back: Order = serde_json::from_value(body).unwrap();
        assert_eq!(back, Order::Act(req));
        let new = NewTask {
            title: "t".into(),
            actor: "tui".into(),
            ..NewTask::default()
        };
        let body = serde_json::to_value(Order::Create {
            create: new.clone(),
        })
        .unwrap();
        let back: Order = serde_json::from_value(body).unwrap();
        assert_eq!(back, Order::Create { create: new });
    }

    /// An answer read back from a queued command's result is the answer the engine gave:
    /// a forge event's outcome by type, a delivery's note, a plain request's summary.
    #[test]
    fn a_queued_answer_keeps_its_type() {
        use super::super::forge_events::ForgeOutcome;
        let forge = Order::Act(Request {
            task_id: 1,
            action: super::super::Action::Forge {
                trigger: "pr_merged".into(),
                note: None,
                seen: vec!["github:d".into()],
                record: None,
            },
            expected_status: None,
            actor: "api".into(),
        });
        for outcome in [
            ForgeOutcome::Seen,
            ForgeOutcome::Recorded,
            ForgeOutcome::Moved,
        ] {
            let answer = Answer::Applied {
                summary: format!("task 1: {}", super::super::forge_events::SEEN),
                queued: false,
                forge: Some(outcome),
            };
            let back = Answer::from_command(&forge, answer.command_result()).unwrap();
            assert_eq!(back, answer);
        }
        let push = Order::Stray {
            stray: "github:x".into(),
        };
        let noted = Answer::Noted(Noted {
            duplicate: false,
            tasks: vec![4],
        });
        assert_eq!(
            Answer::from_command(&push, noted.command_result()).unwrap(),
            noted
        );
        let start = Order::Act(Request {
            task_id: 1,
            action: super::super::Action::Start,
            expected_status: None,
            actor: "user".into(),
        });
        let plain = Answer::Applied {
            summary: "task 1: todo → work (start)".into(),
            queued: false,
            forge: None,
        };
        assert_eq!(plain.command_result(), "task 1: todo → work (start)");
        assert_eq!(
            Answer::from_command(&start, plain.command_result()).unwrap(),
            plain
        );
        // A forge answer an engine wrote as plain text is not taken for an outcome.
        assert!(Answer::from_command(&forge, "task 1: done".into()).is_err());
    }

    #[test]
    fn a_title_made_from_a_template_is_its_first_line_that_shows_something() {
        use crate::engine::actions::card_title;
        assert_eq!(card_title("\n  \n{{x}} done\nmore"), "{{x}} done");
        assert_eq!(card_title("tab\there \x1b[31mred\x1b[0m"), "tab here red");
        assert_eq!(card_title("\n \n"), "");
        assert_eq!(card_title("one\u{2028}two\u{202E}"), "one two");
        assert_eq!(
            card_title(&"y".repeat(MAX_TITLE + 5)).chars().count(),
            MAX_TITLE
        );
    }

    #[test]
    fn a_title_is_checked_the_same_for_every_front_end() {
        let mut new = NewTask {
            title: "\x1b[31m\x07".into(),
            actor: "tui".into(),
            ..NewTask::default()
        };
        assert!(
            new.check()
                .unwrap_err()
                .to_string()
                .contains("needs a title")
        );
        new.title = "x".repeat(MAX_TITLE + 1);
        assert!(
            new.check()
                .unwrap_err()
                .to_string()
                .contains("501 characters")
        );
        new.title = "two\nlines".into();
        assert!(
            new.check()
                .unwrap_err()
                .to_string()
                .contains("control character (U+000A)")
        );
        new.title = "sep\u{2028}here".into();
        assert!(new.check().unwrap_err().to_string().contains("(U+2028)"));
        new.title = "fine".into();
        new.prompt = "a\0b".into();
        assert!(new.check().unwrap_err().to_string().contains("NUL byte"));
        new.prompt.clear();
        assert!(new.check().is_ok());
    }
}
