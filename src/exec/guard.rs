//! The guard: a small process between the engine and a local step (or `run` hook), so that
//! nothing the step started outlives the engine that reads it.
//!
//! The engine starts `baton __guard <fd> <grace-ms> <program> <args…>` instead of the
//! program, as the leader of the step's process group. The guard makes itself the
//! subreaper of everything below it (so descendants that leave their session still end up
//! as its children, not init's), starts the program in the same group, and waits. What the
//! engine does to the group (abort, time-out) reaches the program as it always did; the
//! guard only keeps the signals it gets from ending itself early. Two things end it:
//!
//! - the program exits: the guard exits the same way (the same code, or the same signal),
//!   so the engine sees what it would have seen without it;
//! - the read end `<fd>` of a pipe whose write end only the engine holds reaches its end:
//!   the engine is gone (`kill -9`, a crash), so no one reads the step any more. The guard
//!   ends every process holding the step's `BATON_EXECUTION_KEY` (of its workspace) (SIGTERM, the grace
//!   period, SIGKILL), its own child included, and exits. A pipe rather than a parent-death
//!   signal: that fires when the engine *thread* that forked exits, which tokio's blocking
//!   threads do;
//!
//! It blocks in two threads (pipe read, `waitpid`) and never polls.

use crate::exec::process::{Mark, end_marked_blocking};
use nix::sys::signal::{SigSet, Signal, kill};
use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::Pid;
use std::ffi::OsString;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::time::Duration;

/// The hidden first argument that makes `baton` a guard.
pub const ARG: &str = "__guard";

/// The program to start as a guard: this very binary when it is `baton` (under tests the
/// current program is a test harness, which cannot be one: steps then start directly).
/// `BATON_STEP_GUARD=off` in the engine's environment starts steps without one (tests of
/// recovery use it to leave a step behind a killed engine).
pub fn exe() -> Option<PathBuf> {
    if std::env::var_os("BATON_STEP_GUARD").is_some_and(|v| v == "off") {
        return None;
    }
    let me = std::env::current_exe().ok()?;
    let name = me.file_name()?.to_string_lossy();
    // A rebuilt binary reads `baton (deleted)`; its image is still there to start again.
    if name == "baton" || name == "baton (deleted)" {
        return Some(PathBuf::from("/proc/self/exe"));
    }
    // A test harness is expected here; anything else is a renamed binary whose steps would
    // outlive a killed engine, which its user should hear of once.
    static WARNED: std::sync::Once = std::sync::Once::new();
    if !cfg!(test) && !is_test_harness(&me) {
        WARNED.call_once(|| {
            tracing::warn!(
                "steps start without a guard: this program is `{name}`, not `baton`, so a step's processes may outlive an engine that is killed"
            )
        });
    }
    None
}

/// Whether `exe` is a cargo test binary (`target/<profile>/deps/<name>-<hash>`).
fn is_test_harness(exe: &std::path::Path) -> bool {
    exe.parent()
        .and_then(|d| d.file_name())
        .is_some_and(|d| d == "deps")
}

/// The command that starts `argv` (a step, a hook, a server baton runs): under a guard when
/// this is the `baton` binary, with the write end of the guard's pipe, which only this process holds; else `argv` itself.
pub fn command(
    argv: &[String],
    grace: Duration,
) -> std::io::Result<(tokio::process::Command, Option<OwnedFd>)> {
    let Some(exe) = exe() else {
        let mut c = tokio::process::Command::new(&argv[0]);
        c.args(&argv[1..]);
        return Ok((c, None));
    };
    // Both ends close on exec: no other child ever holds them. The guard's copy of the
    // read end is opened up in its own process only, just before it starts.
    let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
    let fd = read.as_raw_fd();
    let mut c = tokio::process::Command::new(exe);
    c.arg0("baton")
        .arg(ARG)
        .arg(fd.to_string())
        .arg(grace.as_millis().to_string())
        .args(argv);
    // SAFETY: only fcntl, which is async-signal-safe, runs between fork and exec; `read`
    // stays open in the parent (it is moved into the closure) until the command is dropped.
    unsafe {
        c.pre_exec(move || {
            let fd = std::os::fd::BorrowedFd::borrow_raw(read.as_raw_fd());
            nix::fcntl::fcntl(
                fd,
                nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::empty()),
            )?;
            Ok(())
        });
    }
    Ok((c, Some(write)))
}

/// The guard's first argument when the engine's pipe is its standard input.
const PIPE_ON_STDIN: &str = "-";

/// [`command`] for a program that reads nothing: the read end of the guard's pipe is the
/// guard's standard input (the program gets `/dev/null` there), so nothing has to run
/// between fork and exec and the engine starts the guard the cheap way (`posix_spawn`,
/// which does not copy the engine's memory map). The command's input is set here.
pub fn command_without_input(
    argv: &[String],
    grace: Duration,
) -> std::io::Result<(tokio::process::Command, Option<OwnedFd>)> {
    let Some(exe) = exe() else {
        let mut c = tokio::process::Command::new(&argv[0]);
        c.args(&argv[1..]).stdin(std::process::Stdio::null());
        return Ok((c, None));
    };
    // Both ends close on exec; the child's standard input is a copy made in the child.
    let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
    let mut c = tokio::process::Command::new(exe);
    c.arg0("baton")
        .arg(ARG)
        .arg(PIPE_ON_STDIN)
        .arg(grace.as_millis().to_string())
        .args(argv)
        .stdin(std::process::Stdio::from(read));
    Ok((c, Some(write)))
}

/// The engine's pipe: on standard input (which then becomes `/dev/null` for the program),
/// or under the number the engine passed.
fn watched(arg: Option<OsString>) -> Option<OwnedFd> {
    let arg = arg?;
    if arg == PIPE_ON_STDIN {
        let stdin = std::io::stdin();
        let moved = nix::fcntl::fcntl(&stdin, nix::fcntl::FcntlArg::F_DUPFD_CLOEXEC(3)).ok()?;
        // SAFETY: a descriptor just made by F_DUPFD_CLOEXEC, owned by nothing else.
        let watch = unsafe { OwnedFd::from_raw_fd(moved) };
        let null = std::fs::File::open("/dev/null").ok()?;
        nix::unistd::dup2_stdin(&null).ok()?;
        return Some(watch);
    }
    let fd = arg.to_str()?.parse::<i32>().ok()?;
    // SAFETY: the engine passes the read end of its pipe under this number and nothing
    // else in this process owns it.
    let watch = unsafe { OwnedFd::from_raw_fd(fd) };
    // The program must not hold the engine's pipe.
    let _ = nix::fcntl::fcntl(
        &watch,
        nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
    );
    Some(watch)
}

/// What the guard's threads report.
enum Event {
    /// The program ended: its exit code, or the signal that ended it.
    Exited(i32),
    Killed(Signal),
    /// The engine's end of the pipe is closed.
    EngineGone,
}

/// Runs the guard: `args` are what follows `__guard`. Never returns.
pub fn main(args: Vec<OsString>) -> ! {
    let mut args = args.into_iter();
    let watch = watched(args.next());
    let grace = args.next().and_then(|a| a.to_str()?.parse::<u64>().ok());
    let argv: Vec<OsString> = args.collect();
    let (Some(watch), Some(grace), Some(program)) = (watch, grace, argv.first()) else {
        eprintln!("baton: `{ARG}` is started by the engine, not by hand");
        std::process::exit(2);
    };
    let grace = Duration::from_millis(grace);
    // Raw bytes: a variable that is not UTF-8 is the program's business, not a panic here.
    let mark = Mark::from_vars(std::env::vars_os());
    // Orphaned descendants, even those in a session of their own, become our children.
    let _ = nix::sys::prctl::set_child_subreaper(true);
    // The group's SIGTERM (abort) is for the program: blocked here (before any thread
    // exists, so all inherit the mask), it waits pending until the guard exits the way the
    // program did. The program starts with an empty mask (set between fork and exec).
    let mut signals = SigSet::empty();
    for s in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP] {
        signals.add(s);
    }
    let _ = signals.thread_block();
    let mut command = std::process::Command::new(program);
    command.args(&argv[1..]);
    // SAFETY: only sigprocmask, which is async-signal-safe, runs between fork and exec.
    unsafe {
        command.pre_exec(|| {
            nix::sys::signal::sigprocmask(
                nix::sys::signal::SigmaskHow::SIG_SETMASK,
                Some(&SigSet::empty()),
                None,
            )?;
            Ok(())
        });
    }
    let child = match command.spawn() {
        Ok(c) => c,
        Err(e) => {
            eprintln!(
                "baton: could not start `{}`: {e}",
                program.to_string_lossy()
            );
            std::process::exit(127);
        }
    };
    let child = Pid::from_raw(child.id() as i32);
    let (tx, rx) = std::sync::mpsc::channel();
    let engine = tx.clone();
    std::thread::spawn(move || {
        let mut pipe = std::fs::File::from(watch);
        let mut buf = [0u8; 64];
        loop {
            match pipe.read(&mut buf) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        let _ = engine.send(Event::EngineGone);
    });
    std::thread::spawn(move || reap(child, &tx));
    // Every event ends the guard; a closed channel cannot happen while `reap` holds `tx`.
    match rx.recv() {
        Ok(Event::Exited(code)) => std::process::exit(code),
        Ok(Event::Killed(sig)) => exit_by(sig),
        Ok(Event::EngineGone) => {
            // No one reads the step any more. Everything holding its key goes (the
            // program itself by pid too, for one that cleared its environment), and only
            // then the guard: the reaper thread reaps meanwhile.
            let _ = kill(child, Signal::SIGTERM);
            match &mark {
                Some(mark) => end_marked_blocking(mark, grace),
                None => std::thread::sleep(grace),
            }
            let _ = kill(child, Signal::SIGKILL);
            std::process::exit(1)
        }
        Err(_) => std::process::exit(1),
    }
}

/// Reaps every child (the program, and the orphans handed to us as subreaper) and reports
/// how the program ended.
fn reap(child: Pid, tx: &std::sync::mpsc::Sender<Event>) {
    loop {
        match waitpid(None, None) {
            Ok(WaitStatus::Exited(pid, code)) if pid == child => {
                let _ = tx.send(Event::Exited(code));
            }
            Ok(WaitStatus::Signaled(pid, sig, _)) if pid == child => {
                let _ = tx.send(Event::Killed(sig));
            }
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            // No child left: the program was reaped and reported.
            Err(_) => return,
        }
    }
}

/// Ends this process by `sig`, as the program was ended, so the engine reads the same.
fn exit_by(sig: Signal) -> ! {
    // SAFETY: restoring the default action; no handler of ours is replaced.
    unsafe {
        let _ = nix::sys::signal::signal(sig, nix::sys::signal::SigHandler::SigDfl);
    }
    // The program may have dumped core already; the guard's own copy would only be noise.
    let _ = nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_CORE, 0, 0);
    let mut only = SigSet::empty();
    only.add(sig);
    let _ = only.thread_unblock();
    let _ = nix::sys::signal::raise(sig);
    std::process::exit(128 + sig as i32)
}
