//! Frames reach the terminal whole. A frame is gathered and written at once, inside the
//! terminal's synchronized-update mode: over a slow link a half-drawn frame never shows, and
//! a frame costs one write (one packet over SSH), not one per kilobyte of stdout's buffer.

use std::io::{self, Write};

/// Starts a synchronized update (DEC private mode 2026): a terminal that knows the mode
/// shows nothing of the frame until its end; one that does not ignores it.
const BEGIN: &[u8] = b"\x1b[?2026h";
/// Ends it: the terminal shows the frame.
const END: &[u8] = b"\x1b[?2026l";

/// Holds what is written until a flush, then writes it to `inner` in one piece, wrapped in
/// a synchronized update. Nothing held is written if it is dropped unflushed (a frame cut
/// off by a panic): a terminal never gets half a frame or an update left open.
pub struct FrameWriter<W: Write> {
    inner: W,
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
        if !self.frame.is_empty() {
            self.frame.extend_from_slice(END);
            let written = self.inner.write_all(&self.frame);
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
    fn a_frame_is_one_write_inside_a_synchronized_update() {
        let writes = Writes::default();
        let backend = CrosstermBackend::new(FrameWriter::new(writes.clone()));
        let viewport = Viewport::Fixed(Rect::new(0, 0, 60, 20));
        let mut terminal = Terminal::with_options(backend, TerminalOptions { viewport }).unwrap();
        // A frame much larger than stdout's 1 KiB buffer.
        let text = "a line of the board's log, long enough to fill the row\n".repeat(20);
        terminal
            .draw(|f| f.render_widget(Paragraph::new(text.as_str()), f.area()))
            .unwrap();
        terminal
            .draw(|f| f.render_widget(Paragraph::new("QQQQ"), f.area()))
            .unwrap();
        let writes = writes.0.lock().unwrap();
        assert_eq!(writes.len(), 2, "one write per frame");
        for w in writes.iter() {
            assert!(
                w.starts_with(BEGIN) && w.ends_with(END),
                "{:?}",
                String::from_utf8_lossy(w)
            );
        }
        assert!(
            writes[0].len() > 1200,
            "the whole first frame: {} bytes",
            writes[0].len()
        );
        assert!(String::from_utf8_lossy(&writes[1]).contains("QQQQ"));
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
}
