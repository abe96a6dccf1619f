//! The `baton` binary: parse the command line and dispatch.

use baton::cli::{dispatch, exit};

fn main() {
    // Die quietly on a closed pipe (`baton list | head`), as command-line tools do.
    // SAFETY: called first thing, before any other thread exists.
    unsafe {
        let _ = nix::sys::signal::signal(
            nix::sys::signal::Signal::SIGPIPE,
            nix::sys::signal::SigHandler::SigDfl,
        );
    }
    // A step's guard (started by the engine, see `exec::guard`): no command line to parse.
    let mut args = std::env::args_os().skip(1);
    if args.next().is_some_and(|a| a == baton::exec::guard::ARG) {
        baton::exec::guard::main(args.collect());
    }
    baton::cli::complete_if_asked();
    let _ = color_eyre::install();
    // Usage errors exit 1 like every other error (2 means "waiting at a gate" for `run --wait`).
    let cli = match baton::cli::parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() {
                exit::ERROR
            } else {
                exit::OK
            };
            let _ = e.print();
            std::process::exit(code);
        }
    };
    // The board and the commands that run steps, agents, hooks or a server (or talk to a
    // database server) see a closed pipe or socket as an error (`EPIPE`) rather than die of
    // it: a model server that answered before it had read its whole prompt (an HTTP 413)
    // and closed ended the engine, and every step with it. The listing commands keep the
    // default action set above. Still one thread here; children get the default back
    // (std resets it when it spawns).
    if cli
        .command
        .as_ref()
        .is_none_or(baton::cli::Command::hosts_work)
    {
        // SAFETY: as above, before any other thread exists.
        unsafe {
            let _ = nix::sys::signal::signal(
                nix::sys::signal::Signal::SIGPIPE,
                nix::sys::signal::SigHandler::SigIgn,
            );
        }
    }
    let code = match cli.command {
        Some(command) => match dispatch(cli.dir.as_ref(), command) {
            Ok(code) => code,
            Err(failure) => {
                // Messages can quote task text and file contents.
                eprintln!("baton: {}", baton::ansi::strip(&failure.message));
                failure.code
            }
        },
        None => baton::tui::main(cli.dir.as_ref(), cli.demo),
    };
    std::process::exit(code);
}
