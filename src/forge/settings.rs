//! `[forge]` in config.toml: which remote, which forge, where its API is, and the name of
//! the environment variable holding the token (never the token itself).

use super::Kind;
use serde::Deserialize;
use std::time::Duration;

/// `[forge]` as written. Its presence turns the forge features on.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct ForgeSettings {
    /// The git remote pushed to and read for the forge's address (default `origin`).
    pub remote: Option<String>,
    /// `github`, `gitlab`, `gitea` or `forgejo`; detected from the remote URL when unset.
    pub kind: Option<String>,
    /// The REST API's base URL, for a self-hosted forge.
    pub api_url: Option<String>,
    /// `owner/name` on the forge, when the remote URL does not say it.
    pub repo: Option<String>,
    /// The environment variable holding the API token.
    pub token_env: Option<String>,
    /// The environment variable holding the webhook secret of `/hooks/gitlab` and
    /// `/hooks/gitea`.
    pub webhook_secret_env: Option<String>,
    /// Poll open pull requests this often (`"2m"`), for a box that cannot receive webhooks.
    pub poll: Option<String>,
    /// The base branch pull requests target (default: the workspace's base branch).
    pub base: Option<String>,
}

/// The default webhook secret variable.
pub const DEFAULT_WEBHOOK_SECRET_ENV: &str = "BATON_FORGE_WEBHOOK_SECRET";

impl ForgeSettings {
    /// The remote's name.
    pub fn remote(&self) -> &str {
        self.remote.as_deref().unwrap_or("origin")
    }

    /// The kind set in the file, or the one the remote URL names; an error sentence when
    /// neither says.
    pub fn kind_for(&self, remote_url: Option<&str>) -> Result<Kind, String> {
        if let Some(k) = &self.kind {
            return Kind::parse(k).ok_or_else(|| {
                format!(
                    "[forge] kind = \"{k}\" is not a forge baton knows — write \"github\", \"gitlab\", \"gitea\" or \"forgejo\""
                )
            });
        }
        match remote_url.and_then(Kind::detect) {
            Some(k) => Ok(k),
            None => Err(format!(
                "the forge of remote `{}` ({}) is not github.com or gitlab.com — set kind = \"gitea\", \"forgejo\", \"gitlab\" or \"github\" with api_url under [forge]",
                self.remote(),
                remote_url.map_or_else(|| "no URL".into(), super::remote::display_url)
            )),
        }
    }

    /// The token variable's name for this kind.
    pub fn token_env(&self, kind: Kind) -> String {
        self.token_env
            .clone()
            .unwrap_or_else(|| kind.default_token_env().to_string())
    }

    /// The webhook secret variable's name.
    pub fn webhook_secret_env(&self) -> &str {
        self.webhook_secret_env
            .as_deref()
            .unwrap_or(DEFAULT_WEBHOOK_SECRET_ENV)
    }

    /// The polling interval; `None` when polling is off.
    pub fn poll_every(&self) -> Result<Option<Duration>, String> {
        let Some(p) = &self.poll else { return Ok(None) };
        match humantime::parse_duration(p) {
            Ok(d) if d >= Duration::from_secs(1) => Ok(Some(d)),
            Ok(_) => Err(format!(
                "[forge] poll = \"{p}\" is too often — poll at most every second (\"2m\" is usual)"
            )),
            Err(_) => Err(format!(
                "[forge] poll = \"{p}\" is not a duration — write it like \"2m\""
            )),
        }
    }

    /// Every problem with the settings themselves, one sentence each.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(k) = &self.kind
            && Kind::parse(k).is_none()
        {
            out.push(format!(
                "[forge] kind = \"{k}\" is not a forge baton knows — write \"github\", \"gitlab\", \"gitea\" or \"forgejo\""
            ));
        }
        if let Err(e) = self.poll_every() {
            out.push(e);
        }
        if let Some(u) = &self.api_url
            && reqwest::Url::parse(u).is_err()
        {
            out.push(format!(
                "[forge] api_url = \"{u}\" is not a URL — write it like \"https://git.example.com/api/v1\""
            ));
        }
        for (key, v) in [
            ("token_env", &self.token_env),
            ("webhook_secret_env", &self.webhook_secret_env),
        ] {
            if let Some(name) = v
                && (name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
            {
                out.push(format!(
                    "[forge] {key} = \"{name}\" must be the NAME of an environment variable (letters, digits, _), never the secret itself"
                ));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_forge_is_named_without_the_token_in_its_remote() {
        let url = "https://oauth2:glpat-SECRET123@git.example.org/group/app.git";
        let err = ForgeSettings::default()
            .kind_for(Some(url))
            .expect_err("git.example.org is no known forge");
        assert!(
            err.contains("https://git.example.org/group/app.git"),
            "{err}"
        );
        assert!(
            !err.contains("SECRET123") && !err.contains("oauth2"),
            "{err}"
        );
    }
}
