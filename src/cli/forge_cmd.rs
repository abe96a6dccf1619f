//! `baton forge check`: what `[forge]` names, and whether the token reaches the API. One
//! line per finding; one sentence per problem.

use super::{Failure, Outcome, exit, workspace};
use crate::forge::{Target, remote};
use std::path::PathBuf;

/// `baton forge …`.
#[derive(Debug, clap::Subcommand)]
pub enum ForgeCmd {
    /// Say what [forge] in config.toml names and whether the token can reach the API.
    Check,
}

/// Runs a `forge` subcommand.
pub fn run(dir: Option<&PathBuf>, cmd: ForgeCmd) -> Outcome {
    let ForgeCmd::Check = cmd;
    let ws = workspace(dir)?;
    let cfg = ws.config().map_err(|e| Failure::new(e.to_string()))?;
    let Some(settings) = cfg.forge else {
        return Err(Failure::new(format!(
            "no [forge] table in {} — add one naming the remote and the token's variable (see docs/forge.md)",
            ws.config_path().display()
        )));
    };
    let problems = check(ws.root(), &settings);
    for line in &problems.found {
        outln!("ok    {line}");
    }
    for p in &problems.bad {
        outln!("FAIL  {p}");
    }
    Ok(if problems.bad.is_empty() {
        exit::OK
    } else {
        exit::ERROR
    })
}

/// What a check found and what is wrong.
#[derive(Debug, Default)]
pub struct Findings {
    /// What works, in words.
    pub found: Vec<String>,
    /// One sentence per problem.
    pub bad: Vec<String>,
}

/// Checks the settings against the repository at `root` and the forge's API.
pub fn check(root: &std::path::Path, s: &crate::forge::ForgeSettings) -> Findings {
    let mut f = Findings {
        bad: s.problems(),
        ..Findings::default()
    };
    let url = remote::url_of(root, s.remote());
    match &url {
        Some(u) => f.found.push(format!(
            "remote `{}` is {}",
            s.remote(),
            remote::display_url(u)
        )),
        None => f.bad.push(format!(
            "remote `{}` does not exist in {} — add it with `git remote add {} URL`, or name another with remote under [forge]",
            s.remote(),
            root.display(),
            s.remote()
        )),
    }
    let target = match Target::resolve(s, url.as_deref()) {
        Ok(t) => t,
        Err(e) => {
            f.bad.push(e);
            return f;
        }
    };
    f.found.push(format!(
        "{} repository {} through {}",
        target.kind, target.repo, target.api_url
    ));
    let forge = match target.connect() {
        Ok(forge) => forge,
        Err(e) => {
            f.bad.push(e.to_string());
            return f;
        }
    };
    match forge.whoami() {
        Ok(user) => f.found.push(format!(
            "the token in ${} reaches the API as `{user}`",
            target.token_env
        )),
        Err(e) => {
            f.bad.push(e.to_string());
            return f;
        }
    }
    // Listing open pull requests needs read access to the repository itself.
    match forge.find_open("baton-forge-check") {
        Ok(_) => f.found.push(format!(
            "{}s of {} can be read",
            target.kind.pr_noun(),
            target.repo
        )),
        Err(e) => f.bad.push(e.to_string()),
    }
    let secret = s.webhook_secret_env();
    if std::env::var(secret).is_ok_and(|v| !v.is_empty()) {
        f.found.push(format!(
            "webhooks: the secret is in ${secret} (POST /hooks/{})",
            match target.kind {
                crate::forge::Kind::Github => "github",
                crate::forge::Kind::Gitlab => "gitlab",
                _ => "gitea",
            }
        ));
    }
    f
}
