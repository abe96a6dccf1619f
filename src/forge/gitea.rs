//! Gitea's and Forgejo's REST API v1 (the same API): pulls, combined commit statuses,
//! reviews and issue comments.

use super::http::{Http, num, text};
use super::{Checks, FailedCheck, Forge, ForgeError, Kind, Pr, PrRequest, PrState, ReviewComment};
use reqwest::Method;
use serde_json::{Value, json};

/// The most pages of open pull requests read when looking for a branch's.
const MAX_PAGES: usize = 200;

/// One Gitea or Forgejo repository.
pub(super) struct Gitea {
    http: Http,
    repo: String,
}

impl Gitea {
    pub fn new(http: Http, repo: &str) -> Self {
        Self {
            http,
            repo: repo.to_string(),
        }
    }

    fn pr(&self, v: &Value, what: &str) -> Result<Pr, ForgeError> {
        let number = num(v, "number").ok_or_else(|| self.http.bad(what, "no `number`"))?;
        let state = if v["merged"].as_bool() == Some(true) {
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

    /// Gitea adds labels by id: look the names up in the repository's labels.
    fn label_ids(&self, names: &[String]) -> Result<Vec<u64>, ForgeError> {
        let what = "the repository's labels";
        let v = self
            .http
            .get(&format!("/repos/{}/labels?limit=100", self.repo), what)?;
        let all = v
            .as_array()
            .ok_or_else(|| self.http.bad(what, "not a list"))?;
        names
            .iter()
            .map(|n| {
                all.iter()
                    .find(|l| text(l, "name") == *n)
                    .and_then(|l| num(l, "id"))
                    .ok_or_else(|| {
                        ForgeError::Config(format!(
                            "label `{n}` does not exist in {} — create it there, or fix the pr hook's labels",
                            self.repo
                        ))
                    })
            })
            .collect()
    }
}

impl Forge for Gitea {
    fn kind(&self) -> Kind {
        self.http.kind
    }

    fn whoami(&self) -> Result<String, ForgeError> {
        let v = self.http.get("/user", "GET /user")?;
        Ok(text(&v, "login"))
    }

    fn find_open(&self, branch: &str) -> Result<Option<Pr>, ForgeError> {
        // Every page of open pull requests is read (a busy repository has more than one),
        // and only a head branch in this repository counts: a fork's branch of the same
        // name is someone else's pull request.
        const PER_PAGE: usize = 50;
        let what = "the list of open pull requests";
        for page in 1..=MAX_PAGES {
            let v = self.http.get(
                &format!(
                    "/repos/{}/pulls?state=open&limit={PER_PAGE}&page={page}",
                    self.repo
                ),
                what,
            )?;
            let list = v
                .as_array()
                .ok_or_else(|| self.http.bad(what, "not a list"))?;
            let ours = list.iter().find(|p| {
                p["head"]["ref"].as_str() == Some(branch)
                    && p["head"]["repo"]["full_name"]
                        .as_str()
                        .is_some_and(|r| r.eq_ignore_ascii_case(&self.repo))
            });
            if let Some(p) = ours {
                return self.pr(p, what).map(Some);
            }
            if list.len() < PER_PAGE {
                break;
            }
        }
        Ok(None)
    }

    fn create(&self, req: &PrRequest) -> Result<Pr, ForgeError> {
        let what = format!("opening a pull request for {}", req.head);
        // Gitea and Forgejo mark a draft ("work in progress") by a title prefix.
        let title = if req.draft {
            format!("WIP: {}", req.title)
        } else {
            req.title.clone()
        };
        let body = json!({"title": title, "head": req.head, "base": req.base,
            "body": req.body});
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
            let ids = self.label_ids(&req.labels)?;
            let path = format!("/repos/{}/issues/{number}/labels", self.repo);
            self.http
                .post(&path, &json!({"labels": ids}), "adding labels")?;
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
        let what = format!("the commit statuses of #{}", pr.number);
        let v = self
            .http
            .get(&format!("/repos/{}/commits/{sha}/status", self.repo), &what)?;
        let statuses = v["statuses"].as_array().cloned().unwrap_or_default();
        let (mut passed, mut failed, mut pending) = (0, 0, 0);
        let mut failures = Vec::new();
        for s in &statuses {
            // Older Gitea names the field `status`, newer ones `state`.
            let state = Some(text(s, "status"))
                .filter(|x| !x.is_empty())
                .unwrap_or_else(|| text(s, "state"));
            match state.as_str() {
                "success" | "warning" => passed += 1,
                "failure" | "error" => {
                    failed += 1;
                    failures.push(FailedCheck {
                        name: text(s, "context"),
                        summary: text(s, "description"),
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
        review: Option<u64>,
    ) -> Result<Vec<ReviewComment>, ForgeError> {
        let ids = match review {
            Some(r) => vec![r],
            None => {
                let what = format!("the reviews of #{number}");
                let v = self.http.get(
                    &format!("/repos/{}/pulls/{number}/reviews", self.repo),
                    &what,
                )?;
                v.as_array()
                    .map(|l| {
                        l.iter()
                            .filter(|r| text(r, "state") == "REQUEST_CHANGES")
                            // Official reviews are those of people who may write; a
                            // dismissed or stale one no longer asks for anything.
                            .filter(|r| r["official"].as_bool() != Some(false))
                            .filter(|r| r["dismissed"].as_bool() != Some(true))
                            .filter_map(|r| num(r, "id"))
                            .collect()
                    })
                    .unwrap_or_default()
            }
        };
        let mut out = Vec::new();
        for id in ids {
            let what = format!("the comments of review {id}");
            let v = self.http.get(
                &format!("/repos/{}/pulls/{number}/reviews/{id}/comments", self.repo),
                &what,
            )?;
            for c in v.as_array().into_iter().flatten() {
                out.push(ReviewComment {
                    path: text(c, "path"),
                    line: num(c, "position")
                        .filter(|n| *n > 0)
                        .or_else(|| num(c, "original_position")),
                    body: text(c, "body"),
                });
            }
        }
        Ok(out)
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
            "/repos/{}/issues?state=open&type=issues&labels={}&limit=50",
            self.repo,
            super::http::segment(label)
        );
        let list = self.http.list(&path, &what)?;
        Ok(list
            .iter()
            .filter_map(|i| super::issues::from_github_like(self.http.kind, &self.repo, i))
            .collect())
    }

    fn may_write(&self, login: &str, _id: Option<u64>) -> Result<bool, ForgeError> {
        let what = format!("the permission of `{login}`");
        let path = format!(
            "/repos/{}/collaborators/{}/permission",
            self.repo,
            super::http::segment(login)
        );
        // An access mode: none, read, write, admin or owner.
        super::unknown_is_no(
            self.http
                .get(&path, &what)
                .map(|v| matches!(text(&v, "permission").as_str(), "write" | "admin" | "owner")),
        )
    }
}
