//! Who a person is, for the history, events and gate decisions their changes record:
//! `BATON_USER`, else git's `user.name` in the workspace, else the operating system's user
//! name. Decided once per process, here; every front end asks [`current`].

use std::path::Path;
use std::sync::OnceLock;

/// The longest name, in characters.
pub const MAX_NAME: usize = 64;

/// Names baton records for its own changes: a person may not take one.
const MACHINE: &[&str] = &[
    "engine",
    "system",
    "hook",
    "trigger",
    "webhook",
    "forge",
    "auto_resume",
    "demo",
];

/// True when `actor` names a person (or a forge user, `forge:alice`), not one of baton's
/// own movers (the engine, a hook, a trigger, another task).
pub fn is_person(actor: &str) -> bool {
    !actor.is_empty() && !MACHINE.contains(&actor) && !is_task(actor)
}

/// `task 7`: a task's follow-up acting on another task.
fn is_task(actor: &str) -> bool {
    actor
        .strip_prefix("task ")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// Why `name` cannot name a person, in a few words; None when it can.
pub fn problem(name: &str) -> Option<String> {
    let n = name.chars().count();
    if name.trim().is_empty() {
        return Some("is empty".into());
    }
    if let Some(c) = name.chars().find(|c| c.is_control()) {
        return Some(format!(
            "holds a control character (U+{:04X}); a name is one line of plain text",
            c as u32
        ));
    }
    if n > MAX_NAME {
        return Some(format!(
            "is {n} characters long; keep it to {MAX_NAME} at most"
        ));
    }
    if name.trim() != name {
        return Some("starts or ends with a space".into());
    }
    if !is_person(name) || name.starts_with("forge:") {
        return Some(format!(
            "`{name}` is a name baton records for its own moves"
        ));
    }
    None
}

/// Where a name came from, for the sentence that refuses it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Env,
    Git,
    Os,
}

/// Picks the name: `env` (BATON_USER) first, then `git` (user.name), then `os`. A bad
/// BATON_USER or git name is refused with a sentence naming BATON_USER; a bad OS name is
/// passed over.
pub fn choose(
    env: Option<String>,
    git: impl FnOnce() -> Option<String>,
    os: impl FnOnce() -> Option<String>,
) -> Result<String, String> {
    let checked = |name: String, source: Source| match problem(&name) {
        None => Ok(name),
        Some(why) => Err(match source {
            Source::Env => format!(
                "BATON_USER {why} — set BATON_USER to the name your changes should be recorded under"
            ),
            _ => format!(
                "git's user.name {why} — set BATON_USER to the name your changes should be recorded under"
            ),
        }),
    };
    if let Some(name) = env.filter(|n| !n.is_empty()) {
        return checked(name, Source::Env);
    }
    if let Some(name) = git().filter(|n| !n.trim().is_empty()) {
        return checked(name, Source::Git);
    }
    os().filter(|n| problem(n).is_none()).ok_or_else(|| {
        "cannot tell who you are (no BATON_USER, no git user.name, no user name from the system) — set BATON_USER to your name".to_string()
    })
}

static CURRENT: OnceLock<Result<String, String>> = OnceLock::new();

/// This process's person, decided on first use from the workspace at `root` (git's
/// `user.name` is read there) and the same for the rest of the process. Runs git the first
/// time: call it before async work starts, or on a thread that may block.
pub fn current(root: &Path) -> Result<String, String> {
    CURRENT
        .get_or_init(|| choose(std::env::var("BATON_USER").ok(), || git_name(root), os_name))
        .clone()
}

/// The person [`current`] decided, once it has (None before, or when it failed).
pub fn known() -> Option<&'static str> {
    CURRENT.get().and_then(|r| r.as_deref().ok())
}

/// git's `user.name` as seen from `root` (its repository's config, then the user's).
fn git_name(root: &Path) -> Option<String> {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(root)
        .args(["config", "--get", "user.name"])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let name = String::from_utf8_lossy(&out.stdout);
    Some(name.trim_end_matches(['\n', '\r']).to_string())
}

/// The operating system's name for this process's user.
fn os_name() -> Option<String> {
    nix::unistd::User::from_uid(nix::unistd::getuid())
        .ok()
        .flatten()
        .map(|u| u.name)
        .or_else(|| std::env::var("USER").ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pick(env: Option<&str>, git: Option<&str>, os: Option<&str>) -> Result<String, String> {
        choose(
            env.map(str::to_string),
            || git.map(str::to_string),
            || os.map(str::to_string),
        )
    }

    #[test]
    fn baton_user_then_git_then_the_system() {
        assert_eq!(
            pick(Some("alice"), Some("Bob B"), Some("carol")).unwrap(),
            "alice"
        );
        assert_eq!(pick(None, Some("Bob B"), Some("carol")).unwrap(), "Bob B");
        assert_eq!(pick(Some(""), Some(""), Some("carol")).unwrap(), "carol");
        assert!(pick(None, None, None).unwrap_err().contains("BATON_USER"));
    }

    #[test]
    fn a_bad_name_is_refused_with_a_sentence_naming_baton_user() {
        for (bad, says) in [
            ("a\nb", "control character"),
            ("\x1b[31mred", "control character"),
            (&"x".repeat(65), "65 characters"),
            ("engine", "its own moves"),
            ("task 3", "its own moves"),
            ("forge:alice", "its own moves"),
            (" alice", "space"),
        ] {
            let e = pick(Some(bad), None, None).unwrap_err();
            assert!(
                e.starts_with("BATON_USER ") && e.contains(says),
                "{bad:?}: {e}"
            );
        }
        let e = pick(None, Some("a\tb"), None).unwrap_err();
        assert!(
            e.starts_with("git's user.name") && e.contains("set BATON_USER"),
            "{e}"
        );
        assert_eq!(
            pick(None, None, Some("x".repeat(64).as_str()))
                .unwrap()
                .len(),
            64
        );
    }

    #[test]
    fn machine_movers_are_not_people() {
        for a in [
            "engine", "hook", "forge", "trigger", "task 12", "system", "",
        ] {
            assert!(!is_person(a), "{a}");
        }
        for a in ["alice", "Bob B", "forge:carol", "task force", "user"] {
            assert!(is_person(a), "{a}");
        }
    }
}
