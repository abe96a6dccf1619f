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
    /// The repository its head branch lives in (`owner/name`), when the payload names it;
    /// a fork's pull request names the fork here.
    pub head_repo: Option<String>,
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
        /// The pull request's head commit, where the payload names it.
        head_sha: String,
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
            What::ChangesRequested {
                review,
                body,
                head_sha,
            } => match review {
                Some(r) => format!("pr:{number}:review:{r}"),
                // No review id (Gitea, Forgejo): the commit and the text name the review, so
                // two different reviews of the same length are not taken for one.
                None => {
                    use sha2::{Digest, Sha256};
                    let digest = Sha256::new()
                        .chain_update(head_sha.as_bytes())
                        .chain_update([0])
                        .chain_update(body.as_bytes())
                        .finalize();
                    let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
                    format!("pr:{number}:review:{hex}")
                }
            },
            What::ChecksFailed { sha, .. } => format!("pr:{number}:ci_failed:{sha}"),
        }
    }

    /// Whether the event can be told apart from later ones of its kind: failed checks
    /// without a commit cannot (their key would swallow every later failure).
    pub fn keyable(&self) -> bool {
        !matches!(&self.what, What::ChecksFailed { sha, .. } if sha.is_empty())
    }
}

/// Whether a GitHub review's author may write to the repository: only their review asks
/// the coder for changes.
fn github_writer(review: &Value) -> bool {
    matches!(
        review["author_association"].as_str(),
        Some("OWNER" | "MEMBER" | "COLLABORATOR")
    )
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
                head_repo: s(&pr["head"]["repo"]["full_name"]),
                what: if pr["merged"].as_bool() == Some(true) {
                    What::Merged
                } else {
                    What::Closed
                },
            })
        }
        "pull_request_review"
            if p["action"] == "submitted"
                && p["review"]["state"] == "changes_requested"
                && github_writer(&p["review"]) =>
        {
            let pr = &p["pull_request"];
            Some(ForgeEvent {
                number: pr["number"].as_u64(),
                branch: s(&pr["head"]["ref"]),
                head_repo: s(&pr["head"]["repo"]["full_name"]),
                what: What::ChangesRequested {
                    review: p["review"]["id"].as_u64(),
                    body: s(&p["review"]["body"]).unwrap_or_default(),
                    head_sha: s(&pr["head"]["sha"]).unwrap_or_default(),
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
                // A check run's pull requests name their head repository by id only.
                head_repo: None,
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
                head_repo: gitlab_source(
                    p,
                    &attrs["source_project_id"],
                    &attrs["target_project_id"],
                ),
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
            let mr = &p["merge_request"];
            Some(ForgeEvent {
                number: mr["iid"].as_u64(),
                branch: s(&attrs["ref"]),
                head_repo: gitlab_source(p, &mr["source_project_id"], &mr["target_project_id"]),
                what: What::ChecksFailed {
                    sha: s(&attrs["sha"]).unwrap_or_default(),
                    failures,
                },
            })
        }
        _ => None,
    }
}

/// The merge request's source project as `path/with/namespace`: the event's project when
/// the source is that same project; a fork's path (or its id) otherwise.
fn gitlab_source(p: &Value, source: &Value, target: &Value) -> Option<String> {
    match (source.as_u64(), target.as_u64()) {
        (Some(s_id), Some(t_id)) if s_id == t_id => s(&p["project"]["path_with_namespace"]),
        (Some(s_id), _) => Some(
            s(&p["object_attributes"]["source"]["path_with_namespace"])
                .unwrap_or_else(|| format!("project {s_id}")),
        ),
        _ => None,
    }
}

fn gitea(event: &str, p: &Value) -> Option<ForgeEvent> {
    let pr = &p["pull_request"];
    let number = pr["number"].as_u64().or_else(|| p["number"].as_u64());
    let branch = s(&pr["head"]["ref"]);
    let head_repo = s(&pr["head"]["repo"]["full_name"]);
    match event {
        "pull_request" if p["action"] == "closed" => Some(ForgeEvent {
            number,
            branch,
            head_repo,
            what: if pr["merged"].as_bool() == Some(true) {
                What::Merged
            } else {
                What::Closed
            },
        }),
        // Gitea's payload says nothing of the reviewer's rights, so the author's own review
        // of their pull request is refused here; the review comments read from the API
        // later come only from official reviews (those of people who may write).
        "pull_request_review_rejected" if gitea_reviewer_ok(p) => Some(ForgeEvent {
            number,
            branch,
            head_repo,
            what: What::ChangesRequested {
                review: None,
                body: s(&p["review"]["content"]).unwrap_or_default(),
                head_sha: s(&pr["head"]["sha"]).unwrap_or_default(),
            },
        }),
        _ => None,
    }
}

/// A Gitea or Forgejo review counts when its sender is known and is not the pull request's
/// author, and, where the payload carries the sender's permissions, may push.
fn gitea_reviewer_ok(p: &Value) -> bool {
    let Some(sender) = s(&p["sender"]["login"]) else {
        return false;
    };
    if s(&p["pull_request"]["user"]["login"]).as_deref() == Some(sender.as_str()) {
        return false;
    }
    p["sender"]["permissions"]["push"].as_bool() != Some(false)
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

        let mut review = json!({"action": "submitted", "review": {"id": 88, "state": "changes_requested",
            "body": "see comments", "author_association": "MEMBER"}, "pull_request": {"number": 12}});
        let e = parse(Kind::Github, "pull_request_review", &review).unwrap();
        assert_eq!(e.trigger(), "outcome:changes_requested");
        assert_eq!(e.key(12), "pr:12:review:88");
        // Anyone may review a public repository; only those who may write ask for changes.
        for who in [
            "NONE",
            "CONTRIBUTOR",
            "FIRST_TIMER",
            "FIRST_TIME_CONTRIBUTOR",
        ] {
            review["review"]["author_association"] = json!(who);
            assert_eq!(
                parse(Kind::Github, "pull_request_review", &review),
                None,
                "{who}"
            );
        }
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
        let mut rejected = json!({"action": "reviewed", "number": 3,
            "pull_request": {"number": 3, "user": {"login": "ana"}, "head": {"sha": "c0ffee"}},
            "sender": {"login": "bo"},
            "review": {"type": "pull_request_review_rejected", "content": "no"}});
        let e = parse(Kind::Gitea, "pull_request_review_rejected", &rejected).unwrap();
        assert_eq!(e.trigger(), "outcome:changes_requested");
        let key = e.key(3);
        // Another review of the same length on the same commit is another review.
        rejected["review"]["content"] = json!("ok");
        let other = parse(Kind::Gitea, "pull_request_review_rejected", &rejected).unwrap();
        assert_ne!(other.key(3), key);
        assert_eq!(other.key(3), other.clone().key(3));
        // The author's own review, one without a sender, or one from a sender said to have
        // no push access asks for nothing.
        rejected["sender"]["login"] = json!("ana");
        assert_eq!(
            parse(Kind::Gitea, "pull_request_review_rejected", &rejected),
            None
        );
        rejected["sender"] = json!({"login": "eve", "permissions": {"push": false}});
        assert_eq!(
            parse(Kind::Gitea, "pull_request_review_rejected", &rejected),
            None
        );
        rejected["sender"] = Value::Null;
        assert_eq!(
            parse(Kind::Gitea, "pull_request_review_rejected", &rejected),
            None
        );
    }

    #[test]
    fn head_repositories_are_read_and_commitless_failures_have_no_key() {
        let fork = json!({"action": "closed", "number": 4, "pull_request": {"number": 4,
            "merged": false, "head": {"ref": "baton/1-x", "repo": {"full_name": "stranger/app"}}}});
        for kind in [Kind::Github, Kind::Gitea] {
            let e = parse(kind, "pull_request", &fork).unwrap();
            assert_eq!(e.head_repo.as_deref(), Some("stranger/app"), "{kind}");
        }
        let mr = |source: u64| {
            json!({"object_attributes": {"iid": 5, "action": "close", "source_branch": "baton/1-x",
            "source_project_id": source, "target_project_id": 10,
            "source": {"path_with_namespace": "stranger/app"}},
            "project": {"path_with_namespace": "acme/app"}})
        };
        let own = parse(Kind::Gitlab, "Merge Request Hook", &mr(10)).unwrap();
        assert_eq!(own.head_repo.as_deref(), Some("acme/app"));
        let forked = parse(Kind::Gitlab, "Merge Request Hook", &mr(11)).unwrap();
        assert_eq!(forked.head_repo.as_deref(), Some("stranger/app"));

        let check = json!({"action": "completed", "check_run": {"name": "t", "head_sha": "",
            "conclusion": "failure", "pull_requests": [{"number": 12}]}});
        let e = parse(Kind::Github, "check_run", &check).unwrap();
        assert!(!e.keyable());
    }
}
