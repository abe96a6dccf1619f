//! What a forge's webhook delivery means for a task: pure parsing of the documented
//! payloads of GitHub, GitLab and Gitea/Forgejo, after the signature was checked.

use super::{FailedCheck, Kind};
use serde_json::Value;

/// A pull request event baton acts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForgeEvent {
    /// The pull request's number (GitLab's `iid`).
    pub number: Option<u64>,
    /// Its head branch, when the payload names it.
    pub branch: Option<String>,
    /// What happened.
    pub what: What,
}

/// What happened to a pull request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum What {
    /// Merged.
    Merged,
    /// Closed without merging.
    Closed,
    /// A review asked for changes; the review's id (to read its comments) and its text.
    ChangesRequested {
        /// The review's id, where the forge gives one.
        review: Option<u64>,
        /// The review's own text.
        body: String,
    },
    /// Checks failed on this commit.
    ChecksFailed {
        /// The commit.
        sha: String,
        /// The failed checks.
        failures: Vec<FailedCheck>,
    },
}

impl ForgeEvent {
    /// The trigger this event fires.
    pub fn trigger(&self) -> &'static str {
        match self.what {
            What::Merged => "pr_merged",
            What::Closed => "pr_closed",
            What::ChangesRequested { .. } => "outcome:changes_requested",
            What::ChecksFailed { .. } => "ci_failed",
        }
    }

    /// A key naming the event itself, the same whichever path (a webhook, a poll) sees it,
    /// so it is acted on once.
    pub fn key(&self, number: u64) -> String {
        match &self.what {
            What::Merged => format!("pr:{number}:merged"),
            What::Closed => format!("pr:{number}:closed"),
            What::ChangesRequested { review, body } => match review {
                Some(r) => format!("pr:{number}:review:{r}"),
                None => format!("pr:{number}:review:{}", body.len()),
            },
            What::ChecksFailed { sha, .. } => format!("pr:{number}:ci_failed:{sha}"),
        }
    }
}

fn s(v: &Value) -> Option<String> {
    v.as_str().filter(|x| !x.is_empty()).map(String::from)
}

/// Reads a delivery; `None` for events baton does not act on.
pub fn parse(kind: Kind, event: &str, p: &Value) -> Option<ForgeEvent> {
    match kind {
        Kind::Github => github(event, p),
        Kind::Gitlab => gitlab(event, p),
        Kind::Gitea | Kind::Forgejo => gitea(event, p),
    }
}

fn github(event: &str, p: &Value) -> Option<ForgeEvent> {
    match event {
        "pull_request" if p["action"] == "closed" => {
            let pr = &p["pull_request"];
            Some(ForgeEvent {
                number: pr["number"].as_u64().or_else(|| p["number"].as_u64()),
                branch: s(&pr["head"]["ref"]),
                what: if pr["merged"].as_bool() == Some(true) {
                    What::Merged
                } else {
                    What::Closed
                },
            })
        }
        "pull_request_review"
            if p["action"] == "submitted" && p["review"]["state"] == "changes_requested" =>
        {
            let pr = &p["pull_request"];
            Some(ForgeEvent {
                number: pr["number"].as_u64(),
                branch: s(&pr["head"]["ref"]),
                what: What::ChangesRequested {
                    review: p["review"]["id"].as_u64(),
                    body: s(&p["review"]["body"]).unwrap_or_default(),
                },
            })
        }
        "check_run" if p["action"] == "completed" => {
            let run = &p["check_run"];
            let failed = matches!(
                run["conclusion"].as_str(),
                Some("failure" | "timed_out" | "cancelled" | "action_required")
            );
            if !failed {
                return None;
            }
            let pr = run["pull_requests"].as_array()?.first()?;
            let out = &run["output"];
            let summary = [s(&out["title"]), s(&out["summary"])]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
                .join(": ");
            Some(ForgeEvent {
                number: pr["number"].as_u64(),
                branch: s(&pr["head"]["ref"]),
                what: What::ChecksFailed {
                    sha: s(&run["head_sha"]).unwrap_or_default(),
                    failures: vec![FailedCheck {
                        name: s(&run["name"]).unwrap_or_default(),
                        summary,
                    }],
                },
            })
        }
        _ => None,
    }
}

fn gitlab(event: &str, p: &Value) -> Option<ForgeEvent> {
    let attrs = &p["object_attributes"];
    match event {
        "Merge Request Hook" => {
            let what = match (attrs["action"].as_str(), attrs["state"].as_str()) {
                (Some("merge"), _) => What::Merged,
                (Some("close"), _) => What::Closed,
                _ => return None,
            };
            Some(ForgeEvent {
                number: attrs["iid"].as_u64(),
                branch: s(&attrs["source_branch"]),
                what,
            })
        }
        "Pipeline Hook" if attrs["status"] == "failed" => {
            let failures = p["builds"]
                .as_array()
                .map(|b| {
                    b.iter()
                        .filter(|j| j["status"] == "failed" && j["allow_failure"] != true)
                        .map(|j| FailedCheck {
                            name: s(&j["name"]).unwrap_or_default(),
                            summary: [s(&j["stage"]), s(&j["failure_reason"])]
                                .into_iter()
                                .flatten()
                                .collect::<Vec<_>>()
                                .join(": "),
                        })
                        .collect()
                })
                .unwrap_or_default();
            Some(ForgeEvent {
                number: p["merge_request"]["iid"].as_u64(),
                branch: s(&attrs["ref"]),
                what: What::ChecksFailed {
                    sha: s(&attrs["sha"]).unwrap_or_default(),
                    failures,
                },
            })
        }
        _ => None,
    }
}

fn gitea(event: &str, p: &Value) -> Option<ForgeEvent> {
    let pr = &p["pull_request"];
    let number = pr["number"].as_u64().or_else(|| p["number"].as_u64());
    let branch = s(&pr["head"]["ref"]);
    match event {
        "pull_request" if p["action"] == "closed" => Some(ForgeEvent {
            number,
            branch,
            what: if pr["merged"].as_bool() == Some(true) {
                What::Merged
            } else {
                What::Closed
            },
        }),
        "pull_request_review_rejected" => Some(ForgeEvent {
            number,
            branch,
            what: What::ChangesRequested {
                review: None,
                body: s(&p["review"]["content"]).unwrap_or_default(),
            },
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn documented_payloads_become_events() {
        let merged = json!({"action": "closed", "number": 12,
            "pull_request": {"number": 12, "merged": true, "head": {"ref": "baton/1-x"}}});
        let e = parse(Kind::Github, "pull_request", &merged).unwrap();
        assert_eq!((e.number, e.trigger()), (Some(12), "pr_merged"));
        assert_eq!(e.branch.as_deref(), Some("baton/1-x"));
        let closed = json!({"action": "closed", "pull_request": {"number": 12, "merged": false}});
        assert_eq!(
            parse(Kind::Github, "pull_request", &closed)
                .unwrap()
                .trigger(),
            "pr_closed"
        );
        let opened = json!({"action": "opened", "pull_request": {"number": 12}});
        assert_eq!(parse(Kind::Github, "pull_request", &opened), None);

        let review = json!({"action": "submitted", "review": {"id": 88, "state": "changes_requested",
            "body": "see comments"}, "pull_request": {"number": 12}});
        let e = parse(Kind::Github, "pull_request_review", &review).unwrap();
        assert_eq!(e.trigger(), "outcome:changes_requested");
        assert_eq!(e.key(12), "pr:12:review:88");
        let approved = json!({"action": "submitted", "review": {"id": 89, "state": "approved"},
            "pull_request": {"number": 12}});
        assert_eq!(parse(Kind::Github, "pull_request_review", &approved), None);

        let check = json!({"action": "completed", "check_run": {"name": "test", "head_sha": "abc",
            "conclusion": "failure", "output": {"title": "2 failed", "summary": "x panicked"},
            "pull_requests": [{"number": 12, "head": {"ref": "baton/1-x"}}]}});
        let e = parse(Kind::Github, "check_run", &check).unwrap();
        assert_eq!(e.key(12), "pr:12:ci_failed:abc");
        match e.what {
            What::ChecksFailed { failures, .. } => {
                assert_eq!(failures[0].name, "test");
                assert_eq!(failures[0].summary, "2 failed: x panicked");
            }
            other => panic!("{other:?}"),
        }

        let mr = json!({"object_kind": "merge_request", "object_attributes": {"iid": 5,
            "action": "merge", "state": "merged", "source_branch": "baton/2-y"}});
        assert_eq!(
            parse(Kind::Gitlab, "Merge Request Hook", &mr)
                .unwrap()
                .trigger(),
            "pr_merged"
        );
        let pipeline = json!({"object_kind": "pipeline", "object_attributes": {"status": "failed",
            "ref": "baton/2-y", "sha": "def"}, "merge_request": {"iid": 5},
            "builds": [{"name": "rspec", "stage": "test", "status": "failed", "failure_reason": "script_failure"},
                       {"name": "lint", "stage": "test", "status": "success"}]});
        let e = parse(Kind::Gitlab, "Pipeline Hook", &pipeline).unwrap();
        assert_eq!((e.number, e.trigger()), (Some(5), "ci_failed"));

        let gitea = json!({"action": "closed", "number": 3, "pull_request": {"number": 3,
            "merged": true, "head": {"ref": "baton/3-z"}}});
        assert_eq!(
            parse(Kind::Forgejo, "pull_request", &gitea)
                .unwrap()
                .trigger(),
            "pr_merged"
        );
        let rejected = json!({"action": "reviewed", "number": 3, "pull_request": {"number": 3},
            "review": {"type": "pull_request_review_rejected", "content": "no"}});
        assert_eq!(
            parse(Kind::Gitea, "pull_request_review_rejected", &rejected)
                .unwrap()
                .trigger(),
            "outcome:changes_requested"
        );
    }
}
