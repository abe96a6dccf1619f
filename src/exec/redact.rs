//! Keeps known secret values out of logs: the values of environment variables whose names
//! say they are secrets are replaced by `[redacted]` in every line a step prints.
//!
//! Only the exact value is masked: an encoded (base64, URL-escaped) or partial copy is not.

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

/// True when a variable of this name holds a secret: its name contains one of the markers.
/// baton's own `BATON_*` variables (`BATON_EXECUTION_KEY` is an id) never do.
fn is_secret_name(name: &str) -> bool {
    let name = name.to_ascii_uppercase();
    !name.starts_with("BATON_") && MARKERS.iter().any(|m| name.contains(m))
}

/// A set of secret values to mask.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    secrets: Vec<String>,
}

impl Redactor {
    /// Collects secrets from `(name, value)` pairs, such as `std::env::vars()`.
    pub fn from_vars<I: IntoIterator<Item = (String, String)>>(vars: I) -> Self {
        let mut secrets: Vec<String> = vars
            .into_iter()
            .filter(|(k, v)| v.chars().count() >= MIN_LEN && is_secret_name(k))
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

    /// The line with every known secret replaced.
    pub fn apply(&self, line: String) -> String {
        if self.secrets.iter().all(|s| !line.contains(s.as_str())) {
            return line;
        }
        let mut out = line;
        for s in &self.secrets {
            out = out.replace(s.as_str(), "[redacted]");
        }
        out
    }
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
        ]));
        assert_eq!(
            r.apply("key sk-abcdefghijkl and ghp_1234567890 in /root/secret-home abc".into()),
            "key [redacted] and [redacted] in /root/secret-home abc"
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
    fn a_line_without_secrets_is_untouched() {
        let r = Redactor::from_vars(vars(&[("API_KEY", "supersecretvalue")]));
        assert_eq!(r.apply("hello".into()), "hello");
    }
}
