//! GitHub's REST API (api.github.com, or `https://HOST/api/v3` for GitHub Enterprise):
//! pulls, check runs, reviews and issue comments.

use super::http::{Http, num, segment, text};
use super::{Checks, FailedCheck, Forge, ForgeError, Kind, Pr, PrRequest, PrState, ReviewComment};
use reqwest::Method;
use serde_json::{Value, json};

/// One GitHub repository.
pub(super) struct GitHub {
    http: Http,
    repo: String,
}

impl GitHub {
    pub fn new(http: Http, repo: &str) -> Self {
        Self {
            http,
            repo: repo.to_string(),
        }
    }

    fn pr(&self, v: &Value, what: &str) -> Result<Pr, ForgeError> {
        let number = num(v, "number").ok_or_else(|| self.http.bad(what, "no `number`"))?;
        let state = if v["merged"].as_bool() == Some(true) || v["merged_at"].is_string() {
            PrState::Merged
        } else if text(v, "state") == "closed" {
            PrState::Closed
        } else if v["draft"].as_bool() == Some(true) {
            PrState::Draft
        } else {
            PrState::Open
        };
        Ok(Pr {
            number,
            url: text(v, "html_url"),
            state,
            head_sha: v["head"]["sha"].as_str().map(String::from),
        })
    }
}

impl Forge for GitHub {
    fn kind(&self) -> Kind {
        Kind::Github
    }

    fn whoami(&self) -> Result<String, ForgeError> {
        let v = self.http.get("/user", "GET /user")?;
        Ok(text(&v, "login"))
    }

    fn find_open(&self, branch: &str) -> Result<Option<Pr>, ForgeError> {
        let owner = self.repo.split('/').next().unwrap_or("");
        let what = "the list of open pull requests";
        let path = format!(
            "/repos/{}/pulls?state=open&head={}",
            self.repo,
            segment(&format!("{owner}:{branch}"))
        );
        let v = self.http.get(&path, what)?;
        let list = v
            .as_array()
            .ok_or_else(|| self.http.bad(what, "not a list"))?;
        list.first().map(|p| self.pr(p, what)).transpose()
    }

    fn create(&self, req: &PrRequest) -> Result<Pr, ForgeError> {
        let what = format!("opening a pull request for {}", req.head);
        let body = json!({"title": req.title, "head": req.head, "base": req.base,
            "body": req.body, "draft": req.draft});
        let path = format!("/repos/{}/pulls", self.repo);
        let v = self.http.post(&path, &body, &what)?;
        self.pr(&v, &what)
    }

    fn update(&self, number: u64, req: &PrRequest) -> Result<Pr, ForgeError> {
        let what = format!("updating pull request #{number}");
        let body = json!({"title": req.title, "body": req.body, "base": req.base});
        let path = format!("/repos/{}/pulls/{number}", self.repo);
        let v = self.http.call(Method::PATCH, &path, Some(&body), &what)?;
        self.pr(&v, &what)
    }

    fn label_and_request(&self, number: u64, req: &PrRequest) -> Result<(), ForgeError> {
        if !req.labels.is_empty() {
            let path = format!("/repos/{}/issues/{number}/labels", self.repo);
            let body = json!({"labels": req.labels});
            self.http.post(&path, &body, "adding labels")?;
        }
        if !req.reviewers.is_empty() {
            let path = format!("/repos/{}/pulls/{number}/requested_reviewers", self.repo);
            let body = json!({"reviewers": req.reviewers});
            self.http.post(&path, &body, "requesting reviewers")?;
        }
        Ok(())
    }

    fn get(&self, number: u64) -> Result<Pr, ForgeError> {
        let what = format!("pull request #{number}");
        let v = self
            .http
            .get(&format!("/repos/{}/pulls/{number}", self.repo), &what)?;
        self.pr(&v, &what)
    }

    fn checks(&self, pr: &Pr) -> Result<Checks, ForgeError> {
        let Some(sha) = &pr.head_sha else {
            return Ok(Checks::default());
        };
        let what = format!("the check runs of #{}", pr.number);
        let v = self.http.get(
            &format!("/repos/{}/commits/{sha}/check-runs?per_page=100", self.repo),
            &what,
        )?;
        let runs = v["check_runs"]
            .as_array()
            .ok_or_else(|| self.http.bad(&what, "no `check_runs` list"))?;
        let (mut passed, mut failed, mut pending) = (0, 0, 0);
        let mut failures = Vec::new();
        for r in runs {
            if text(r, "status") != "completed" {
                pending += 1;
                continue;
            }
            match text(r, "conclusion").as_str() {
                "failure" | "timed_out" | "cancelled" | "action_required" => {
                    failed += 1;
                    let out = &r["output"];
                    let summary = [text(out, "title"), text(out, "summary")]
                        .into_iter()
                        .filter(|s| !s.is_empty())
                        .collect::<Vec<_>>()
                        .join(": ");
                    failures.push(FailedCheck {
                        name: text(r, "name"),
                        summary,
                    });
                }
                _ => passed += 1,
            }
        }
        Ok(Checks::from_counts(passed, failed, pending, failures))
    }

    fn review_comments(
        &self,
        number: u64,
        review: Option<u64>,
    ) -> Result<Vec<ReviewComment>, ForgeError> {
        let path = match review {
            Some(r) => format!("/repos/{}/pulls/{number}/reviews/{r}/comments", self.repo),
            None => format!("/repos/{}/pulls/{number}/comments", self.repo),
        };
        let what = format!("the review comments of #{number}");
        let list = self.http.list(&path, &what)?;
        Ok(list
            .iter()
            .map(|c| ReviewComment {
                path: text(c, "path"),
                line: num(c, "line").or_else(|| num(c, "original_line")),
                body: text(c, "body"),
            })
            .collect())
    }

    fn comment(&self, number: u64, body: &str) -> Result<(), ForgeError> {
        let path = format!("/repos/{}/issues/{number}/comments", self.repo);
        self.http.post(
            &path,
            &json!({"body": body}),
            &format!("commenting on #{number}"),
        )?;
        Ok(())
    }

    fn open_issues(&self, label: &str) -> Result<Vec<super::issues::IssueSeen>, ForgeError> {
        let what = format!("the open issues labelled `{label}`");
        let path = format!(
            "/repos/{}/issues?state=open&labels={}&per_page=100",
            self.repo,
            segment(label)
        );
        let list = self.http.list(&path, &what)?;
        Ok(list
            .iter()
            .filter_map(|i| super::issues::from_github_like(Kind::Github, &self.repo, i))
            .collect())
    }

    fn may_write(&self, login: &str, _id: Option<u64>) -> Result<bool, ForgeError> {
        let what = format!("the permission of `{login}`");
        let path = format!(
            "/repos/{}/collaborators/{}/permission",
            self.repo,
            segment(login)
        );
        // `permission` is admin, write, read or none (maintain reads as write there);
        // `role_name` names custom and maintain roles.
        super::unknown_is_no(self.http.get(&path, &what).map(|v| {
            matches!(text(&v, "permission").as_str(), "admin" | "write")
                || matches!(
                    text(&v, "role_name").as_str(),
                    "admin" | "maintain" | "write"
                )
        }))
    }
}
