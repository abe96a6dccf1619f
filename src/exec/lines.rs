//! Reading a child's output as lines with bounded memory.

use super::redact::Redactor;
use crate::store::Stream;
use std::sync::Arc;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};

/// A line longer than this is cut into pieces, so one runaway line cannot grow memory.
pub const MAX_LINE: usize = 16 * 1024;

/// Reads `src` to its end, sending each line (without its newline, lossily decoded,
/// ANSI codes kept) to `out`. Stops early if the receiver is gone.
///
/// A line cut for length is never cut inside one of `secrets` (so the redactor downstream
/// sees it whole) nor inside a UTF-8 character: the cut moves back and the rest starts the
/// next piece.
pub async fn pump<R: AsyncRead + Unpin>(
    src: R,
    stream: Stream,
    out: super::LogSender,
    secrets: Arc<Redactor>,
) {
    let mut reader = BufReader::with_capacity(64 * 1024, src);
    let mut line: Vec<u8> = Vec::new();
    while let Ok(buf) = reader.fill_buf().await {
        if buf.is_empty() {
            break;
        }
        let room = MAX_LINE - line.len();
        let (take, complete) = match buf.iter().take(room).position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (buf.len().min(room), line.len() + buf.len() >= MAX_LINE),
        };
        line.extend_from_slice(&buf[..take]);
        reader.consume(take);
        if complete {
            let cut = if line.last() == Some(&b'\n') {
                line.len()
            } else {
                cut_point(&line, &secrets)
            };
            if out.send((stream, decode(&line[..cut]))).await.is_err() {
                return;
            }
            line.drain(..cut);
        }
    }
    if !line.is_empty() {
        let _ = out.send((stream, decode(&line))).await;
    }
}

/// Where to cut a line that filled [`MAX_LINE`]: before any start of a secret at its end,
/// then back to the start of a UTF-8 character.
fn cut_point(line: &[u8], secrets: &Redactor) -> usize {
    let mut cut = line.len() - secrets.partial_tail(line);
    let start = cut.saturating_sub(3);
    if let Some(i) = (start..cut).rev().find(|&i| line[i] & 0xc0 != 0x80) {
        // `line[i]` starts a character; keep it only if all its bytes are before the cut.
        let width = match line[i] {
            b if b < 0x80 => 1,
            b if b >= 0xf0 => 4,
            b if b >= 0xe0 => 3,
            _ => 2,
        };
        if i + width > cut && i > 0 {
            cut = i;
        }
    }
    cut
}

fn decode(raw: &[u8]) -> String {
    let raw = raw.strip_suffix(b"\n").unwrap_or(raw);
    let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
    String::from_utf8_lossy(raw).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::sync::mpsc;

    async fn collect(input: &[u8]) -> Vec<String> {
        collect_with(input, Redactor::default()).await
    }

    async fn collect_with(input: &[u8], secrets: Redactor) -> Vec<String> {
        let (tx, mut rx) = mpsc::channel(1024);
        pump(input, Stream::Stdout, tx, Arc::new(secrets)).await;
        let mut out = Vec::new();
        while let Some((_, l)) = rx.recv().await {
            out.push(l);
        }
        out
    }

    #[tokio::test]
    async fn splits_lines_and_keeps_ansi() {
        let got = collect(b"a\r\n\x1b[32mgreen\x1b[0m\nlast").await;
        assert_eq!(got, vec!["a", "\u{1b}[32mgreen\u{1b}[0m", "last"]);
    }

    #[tokio::test]
    async fn cuts_runaway_lines() {
        let big = vec![b'x'; MAX_LINE * 2 + 10];
        let got = collect(&big).await;
        assert_eq!(got.len(), 3);
        assert_eq!(got[0].len(), MAX_LINE);
        assert_eq!(got[2].len(), 10);
    }

    #[tokio::test]
    async fn a_secret_across_the_cut_is_kept_whole_and_redacted() {
        let secret = "sk-live-0123456789abcdef";
        let r = Redactor::from_vars([("MY_API_KEY".to_string(), secret.to_string())]);
        for before in [MAX_LINE - 1, MAX_LINE - 5, MAX_LINE - secret.len() + 1] {
            let mut input = "x".repeat(before);
            input.push_str(secret);
            input.push_str(" tail\n");
            let got = collect_with(input.as_bytes(), r.clone()).await;
            assert_eq!(got.concat(), input.trim_end(), "nothing lost or added");
            let stored: Vec<String> = got.into_iter().map(|l| r.apply(l)).collect();
            for line in &stored {
                assert!(line.len() <= MAX_LINE);
                assert!(
                    !line.contains("sk-live") && !line.contains("cdef"),
                    "{before}"
                );
            }
            assert!(stored.concat().contains("[redacted] tail"), "{before}");
        }
    }

    #[tokio::test]
    async fn a_cut_never_splits_a_character() {
        let mut input = "x".repeat(MAX_LINE - 1);
        input.push_str("é and more");
        let got = collect(input.as_bytes()).await;
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].len(), MAX_LINE - 1);
        assert_eq!(got[1], "é and more");
    }

    #[tokio::test]
    async fn invalid_utf8_is_replaced_not_dropped() {
        let got = collect(b"ok \xff\xfe end\n").await;
        assert_eq!(got, vec!["ok \u{fffd}\u{fffd} end"]);
    }
}
