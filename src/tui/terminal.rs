//! Entering and leaving the terminal's full-screen mode. The terminal is restored on every
//! exit path: by the guard's `Drop`, and by a panic hook that runs before the panic message
//! is printed.

use super::frame_writer::FrameWriter;
use crossterm::cursor::Show;
use crossterm::event::{DisableMouseCapture, EnableMouseCapture};
use crossterm::execute;
use crossterm::terminal::{
    EndSynchronizedUpdate, EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode,
    enable_raw_mode,
};
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use std::io::{Stdout, stdout};
use std::sync::Once;

/// The terminal in full-screen mode; restores it when dropped.
pub struct Screen {
    pub terminal: Terminal<CrosstermBackend<FrameWriter<Stdout>>>,
    /// Mouse reporting is on (`[board] mouse = true`), and goes back on after a suspension.
    pub mouse: bool,
}

/// Puts the terminal back as it was. Safe to call more than once.
pub fn restore() {
    let _ = disable_raw_mode();
    // Turning mouse reporting off when it was never on is harmless.
    // A frame cut off inside a synchronized update would hold back what follows.
    let _ = execute!(
        stdout(),
        EndSynchronizedUpdate,
        DisableMouseCapture,
        LeaveAlternateScreen,
        Show
    );
}

fn install_panic_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            previous(info);
        }));
    });
}

impl Screen {
    /// Raw mode, alternate screen, hidden cursor.
    pub fn enter() -> std::io::Result<Self> {
        install_panic_hook();
        enable_raw_mode()?;
        if let Err(e) = execute!(stdout(), EnterAlternateScreen) {
            restore();
            return Err(e);
        }
        let terminal = match Terminal::new(CrosstermBackend::new(FrameWriter::new(stdout()))) {
            Ok(t) => t,
            Err(e) => {
                restore();
                return Err(e);
            }
        };
        let mut screen = Self {
            terminal,
            mouse: false,
        };
        let _ = screen.terminal.hide_cursor();
        let _ = screen.terminal.clear();
        Ok(screen)
    }
}

impl Screen {
    /// Takes the terminal back after another program had it: raw mode, alternate screen,
    /// and a cleared buffer so the next frame draws everything.
    pub fn resume(&mut self) -> std::io::Result<()> {
        enable_raw_mode()?;
        execute!(stdout(), EnterAlternateScreen)?;
        if self.mouse {
            self.capture_mouse()?;
        }
        self.terminal.hide_cursor()?;
        self.terminal.clear()
    }
}

impl Screen {
    /// Turns mouse reporting on (the wheel reaches the board as events).
    pub fn capture_mouse(&mut self) -> std::io::Result<()> {
        execute!(stdout(), EnableMouseCapture)
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        restore();
    }
}
