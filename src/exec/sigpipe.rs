//! Writing to a child's pipe without dying of SIGPIPE. The commands that run steps ignore
//! the signal (see `Command::hosts_work`); the listing commands keep its default action,
//! so that `baton list | head` ends quietly, and under it a write to a pipe whose reader
//! has gone ends the whole process: `baton diff` paging to a `less` quit early. Here the
//! signal is blocked for the writing thread during the write only; the write then fails
//! with `EPIPE`, and the signal it left pending is taken before the mask is restored.

use nix::sys::signal::{SigSet, SigmaskHow, Signal, pthread_sigmask};

/// Runs `write` (a write to a pipe) with SIGPIPE blocked for this thread; an `EPIPE` it
/// returns leaves no signal behind.
pub fn blocked<T>(write: impl FnOnce() -> std::io::Result<T>) -> std::io::Result<T> {
    let pipe = SigSet::from(Signal::SIGPIPE);
    let mut before = SigSet::empty();
    if pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&pipe), Some(&mut before)).is_err() {
        return write();
    }
    // Unblocked again however the write ends (a panic too), unless it was blocked before.
    let _unblock = (!before.contains(Signal::SIGPIPE)).then_some(Unblock);
    write()
}

/// Takes a SIGPIPE a write left pending for this thread, then unblocks the signal: only
/// it, so that any other change of the mask made meanwhile stays.
struct Unblock;

impl Drop for Unblock {
    fn drop(&mut self) {
        // A write can raise the signal and still return bytes written (a blocking write
        // whose reader went away part-way): taken whatever the write returned.
        take_pending();
        let pipe = SigSet::from(Signal::SIGPIPE);
        let _ = pthread_sigmask(SigmaskHow::SIG_UNBLOCK, Some(&pipe), None);
    }
}

/// Takes a pending SIGPIPE without waiting.
fn take_pending() {
    use nix::libc;
    let pipe = SigSet::from(Signal::SIGPIPE);
    let none = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a signal set and a timespec that live across the call; no info is asked for.
    unsafe {
        libc::sigtimedwait(pipe.as_ref(), std::ptr::null_mut(), &none);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// Whether SIGPIPE is pending for this thread or the process.
    fn sigpipe_pending() -> bool {
        let mut set = std::mem::MaybeUninit::<nix::libc::sigset_t>::uninit();
        // SAFETY: `sigpending` fills the set it is given; it is read only after that.
        unsafe {
            assert_eq!(nix::libc::sigpending(set.as_mut_ptr()), 0);
            nix::libc::sigismember(set.as_ptr(), nix::libc::SIGPIPE) == 1
        }
    }

    // The test binary ignores SIGPIPE (changing that would endanger the other tests); a
    // blocked signal is queued even so, so this sees the signal taken and the mask back.

    /// A write to a pipe whose reader has gone fails with `EPIPE`, and leaves no signal
    /// pending for later and the thread's mask as it was.
    #[test]
    fn a_write_to_a_closed_pipe_fails_and_leaves_no_signal() {
        let (read, write) = nix::unistd::pipe().unwrap();
        drop(read);
        let mut file = std::fs::File::from(write);
        let e = blocked(|| file.write_all(b"gone")).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe);
        // Unblocked again, with nothing pending.
        let mut mask = SigSet::empty();
        pthread_sigmask(SigmaskHow::SIG_SETMASK, None, Some(&mut mask)).unwrap();
        assert!(!mask.contains(Signal::SIGPIPE));
        assert!(!sigpipe_pending());
    }
}
