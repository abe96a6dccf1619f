//! Reading a child's output as lines with bounded memory.

use crate::store::Stream;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};

/// A line longer than this is cut into pieces, so one runaway line cannot grow memory.
pub const MAX_LINE: usize = 16 * 1024;

/// Reads `src` to its end, sending each line (without its newline, lossily decoded,
/// ANSI codes kept) to `out`. Stops early if the receiver is gone.
pub async fn pump<R: AsyncRead + Unpin>(src: R, stream: Stream, out: super::LogSender) {
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
            if out.send((stream, decode(&line))).await.is_err() {
                return;
            }
            line.clear();
        }
    }
    if !line.is_empty() {
        let _ = out.send((stream, decode(&line))).await;
    }
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
        let (tx, mut rx) = mpsc::channel(1024);
        pump(input, Stream::Stdout, tx).await;
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
    async fn invalid_utf8_is_replaced_not_dropped() {
        let got = collect(b"ok \xff\xfe end\n").await;
        assert_eq!(got, vec!["ok \u{fffd}\u{fffd} end"]);
    }
}
