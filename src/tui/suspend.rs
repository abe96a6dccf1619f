//! Handing the terminal to another program (a shell, the editor, a pager) and taking it
//! back. The input thread is parked first, so it cannot read the keys meant for the
//! program; the screen is restored and fully redrawn after.

use super::launch::Launch;
use super::terminal::Screen;
use std::process::Command;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

/// How long the input thread waits for a key before it looks at the gate again: the most
/// a suspension waits for the thread to let go of the terminal.
pub const INPUT_POLL: Duration = Duration::from_millis(200);

#[derive(Default)]
struct GateState {
    /// The board asked the input thread to stop reading.
    closed: bool,
    /// The input thread is waiting at the gate (not reading the terminal).
    parked: bool,
}

/// Lets the board stop the input thread from reading the terminal while another program
/// has it.
#[derive(Default)]
pub struct InputGate {
    state: Mutex<GateState>,
    cv: Condvar,
}

impl InputGate {
    fn lock(&self) -> MutexGuard<'_, GateState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The input thread, before each read: waits while the gate is closed.
    pub fn pass(&self) {
        let mut s = self.lock();
        while s.closed {
            s.parked = true;
            self.cv.notify_all();
            s = self.cv.wait(s).unwrap_or_else(|e| e.into_inner());
        }
        s.parked = false;
    }

    /// Closes the gate and waits until the input thread is parked at it (at most a few
    /// poll intervals; a thread that has ended does not hold anyone up for long).
    pub fn close(&self) {
        let mut s = self.lock();
        s.closed = true;
        let mut waited = Duration::ZERO;
        while !s.parked && waited < INPUT_POLL * 5 {
            let (next, _) = self
                .cv
                .wait_timeout(s, INPUT_POLL)
                .unwrap_or_else(|e| e.into_inner());
            s = next;
            waited += INPUT_POLL;
        }
    }

    /// Lets the input thread read again.
    pub fn open(&self) {
        self.lock().closed = false;
        self.cv.notify_all();
    }
}

/// Runs `f` with the terminal given back (cooked mode, main screen, the input thread
/// parked), then takes it again and clears it so the next frame redraws everything.
pub fn suspended<T>(screen: &mut Screen, gate: &InputGate, f: impl FnOnce() -> T) -> T {
    gate.close();
    super::terminal::restore();
    let out = f();
    if let Err(e) = screen.resume() {
        tracing::warn!("taking the terminal back failed: {e}");
    }
    gate.open();
    out
}

/// Runs `launch`: in a new tmux window when asked for and inside tmux, else in the
/// foreground with the board suspended. Returns a sentence for the status line.
pub fn launch(
    screen: &mut Screen,
    gate: &InputGate,
    launch: &Launch,
    tmux: bool,
) -> Result<String, String> {
    let Some((program, args)) = launch.argv.split_first() else {
        return Err("nothing to run".into());
    };
    let at = launch.cwd.display();
    if !launch.cwd.is_dir() {
        return Err(format!("the worktree {at} is gone"));
    }
    if launch.window && tmux {
        super::launch::tmux_window(&launch.cwd, &[], &launch.argv)?;
        return Ok(format!("opened a tmux window in {at}"));
    }
    let status = suspended(screen, gate, || {
        Command::new(program)
            .args(args)
            .current_dir(&launch.cwd)
            .status()
    });
    match status {
        Ok(s) if s.success() => Ok(format!("back from {program}")),
        Ok(s) => Err(format!("{program} ended with {s}")),
        Err(e) => Err(format!("cannot run {program}: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    #[test]
    fn close_waits_for_the_reader_to_park_and_open_lets_it_go() {
        let gate = Arc::new(InputGate::default());
        let reading = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let (g, r, st) = (gate.clone(), reading.clone(), stop.clone());
        let reader = std::thread::spawn(move || {
            loop {
                g.pass();
                if st.load(Ordering::SeqCst) {
                    return;
                }
                r.store(true, Ordering::SeqCst);
                // Stands for a read of the terminal.
                std::thread::sleep(Duration::from_millis(1));
                r.store(false, Ordering::SeqCst);
            }
        });
        gate.close();
        // Parked at the gate, not inside a read.
        assert!(gate.lock().parked);
        assert!(!reading.load(Ordering::SeqCst));
        stop.store(true, Ordering::SeqCst);
        gate.open();
        reader.join().expect("the reader ends once the gate opens");
    }
}
