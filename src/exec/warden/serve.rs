//! The warden process: `baton-guard --warden`, started once by an engine with its end of
//! the socket on standard input. It starts the engine's local steps, each the leader of a
//! process group of its own, as its children; it is their subreaper, so whatever a step
//! leaves behind is handed to it rather than to init; it tells the engine how each step
//! ended and whether anything of it is left. When the engine's end of the socket closes
//! (`kill -9`, a crash), it ends every step it started, and everything carrying their
//! marks, and exits.
//!
//! One thread, blocked in one `poll` on the socket and a pipe its signal handler writes to.
//! No signal is blocked, so a step is started the cheap way (`posix_spawn`, which shares
//! the warden's memory until the step's program runs, rather than `fork`, which copies
//! its page tables) with the empty signal mask a step must start with.

use super::sock;
use super::wire::{MAX, Msg, PROTOCOL, Start, Status};
use crate::exec::process::{Mark, end_marked_blocking, start_time};
use nix::errno::Errno;
use nix::libc;
use nix::sys::signal::{SigSet, Signal, killpg};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;
use std::collections::HashMap;
use std::ffi::OsString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::Duration;

/// A step the warden started and has not seen end.
struct Step {
    id: u64,
    mark: Option<Mark>,
    grace: Duration,
}

/// Runs the warden; the engine's socket is standard input. Never returns.
pub fn main() -> ! {
    let Some(sock) = crate::exec::guard::socket_from_stdin() else {
        eprintln!("baton: the warden is started by the engine, not by hand");
        std::process::exit(2);
    };
    // Orphans below any step, in whatever session, become ours: none goes unseen.
    let subreaper = nix::sys::prctl::set_child_subreaper(true).is_ok();
    // A SIGTERM, SIGINT or SIGHUP meant for the warden ends its steps as a lost engine
    // does; SIGCHLD says a child ended.
    let Some(wake) = catch_signals() else {
        std::process::exit(127);
    };
    let hello = Msg::Hello(PROTOCOL.into()).encode();
    if sock::send(sock.as_raw_fd(), &hello, &[], true).is_err() {
        std::process::exit(1);
    }
    let mut steps: HashMap<i32, Step> = HashMap::new();
    let mut buf = vec![0u8; MAX + 1024];
    loop {
        let (socket_ready, signalled) = wait(&sock, &wake);
        if signalled {
            drain(&wake);
            reap(&sock, &mut steps, subreaper);
            if STOP.load(Ordering::SeqCst) {
                end_all(steps);
            }
        }
        if socket_ready {
            match sock::recv(sock.as_raw_fd(), &mut buf, false) {
                Ok((0, _)) => end_all(steps),
                Ok((n, fds)) => {
                    if let Some(Msg::Start(start)) = Msg::decode(&buf[..n]) {
                        let (answer, started) = spawn(start, fds);
                        let _ = sock::send(sock.as_raw_fd(), &answer.encode(), &[], true);
                        // Its mark is made after the answer, off the step's way.
                        if let Some((pid, step, since)) = started {
                            steps.insert(pid as i32, step.marked(since));
                        }
                    }
                }
                Err(Errno::EAGAIN | Errno::EINTR | Errno::EMSGSIZE) => {}
                Err(_) => end_all(steps),
            }
        }
    }
}

/// The write end of the pipe the signal handler wakes the warden through.
static WAKE: AtomicI32 = AtomicI32::new(-1);
/// Set by the handler when a signal other than SIGCHLD came: the warden ends its steps.
static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(signal: libc::c_int) {
    if signal != libc::SIGCHLD {
        STOP.store(true, Ordering::SeqCst);
    }
    let byte = 0u8;
    // SAFETY: write(2) and errno access are async-signal-safe. A full pipe loses nothing:
    // a wake-up is pending already, and STOP is a flag, not a byte.
    unsafe {
        let errno = *libc::__errno_location();
        libc::write(WAKE.load(Ordering::Relaxed), (&raw const byte).cast(), 1);
        *libc::__errno_location() = errno;
    }
}

/// Makes the pipe and installs the handler for SIGCHLD, SIGTERM, SIGINT and SIGHUP, with
/// no signal blocked (whatever mask the engine's thread had): what the warden polls.
fn catch_signals() -> Option<OwnedFd> {
    use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigmaskHow, sigaction, sigprocmask};
    let flags = nix::fcntl::OFlag::O_CLOEXEC | nix::fcntl::OFlag::O_NONBLOCK;
    let (read, write) = nix::unistd::pipe2(flags).ok()?;
    WAKE.store(write.as_raw_fd(), Ordering::SeqCst);
    // Written to by the handler for as long as the warden lives.
    std::mem::forget(write);
    let action = SigAction::new(
        SigHandler::Handler(on_signal),
        SaFlags::SA_RESTART | SaFlags::SA_NOCLDSTOP,
        SigSet::all(),
    );
    // SAFETY: the handler does only async-signal-safe things. A signal the engine was
    // started ignoring (`nohup`, a script's `&`) stays ignored, for the warden as for
    // its steps.
    unsafe { sigaction(Signal::SIGCHLD, &action) }.ok()?;
    for s in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP] {
        if !ignored(s) {
            unsafe { sigaction(s, &action) }.ok()?;
        }
    }
    sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None).ok()?;
    Some(read)
}

/// Whether `signal` is ignored (asked without changing it).
fn ignored(signal: Signal) -> bool {
    // SAFETY: a query only (no new action), into a zeroed record of ours.
    unsafe {
        let mut now: libc::sigaction = std::mem::zeroed();
        libc::sigaction(signal as libc::c_int, std::ptr::null(), &mut now) == 0
            && now.sa_sigaction == libc::SIG_IGN
    }
}

/// Empties the wake-up pipe (the handler's bytes say only that something came).
fn drain(wake: &OwnedFd) {
    let mut buf = [0u8; 256];
    while nix::unistd::read(wake, &mut buf).is_ok_and(|n| n > 0) {}
}

/// Blocks until the socket or the wake-up pipe is ready: which of them.
fn wait(sock: &OwnedFd, wake: &OwnedFd) -> (bool, bool) {
    use nix::libc;
    let mut fds = [
        libc::pollfd {
            fd: sock.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: wake.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    loop {
        // SAFETY: two initialised pollfd records, their number passed with them.
        let ready = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, -1) };
        if ready > 0 {
            return (fds[0].revents != 0, fds[1].revents != 0);
        }
        if ready < 0 && Errno::last() != Errno::EINTR {
            // poll cannot fail otherwise with these arguments; read the socket, which
            // tells whether the engine is still there, rather than spin.
            return (true, false);
        }
    }
}

/// A step just started, before its mark is read.
struct Started {
    id: u64,
    /// Its environment, `NAME=value` (the mark is found in it).
    env: Vec<OsString>,
    grace: Duration,
}

impl Started {
    /// The step, with the mark its processes carry: those started since its leader
    /// (`start`, read from `/proc`).
    fn marked(self, start: Option<u64>) -> Step {
        Step {
            id: self.id,
            mark: Mark::from_vars(self.env.iter().filter_map(|kv| split(kv)))
                .map(|m| m.since(start)),
            grace: self.grace,
        }
    }
}

/// Starts `start` with the three descriptors that came with it: the answer for the engine,
/// and when it started, its pid, the step (to be marked) and its start time.
fn spawn(start: Start, fds: Vec<OwnedFd>) -> (Msg, Option<(u32, Started, Option<u64>)>) {
    let id = start.id;
    let failed = |errno: i32, why: String| (Msg::Failed { id, errno, why }, None);
    let Ok(stdio) = <[OwnedFd; 3]>::try_from(fds) else {
        return failed(0, "the step's pipes did not arrive".into());
    };
    if start.argv.is_empty() {
        return failed(0, "the command line is empty".into());
    }
    let env = last_wins(&start.env);
    let spawned = match add_chdir() {
        Some(add_chdir) => posix_spawn(&start, &env, &stdio, add_chdir),
        None => command_spawn(&start, &env, stdio),
    };
    let pid = match spawned {
        Ok(pid) => pid,
        Err(Unstarted::Nul) => {
            return failed(
                0,
                "its command line, environment or folder holds a NUL byte, which no program can be given".into(),
            );
        }
        Err(Unstarted::Os(e)) => return failed(e as i32, std::io::Error::from(e).to_string()),
    };
    let grace = Duration::from_millis(start.grace_ms);
    // Read once, here: the engine records it (so that recovery knows the group is the
    // step's), and the mark looks only at processes started since.
    let since = start_time(pid);
    let started = Started {
        id,
        env: start.env,
        grace,
    };
    (
        Msg::Started {
            id,
            pid,
            start: since.unwrap_or(0),
        },
        Some((pid, started, since)),
    )
}

/// Why a step's program did not start.
enum Unstarted {
    /// A NUL byte in a string handed to the program.
    Nul,
    /// The system's error.
    Os(Errno),
}

/// The environment as the program gets it: one entry per name, the last one given winning
/// (the engine sends what a step inherits first, then the step's own `env`), as
/// `Command::envs` builds it. An entry without `=` (the engine sends none) is left out, as
/// `Command` could not pass it either.
fn last_wins(env: &[OsString]) -> Vec<&OsString> {
    let mut seen = std::collections::HashSet::with_capacity(env.len());
    let mut out: Vec<&OsString> = env
        .iter()
        .rev()
        .filter(|kv| split(kv).is_some_and(|(name, _)| seen.insert(name)))
        .collect();
    out.reverse();
    out
}

/// `posix_spawn_file_actions_addchdir_np`, which glibc has had since 2.29: looked up when
/// the warden runs rather than linked, so that baton still builds and runs on an older
/// glibc (a step is then started through `std::process::Command`, which looks it up too).
type AddChdir =
    unsafe extern "C" fn(*mut libc::posix_spawn_file_actions_t, *const libc::c_char) -> libc::c_int;

fn add_chdir() -> Option<AddChdir> {
    static FOUND: std::sync::OnceLock<Option<AddChdir>> = std::sync::OnceLock::new();
    *FOUND.get_or_init(|| {
        // SAFETY: a symbol lookup in the loaded libraries; a non-null result is that
        // function, whose C signature is the one declared above.
        unsafe {
            let f = libc::dlsym(
                libc::RTLD_DEFAULT,
                c"posix_spawn_file_actions_addchdir_np".as_ptr(),
            );
            (!f.is_null()).then(|| std::mem::transmute::<*mut libc::c_void, AddChdir>(f))
        }
    })
}

/// Starts the step's program as `std::process::Command` would with the same settings
/// (`posix_spawn`, which shares the warden's memory until the program runs): in its own
/// process group, in `cwd`, with `stdio` as its standard input, output and error, exactly
/// the environment `env`, no signal blocked and SIGPIPE back to its default (the engine
/// ignores it; handled signals are reset by `posix_spawn` itself). Direct, because the
/// message already holds `NAME=value` strings: no map of the environment is built and
/// taken apart again for every step.
fn posix_spawn(
    start: &Start,
    env: &[&OsString],
    stdio: &[OwnedFd; 3],
    add_chdir: AddChdir,
) -> Result<u32, Unstarted> {
    use std::ffi::CString;
    let c = |s: &OsString| CString::new(s.as_bytes()).map_err(|_| Unstarted::Nul);
    let program = c(&start.program)?;
    let cwd = c(&start.cwd)?;
    let argv = start.argv.iter().map(c).collect::<Result<Vec<_>, _>>()?;
    let env = env.iter().map(|kv| c(kv)).collect::<Result<Vec<_>, _>>()?;
    let pointers = |list: &[CString]| {
        let mut p: Vec<*mut libc::c_char> = list.iter().map(|s| s.as_ptr().cast_mut()).collect();
        p.push(std::ptr::null_mut());
        p
    };
    let (argv_p, env_p) = (pointers(&argv), pointers(&env));
    // The descriptors came past the three standard ones (the warden's own are those).
    debug_assert!(stdio.iter().all(|fd| fd.as_raw_fd() > 2));
    let ok = |rc: libc::c_int| {
        if rc == 0 {
            Ok(())
        } else {
            Err(Unstarted::Os(Errno::from_raw(rc)))
        }
    };
    // SAFETY: the attribute and action records are initialised before use and destroyed
    // on every path after; every pointer handed to posix_spawn points into a CString or
    // pointer list that outlives the call.
    unsafe {
        let mut actions: libc::posix_spawn_file_actions_t = std::mem::zeroed();
        ok(libc::posix_spawn_file_actions_init(&mut actions))?;
        let mut attr: libc::posix_spawnattr_t = std::mem::zeroed();
        if let Err(e) = ok(libc::posix_spawnattr_init(&mut attr)) {
            libc::posix_spawn_file_actions_destroy(&mut actions);
            return Err(e);
        }
        let spawned = (|| {
            ok(add_chdir(&mut actions, cwd.as_ptr()))?;
            for (fd, to) in stdio.iter().zip(0..) {
                ok(libc::posix_spawn_file_actions_adddup2(
                    &mut actions,
                    fd.as_raw_fd(),
                    to,
                ))?;
            }
            let none = SigSet::empty();
            let mut pipe = SigSet::empty();
            pipe.add(Signal::SIGPIPE);
            ok(libc::posix_spawnattr_setsigmask(&mut attr, none.as_ref()))?;
            ok(libc::posix_spawnattr_setsigdefault(
                &mut attr,
                pipe.as_ref(),
            ))?;
            ok(libc::posix_spawnattr_setpgroup(&mut attr, 0))?;
            let flags = libc::POSIX_SPAWN_SETPGROUP
                | libc::POSIX_SPAWN_SETSIGMASK
                | libc::POSIX_SPAWN_SETSIGDEF;
            ok(libc::posix_spawnattr_setflags(
                &mut attr,
                flags as libc::c_short,
            ))?;
            let mut pid: libc::pid_t = 0;
            ok(libc::posix_spawn(
                &mut pid,
                program.as_ptr(),
                &actions,
                &attr,
                argv_p.as_ptr(),
                env_p.as_ptr(),
            ))?;
            Ok(pid as u32)
        })();
        libc::posix_spawnattr_destroy(&mut attr);
        libc::posix_spawn_file_actions_destroy(&mut actions);
        spawned
    }
}

/// [`posix_spawn`] through `std::process::Command`, where glibc is too old to change a
/// spawned program's folder itself (std then forks).
fn command_spawn(start: &Start, env: &[&OsString], stdio: [OwnedFd; 3]) -> Result<u32, Unstarted> {
    use std::os::unix::process::CommandExt;
    let [input, output, errors] = stdio;
    let nul = |s: &std::ffi::OsStr| s.as_bytes().contains(&0);
    if nul(&start.program)
        || nul(&start.cwd)
        || start.argv.iter().chain(env.iter().copied()).any(|s| nul(s))
    {
        return Err(Unstarted::Nul);
    }
    let mut command = std::process::Command::new(&start.program);
    command
        .arg0(&start.argv[0])
        .args(&start.argv[1..])
        .env_clear()
        .envs(env.iter().filter_map(|kv| split(kv)))
        .current_dir(&start.cwd)
        .process_group(0)
        .stdin(std::process::Stdio::from(input))
        .stdout(std::process::Stdio::from(output))
        .stderr(std::process::Stdio::from(errors));
    let child = command
        .spawn()
        .map_err(|e| Unstarted::Os(Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO))))?;
    // Reaped by `reap`, not by the handle.
    Ok(child.id())
}

/// `NAME=value` as its two halves (the value may hold `=`).
fn split(kv: &OsString) -> Option<(&std::ffi::OsStr, &std::ffi::OsStr)> {
    use std::os::unix::ffi::OsStrExt;
    let b = kv.as_bytes();
    let at = b.iter().position(|c| *c == b'=')?;
    Some((
        std::ffi::OsStr::from_bytes(&b[..at]),
        std::ffi::OsStr::from_bytes(&b[at + 1..]),
    ))
}

/// Reaps every ended child (steps, and orphans handed to the warden) and tells the engine
/// how each step ended.
fn reap(sock: &OwnedFd, steps: &mut HashMap<i32, Step>, subreaper: bool) {
    let mut ended = Vec::new();
    loop {
        let (pid, status) = match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::Exited(pid, code)) => (pid, Status::Exited(code)),
            Ok(WaitStatus::Signaled(pid, sig, _)) => (pid, Status::Signalled(sig as i32)),
            Ok(WaitStatus::StillAlive) | Err(Errno::ECHILD) => break,
            Ok(_) | Err(Errno::EINTR) => continue,
            Err(_) => break,
        };
        if let Some(step) = steps.remove(&pid.as_raw()) {
            ended.push((pid, step.id, status));
        }
    }
    for (pid, id, status) in ended {
        let clean = subreaper && nothing_left(pid, steps);
        let _ = sock::send(
            sock.as_raw_fd(),
            &Msg::Ended { id, status, clean }.encode(),
            &[],
            true,
        );
    }
}

/// Whether nothing of the step led by `leader` is alive: its group is empty, and the
/// warden has no child but the leaders of steps still running (every process a step
/// started that outlived its parent was handed to the warden). An orphan of any step
/// makes this false for all: the engine then looks for what carries the step's mark.
fn nothing_left(leader: Pid, running: &HashMap<i32, Step>) -> bool {
    if killpg(leader, None) != Err(Errno::ESRCH) {
        return false;
    }
    let me = std::process::id();
    let Ok(children) = std::fs::read_to_string(format!("/proc/{me}/task/{me}/children")) else {
        return false;
    };
    children
        .split_whitespace()
        .all(|pid| pid.parse::<i32>().is_ok_and(|p| running.contains_key(&p)))
}

/// The engine is gone: every step, and every process carrying a step's mark, gets SIGTERM,
/// its grace period, then SIGKILL; then the warden exits.
fn end_all(steps: HashMap<i32, Step>) -> ! {
    // What ends is reaped at once rather than left to an init that may never reap it.
    std::thread::spawn(
        || {
            while !matches!(waitpid(None, None), Err(e) if e != Errno::EINTR) {}
        },
    );
    for pid in steps.keys() {
        let _ = killpg(Pid::from_raw(*pid), Signal::SIGTERM);
    }
    std::thread::scope(|scope| {
        for step in steps.values() {
            scope.spawn(|| match &step.mark {
                Some(mark) => end_marked_blocking(mark, step.grace),
                None => std::thread::sleep(step.grace),
            });
        }
    });
    for pid in steps.keys() {
        let _ = killpg(Pid::from_raw(*pid), Signal::SIGKILL);
    }
    std::process::exit(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both ways of starting a step (glibc's `posix_spawn` with a folder of its own, and
    /// `Command` where glibc is older) give the program one entry per name with the last
    /// value, its folder, its three descriptors and a process group of its own.
    #[test]
    fn both_ways_of_starting_a_step_give_it_the_same_start() {
        let dir = tempfile::tempdir().unwrap();
        let start = Start {
            id: 1,
            grace_ms: 0,
            program: "/bin/sh".into(),
            argv: vec![
                "sh".into(),
                "-c".into(),
                "pwd; env | grep -c '^TWICE='; printenv TWICE; cut -d' ' -f5 /proc/$$/stat; echo $$".into(),
            ],
            env: vec![
                "TWICE=first".into(),
                "PATH=/usr/bin:/bin".into(),
                "NOEQUALS".into(),
                "TWICE=last".into(),
            ],
            cwd: dir.path().into(),
        };
        let env = last_wins(&start.env);
        assert_eq!(
            env,
            [&OsString::from("PATH=/usr/bin:/bin"), &"TWICE=last".into()]
        );
        let run = |how: &str| {
            let (out_r, out_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
            let (err_r, err_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
            let input = OwnedFd::from(std::fs::File::open("/dev/null").unwrap());
            let stdio = [input, out_w, err_w];
            // The write ends close here once the child has its copies, so the read ends.
            let pid = match how {
                "posix_spawn" => {
                    let pid = posix_spawn(&start, &env, &stdio, add_chdir().unwrap());
                    drop(stdio);
                    pid
                }
                _ => command_spawn(&start, &env, stdio),
            };
            let Ok(pid) = pid else {
                panic!("{how} did not start")
            };
            let mut out = String::new();
            use std::io::Read;
            std::fs::File::from(out_r).read_to_string(&mut out).unwrap();
            drop(err_r);
            let _ = waitpid(Pid::from_raw(pid as i32), None);
            let lines: Vec<String> = out.lines().map(|l| l.trim().to_string()).collect();
            assert_eq!(
                lines[0],
                dir.path().canonicalize().unwrap().to_str().unwrap(),
                "{how}"
            );
            // `env` in a shell shows the shell's own table: one entry; the value is the last.
            assert_eq!(lines[1..3], ["1", "last"], "{how}");
            assert_eq!(lines[3], lines[4], "{how}: leads its own group: {lines:?}");
            assert_eq!(lines[4], pid.to_string(), "{how}");
        };
        run("posix_spawn");
        run("command");
    }
}
