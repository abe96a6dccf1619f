//! Issues in, and `/baton` comments on pull requests: pure parsing of the documented webhook
//! payloads (GitHub `issues` and `issue_comment`, GitLab `Issue Hook` and `Note Hook`,
//! Gitea/Forgejo `issues` and `issue_comment`) and of the issue lists the REST APIs return.

use super::Kind;
use super::http::{num, text};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// An issue as a forge shows it: what an `issue` trigger needs to make a task of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IssueSeen {
    /// The forge's kind (`github`, `gitlab`, `gitea`, `forgejo`).
    pub forge: String,
    /// `owner/name` of its repository.
    pub repo: String,
    /// Its number (GitLab's `iid`).
    pub number: u64,
    pub title: String,
    /// Its text (markdown).
    pub body: String,
    /// Its web address.
    pub url: String,
    /// Its labels' names.
    pub labels: Vec<String>,
    /// It is open (a closed issue makes no task).
    pub open: bool,
}

impl IssueSeen {
    /// The key that makes it one task: the forge, the repository and the number (Forgejo
    /// speaks Gitea's API, so a webhook and a poll of one server name it alike).
    pub fn key(&self) -> String {
        let forge = if self.forge == "forgejo" {
            "gitea"
        } else {
            &self.forge
        };
        format!(
            "issue:{forge}:{}:{}",
            self.repo.to_ascii_lowercase(),
            self.number
        )
    }
}

/// The slug of a forge kind, as keys and settings write it.
pub fn slug(kind: Kind) -> &'static str {
    match kind {
        Kind::Github => "github",
        Kind::Gitlab => "gitlab",
        Kind::Gitea => "gitea",
        Kind::Forgejo => "forgejo",
    }
}

fn names(list: &Value, key: &str) -> Vec<String> {
    list.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|l| l[key].as_str().or_else(|| l.as_str()).map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// An issue object of GitHub's or Gitea's REST API and webhooks (they share the shape);
/// `None` for a pull request, which GitHub lists among issues too.
pub fn from_github_like(kind: Kind, repo: &str, issue: &Value) -> Option<IssueSeen> {
    if issue.get("pull_request").is_some_and(|p| !p.is_null()) {
        return None;
    }
    Some(IssueSeen {
        forge: slug(kind).into(),
        repo: repo.to_string(),
        number: num(issue, "number")?,
        title: text(issue, "title"),
        body: text(issue, "body"),
        url: text(issue, "html_url"),
        labels: names(&issue["labels"], "name"),
        open: text(issue, "state") == "open",
    })
}

/// An issue object of GitLab's REST API (`labels` are names there).
pub fn from_gitlab_api(repo: &str, issue: &Value) -> Option<IssueSeen> {
    Some(IssueSeen {
        forge: "gitlab".into(),
        repo: repo.to_string(),
        number: num(issue, "iid")?,
        title: text(issue, "title"),
        body: text(issue, "description"),
        url: text(issue, "web_url"),
        labels: names(&issue["labels"], "title"),
        open: text(issue, "state") == "opened",
    })
}

/// The issue an issue webhook delivery is about; `None` for any other event.
pub fn parse_issue_event(kind: Kind, event: &str, p: &Value) -> Option<IssueSeen> {
    match (kind, event) {
        (Kind::Github, "issues") | (Kind::Gitea | Kind::Forgejo, "issues") => {
            let repo = p["repository"]["full_name"].as_str()?;
            from_github_like(kind, repo, &p["issue"])
        }
        (Kind::Gitlab, "Issue Hook") => {
            let a = &p["object_attributes"];
            Some(IssueSeen {
                forge: "gitlab".into(),
                repo: p["project"]["path_with_namespace"].as_str()?.to_string(),
                number: num(a, "iid")?,
                title: text(a, "title"),
                body: text(a, "description"),
                url: text(a, "url"),
                labels: names(&p["labels"], "title"),
                open: text(a, "state") == "opened",
            })
        }
        _ => None,
    }
}

/// A `/baton` comment on a pull request: its number and the text after `/baton`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatonComment {
    pub number: u64,
    pub text: String,
    /// Who wrote it (their login).
    pub author: String,
    /// Their user id, where the payload gives it (GitLab asks for members by id).
    pub author_id: Option<u64>,
    /// Whether they may write to the repository, where the payload says (GitHub's
    /// `author_association`); `None`: ask the forge's API.
    pub writer: Option<bool>,
    /// The repository it was written in (`owner/name`), where the payload names it.
    pub repo: Option<String>,
}

/// The `/baton` comment a delivery carries, if it is one on a pull request.
pub fn parse_baton_comment(kind: Kind, event: &str, p: &Value) -> Option<BatonComment> {
    let (number, body, author, author_id, writer, repo) = match (kind, event) {
        (Kind::Github | Kind::Gitea | Kind::Forgejo, "issue_comment") => {
            let issue = &p["issue"];
            // A comment on an issue that is not a pull request is not for a task.
            let on_pr = issue.get("pull_request").is_some_and(|v| !v.is_null())
                || issue["is_pull"].as_bool() == Some(true)
                || p["is_pull"].as_bool() == Some(true);
            if !on_pr || text(p, "action") != "created" {
                return None;
            }
            let comment = &p["comment"];
            // Only GitHub says what the author may do; Gitea's comment does not.
            let writer = (kind == Kind::Github)
                .then(|| comment["author_association"].as_str())
                .flatten()
                .map(|a| matches!(a, "OWNER" | "MEMBER" | "COLLABORATOR"));
            (
                num(issue, "number")?,
                text(comment, "body"),
                text(&comment["user"], "login"),
                num(&comment["user"], "id"),
                writer,
                p["repository"]["full_name"].as_str().map(String::from),
            )
        }
        (Kind::Gitlab, "Note Hook") => {
            let a = &p["object_attributes"];
            if text(a, "noteable_type") != "MergeRequest" {
                return None;
            }
            (
                num(&p["merge_request"], "iid")?,
                text(a, "note"),
                text(&p["user"], "username"),
                num(&p["user"], "id").or_else(|| num(a, "author_id")),
                None,
                p["project"]["path_with_namespace"]
                    .as_str()
                    .map(String::from),
            )
        }
        _ => return None,
    };
    let rest = body.trim_start().strip_prefix("/baton")?;
    // `/batonic` is not a command.
    if !rest.is_empty() && !rest.starts_with(char::is_whitespace) {
        return None;
    }
    Some(BatonComment {
        number,
        text: rest.trim().to_string(),
        author,
        author_id,
        writer,
        repo,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn issue_events_of_each_forge() {
        let gh = json!({"action": "labeled", "repository": {"full_name": "acme/app"},
            "issue": {"number": 7, "title": "Crash", "body": "It crashes", "state": "open",
                "html_url": "https://github.com/acme/app/issues/7",
                "labels": [{"name": "bug"}, {"name": "baton"}]}});
        let i = parse_issue_event(Kind::Github, "issues", &gh).unwrap();
        assert_eq!((i.number, i.open), (7, true));
        assert_eq!(i.labels, ["bug", "baton"]);
        assert_eq!(i.key(), "issue:github:acme/app:7");
        let mut pr = gh.clone();
        pr["issue"]["pull_request"] = json!({"url": "x"});
        assert_eq!(parse_issue_event(Kind::Github, "issues", &pr), None);

        let gl = json!({"object_kind": "issue", "project": {"path_with_namespace": "acme/app"},
            "object_attributes": {"iid": 3, "title": "T", "description": "D", "state": "opened",
                "url": "https://gitlab.com/acme/app/-/issues/3", "action": "open"},
            "labels": [{"title": "baton"}]});
        let i = parse_issue_event(Kind::Gitlab, "Issue Hook", &gl).unwrap();
        assert_eq!((i.number, i.body.as_str(), i.open), (3, "D", true));
        assert_eq!(i.labels, ["baton"]);

        let gt = json!({"action": "opened", "repository": {"full_name": "acme/app"},
            "issue": {"number": 9, "title": "T", "body": "", "state": "closed",
                "html_url": "u", "labels": []}});
        let i = parse_issue_event(Kind::Forgejo, "issues", &gt).unwrap();
        assert_eq!((i.forge.as_str(), i.open), ("forgejo", false));
        assert_eq!(i.key(), "issue:gitea:acme/app:9");
        assert_eq!(parse_issue_event(Kind::Gitea, "pull_request", &gt), None);
    }

    #[test]
    fn baton_comments_only_on_pull_requests() {
        let gh = |body: &str, on_pr: bool| {
            let mut p = json!({"action": "created", "issue": {"number": 12},
                "comment": {"body": body, "user": {"login": "octo"}}});
            if on_pr {
                p["issue"]["pull_request"] = json!({"url": "x"});
            }
            parse_baton_comment(Kind::Github, "issue_comment", &p)
        };
        let c = gh("/baton please add a test", true).unwrap();
        assert_eq!((c.number, c.text.as_str()), (12, "please add a test"));
        assert_eq!((c.author.as_str(), c.writer), ("octo", None));
        assert_eq!(gh("/baton please", false), None);
        assert_eq!(gh("looks good /baton", true), None);
        assert_eq!(gh("/batonic", true), None);
        let gl = json!({"object_attributes": {"noteable_type": "MergeRequest", "note": "/baton go on"},
            "merge_request": {"iid": 4}, "user": {"username": "u"}});
        let c = parse_baton_comment(Kind::Gitlab, "Note Hook", &gl).unwrap();
        assert_eq!((c.number, c.text.as_str()), (4, "go on"));
        let gt = json!({"action": "created", "is_pull": true, "issue": {"number": 5},
            "comment": {"body": "/baton", "user": {"login": "g"}}});
        let c = parse_baton_comment(Kind::Gitea, "issue_comment", &gt).unwrap();
        assert_eq!((c.number, c.text.as_str()), (5, ""));
    }

    #[test]
    fn baton_comments_say_who_wrote_them_and_what_they_may_do() {
        let gh = |association: &str| {
            let p = json!({"action": "created", "repository": {"full_name": "acme/app"},
                "issue": {"number": 12, "pull_request": {"url": "x"}},
                "comment": {"body": "/baton fix it", "author_association": association,
                    "user": {"login": "ana", "id": 41}}});
            parse_baton_comment(Kind::Github, "issue_comment", &p).unwrap()
        };
        for writer in ["OWNER", "MEMBER", "COLLABORATOR"] {
            assert_eq!(gh(writer).writer, Some(true), "{writer}");
        }
        // Anyone may comment on a public repository.
        for other in [
            "CONTRIBUTOR",
            "FIRST_TIMER",
            "FIRST_TIME_CONTRIBUTOR",
            "NONE",
        ] {
            assert_eq!(gh(other).writer, Some(false), "{other}");
        }
        let c = gh("OWNER");
        assert_eq!((c.author.as_str(), c.author_id), ("ana", Some(41)));
        assert_eq!(c.repo.as_deref(), Some("acme/app"));

        // GitLab's Note Hook names the user (and their id) but not their rights.
        let gl = json!({"object_kind": "note", "user": {"id": 7, "username": "bo"},
            "project": {"path_with_namespace": "acme/app"},
            "object_attributes": {"noteable_type": "MergeRequest", "note": "/baton go", "author_id": 7},
            "merge_request": {"iid": 4}});
        let c = parse_baton_comment(Kind::Gitlab, "Note Hook", &gl).unwrap();
        assert_eq!(
            (c.author.as_str(), c.author_id, c.writer),
            ("bo", Some(7), None)
        );
        assert_eq!(c.repo.as_deref(), Some("acme/app"));

        // Gitea's and Forgejo's comments carry no association: their API is asked.
        let gt = json!({"action": "created", "is_pull": true, "repository": {"full_name": "acme/app"},
            "issue": {"number": 5}, "comment": {"body": "/baton go", "author_association": "OWNER",
                "user": {"login": "cy", "id": 3}}});
        let c = parse_baton_comment(Kind::Forgejo, "issue_comment", &gt).unwrap();
        assert_eq!((c.author.as_str(), c.writer), ("cy", None));
    }
}
