//! The guard: a small process between the engine and a local step (or `run` hook), so that
//! nothing the step started outlives the engine that reads it.
//!
//! The engine starts `baton-guard <fd> <grace-ms> <program> <args…>` (a small binary of its
//! own, installed next to `baton`; failing that, `baton __guard …`) instead of the program,
//! as the leader of the step's process group. The guard makes itself the subreaper of
//! everything below it (so descendants that leave their session still end up as its
//! children, not init's), starts the program in the same group, and waits. What the engine
//! does to the group (abort, time-out) reaches the program as it always did; the guard only
//! keeps the signals it gets from ending itself early. Two things end it:
//!
//! - the program exits: the guard exits the same way (the same code, or the same signal),
//!   so the engine sees what it would have seen without it. If no process is left below
//!   the guard, it first says so on its socket ([`CLEAN`]): every process of the step is a
//!   descendant of the guard (orphans are handed to it as subreaper), so the engine can
//!   skip looking for what the step left running;
//! - the engine's end `<fd>` of a socket pair that only the engine holds is closed: the
//!   engine is gone (`kill -9`, a crash), so no one reads the step any more. The guard
//!   ends every process holding the step's `BATON_EXECUTION_KEY` (of its workspace) (SIGTERM, the grace
//!   period, SIGKILL), its own child included, and exits. A socket rather than a
//!   parent-death signal: that fires when the engine *thread* that forked exits, which
//!   tokio's blocking threads do;
//!
//! It blocks in one `poll` on the socket and a signalfd of SIGCHLD, and starts no thread.

use crate::exec::process::{Mark, end_marked_blocking};
use nix::sys::signal::{SigSet, Signal, kill};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;
use std::ffi::OsString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::time::Duration;

/// The hidden first argument that makes `baton` a guard.
pub const ARG: &str = "__guard";

/// The guard's own small binary, next to `baton`. Starting it costs a few hundred
/// microseconds less per step than starting `baton` again, whose 50 MB image is mostly
/// relocated at each start.
pub const BIN: &str = "baton-guard";

/// What a guard and the engine that starts it agree on; `baton-guard --protocol` prints it.
/// A `baton-guard` left from another build (`cargo run` rebuilds only `baton`) answers
/// something else, or nothing, and is not used.
const PROTOCOL: &str = "baton-guard 2";

/// What [`CLEAN`] is sent as.
const CLEAN: u8 = b'c';

/// How to start a guard.
struct Guard {
    program: PathBuf,
    /// Whether it is `baton` itself, which needs [`ARG`] first.
    via_baton: bool,
}

/// The program to start as a guard: `baton-guard` next to this binary when this is `baton`,
/// else this very binary (under tests the current program is a test harness, which cannot
/// be one: steps then start directly). `BATON_STEP_GUARD=off` in the engine's environment
/// starts steps without one (tests of recovery use it to leave a step behind a killed
/// engine).
fn guard() -> Option<Guard> {
    if std::env::var_os("BATON_STEP_GUARD").is_some_and(|v| v == "off") {
        return None;
    }
    let me = std::env::current_exe().ok()?;
    let name = me.file_name()?.to_string_lossy();
    // A rebuilt binary reads `baton (deleted)`; its image is still there to start again.
    if name == "baton" || name == "baton (deleted)" {
        static SMALL: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
        let small = SMALL.get_or_init(|| {
            let path = me.with_file_name(BIN);
            (path.is_file() && speaks_protocol(&path)).then_some(path)
        });
        return Some(match small {
            Some(path) => Guard {
                program: path.clone(),
                via_baton: false,
            },
            None => Guard {
                program: PathBuf::from("/proc/self/exe"),
                via_baton: true,
            },
        });
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

/// Where an engine's warden (`exec::warden`) may be started from, in the order to try:
/// `baton-guard` next to this binary, then this binary itself (`true`: it needs [`ARG`]
/// first). None under a test harness or a renamed binary, or with `BATON_STEP_GUARD=off`,
/// as for [`guard`]; each candidate proves itself by its first words.
pub fn warden_programs() -> Vec<(PathBuf, bool)> {
    if std::env::var_os("BATON_STEP_GUARD").is_some_and(|v| v == "off") {
        return Vec::new();
    }
    let Ok(me) = std::env::current_exe() else {
        return Vec::new();
    };
    let name = me.file_name().map(|n| n.to_string_lossy().into_owned());
    if !matches!(name.as_deref(), Some("baton" | "baton (deleted)")) {
        return Vec::new();
    }
    vec![
        (me.with_file_name(BIN), false),
        (PathBuf::from("/proc/self/exe"), true),
    ]
}

/// Whether `exe` is a cargo test binary (`target/<profile>/deps/<name>-<hash>`).
fn is_test_harness(exe: &std::path::Path) -> bool {
    exe.parent()
        .and_then(|d| d.file_name())
        .is_some_and(|d| d == "deps")
}

/// The guard's command line up to the program's: the program, `__guard` when it is
/// `baton`, then the engine's socket and the grace period.
fn guard_command(guard: Guard, fd: &str, grace: Duration) -> tokio::process::Command {
    let mut c = tokio::process::Command::new(&guard.program);
    if guard.via_baton {
        c.arg0("baton").arg(ARG);
    } else {
        c.arg0(BIN);
    }
    c.arg(fd).arg(grace.as_millis().to_string());
    c
}

/// A connected pair of Unix stream sockets, both closed on exec: the engine's end and
/// the guard's. The guard sees its read reach the end when every copy of the engine's
/// end is closed, and can answer on the same socket.
fn socket_pair() -> std::io::Result<(OwnedFd, OwnedFd)> {
    use nix::libc;
    let mut fds = [0; 2];
    // SAFETY: on success socketpair writes two new descriptors into `fds`.
    let done = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    if done != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: two descriptors just made, owned by nothing else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// The command that starts `argv` (a step, a hook, a server baton runs): under a guard when
/// this is the `baton` binary, with the engine's end of the guard's socket, which only this
/// process holds; else `argv` itself.
pub fn command(
    argv: &[String],
    grace: Duration,
) -> std::io::Result<(tokio::process::Command, Option<OwnedFd>)> {
    let Some(guard) = guard() else {
        let mut c = tokio::process::Command::new(&argv[0]);
        c.args(&argv[1..]);
        return Ok((c, None));
    };
    // Both ends close on exec: no other child ever holds them. The guard's copy of its
    // end is opened up in its own process only, just before it starts.
    let (engine, theirs) = socket_pair()?;
    let fd = theirs.as_raw_fd();
    let mut c = guard_command(guard, &fd.to_string(), grace);
    c.args(argv);
    // SAFETY: only fcntl, which is async-signal-safe, runs between fork and exec; `theirs`
    // stays open in the parent (it is moved into the closure) until the command is dropped.
    unsafe {
        c.pre_exec(move || {
            let fd = std::os::fd::BorrowedFd::borrow_raw(theirs.as_raw_fd());
            nix::fcntl::fcntl(
                fd,
                nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::empty()),
            )?;
            Ok(())
        });
    }
    Ok((c, Some(engine)))
}

/// The guard's first argument when the engine's socket is its standard input.
const SOCKET_ON_STDIN: &str = "-";

/// [`command`] for a program that reads nothing: the guard's end of the socket is the
/// guard's standard input (the program gets `/dev/null` there), so nothing has to run
/// between fork and exec and the engine starts the guard the cheap way (`posix_spawn`,
/// which does not copy the engine's memory map). The command's input is set here.
pub fn command_without_input(
    argv: &[String],
    grace: Duration,
) -> std::io::Result<(tokio::process::Command, Option<OwnedFd>)> {
    let Some(guard) = guard() else {
        let mut c = tokio::process::Command::new(&argv[0]);
        c.args(&argv[1..]).stdin(std::process::Stdio::null());
        return Ok((c, None));
    };
    // Both ends close on exec; the child's standard input is a copy made in the child.
    let (engine, theirs) = socket_pair()?;
    let mut c = guard_command(guard, SOCKET_ON_STDIN, grace);
    c.args(argv).stdin(std::process::Stdio::from(theirs));
    Ok((c, Some(engine)))
}

/// After the guard has exited: whether it said that nothing it started was left (then no
/// process of the step is: none needs looking for). Never blocks.
pub fn left_nothing(engine_end: &OwnedFd) -> bool {
    use nix::libc;
    let mut byte = 0u8;
    // SAFETY: a read of at most one byte into `byte`, on a descriptor we own.
    let got = unsafe {
        libc::recv(
            engine_end.as_raw_fd(),
            (&raw mut byte).cast(),
            1,
            libc::MSG_DONTWAIT,
        )
    };
    got == 1 && byte == CLEAN
}

/// The engine's socket: on standard input (which then becomes `/dev/null` for the program),
/// or under the number the engine passed.
fn watched(arg: Option<OsString>) -> Option<OwnedFd> {
    let arg = arg?;
    if arg == SOCKET_ON_STDIN {
        return socket_from_stdin();
    }
    let fd = arg.to_str()?.parse::<i32>().ok()?;
    // SAFETY: the engine passes its socket under this number and nothing else in this
    // process owns it.
    let watch = unsafe { OwnedFd::from_raw_fd(fd) };
    // The program must not hold the engine's socket.
    let _ = nix::fcntl::fcntl(
        &watch,
        nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
    );
    Some(watch)
}

/// The engine's socket, passed as standard input, moved off it (standard input becomes
/// `/dev/null`, so nothing started later inherits the socket there).
pub(crate) fn socket_from_stdin() -> Option<OwnedFd> {
    let stdin = std::io::stdin();
    let moved = nix::fcntl::fcntl(&stdin, nix::fcntl::FcntlArg::F_DUPFD_CLOEXEC(3)).ok()?;
    // SAFETY: a descriptor just made by F_DUPFD_CLOEXEC, owned by nothing else.
    let socket = unsafe { OwnedFd::from_raw_fd(moved) };
    let null = std::fs::File::open("/dev/null").ok()?;
    nix::unistd::dup2_stdin(&null).ok()?;
    Some(socket)
}

/// Makes `command` start its program with no signal blocked, whatever this process blocks
/// for the signalfd it reads (std keeps the parent's mask in the child).
pub(crate) fn unblocked(command: &mut std::process::Command) {
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
}

/// Tells the engine that nothing the guard started is left. A closed socket (the engine
/// gone) is no error, and no SIGPIPE.
fn say_clean(socket: &OwnedFd) {
    use nix::libc;
    let byte = CLEAN;
    // SAFETY: a write of one byte from `byte`, on a descriptor we own.
    unsafe {
        libc::send(
            socket.as_raw_fd(),
            (&raw const byte).cast(),
            1,
            libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT,
        );
    }
}

/// How the program ended: its exit code, or the signal that ended it.
enum Ended {
    Exited(i32),
    Killed(Signal),
}

/// True when the guard binary at `path` is of this build's protocol. Asked once per
/// process, before its first step.
fn speaks_protocol(path: &std::path::Path) -> bool {
    std::process::Command::new(path)
        .arg("--protocol")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .is_ok_and(|o| o.status.success() && o.stdout.trim_ascii() == PROTOCOL.as_bytes())
}

/// Runs the guard: `args` are what follows `__guard` (or `baton-guard`). Never returns.
pub fn main(args: Vec<OsString>) -> ! {
    if args.first().is_some_and(|a| a == "--protocol") {
        println!("{PROTOCOL}");
        std::process::exit(0);
    }
    if args.first().is_some_and(|a| a == crate::exec::warden::ARG) {
        crate::exec::warden::serve::main();
    }
    let mut args = args.into_iter();
    let watch = watched(args.next());
    let grace = args.next().and_then(|a| a.to_str()?.parse::<u64>().ok());
    let argv: Vec<OsString> = args.collect();
    let (Some(watch), Some(grace), Some(program)) = (watch, grace, argv.first()) else {
        eprintln!("baton: the step guard is started by the engine, not by hand");
        std::process::exit(2);
    };
    let grace = Duration::from_millis(grace);
    // Raw bytes: a variable that is not UTF-8 is the program's business, not a panic here.
    let mark = Mark::from_vars(std::env::vars_os());
    // Orphaned descendants, even those in a session of their own, become our children.
    // Without that, the step's orphans go elsewhere and the guard cannot vouch for them.
    let subreaper = nix::sys::prctl::set_child_subreaper(true).is_ok();
    // The group's SIGTERM (abort) is for the program: blocked here, it waits pending until
    // the guard exits the way the program did. SIGCHLD is blocked to be read from a
    // signalfd, so one thread waits for both the program and the engine's socket. The
    // program starts with an empty mask (set between fork and exec).
    let mut signals = SigSet::empty();
    for s in [
        Signal::SIGTERM,
        Signal::SIGINT,
        Signal::SIGHUP,
        Signal::SIGCHLD,
    ] {
        signals.add(s);
    }
    let _ = signals.thread_block();
    let mut children = SigSet::empty();
    children.add(Signal::SIGCHLD);
    let flags = SfdFlags::SFD_CLOEXEC | SfdFlags::SFD_NONBLOCK;
    let Ok(exits) = SignalFd::with_flags(&children, flags) else {
        eprintln!("baton: the step guard could not watch its program");
        std::process::exit(127);
    };
    let mut command = std::process::Command::new(program);
    command.args(&argv[1..]);
    unblocked(&mut command);
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
    match wait(child, &watch, &exits) {
        Some(ended) => {
            // The program is gone; if nothing else it started is, the engine hears so.
            if subreaper && nothing_left() {
                say_clean(&watch);
            }
            match ended {
                Ended::Exited(code) => std::process::exit(code),
                Ended::Killed(sig) => exit_by(sig),
            }
        }
        None => {
            // No one reads the step any more. Everything holding its key goes (the
            // program itself by pid too, for one that cleared its environment), and only
            // then the guard; a thread reaps meanwhile, so that what ends is gone at once
            // rather than left to an init that may never reap it.
            std::thread::spawn(|| {
                while !matches!(waitpid(None, None), Err(e) if e != nix::errno::Errno::EINTR) {}
            });
            let _ = kill(child, Signal::SIGTERM);
            match &mark {
                Some(mark) => end_marked_blocking(mark, grace),
                None => std::thread::sleep(grace),
            }
            let _ = kill(child, Signal::SIGKILL);
            std::process::exit(1)
        }
    }
}

/// Waits for the program to end (reaping the orphans handed to the guard as subreaper
/// meanwhile), or for the engine's end of the socket to close: how the program ended, or
/// None when the engine is gone.
fn wait(child: Pid, socket: &OwnedFd, exits: &SignalFd) -> Option<Ended> {
    use nix::libc;
    let mut fds = [
        libc::pollfd {
            fd: socket.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: exits.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    loop {
        // SAFETY: two initialised pollfd records, their number passed with them.
        let ready = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, -1) };
        if ready < 0 {
            match nix::errno::Errno::last() {
                nix::errno::Errno::EINTR => continue,
                // poll cannot fail otherwise with these arguments; treat it as the engine
                // gone rather than spin.
                _ => return None,
            }
        }
        if fds[1].revents != 0 {
            while let Ok(Some(_)) = exits.read_signal() {}
            if let Some(ended) = reap(child) {
                return Some(ended);
            }
        }
        if fds[0].revents != 0 {
            let mut buf = [0u8; 64];
            match nix::unistd::read(socket, &mut buf) {
                Ok(0) => return None,
                Ok(_) | Err(nix::errno::Errno::EINTR | nix::errno::Errno::EAGAIN) => {}
                Err(_) => return None,
            }
        }
    }
}

/// Reaps every child that has ended (the program, and the orphans handed to us as
/// subreaper); how the program ended if it is among them. Never blocks.
fn reap(child: Pid) -> Option<Ended> {
    loop {
        match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::Exited(pid, code)) if pid == child => {
                return Some(Ended::Exited(code));
            }
            Ok(WaitStatus::Signaled(pid, sig, _)) if pid == child => {
                return Some(Ended::Killed(sig));
            }
            Ok(WaitStatus::StillAlive) => return None,
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            // No child left, and the program was not among the reaped: cannot happen
            // while the program is our child.
            Err(_) => return None,
        }
    }
}

/// Whether the guard has no child left, live or unreaped (those already ended are reaped
/// here). As subreaper it inherits every orphan below it as the orphan's parent exits, so
/// this means no process the program started is alive. Never blocks.
fn nothing_left() -> bool {
    loop {
        match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) => return false,
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(nix::errno::Errno::ECHILD) => return true,
            Err(_) => return false,
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
