//! Keeps known secret values out of logs: the values of environment variables whose names
//! say they are secrets are replaced by `[redacted]` in every line a step prints.

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

/// Shorter values are too likely to occur by chance to be worth masking.
const MIN_LEN: usize = 8;

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
            .filter(|(k, v)| {
                let k = k.to_ascii_uppercase();
                v.len() >= MIN_LEN && MARKERS.iter().any(|m| k.contains(m))
            })
            .map(|(_, v)| v)
            .collect();
        // Longest first, so a secret containing another is masked whole.
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        secrets.dedup();
        Self { secrets }
    }

    /// Adds one secret value (e.g. an API key read for an agent backend).
    pub fn add(&mut self, secret: &str) {
        if secret.len() >= MIN_LEN && !self.secrets.iter().any(|s| s == secret) {
            self.secrets.push(secret.to_string());
            self.secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        }
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
    fn a_line_without_secrets_is_untouched() {
        let r = Redactor::from_vars(vars(&[("API_KEY", "supersecretvalue")]));
        assert_eq!(r.apply("hello".into()), "hello");
    }
}
