//! The forge: GitHub, GitLab, Gitea and Forgejo, through their REST APIs. One small module
//! per forge behind [`Forge`]; calls block, so async callers run them on a blocking thread.
//! The token is read from the environment variable `[forge] token_env` names and is sent
//! only in a request header: it never reaches the database, a log line, an event or an
//! answer.

mod gitea;
mod github;
mod gitlab;
pub mod hook;
mod http;
pub mod issues;
pub mod push;
pub mod remote;
pub mod settings;
pub mod webhook;

pub use settings::ForgeSettings;

use serde::Serialize;
use std::fmt;

/// Which forge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// github.com or GitHub Enterprise.
    Github,
    /// gitlab.com or a self-managed GitLab.
    Gitlab,
    /// Gitea.
    Gitea,
    /// Forgejo (Gitea's API).
    Forgejo,
}

impl Kind {
    /// The kind as written in config.toml.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s.trim().to_ascii_lowercase().as_str() {
            "github" => Self::Github,
            "gitlab" => Self::Gitlab,
            "gitea" => Self::Gitea,
            "forgejo" => Self::Forgejo,
            _ => return None,
        })
    }

    /// The kind a remote URL names by its host (github.com, gitlab.com, codeberg.org).
    pub fn detect(url: &str) -> Option<Self> {
        let host = remote::host(url)?;
        match host.as_str() {
            "github.com" => Some(Self::Github),
            "gitlab.com" => Some(Self::Gitlab),
            "codeberg.org" => Some(Self::Forgejo),
            _ => None,
        }
    }

    /// The token variable used when `token_env` is not set.
    pub fn default_token_env(self) -> &'static str {
        match self {
            Self::Github => "GITHUB_TOKEN",
            Self::Gitlab => "GITLAB_TOKEN",
            Self::Gitea => "GITEA_TOKEN",
            Self::Forgejo => "FORGEJO_TOKEN",
        }
    }

    /// The API's base URL for a remote on `host` (public hosts have their own API host).
    pub fn default_api_url(self, host: &str) -> String {
        match (self, host) {
            (Self::Github, "github.com") => "https://api.github.com".into(),
            (Self::Github, h) => format!("https://{h}/api/v3"),
            (Self::Gitlab, h) => format!("https://{h}/api/v4"),
            (Self::Gitea | Self::Forgejo, h) => format!("https://{h}/api/v1"),
        }
    }

    /// What a pull request is called there.
    pub fn pr_noun(self) -> &'static str {
        match self {
            Self::Gitlab => "merge request",
            _ => "pull request",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Github => "GitHub",
            Self::Gitlab => "GitLab",
            Self::Gitea => "Gitea",
            Self::Forgejo => "Forgejo",
        })
    }
}

/// A pull request's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PrState {
    /// Open for review.
    Open,
    /// Open as a draft.
    Draft,
    /// Merged.
    Merged,
    /// Closed without merging.
    Closed,
}

impl PrState {
    /// The state's name as stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Open => "open",
            Self::Draft => "draft",
            Self::Merged => "merged",
            Self::Closed => "closed",
        }
    }
}

/// A pull request (a merge request on GitLab).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Pr {
    /// Its number (GitLab's `iid`).
    pub number: u64,
    /// Its web page.
    pub url: String,
    /// Open, draft, merged or closed.
    pub state: PrState,
    /// The commit its branch points at, when the forge says.
    pub head_sha: Option<String>,
}

/// What baton asks for when it opens or updates a pull request.
#[derive(Debug, Clone, Default)]
pub struct PrRequest {
    /// The branch with the work.
    pub head: String,
    /// The branch it goes into.
    pub base: String,
    /// Its title.
    pub title: String,
    /// Its body (markdown).
    pub body: String,
    /// Open it as a draft.
    pub draft: bool,
    /// Labels to add.
    pub labels: Vec<String>,
    /// User names asked to review.
    pub reviewers: Vec<String>,
}

/// The overall result of a pull request's checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum ChecksState {
    /// No checks reported.
    #[default]
    None,
    /// Some still running, none failed.
    Pending,
    /// All passed.
    Passed,
    /// At least one failed.
    Failed,
}

/// A failed check: its name and the summary the forge gives.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FailedCheck {
    /// The check's (job's, status context's) name.
    pub name: String,
    /// The forge's summary of why it failed.
    pub summary: String,
}

/// A pull request's checks (GitHub check runs, GitLab pipeline jobs, Gitea commit statuses).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct Checks {
    /// The overall result.
    pub state: ChecksState,
    /// Checks passed.
    pub passed: u32,
    /// Checks failed.
    pub failed: u32,
    /// Checks still running or queued.
    pub pending: u32,
    /// The failed ones.
    pub failures: Vec<FailedCheck>,
}

impl Checks {
    /// Sums up counted checks.
    pub fn from_counts(passed: u32, failed: u32, pending: u32, failures: Vec<FailedCheck>) -> Self {
        let state = if failed > 0 {
            ChecksState::Failed
        } else if pending > 0 {
            ChecksState::Pending
        } else if passed > 0 {
            ChecksState::Passed
        } else {
            ChecksState::None
        };
        Self {
            state,
            passed,
            failed,
            pending,
            failures,
        }
    }

    /// A short line: `2/3 passed, 1 failed`, `pending 1/2`, `none`.
    pub fn summary(&self) -> String {
        let total = self.passed + self.failed + self.pending;
        match self.state {
            ChecksState::None => "no checks".into(),
            ChecksState::Failed => {
                format!("{}/{total} passed, {} failed", self.passed, self.failed)
            }
            ChecksState::Pending => {
                format!("{}/{total} passed, {} pending", self.passed, self.pending)
            }
            ChecksState::Passed => format!("{total}/{total} passed"),
        }
    }
}

/// A review comment on a line of a file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReviewComment {
    /// The file.
    pub path: String,
    /// The line, when the comment is on one.
    pub line: Option<u64>,
    /// What the reviewer wrote.
    pub body: String,
}

impl ReviewComment {
    /// `src/x.rs:12: text`.
    pub fn line_text(&self) -> String {
        match self.line {
            Some(n) => format!("{}:{n}: {}", self.path, self.body.trim()),
            None => format!("{}: {}", self.path, self.body.trim()),
        }
    }
}

/// Why a forge call failed, in words for people (never with the token).
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum ForgeError {
    /// The settings cannot work.
    #[error("{0}")]
    Config(String),
    /// The forge could not be reached.
    #[error(
        "{kind}'s API at {url} could not be reached: {why} — check api_url under [forge] and the network"
    )]
    Unreachable {
        /// The forge.
        kind: Kind,
        /// Scheme, host and port only.
        url: String,
        /// The transport's reason.
        why: String,
    },
    /// The forge refused the request.
    #[error("{kind} answered {status} to {what}: {message}{hint}")]
    Refused {
        /// The forge.
        kind: Kind,
        /// The HTTP status.
        status: u16,
        /// What baton asked for.
        what: String,
        /// The forge's own message.
        message: String,
        /// What to do next.
        hint: String,
    },
    /// The forge's answer was not what its documentation describes.
    #[error("{kind}'s answer to {what} could not be read: {why}")]
    BadAnswer {
        /// The forge.
        kind: Kind,
        /// What baton asked for.
        what: String,
        /// Why.
        why: String,
    },
}

/// One forge's REST API, for one repository. Calls block (run them off async workers).
pub trait Forge: Send + Sync {
    /// Which forge.
    fn kind(&self) -> Kind;
    /// The token's user name (the check that the token reaches the API).
    fn whoami(&self) -> Result<String, ForgeError>;
    /// The open pull request whose head is `branch`, if any.
    fn find_open(&self, branch: &str) -> Result<Option<Pr>, ForgeError>;
    /// Opens a pull request.
    fn create(&self, req: &PrRequest) -> Result<Pr, ForgeError>;
    /// Updates the title, body and base of an open pull request.
    fn update(&self, number: u64, req: &PrRequest) -> Result<Pr, ForgeError>;
    /// Adds labels and asks reviewers (both may be empty).
    fn label_and_request(&self, number: u64, req: &PrRequest) -> Result<(), ForgeError>;
    /// A pull request as it is now.
    fn get(&self, number: u64) -> Result<Pr, ForgeError>;
    /// The checks of a pull request's head.
    fn checks(&self, pr: &Pr) -> Result<Checks, ForgeError>;
    /// The comments of a review (GitHub) or the open discussions (GitLab, Gitea).
    fn review_comments(
        &self,
        number: u64,
        review: Option<u64>,
    ) -> Result<Vec<ReviewComment>, ForgeError>;
    /// Comments on a pull request or issue.
    fn comment(&self, number: u64, body: &str) -> Result<(), ForgeError>;
    /// Comments on an issue (where issues and pull requests share their numbers and
    /// comments, as on GitHub and Gitea, the same as [`Forge::comment`]).
    fn comment_issue(&self, number: u64, body: &str) -> Result<(), ForgeError> {
        self.comment(number, body)
    }
    /// The open issues carrying `label` (one page, newest first), pull requests left out.
    fn open_issues(&self, label: &str) -> Result<Vec<issues::IssueSeen>, ForgeError>;
    /// Whether the user `login` (GitLab: user `id` when known, else looked up by name) may
    /// write to the repository. A user the forge does not know, or who is no member, may
    /// not; an error means the check could not be made.
    fn may_write(&self, login: &str, id: Option<u64>) -> Result<bool, ForgeError>;

    /// Opens the branch's pull request, or updates the one already open; then labels and
    /// reviewers. Returns the pull request and whether it was created.
    fn open_or_update(&self, req: &PrRequest) -> Result<(Pr, bool), ForgeError> {
        let (pr, created) = match self.find_open(&req.head)? {
            Some(open) => (self.update(open.number, req)?, false),
            None => (self.create(req)?, true),
        };
        if !req.labels.is_empty() || !req.reviewers.is_empty() {
            self.label_and_request(pr.number, req)?;
        }
        Ok((pr, created))
    }
}

/// A 404 answer to a permission question: the forge knows no such user or member.
fn unknown_is_no(r: Result<bool, ForgeError>) -> Result<bool, ForgeError> {
    match r {
        Err(ForgeError::Refused { status: 404, .. }) => Ok(false),
        other => other,
    }
}

/// Where a forge is and how to reach it, resolved from the settings and the remote.
#[derive(Debug, Clone)]
pub struct Target {
    /// Which forge.
    pub kind: Kind,
    /// The REST API's base URL.
    pub api_url: String,
    /// `owner/name`.
    pub repo: String,
    /// The token variable's name.
    pub token_env: String,
}

impl Target {
    /// Resolves the settings against the remote's URL; one sentence when they cannot work.
    pub fn resolve(s: &ForgeSettings, remote_url: Option<&str>) -> Result<Self, String> {
        let kind = s.kind_for(remote_url)?;
        let repo = match (&s.repo, remote_url.and_then(remote::repo_path)) {
            (Some(r), _) => r.trim_matches('/').to_string(),
            (None, Some(r)) => r,
            (None, None) => {
                return Err(format!(
                    "the repository on the forge is not known: remote `{}` has no owner/name in its URL — set repo = \"owner/name\" under [forge]",
                    s.remote()
                ));
            }
        };
        let api_url = match (&s.api_url, remote_url.and_then(remote::host)) {
            (Some(u), _) => u.trim_end_matches('/').to_string(),
            (None, Some(h)) => kind.default_api_url(&h),
            (None, None) => {
                return Err(format!(
                    "the {kind} API's address is not known from remote `{}` — set api_url under [forge]",
                    s.remote()
                ));
            }
        };
        Ok(Self {
            kind,
            api_url,
            repo,
            token_env: s.token_env(kind),
        })
    }

    /// The forge of the workspace at `root`: the settings resolved against its remote's URL.
    pub fn of_workspace(s: &ForgeSettings, root: &std::path::Path) -> Result<Self, String> {
        let url = remote::url_of(root, s.remote());
        Self::resolve(s, url.as_deref())
    }

    /// A client for the forge of the workspace at `root`; one sentence when there is none.
    pub fn client_for(s: &ForgeSettings, root: &std::path::Path) -> Result<Box<dyn Forge>, String> {
        Self::of_workspace(s, root)?
            .connect()
            .map_err(|e| e.to_string())
    }

    /// A client for this forge with the token from its variable.
    pub fn connect(&self) -> Result<Box<dyn Forge>, ForgeError> {
        let token = std::env::var(&self.token_env)
            .ok()
            .filter(|t| !t.trim().is_empty())
            .ok_or_else(|| {
                ForgeError::Config(format!(
                    "no {} token: ${} is not set — export a token there (for GitHub, `export {}=$(gh auth token)` works), or name another variable with token_env under [forge]",
                    self.kind, self.token_env, self.token_env
                ))
            })?;
        self.connect_with(token.trim())
    }

    /// A client for this forge with the given token.
    pub fn connect_with(&self, token: &str) -> Result<Box<dyn Forge>, ForgeError> {
        let http = http::Http::new(self.kind, &self.api_url, token)?;
        Ok(match self.kind {
            Kind::Github => Box::new(github::GitHub::new(http, &self.repo)),
            Kind::Gitlab => Box::new(gitlab::GitLab::new(http, &self.repo)),
            Kind::Gitea | Kind::Forgejo => Box::new(gitea::Gitea::new(http, &self.repo)),
        })
    }
}
