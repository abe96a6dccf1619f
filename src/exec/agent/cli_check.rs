//! `baton agents check` for a CLI agent on this machine: the program is on PATH, answers
//! `--version` (well-known CLIs only: an arbitrary program may do anything with that flag),
//! and can authenticate — its key variable is set or its own login state is there. Fast (a
//! few seconds at most), no shell, and never a secret in what it prints.

use super::http::Health;
use crate::agents::Profile;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The longest a `--version` or login-status call may take: they answer in well under a
/// second on an idle machine, but a loaded one (or a first run) can take several.
const PROBE: Duration = Duration::from_secs(30);

/// The CLIs whose `--version` and login state baton knows.
const KNOWN: &[&str] = &["claude", "codex", "gemini", "opencode", "aider"];

/// How to install the well-known CLI agents, for the "not on PATH" message.
pub(super) fn install_hint(program: &str) -> &'static str {
    match program {
        "claude" => " (`npm install -g @anthropic-ai/claude-code`)",
        "codex" => " (`npm install -g @openai/codex`)",
        "gemini" => " (`npm install -g @google/gemini-cli`)",
        "opencode" => " (`npm install -g opencode-ai`)",
        _ => "",
    }
}

/// The environment the agent will see: the engine's, then the profile's `env`.
struct Env(BTreeMap<String, String>);

impl Env {
    fn of(p: &Profile) -> Self {
        let mut vars: BTreeMap<String, String> = crate::exec::redact::env_vars().collect();
        vars.extend(p.env.clone());
        Self(vars)
    }

    /// The first of `names` that is set and not empty.
    fn any<'a>(&self, names: &[&'a str]) -> Option<&'a str> {
        names
            .iter()
            .find(|n| self.0.get(**n).is_some_and(|v| !v.trim().is_empty()))
            .copied()
    }

    fn home(&self) -> Option<PathBuf> {
        self.0.get("HOME").map(PathBuf::from)
    }
}

/// The variable the configured Codex model provider reads its key from: `env_key` of
/// `[model_providers.<model_provider>]` in `$CODEX_HOME/config.toml` (default
/// `~/.codex`), when a provider is set and names one.
fn codex_provider_key(env: &Env) -> Option<String> {
    let home = match env.0.get("CODEX_HOME").filter(|h| !h.is_empty()) {
        Some(h) => PathBuf::from(h),
        None => env.home()?.join(".codex"),
    };
    let text = std::fs::read_to_string(home.join("config.toml")).ok()?;
    let config: toml::Value = toml::from_str(&text).ok()?;
    let provider = config.get("model_provider")?.as_str()?;
    let key = config
        .get("model_providers")?
        .get(provider)?
        .get("env_key")?
        .as_str()?;
    Some(key.to_string())
}

/// Runs `program args` without a shell, stdin closed, under [`PROBE`]. Returns the exit
/// status's success and the first non-empty line of its output, or why it could not run.
async fn probe(program: &Path, args: &[&str], env: &Env) -> Result<(bool, String), String> {
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .env_clear()
        .envs(&env.0)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let out = match tokio::time::timeout(PROBE, cmd.output()).await {
        Ok(Ok(out)) => out,
        Ok(Err(e)) => return Err(e.to_string()),
        Err(_) => return Err(format!("no answer within {} s", PROBE.as_secs())),
    };
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    let first = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or_default();
    Ok((
        out.status.success(),
        super::log::one_line(&crate::ansi::strip(first), 80),
    ))
}

/// The program's name without its folder (`/opt/bin/claude` → `claude`).
fn base_name(program: &str) -> &str {
    program.rsplit('/').next().unwrap_or(program)
}

/// Why profile `p` cannot start here without looking further than `PATH`: a command
/// agent on this machine whose program is not on it. None when it is, or when the profile
/// runs elsewhere or over HTTP (`baton agents check` looks at those).
pub fn not_on_path(p: &Profile) -> Option<String> {
    let local = p.executor.as_ref().is_none_or(|e| e.kind() == "local");
    if p.backend != crate::agents::Backend::Command || !local {
        return None;
    }
    let program = p.argv.first()?;
    super::command::find_program(program, std::path::Path::new("."), None)
        .is_none()
        .then(|| missing(p, program))
}

/// The sentence for `program` of profile `p` not being on `PATH`.
fn missing(p: &Profile, program: &str) -> String {
    format!(
        "`{program}` is not on PATH — install it{} or put its full path in `argv` {}",
        install_hint(base_name(program)),
        p.fix_in()
    )
}

/// Checks the CLI `program` (argv[0]) of profile `p`: found, its version, its credentials.
pub async fn check_cli(p: &Profile, program: &str) -> Health {
    let Some(path) = super::command::find_program(program, std::path::Path::new("."), None) else {
        return Health {
            ok: false,
            detail: missing(p, program),
        };
    };
    let name = base_name(program);
    if !KNOWN.contains(&name) {
        return Health {
            ok: true,
            detail: format!("`{program}` found at {}", path.display()),
        };
    }
    let env = Env::of(p);
    let version = match probe(&path, &["--version"], &env).await {
        Ok((true, v)) if !v.is_empty() => v,
        Ok((true, _)) => "(no version printed)".into(),
        Ok((false, v)) => {
            return Health {
                ok: false,
                detail: format!(
                    "`{program} --version` failed ({v}) — reinstall it{}",
                    install_hint(name)
                ),
            };
        }
        Err(e) => {
            return Health {
                ok: false,
                detail: format!(
                    "`{program} --version` did not run ({e}) — reinstall it{}",
                    install_hint(name)
                ),
            };
        }
    };
    let found = format!("`{program}` {version} at {}", path.display());
    match auth(name, &path, &env).await {
        Ok(how) => Health {
            ok: true,
            detail: format!("{found}; {how}"),
        },
        Err(fix) => Health {
            ok: false,
            detail: format!("{found}, but {fix}"),
        },
    }
}

/// How the CLI `name` will authenticate, or the one-sentence fix when it cannot.
async fn auth(name: &str, path: &Path, env: &Env) -> Result<String, String> {
    let file = |rel: &str| env.home().map(|h| h.join(rel)).filter(|f| f.is_file());
    match name {
        "claude" => {
            if let Some(var) = env.any(&[
                "ANTHROPIC_API_KEY",
                "ANTHROPIC_AUTH_TOKEN",
                "CLAUDE_CODE_OAUTH_TOKEN",
            ]) {
                return Ok(format!("key in ${var}"));
            }
            if let Some(var) = env.any(&["CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX"]) {
                return Ok(format!("cloud credentials (${var})"));
            }
            let dir = env
                .0
                .get("CLAUDE_CONFIG_DIR")
                .map(PathBuf::from)
                .or_else(|| env.home().map(|h| h.join(".claude")));
            if let Some(f) = dir
                .map(|d| d.join(".credentials.json"))
                .filter(|f| f.is_file())
            {
                return Ok(format!("logged in ({})", f.display()));
            }
            if cfg!(target_os = "macos") {
                return Ok("login state is in the keychain (not checked)".into());
            }
            Err("it has no credentials — set ANTHROPIC_API_KEY where the engine runs, or run `claude` once and log in".into())
        }
        "codex" => {
            if let Some(var) = env.any(&["CODEX_API_KEY"]) {
                return Ok(format!("key in ${var}"));
            }
            // A model provider of its own (`model_provider` in CODEX_HOME's config.toml)
            // takes its key from the variable its `env_key` names.
            if let Some(var) = codex_provider_key(env) {
                return match env.any(&[var.as_str()]) {
                    Some(_) => Ok(format!("key in ${var} (its model provider's env_key)")),
                    None => Err(format!(
                        "its model provider takes its key from ${var}, which is not set where the engine runs — set it"
                    )),
                };
            }
            // Its words are not repeated: they can hold part of a key, and warnings.
            match probe(path, &["login", "status"], env).await {
                Ok((true, _)) => Ok("logged in (`codex login status`)".into()),
                _ => Err("it is not logged in (`codex login status` failed) — run `codex login`, or set CODEX_API_KEY where the engine runs".into()),
            }
        }
        "gemini" => {
            if let Some(var) = env.any(&[
                "GEMINI_API_KEY",
                "GOOGLE_API_KEY",
                "GOOGLE_GENAI_USE_VERTEXAI",
                "GOOGLE_APPLICATION_CREDENTIALS",
            ]) {
                return Ok(format!("credentials in ${var}"));
            }
            match file(".gemini/oauth_creds.json") {
                Some(f) => Ok(format!("logged in ({})", f.display())),
                None => Err("it has no credentials — set GEMINI_API_KEY where the engine runs, or run `gemini` once and log in".into()),
            }
        }
        // OpenCode's providers and aider's keys live in their own configuration files,
        // per provider: the version is what can be checked from here.
        _ => Ok("credentials are in its own configuration (not checked)".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_variable_is_found_and_an_empty_one_is_not() {
        let env = Env(BTreeMap::from([
            ("A".to_string(), " ".to_string()),
            ("B".to_string(), "x".to_string()),
        ]));
        assert_eq!(env.any(&["A", "B"]), Some("B"));
        assert_eq!(env.any(&["A", "C"]), None);
        assert_eq!(base_name("/opt/bin/claude"), "claude");
    }
}
