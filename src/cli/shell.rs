//! `baton completions SHELL` and `baton man`: generated from the argument definitions, so
//! they never drift from the commands.

use super::{Cli, Failure, Outcome, exit};
use clap::CommandFactory;
use std::io::Write;

/// `baton completions bash|zsh|fish|elvish|powershell`: the completion script on stdout.
pub fn completions(shell: clap_complete::Shell) -> Outcome {
    let mut cmd = Cli::command();
    let mut out = std::io::stdout().lock();
    clap_complete::generate(shell, &mut cmd, "baton", &mut out);
    out.flush()
        .map_err(|e| Failure::new(format!("cannot write the completions: {e}")))?;
    Ok(exit::OK)
}

/// `baton man`: the man page (roff) on stdout, listing every subcommand.
pub fn man() -> Outcome {
    // The NAME line already says "baton -", so the about line starts at its second word.
    let cmd = Cli::command().about(
        "a terminal kanban that runs software work through pipelines of AI agents and scripts",
    );
    let mut page = Vec::new();
    let fail = |e: std::io::Error| Failure::new(format!("cannot render the man page: {e}"));
    clap_mangen::Man::new(cmd).render(&mut page).map_err(fail)?;
    std::io::stdout()
        .write_all(&page)
        .map_err(|e| Failure::new(format!("cannot write the man page: {e}")))?;
    Ok(exit::OK)
}
