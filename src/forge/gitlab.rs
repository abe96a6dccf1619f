//! GitLab's REST API v4 (gitlab.com or self-managed): merge requests, their pipelines'
//! jobs, discussions and notes. A project is addressed by its URL-encoded path.

use super::http::{Http, num, segment, text};
use super::{Checks, FailedCheck, Forge, ForgeError, Kind, Pr, PrRequest, PrState, ReviewComment};
use reqwest::Method;
use serde_json::{Value, json};

/// One GitLab project.
pub(super) struct GitLab {
    http: Http,
    project: String,
    /// `owner/name`, as issues are named.
    repo: String,
}

impl GitLab {
    pub fn new(http: Http, repo: &str) -> Self {
        Self {
            http,
            project: format!("/projects/{}", segment(repo)),
            repo: repo.to_string(),
        }
    }

    fn mr(&self, v: &Value, what: &str) -> Result<Pr, ForgeError> {
        let number = num(v, "iid").ok_or_else(|| self.http.bad(what, "no `iid`"))?;
        let state = match text(v, "state").as_str() {
            "merged" => PrState::Merged,
            "closed" | "locked" => PrState::Closed,
            _ if v["draft"].as_bool() == Some(true)
                || v["work_in_progress"].as_bool() == Some(true) =>
            {
                PrState::Draft
            }
            _ => PrState::Open,
        };
        Ok(Pr {
            number,
            url: text(v, "web_url"),
            state,
            head_sha: v["sha"].as_str().map(String::from),
        })
    }

    /// GitLab asks reviewers by user id: look each name up.
    fn user_ids(&self, names: &[String]) -> Result<Vec<u64>, ForgeError> {
        let mut ids = Vec::new();
        for name in names {
            let what = format!("the user `{name}`");
            let v = self
                .http
                .get(&format!("/users?username={}", segment(name)), &what)?;
            match v
                .as_array()
                .and_then(|l| l.first())
                .and_then(|u| num(u, "id"))
            {
                Some(id) => ids.push(id),
                None => {
                    return Err(ForgeError::Config(format!(
                        "reviewer `{name}` is not a GitLab user — fix the name in the pr hook's reviewers"
                    )));
                }
            }
        }
        Ok(ids)
    }
}

impl Forge for GitLab {
    fn kind(&self) -> Kind {
        Kind::Gitlab
    }

    fn whoami(&self) -> Result<String, ForgeError> {
        let v = self.http.get("/user", "GET /user")?;
        Ok(text(&v, "username"))
    }

    fn find_open(&self, branch: &str) -> Result<Option<Pr>, ForgeError> {
        let what = "the list of open merge requests";
        let path = format!(
            "{}/merge_requests?state=opened&source_branch={}",
            self.project,
            segment(branch)
        );
        let v = self.http.get(&path, what)?;
        let list = v
            .as_array()
            .ok_or_else(|| self.http.bad(what, "not a list"))?;
        list.first().map(|m| self.mr(m, what)).transpose()
    }

    fn create(&self, req: &PrRequest) -> Result<Pr, ForgeError> {
        let what = format!("opening a merge request for {}", req.head);
        // A draft is a title prefix on GitLab.
        let title = if req.draft {
            format!("Draft: {}", req.title)
        } else {
            req.title.clone()
        };
        let body = json!({"source_branch": req.head, "target_branch": req.base,
            "title": title, "description": req.body});
        let path = format!("{}/merge_requests", self.project);
        let v = self.http.post(&path, &body, &what)?;
        self.mr(&v, &what)
    }

    fn update(&self, number: u64, req: &PrRequest) -> Result<Pr, ForgeError> {
        let what = format!("updating merge request !{number}");
        let body = json!({"title": req.title, "description": req.body,
            "target_branch": req.base});
        let path = format!("{}/merge_requests/{number}", self.project);
        let v = self.http.call(Method::PUT, &path, Some(&body), &what)?;
        self.mr(&v, &what)
    }

    fn label_and_request(&self, number: u64, req: &PrRequest) -> Result<(), ForgeError> {
        let mut body = json!({});
        if !req.labels.is_empty() {
            body["add_labels"] = json!(req.labels.join(","));
        }
        if !req.reviewers.is_empty() {
            body["reviewer_ids"] = json!(self.user_ids(&req.reviewers)?);
        }
        let path = format!("{}/merge_requests/{number}", self.project);
        self.http.call(
            Method::PUT,
            &path,
            Some(&body),
            "adding labels and reviewers",
        )?;
        Ok(())
    }

    fn get(&self, number: u64) -> Result<Pr, ForgeError> {
        let what = format!("merge request !{number}");
        let v = self
            .http
            .get(&format!("{}/merge_requests/{number}", self.project), &what)?;
        self.mr(&v, &what)
    }

    fn checks(&self, pr: &Pr) -> Result<Checks, ForgeError> {
        let what = format!("the pipelines of !{}", pr.number);
        let v = self.http.get(
            &format!("{}/merge_requests/{}/pipelines", self.project, pr.number),
            &what,
        )?;
        // Newest first: the pipeline of the latest push.
        let Some(pipeline) = v
            .as_array()
            .and_then(|l| l.first())
            .and_then(|p| num(p, "id"))
        else {
            return Ok(Checks::default());
        };
        let what = format!("the jobs of pipeline {pipeline}");
        let v = self.http.get(
            &format!("{}/pipelines/{pipeline}/jobs?per_page=100", self.project),
            &what,
        )?;
        let jobs = v
            .as_array()
            .ok_or_else(|| self.http.bad(&what, "not a list"))?;
        let (mut passed, mut failed, mut pending) = (0, 0, 0);
        let mut failures = Vec::new();
        for j in jobs {
            match text(j, "status").as_str() {
                "success" | "skipped" | "manual" => passed += 1,
                "failed" if j["allow_failure"].as_bool() == Some(true) => passed += 1,
                "failed" | "canceled" => {
                    failed += 1;
                    let summary = [text(j, "stage"), text(j, "failure_reason")]
                        .into_iter()
                        .filter(|s| !s.is_empty())
                        .collect::<Vec<_>>()
                        .join(": ");
                    failures.push(FailedCheck {
                        name: text(j, "name"),
                        summary,
                    });
                }
                _ => pending += 1,
            }
        }
        Ok(Checks::from_counts(passed, failed, pending, failures))
    }

    fn review_comments(
        &self,
        number: u64,
        _review: Option<u64>,
    ) -> Result<Vec<ReviewComment>, ForgeError> {
        let what = format!("the discussions of !{number}");
        let v = self.http.get(
            &format!("{}/merge_requests/{number}/discussions", self.project),
            &what,
        )?;
        let list = v
            .as_array()
            .ok_or_else(|| self.http.bad(&what, "not a list"))?;
        // The open threads on lines of the diff.
        Ok(list
            .iter()
            .filter_map(|d| d["notes"].as_array()?.first())
            .filter(|n| {
                n["resolvable"].as_bool() == Some(true) && n["resolved"].as_bool() != Some(true)
            })
            .map(|n| {
                let pos = &n["position"];
                let path = Some(text(pos, "new_path"))
                    .filter(|p| !p.is_empty())
                    .unwrap_or_else(|| text(pos, "old_path"));
                ReviewComment {
                    path,
                    line: num(pos, "new_line").or_else(|| num(pos, "old_line")),
                    body: text(n, "body"),
                }
            })
            .collect())
    }

    fn comment(&self, number: u64, body: &str) -> Result<(), ForgeError> {
        let path = format!("{}/merge_requests/{number}/notes", self.project);
        self.http.post(
            &path,
            &json!({"body": body}),
            &format!("commenting on !{number}"),
        )?;
        Ok(())
    }

    fn comment_issue(&self, number: u64, body: &str) -> Result<(), ForgeError> {
        let path = format!("{}/issues/{number}/notes", self.project);
        self.http.post(
            &path,
            &json!({"body": body}),
            &format!("commenting on issue #{number}"),
        )?;
        Ok(())
    }

    fn open_issues(&self, label: &str) -> Result<Vec<super::issues::IssueSeen>, ForgeError> {
        let what = format!("the open issues labelled `{label}`");
        let path = format!(
            "{}/issues?state=opened&labels={}&per_page=100",
            self.project,
            segment(label)
        );
        let list = self.http.list(&path, &what)?;
        Ok(list
            .iter()
            .filter_map(|i| super::issues::from_gitlab_api(&self.repo, i))
            .collect())
    }

    fn may_write(&self, login: &str, id: Option<u64>) -> Result<bool, ForgeError> {
        let id = match id {
            Some(id) => id,
            None => {
                let what = format!("the user `{login}`");
                let v = self
                    .http
                    .get(&format!("/users?username={}", segment(login)), &what)?;
                match v
                    .as_array()
                    .and_then(|l| l.first())
                    .and_then(|u| num(u, "id"))
                {
                    Some(id) => id,
                    None => return Ok(false),
                }
            }
        };
        // Members of the project and of its groups; Developer (30) and above may push.
        let what = format!("the membership of `{login}`");
        let path = format!("{}/members/all/{id}", self.project);
        super::unknown_is_no(
            self.http
                .get(&path, &what)
                .map(|v| num(&v, "access_level").is_some_and(|l| l >= 30)),
        )
    }
}
