//! Writing agent progress into the step's log: whole lines, secrets redacted.

use crate::agents::Profile;
use crate::exec::{LogSender, StepEnv};
use crate::store::Stream;
use std::sync::Arc;

/// A longer partial line is emitted as it is, so one runaway line cannot grow memory.
const MAX_PENDING: usize = 16 * 1024;

/// Shortest value treated as a secret (shorter ones would redact ordinary words).
const MIN_SECRET: usize = 8;

/// Replaces every occurrence of each secret with `***`.
pub fn redact(text: &str, secrets: &[String]) -> String {
    let mut out = text.to_string();
    for s in secrets {
        if s.len() >= MIN_SECRET && out.contains(s.as_str()) {
            out = out.replace(s.as_str(), "***");
        }
    }
    out
}

/// Names that look like they hold a credential.
fn secret_name(name: &str) -> bool {
    let n = name.to_ascii_uppercase();
    ["KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL"]
        .iter()
        .any(|w| n.contains(w))
}

/// The values to redact from a job's log: the profile's API key, and every variable of the
/// engine's, the step's or the profile's environment whose name looks like a credential.
pub(super) fn secrets_for(profile: &Profile, env: &StepEnv) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    if let Some(v) = profile
        .api_key_env
        .as_deref()
        .and_then(|k| std::env::var(k).ok())
    {
        out.push(v);
    }
    let named = std::env::vars()
        .chain(env.vars.iter().cloned())
        .chain(profile.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    for (k, v) in named {
        if secret_name(&k) && v.len() >= MIN_SECRET && !out.contains(&v) {
            out.push(v);
        }
    }
    // Longest first, so a secret containing another is replaced whole.
    out.sort_by_key(|s| std::cmp::Reverse(s.len()));
    out
}

/// The step's log as agent backends see it.
#[derive(Clone)]
pub(super) struct Log {
    tx: LogSender,
    secrets: Arc<Vec<String>>,
}

impl Log {
    pub(super) fn new(tx: LogSender, secrets: Vec<String>) -> Self {
        Self {
            tx,
            secrets: Arc::new(secrets),
        }
    }

    /// Sends `text` (one or more lines), redacted.
    pub(super) async fn send(&self, stream: Stream, text: impl AsRef<str>) {
        let text = redact(text.as_ref(), &self.secrets);
        for line in text.split('\n') {
            let line = line.strip_suffix('\r').unwrap_or(line);
            let _ = self.tx.send((stream, line.to_string())).await;
        }
    }

    /// What the agent says or does.
    pub(super) async fn out(&self, text: impl AsRef<str>) {
        self.send(Stream::Stdout, text).await;
    }

    /// Errors and warnings from the agent or its backend.
    pub(super) async fn err(&self, text: impl AsRef<str>) {
        self.send(Stream::Stderr, text).await;
    }

    /// baton's own remarks (session ids, costs, cleanup).
    pub(super) async fn system(&self, text: impl AsRef<str>) {
        self.send(Stream::System, text).await;
    }

    /// Redacts without sending (for error sentences that end up in the database).
    pub(super) fn clean(&self, text: &str) -> String {
        redact(text, &self.secrets)
    }
}

/// Turns streamed text fragments into whole lines as their newlines arrive.
#[derive(Debug, Default)]
pub struct LineBuf {
    pending: String,
}

impl LineBuf {
    /// Adds a fragment; returns the lines it completed.
    pub fn push(&mut self, fragment: &str) -> Vec<String> {
        self.pending.push_str(fragment);
        let mut lines = Vec::new();
        while let Some(i) = self.pending.find('\n') {
            let line: String = self.pending.drain(..=i).collect();
            lines.push(line.trim_end_matches(['\n', '\r']).to_string());
        }
        if self.pending.len() > MAX_PENDING {
            lines.push(std::mem::take(&mut self.pending));
        }
        lines
    }

    /// The unfinished last line, if any.
    pub fn finish(&mut self) -> Option<String> {
        let rest = std::mem::take(&mut self.pending);
        (!rest.is_empty()).then_some(rest)
    }
}

/// Shortens `s` to one line of at most `max` characters.
pub(super) fn one_line(s: &str, max: usize) -> String {
    let flat: String = s
        .chars()
        .map(|c| if c == '\n' || c == '\r' { ' ' } else { c })
        .collect();
    let flat = flat.trim();
    if flat.chars().count() <= max {
        return flat.to_string();
    }
    let cut: String = flat.chars().take(max.saturating_sub(1)).collect();
    format!("{cut}…")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_buf_emits_whole_lines() {
        let mut b = LineBuf::default();
        assert!(b.push("Hel").is_empty());
        assert_eq!(b.push("lo\nwor"), ["Hello"]);
        assert_eq!(b.push("ld\r\n\nx"), ["world", ""]);
        assert_eq!(b.finish().as_deref(), Some("x"));
        assert_eq!(b.finish(), None);
    }

    #[test]
    fn redacts_long_secrets_only() {
        let secrets = vec!["sk-live-123456".to_string(), "abc".to_string()];
        assert_eq!(
            redact("key sk-live-123456 and abc", &secrets),
            "key *** and abc"
        );
    }

    #[test]
    fn one_line_flattens_and_cuts() {
        assert_eq!(one_line("a\nb", 10), "a b");
        assert_eq!(one_line("abcdefghij", 5), "abcd…");
    }
}
