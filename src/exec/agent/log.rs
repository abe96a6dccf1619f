//! Writing agent progress into the step's log: whole lines, secrets redacted.

use crate::agents::Profile;
use crate::exec::redact::Redactor;
use crate::exec::{LogSender, StepEnv};
use crate::store::Stream;
use std::sync::Arc;

/// A longer partial line is emitted as it is, so one runaway line cannot grow memory.
const MAX_PENDING: usize = 16 * 1024;

/// What to mask in a job's log: the profile's API key, and every variable of the engine's,
/// the step's or the profile's environment whose name looks like a credential.
pub(super) fn secrets_for(profile: &Profile, env: &StepEnv) -> Redactor {
    let mut redactor = Redactor::from_vars(
        crate::exec::redact::env_secrets()
            .chain(env.vars.iter().cloned())
            .chain(profile.env.iter().map(|(k, v)| (k.clone(), v.clone()))),
    );
    if let Some(key) = profile
        .api_key_env
        .as_deref()
        .and_then(|k| std::env::var(k).ok())
    {
        redactor.add(&key);
    }
    redactor
}

/// One line of a CLI agent's JSON stream: the event, or — for a line that is not JSON — what
/// to show instead (the line itself; nothing for a blank one).
pub(super) fn json_line(line: &str) -> Result<serde_json::Value, Vec<(Stream, String)>> {
    serde_json::from_str(line).map_err(|_| {
        if line.trim().is_empty() {
            Vec::new()
        } else {
            vec![(Stream::Stdout, line.to_string())]
        }
    })
}

/// The step's log as agent backends see it.
#[derive(Clone)]
pub(super) struct Log {
    tx: LogSender,
    redactor: Arc<Redactor>,
}

impl Log {
    pub(super) fn new(tx: LogSender, redactor: Redactor) -> Self {
        Self {
            tx,
            redactor: Arc::new(redactor),
        }
    }

    /// Sends `text` (one or more lines), redacted.
    pub(super) async fn send(&self, stream: Stream, text: impl AsRef<str>) {
        let text = self.redactor.apply(text.as_ref().to_string());
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
        self.redactor.apply(text.to_string())
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
    fn one_line_flattens_and_cuts() {
        assert_eq!(one_line("a\nb", 10), "a b");
        assert_eq!(one_line("abcdefghij", 5), "abcd…");
    }
}
