//! The blocking HTTP client the forge modules share: base URL, auth header, errors in words.

use super::{ForgeError, Kind};
use reqwest::Method;
use reqwest::blocking::{Client, RequestBuilder};
use serde_json::Value;
use std::time::Duration;

/// How long one API call may take.
const TIMEOUT: Duration = Duration::from_secs(30);

/// One forge's API endpoint with its credentials.
pub(super) struct Http {
    pub kind: Kind,
    base: String,
    client: Client,
    auth: (&'static str, String),
}

impl Http {
    pub fn new(kind: Kind, base: &str, token: &str) -> Result<Self, ForgeError> {
        let client = Client::builder()
            .timeout(TIMEOUT)
            .user_agent(concat!("baton/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| ForgeError::Config(format!("the HTTP client could not start: {e}")))?;
        // Each forge's documented header: GitHub and Gitea take `Authorization`, GitLab
        // its `PRIVATE-TOKEN`.
        let auth = match kind {
            Kind::Github => ("Authorization", format!("Bearer {token}")),
            Kind::Gitlab => ("PRIVATE-TOKEN", token.to_string()),
            Kind::Gitea | Kind::Forgejo => ("Authorization", format!("token {token}")),
        };
        Ok(Self {
            kind,
            base: base.trim_end_matches('/').to_string(),
            client,
            auth,
        })
    }

    /// Scheme, host and port of the API, for messages.
    fn origin(&self) -> String {
        reqwest::Url::parse(&self.base)
            .map(|u| u.origin().ascii_serialization())
            .unwrap_or_else(|_| "the configured api_url".into())
    }

    fn request(&self, method: Method, path: &str) -> RequestBuilder {
        let mut r = self
            .client
            .request(method, format!("{}{path}", self.base))
            .header(self.auth.0, &self.auth.1)
            .header("Accept", "application/json");
        if self.kind == Kind::Github {
            r = r
                .header("Accept", "application/vnd.github+json")
                .header("X-GitHub-Api-Version", "2022-11-28");
        }
        r
    }

    /// Sends a request; the JSON answer, or an error naming `what` was asked.
    pub fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        what: &str,
    ) -> Result<Value, ForgeError> {
        let mut r = self.request(method, path);
        if let Some(b) = body {
            r = r.json(b);
        }
        let resp = r.send().map_err(|e| {
            // The innermost cause says most ("Connection refused"); without the URL, which
            // reqwest's words can carry and ours already name.
            let e = e.without_url();
            let mut why = e.to_string();
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                why = s.to_string();
                source = s.source();
            }
            ForgeError::Unreachable {
                kind: self.kind,
                url: self.origin(),
                why,
            }
        })?;
        let status = resp.status();
        let text = resp.text().unwrap_or_default();
        if !status.is_success() {
            let message = serde_json::from_str::<Value>(&text)
                .ok()
                .and_then(|v| {
                    v.get("message").or_else(|| v.get("error")).map(|m| {
                        m.as_str()
                            .map(String::from)
                            .unwrap_or_else(|| m.to_string())
                    })
                })
                .unwrap_or_else(|| text.chars().take(200).collect());
            let hint = match status.as_u16() {
                401 => {
                    " — the token is missing, wrong or expired: set a valid one in the variable token_env names"
                }
                403 => " — the token lacks a permission (scope) this needs",
                404 => {
                    " — check repo and api_url under [forge], and that the token can see the repository"
                }
                _ => "",
            };
            return Err(ForgeError::Refused {
                kind: self.kind,
                status: status.as_u16(),
                what: what.to_string(),
                message,
                hint: hint.to_string(),
            });
        }
        if text.trim().is_empty() {
            return Ok(Value::Null);
        }
        serde_json::from_str(&text).map_err(|e| self.bad(what, e.to_string()))
    }

    pub fn get(&self, path: &str, what: &str) -> Result<Value, ForgeError> {
        self.call(Method::GET, path, None, what)
    }

    /// POSTs `body`; the JSON answer.
    pub fn post(&self, path: &str, body: &Value, what: &str) -> Result<Value, ForgeError> {
        self.call(Method::POST, path, Some(body), what)
    }

    /// GETs a JSON list; an answer that is not one is a bad answer naming `what`.
    pub fn list(&self, path: &str, what: &str) -> Result<Vec<Value>, ForgeError> {
        match self.get(path, what)? {
            Value::Array(items) => Ok(items),
            _ => Err(self.bad(what, "not a list")),
        }
    }

    pub fn bad(&self, what: &str, why: impl Into<String>) -> ForgeError {
        ForgeError::BadAnswer {
            kind: self.kind,
            what: what.to_string(),
            why: why.into(),
        }
    }
}

/// A number field.
pub(super) fn num(v: &Value, key: &str) -> Option<u64> {
    v.get(key).and_then(Value::as_u64)
}

/// A text field, empty when absent.
pub(super) fn text(v: &Value, key: &str) -> String {
    v.get(key).and_then(Value::as_str).unwrap_or("").to_string()
}

/// Percent-encodes one path segment (GitLab's project id is `group%2Fname`).
pub(super) fn segment(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
