//! The `baton` binary: parse the command line and dispatch.

use baton::cli::{Cli, dispatch, exit};
use clap::Parser;

fn main() {
    let _ = color_eyre::install();
    let cli = Cli::parse();
    let code = match cli.command {
        Some(command) => match dispatch(cli.dir.as_ref(), command) {
            Ok(code) => code,
            Err(failure) => {
                eprintln!("baton: {}", failure.message);
                failure.code
            }
        },
        None => {
            eprintln!("baton: the terminal UI is not built yet — see `baton --help` for the headless commands");
            exit::ERROR
        }
    };
    std::process::exit(code);
}
