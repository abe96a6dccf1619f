//! Frames reach the terminal whole. A frame is gathered and written at once, and a large
//! one inside the terminal's synchronized-update mode: over a slow link a half-drawn frame
//! never shows, and a frame costs one write (one packet over SSH), not one per kilobyte of
//! stdout's buffer.

use std::io::{self, Write};

/// Starts a synchronized update (DEC private mode 2026): a terminal that knows the mode
/// shows nothing of the frame until its end; one that does not ignores it.
pub const BEGIN: &[u8] = b"\x1b[?2026h";
/// Ends it: the terminal shows the frame.
pub const END: &[u8] = b"\x1b[?2026l";

/// Frames up to this size go out as they are. One write is taken whole in practice, and
/// tmux (3.7 and later) answers the end of an update by drawing again every line it
/// touched: a spinner's tick would cost a whole line instead of a few bytes.
const SYNC_ABOVE: usize = 1024;

/// Holds what is written until a flush, then writes it to `inner` in one piece, a large
/// frame wrapped in a synchronized update. Nothing held is written if it is dropped
/// unflushed (a frame cut off by a panic): a terminal never gets half a frame from it.
pub struct FrameWriter<W: Write> {
    inner: W,
    /// [`BEGIN`], then the frame so far (the start is left out of a small frame).
    frame: Vec<u8>,
}

impl<W: Write> FrameWriter<W> {
    pub fn new(inner: W) -> Self {
        Self {
            inner,
            frame: Vec::with_capacity(64 * 1024),
        }
    }
}

impl<W: Write> Write for FrameWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.frame.is_empty() {
            self.frame.extend_from_slice(BEGIN);
        }
        self.frame.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.frame.len() > BEGIN.len() + SYNC_ABOVE {
            self.frame.extend_from_slice(END);
            let written = self.inner.write_all(&self.frame);
            self.frame.clear();
            if let Err(e) = written {
                // Part of the frame may have gone out: the update is ended rather than
                // left to the terminal's own timeout, if the terminal can take it now.
                let _ = self.inner.write_all(END);
                return Err(e);
            }
        } else if !self.frame.is_empty() {
            let written = self.inner.write_all(&self.frame[BEGIN.len()..]);
            self.frame.clear();
            written?;
        }
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::backend::CrosstermBackend;
    use ratatui::layout::Rect;
    use ratatui::widgets::Paragraph;
    use ratatui::{Terminal, TerminalOptions, Viewport};
    use std::sync::{Arc, Mutex};

    /// Each `write` call it got, as a terminal's stdout would get them.
    #[derive(Clone, Default)]
    struct Writes(Arc<Mutex<Vec<Vec<u8>>>>);

    impl Write for Writes {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().push(buf.to_vec());
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_frame_is_one_write_and_a_large_one_a_synchronized_update() {
        let writes = Writes::default();
        let backend = CrosstermBackend::new(FrameWriter::new(writes.clone()));
        let viewport = Viewport::Fixed(Rect::new(0, 0, 60, 20));
        let mut terminal = Terminal::with_options(backend, TerminalOptions { viewport }).unwrap();
        // A frame much larger than stdout's 1 KiB buffer.
        let text = "a line of the board's log, long enough to fill the row\n".repeat(20);
        terminal
            .draw(|f| f.render_widget(Paragraph::new(text.as_str()), f.area()))
            .unwrap();
        // A small change: a few cells.
        let changed = text.replacen("a line", "QQQQQQ", 1);
        terminal
            .draw(|f| f.render_widget(Paragraph::new(changed.as_str()), f.area()))
            .unwrap();
        let writes = writes.0.lock().unwrap();
        assert_eq!(writes.len(), 2, "one write per frame");
        let (large, small) = (&writes[0], &writes[1]);
        assert!(large.starts_with(BEGIN) && large.ends_with(END));
        assert!(
            large.len() > 1200,
            "the whole first frame: {} bytes",
            large.len()
        );
        let small_text = String::from_utf8_lossy(small);
        assert!(
            small_text.contains("QQQQ") && !small_text.contains("2026"),
            "{small_text:?}"
        );
    }

    #[test]
    fn nothing_is_written_for_nothing_nor_for_a_frame_never_flushed() {
        let writes = Writes::default();
        let mut w = FrameWriter::new(writes.clone());
        w.flush().unwrap();
        assert!(writes.0.lock().unwrap().is_empty());
        w.write_all(b"half a frame").unwrap();
        drop(w);
        assert!(writes.0.lock().unwrap().is_empty(), "dropped unflushed");
    }

    /// Takes `first` bytes, then fails once (a terminal whose descriptor was left
    /// non-blocking by another program), then takes everything.
    struct FailsOnce {
        got: Vec<u8>,
        first: usize,
        failed: bool,
    }

    impl Write for FailsOnce {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            if !self.failed && self.got.len() >= self.first {
                self.failed = true;
                return Err(io::ErrorKind::WouldBlock.into());
            }
            let n = if self.failed {
                buf.len()
            } else {
                buf.len().min(self.first - self.got.len())
            };
            self.got.extend_from_slice(&buf[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_large_frame_cut_off_still_ends_its_update() {
        let mut w = FrameWriter::new(FailsOnce {
            got: Vec::new(),
            first: 100,
            failed: false,
        });
        w.write_all(&[b'x'; 4096]).unwrap();
        assert!(w.flush().is_err());
        assert!(w.inner.got.starts_with(BEGIN) && w.inner.got.ends_with(END));
        assert_eq!(
            w.inner.got.len(),
            100 + END.len(),
            "the part sent, then the end"
        );
    }
}
