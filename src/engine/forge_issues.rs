//! Issues in: an open issue carrying a label an `issue` trigger watches becomes a task of
//! that trigger's pipeline, once per issue (its forge, repository and number) whichever
//! path brought it — a webhook or a poll. The task remembers its issue, so its pull
//! request closes it and a `comment` hook can post on it.

use super::request::Answer;
use super::triggers::{self, Firing, Kind, TriggerSet};
use super::{Engine, EngineError, EngineEvent};
use crate::forge::issues::IssueSeen;
use crate::store::{CommandState, Db};

/// The store's memory of the issue task `task` came from.
fn memo(task: i64) -> String {
    format!("task-issue:{task}")
}

/// The issue task `task` came from, if it came from one.
pub fn issue_of(db: &Db, task: i64) -> crate::store::Result<Option<u64>> {
    Ok(db.meta(&memo(task))?.and_then(|v| v.parse().ok()))
}

/// The firing an issue makes: of the first `issue` trigger whose labels it carries, while
/// it is open.
pub fn firing(set: &TriggerSet, issue: &IssueSeen) -> Option<Firing> {
    if !issue.open {
        return None;
    }
    let carries = |labels: &[String]| {
        labels
            .iter()
            .any(|l| issue.labels.iter().any(|have| have.eq_ignore_ascii_case(l)))
    };
    let (i, _) = set
        .triggers
        .iter()
        .enumerate()
        .find(|(_, t)| matches!(&t.kind, Kind::Issue(labels) if carries(labels)))?;
    Some(Firing {
        trigger: i,
        key: issue.key(),
        vars: vec![
            ("title".into(), title_of(issue)),
            ("body".into(), clean(&issue.body)),
            ("number".into(), issue.number.to_string()),
            ("url".into(), clean(&issue.url)),
        ],
        slot: None,
        issue: Some(issue.number),
        origin: triggers::Origin::Outside,
    })
}

/// Every label the `issue` triggers watch, once each (what a poll asks the forge for).
pub fn watched_labels(set: &TriggerSet) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for t in &set.triggers {
        if let Kind::Issue(labels) = &t.kind {
            for l in labels {
                if !out.iter().any(|o| o.eq_ignore_ascii_case(l)) {
                    out.push(l.clone());
                }
            }
        }
    }
    out
}

/// Text from the forge as a task holds it: no NUL (a step could not be given it).
fn clean(text: &str) -> String {
    text.replace('\0', "")
}

/// An issue's title as a card's: one line, of a card's length, never blank.
fn title_of(issue: &IssueSeen) -> String {
    let line = super::actions::card_title(&issue.title);
    if line.is_empty() {
        return format!("issue #{}", issue.number);
    }
    line
}

impl Engine {
    /// An issue the forge showed (by webhook or poll): a task when an `issue` trigger
    /// watches one of its labels and it made none before. `command` is its row when it
    /// came through the commands table, finished in the same transaction.
    pub(super) async fn take_issue(
        &mut self,
        issue: IssueSeen,
        command: Option<i64>,
    ) -> Result<Answer, String> {
        let number = issue.number;
        let fired = firing(&self.triggers, &issue).and_then(|f| {
            let parts = self.triggers.parts(&f)?;
            Some((f, parts))
        });
        let out = self
            .store
            .write(move |db| {
                let (summary, made) = match &fired {
                    None => (format!(
                        "issue #{number} made no task: it is closed or carries no label an issue trigger watches"
                    ), None),
                    Some((f, (trigger, pipeline))) => {
                        let vars: Vec<(&str, &str)> = f
                            .vars
                            .iter()
                            .map(|(k, v)| (k.as_str(), v.as_str()))
                            .collect();
                        match triggers::fire(db, pipeline, trigger, &f.key, &vars)? {
                            Some(id) => {
                                db.set_meta(&memo(id), &number.to_string())?;
                                (format!("task {id}: created from issue #{number}"), Some(id))
                            }
                            None => (format!("issue #{number} made its task before"), None),
                        }
                    }
                };
                if let Some(id) = command {
                    db.finish_command(id, CommandState::Done, &summary)?;
                }
                Ok::<_, EngineError>((summary, made))
            })
            .await;
        match out {
            Ok((summary, made)) => {
                if let Some(id) = made {
                    let _ = self.events.send(EngineEvent::TaskChanged { task_id: id });
                    self.look_again = true;
                }
                Ok(Answer::Applied {
                    summary,
                    queued: false,
                    forge: None,
                })
            }
            Err(e) => Err(e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn set() -> TriggerSet {
        let p: crate::pipeline::Pipeline = serde_json::from_value(json!({
            "id": "p", "name": "P",
            "statuses": [{"id": "todo", "label": "todo", "kind": "queue"}],
            "triggers": [{"schedule": "0 3 * * *"}, {"issue": {"labels": ["Baton", "agent"]}}],
        }))
        .unwrap();
        TriggerSet::new(&[p]).0
    }

    fn issue(labels: &[&str], open: bool) -> IssueSeen {
        IssueSeen {
            forge: "github".into(),
            repo: "Acme/App".into(),
            number: 7,
            title: "Crash on start\nsecond line".into(),
            body: "It\0 crashes".into(),
            url: "https://github.com/acme/app/issues/7".into(),
            labels: labels.iter().map(|l| l.to_string()).collect(),
            open,
        }
    }

    #[test]
    fn an_open_issue_with_a_watched_label_fires_once_by_its_key() {
        let s = set();
        let f = firing(&s, &issue(&["bug", "baton"], true)).expect("fires");
        assert_eq!(f.trigger, 1);
        assert_eq!(f.key, "issue:github:acme/app:7");
        assert_eq!(f.issue, Some(7));
        let var = |k: &str| f.vars.iter().find(|(n, _)| n == k).unwrap().1.clone();
        assert_eq!(var("title"), "Crash on start");
        assert_eq!(var("body"), "It crashes");
        assert!(firing(&s, &issue(&["bug"], true)).is_none());
        assert!(firing(&s, &issue(&["baton"], false)).is_none());
        assert_eq!(watched_labels(&s), ["Baton", "agent"]);
    }
}
