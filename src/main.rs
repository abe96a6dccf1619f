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
