//! Keeps known secret values out of logs: the values of environment variables whose names
//! say they are secrets are replaced by `[redacted]` in every line a step prints.
//!
//! A value is found in the text as a terminal shows it: colour codes, other escape
//! sequences and control characters inside it (`tok-\e[0mDEPLOY`) do not hide it.
//! Only the exact value is masked: an encoded (base64, URL-escaped) or partial copy is not.

use crate::pipeline::{HOOK_VARS, STEP_VARS};

/// Names that mark an environment variable as a secret.
const MARKERS: &[&str] = &[
    "KEY",
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "CREDENTIAL",
    "AUTH",
];

/// Shorter values are not masked: a two- or three-character value (`ab`, `dev`, `yes`)
/// would blank out ordinary words all over the log while protecting nothing worth the name.
pub const MIN_LEN: usize = 4;

/// True when a variable of this name holds a secret: its name contains one of the markers
/// and it is not one of the ids, paths and task text baton sets for steps and hooks
/// (`BATON_EXECUTION_KEY` is an id). Every other name, `BATON_*` ones included
/// (`BATON_GITHUB_SECRET`, a `BATON_TOKEN` for the API), is judged by its markers.
fn is_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    let own = STEP_VARS.contains(&upper.as_str()) || HOOK_VARS.contains(&upper.as_str());
    !own && MARKERS.iter().any(|m| match *m {
        "AUTH" => auth_marked(&upper),
        m => upper.contains(m),
    })
}

/// `AUTH` marks a secret (`AUTH_TOKEN`, `BASIC_AUTH`, `HTTP_AUTHORIZATION`, `…_AUTHORISATION`),
/// but not as the start of `AUTHOR` (`GIT_AUTHOR_NAME`, whose value, a person's name, would
/// be masked all over a step's log).
fn auth_marked(upper: &str) -> bool {
    upper.match_indices("AUTH").any(|(at, _)| {
        let rest = &upper[at + 4..];
        !rest.starts_with("OR") || rest.starts_with("ORIZ") || rest.starts_with("ORIS")
    })
}

/// True for a secret of the engine's own (`BATON_GITHUB_SECRET`, `BATON_TOKEN`, the
/// board's `BATON_DATABASE_URL`): a step needs none of them, so a step's process does not
/// inherit them (with the board's address, an agent could write to it past the engine).
pub fn is_engine_secret(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    upper == "BATON_DATABASE_URL" || (upper.starts_with("BATON_") && is_secret_name(name))
}

/// This process's environment as strings, as it was when first read (see
/// [`crate::exec::process::process_env`]): a variable whose name or value is not UTF-8 is
/// skipped (`std::env::vars` would panic on it).
pub fn env_vars() -> impl Iterator<Item = (String, String)> {
    crate::exec::process::process_env()
        .iter()
        .filter_map(|(k, v)| Some((k.to_str()?.to_string(), v.to_str()?.to_string())))
}

/// The variables of [`env_vars`] that [`Redactor::from_vars`] keeps (a secret's name, a
/// value long enough to mask), found once: a step's redactor starts from them.
pub fn env_secrets() -> impl Iterator<Item = (String, String)> {
    static SECRETS: std::sync::OnceLock<Vec<(String, String)>> = std::sync::OnceLock::new();
    SECRETS
        .get_or_init(|| env_vars().filter(|(k, v)| is_masked(k, v)).collect())
        .iter()
        .cloned()
}

/// Whether `value` under `name` is a secret to mask.
fn is_masked(name: &str, value: &str) -> bool {
    value.chars().count() >= MIN_LEN && is_secret_name(name)
}

/// A set of secret values to mask.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    secrets: Vec<String>,
}

impl Redactor {
    /// Collects secrets from `(name, value)` pairs, such as [`env_secrets`] and a step's
    /// own environment.
    pub fn from_vars<I: IntoIterator<Item = (String, String)>>(vars: I) -> Self {
        let mut secrets: Vec<String> = vars
            .into_iter()
            .filter(|(k, v)| is_masked(k, v))
            .map(|(_, v)| v)
            .collect();
        // Longest first, so a secret containing another is masked whole.
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        secrets.dedup();
        Self { secrets }
    }

    /// Adds one secret value (e.g. an API key read for an agent backend).
    pub fn add(&mut self, secret: &str) {
        if secret.chars().count() >= MIN_LEN && !self.secrets.iter().any(|s| s == secret) {
            self.secrets.push(secret.to_string());
            self.secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        }
    }

    /// How many bytes at the end of `chunk` could be the start of a secret that goes on past
    /// it. A long line cut there would split the secret into halves that no line holds whole,
    /// so the cut moves back by this much. Zero when nothing would fit in the next piece.
    pub fn partial_tail(&self, chunk: &[u8]) -> usize {
        let mut held = 0;
        for s in &self.secrets {
            let s = s.as_bytes();
            let longest = (s.len() - 1).min(chunk.len());
            if let Some(k) = (held + 1..=longest)
                .rev()
                .find(|&k| chunk.ends_with(&s[..k]))
            {
                held = k;
            }
        }
        if held >= chunk.len() { 0 } else { held }
    }

    /// The line with every known secret replaced, also where escape sequences or control
    /// characters split it on screen.
    pub fn apply(&self, line: String) -> String {
        let mut out = line;
        if self.secrets.iter().any(|s| out.contains(s.as_str())) {
            for s in &self.secrets {
                out = out.replace(s.as_str(), "[redacted]");
            }
        }
        if self.secrets.is_empty() || !out.chars().any(hides) {
            return out;
        }
        self.mask_shown(out)
    }

    /// Masks secrets in the text a terminal shows: the visible characters of a secret are
    /// replaced by one `[redacted]`; the escape sequences between them are kept, so colours
    /// stay as the step set them.
    fn mask_shown(&self, line: String) -> String {
        let shown = crate::ansi::visible_chars(&line);
        let text: String = shown.iter().map(|&(_, c)| c).collect();
        // The index in `shown` of each character of `text`, by byte offset.
        let mut index = vec![0; text.len() + 1];
        for (i, (b, _)) in text.char_indices().enumerate() {
            index[b] = i;
        }
        let mut hidden = vec![false; shown.len()];
        let mut marker = vec![false; shown.len()];
        for s in &self.secrets {
            for (b, _) in text.match_indices(s.as_str()) {
                let first = index[b];
                let span = first..first + s.chars().count();
                if !hidden[first] {
                    marker[first] = true;
                }
                hidden[span].fill(true);
            }
        }
        if !hidden.contains(&true) {
            return line;
        }
        let mut out = String::with_capacity(line.len());
        let mut next = 0;
        for (at, c) in line.char_indices() {
            if shown.get(next).is_some_and(|&(b, _)| b == at) {
                if marker[next] {
                    out.push_str("[redacted]");
                }
                if !hidden[next] {
                    out.push(c);
                }
                next += 1;
            } else {
                out.push(c);
            }
        }
        out
    }
}

/// A character that can sit inside a secret without being shown: an escape sequence's
/// start or a control character.
fn hides(c: char) -> bool {
    c.is_control() && c != '\n' && c != '\t'
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn masks_secret_looking_variables_only() {
        let r = Redactor::from_vars(vars(&[
            ("OPENAI_API_KEY", "sk-abcdefghijkl"),
            ("GITHUB_TOKEN", "ghp_1234567890"),
            ("HOME", "/root/secret-home"),
            ("SHORT_KEY", "abc"),
            ("GIT_AUTHOR_NAME", "Jane Doe"),
            ("GIT_AUTHOR_EMAIL", "jane@example.com"),
            ("HTTP_AUTHORIZATION", "Bearer abc123"),
            ("BASIC_AUTH", "user:pass"),
        ]));
        assert_eq!(
            r.apply("key sk-abcdefghijkl and ghp_1234567890 in /root/secret-home abc".into()),
            "key [redacted] and [redacted] in /root/secret-home abc"
        );
        assert_eq!(
            r.apply("Author: Jane Doe <jane@example.com>; Bearer abc123 user:pass".into()),
            "Author: Jane Doe <jane@example.com>; [redacted] [redacted]"
        );
    }

    #[test]
    fn values_of_four_characters_and_more_are_masked_shorter_ones_are_not() {
        let r = Redactor::from_vars(vars(&[
            ("DB_PASSWORD", "hunt"),
            ("PIN_SECRET", "abc"),
            ("EMPTY_TOKEN", ""),
            ("BATON_EXECUTION_KEY", "1:build:1"),
        ]));
        assert_eq!(
            r.apply("hunt abc 1:build:1 hunter".into()),
            "[redacted] abc 1:build:1 [redacted]er"
        );
    }

    #[test]
    fn the_partial_tail_is_the_longest_start_of_a_secret_ending_the_chunk() {
        let r = Redactor::from_vars(vars(&[("A_TOKEN", "abcdef"), ("B_KEY", "cdxyzw")]));
        assert_eq!(r.partial_tail(b"...abc"), 3);
        assert_eq!(r.partial_tail(b"...abcd"), 4);
        assert_eq!(
            r.partial_tail(b"...abcdef"),
            0,
            "a whole secret is not split"
        );
        assert_eq!(r.partial_tail(b"...xyz"), 0);
        assert_eq!(r.partial_tail(b"abc"), 0, "nothing would be left to send");
    }

    #[test]
    fn only_batons_own_names_are_exempt() {
        let r = Redactor::from_vars(vars(&[
            ("BATON_GITHUB_SECRET", "hook-secret-1"),
            ("BATON_TOKEN", "api-token-2"),
            ("BATON_EXECUTION_KEY", "3:build:1"),
        ]));
        assert_eq!(
            r.apply("hook-secret-1 api-token-2 3:build:1".into()),
            "[redacted] [redacted] 3:build:1"
        );
        assert!(is_engine_secret("BATON_GITHUB_SECRET"));
        assert!(is_engine_secret("baton_token"));
        assert!(
            is_engine_secret("BATON_DATABASE_URL"),
            "the board's address"
        );
        assert!(!is_engine_secret("BATON_EXECUTION_KEY"));
        assert!(
            !is_engine_secret("OPENAI_API_KEY"),
            "the step's own keys pass on"
        );
    }

    #[test]
    fn a_secret_split_by_escapes_or_controls_is_masked_as_shown() {
        let r = Redactor::from_vars(vars(&[("DEPLOY_TOKEN", "tok-DEPLOY-5f3a9e")]));
        let cases = [
            // (printed, stored)
            ("tok-\x1b[0mDEPLOY-5f3a9e", "[redacted]\x1b[0m"),
            (
                "a \x1b[31mtok-\x1b[1mDEP\x1b[0mLOY-5f3a9e\x1b[0m b",
                "a \x1b[31m[redacted]\x1b[1m\x1b[0m\x1b[0m b",
            ),
            (
                "tok-\x07DEPLOY-\x1b]0;t\x075f3a9e!",
                "[redacted]\x07\x1b]0;t\x07!",
            ),
            ("tok-DEPLOY-5f3a9e \x1b[0m", "[redacted] \x1b[0m"),
            // What a terminal does not show joined is not a secret shown.
            ("tok-DEPLOY\n-5f3a9e", "tok-DEPLOY\n-5f3a9e"),
            ("\x1b[32mtok-DEPLOY\x1b[0m", "\x1b[32mtok-DEPLOY\x1b[0m"),
        ];
        for (printed, stored) in cases {
            assert_eq!(r.apply(printed.into()), stored, "{printed:?}");
            let shown = crate::ansi::strip(stored);
            assert!(!shown.contains("tok-DEPLOY-5f3a9e"), "{printed:?}");
        }
    }

    #[test]
    fn a_line_without_secrets_is_untouched() {
        let r = Redactor::from_vars(vars(&[("API_KEY", "supersecretvalue")]));
        assert_eq!(r.apply("hello".into()), "hello");
    }
}
