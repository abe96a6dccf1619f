//! The headless command line: argument definitions and dispatch.

/// `println!` for a command's output that does not panic once standard output has closed
/// (its reader went away: `| head`, a closed terminal): the line is dropped. The commands
/// that ignore SIGPIPE (see [`Command::hosts_work`]) would otherwise panic there.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

mod attach_cmd;
mod complete;
mod config_cmd;
mod console;
mod db_cmd;
mod engine_cmd;
mod engine_takeover;
mod engines_cmd;
mod executors_check;
pub mod forge_cmd;
mod help;
mod init_cmd;
mod talk;
mod task_edits;
/// The `--json` shapes, which the API answers with too.
pub(crate) use crate::engine::views as json;
mod people;
mod pipelines;
mod run_wait;
pub use people::TokenCmd;
mod serve;
mod shell;
mod shell_cmd;
mod show;
mod signals;
mod tasks;
mod try_cmd;
mod why;

use crate::engine::EngineError;
use crate::store::StoreError;
use crate::workspace::{Workspace, WorkspaceError};
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

/// Exit codes, as documented in `--help`.
pub mod exit {
    /// Success (for `run --wait`: the task ended done).
    pub const OK: i32 = 0;
    /// An error, or (for `run --wait`) the task ended anywhere but done or a gate.
    pub const ERROR: i32 = 1;
    /// `run --wait`: the task waits at a gate for a person.
    pub const WAITING: i32 = 2;
}

const AFTER_HELP: &str = "\
Exit codes: 0 success; 1 error (one plain sentence on stderr); for `run --wait`: 0 the task \
ended done, 2 it waits at a gate, 1 anything else.
With no command, baton opens the terminal UI.";

/// baton — a terminal kanban that runs work through pipelines of AI agents and scripts.
#[derive(Debug, Parser)]
#[command(name = "baton", version, after_help = AFTER_HELP)]
pub struct Cli {
    /// The workspace folder (default: the nearest parent holding `.baton/`).
    #[arg(long, global = true, env = "BATON_DIR", value_name = "D")]
    pub dir: Option<PathBuf>,
    /// Open the TUI on a throwaway demo workspace.
    #[arg(long)]
    pub demo: bool,
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create `.baton/` here (config, .gitignore, pipeline and agent folders, file schemas).
    Init {
        /// Also write planner, coder and reviewer profiles for one backend and a `feature`
        /// pipeline using them, then check them: claude, codex, opencode[=URL], openai[=URL].
        #[arg(long, value_name = "BACKEND")]
        agent: Option<String>,
    },
    /// Create a task; prints only its id.
    New {
        title: String,
        /// Pipeline id (default: the workspace's first own pipeline, else `quick_fix`).
        #[arg(long, short)]
        pipeline: Option<String>,
        /// The task's prompt (markdown); `-` reads it from stdin.
        #[arg(long)]
        prompt: Option<String>,
        /// Start it right away.
        #[arg(long)]
        start: bool,
        /// The branch its worktree starts from (default: the configured base branch).
        #[arg(long, value_name = "B")]
        branch: Option<String>,
        /// Tasks it waits for (`3,4`): it starts only once every one of them is done.
        #[arg(long, value_name = "IDS", value_delimiter = ',', value_parser = task_id)]
        after: Vec<i64>,
    },
    /// List tasks, newest first.
    List {
        #[arg(long)]
        status: Option<String>,
        #[arg(long)]
        pipeline: Option<String>,
        #[arg(long)]
        json: bool,
        /// Only the archived tasks (the other filters apply to them too).
        #[arg(long)]
        archived: bool,
        /// Only tasks you created or last moved (you: BATON_USER, else git's user.name).
        #[arg(long, conflicts_with = "by")]
        mine: bool,
        /// Only tasks NAME created or last moved.
        #[arg(long, value_name = "NAME")]
        by: Option<String>,
    },
    /// A task with its steps, handoffs and history.
    Show {
        id: i64,
        #[arg(long)]
        json: bool,
    },
    /// Start a task waiting in its backlog.
    Start(ActionArgs),
    /// Approve a task waiting at a gate.
    Approve(ActionArgs),
    /// Reject a task waiting at a gate (the note reaches the next step).
    Reject(ActionArgs),
    /// Abort a task: stop its step and move it to cancelled.
    Abort(ActionArgs),
    /// Re-run an interrupted or failed step as a new attempt and go on from there.
    Resume(ActionArgs),
    /// Start a new run from the first step.
    Retry(ActionArgs),
    /// Move a task to a status its pipeline allows from where it is.
    Move {
        id: i64,
        status: String,
        #[arg(long)]
        note: Option<String>,
    },
    /// Say something to a task's agent: its running step hears it where the agent takes
    /// input mid-run (else it waits for the next step); a task that waits or failed
    /// continues its agent's last session with it, as a new attempt.
    Say {
        id: i64,
        /// What to say; `-` reads it from stdin.
        text: String,
    },
    /// Answer the open questions of an agent that ended with `needs_info`: asked one by
    /// one on the terminal, or given with --json; the task goes back to the status that
    /// asked.
    Answer {
        id: i64,
        /// `{"answers": ["…", …]}`, one per question in order; `-` reads it from stdin.
        #[arg(long)]
        json: Option<String>,
    },
    /// Pause a task before the step of STATUS.
    Break { id: i64, status: String },
    /// Clear a task's breakpoint and run the paused step.
    Continue { id: i64 },
    /// The task's changes: its branch against the base, plus uncommitted work.
    Diff {
        id: i64,
        /// Colour the diff (default: when stdout is a terminal and NO_COLOR is unset).
        #[arg(long)]
        color: bool,
    },
    /// Open a shell in a task's worktree (inside tmux: a new window there).
    Shell {
        id: i64,
        /// Inside tmux too, run the shell in this pane.
        #[arg(long)]
        here: bool,
    },
    /// Take a task over in the agent's own UI, on its last session in its worktree (inside
    /// tmux: a new window); when you quit it, its changes are committed to the task branch.
    Attach {
        id: i64,
        /// Inside tmux too, run it in this pane.
        #[arg(long)]
        here: bool,
        /// Wake `tmux wait-for CHANNEL` once the takeover is recorded (the board's `T`).
        #[arg(long, hide = true, value_name = "CHANNEL")]
        signal: Option<String>,
        /// Started by the board: wait for Enter after a failure, so it can be read.
        #[arg(long, hide = true)]
        board: bool,
        /// Wait for Enter before ending (a tmux window closes with its program).
        #[arg(long, hide = true)]
        hold: bool,
    },
    /// Print a step's log (default: the latest step).
    Logs {
        id: i64,
        /// The step's position in `baton show` (1 = first).
        #[arg(long)]
        step: Option<usize>,
        /// Keep printing new lines until the step ends.
        #[arg(long, short)]
        follow: bool,
    },
    /// Create and start a task on PIPELINE.
    Run {
        /// Pipeline id (`baton pipelines list` shows them).
        pipeline: String,
        /// The task's title: one line saying what to do.
        #[arg(long)]
        title: String,
        /// The task's prompt (markdown); `-` reads it from stdin.
        #[arg(long)]
        prompt: Option<String>,
        /// Wait until the task is done, at a gate, or stopped (runs an engine if none runs).
        #[arg(long)]
        wait: bool,
        /// Print the task as `baton show --json` does.
        #[arg(long)]
        json: bool,
    },
    /// Run the engine headless (for tmux/systemd); SIGTERM/SIGINT stop it gracefully.
    Engine {
        /// Stop once nothing runs or is queued.
        #[arg(long)]
        exit_when_idle: bool,
        /// Print only problems, on stderr (a failed step's move, a failed hook, the running
        /// steps a stop waits for or interrupts): no line saying the engine runs, none per
        /// move and step result, nothing on stdout.
        #[arg(long, short)]
        quiet: bool,
        /// Its name on the board (default: `[engine] name`, else the host name).
        #[arg(long, value_name = "NAME")]
        name: Option<String>,
        /// Its labels, comma-separated lowercase words: it starts only steps whose
        /// `requires` it has all of (default: `[engine] labels`).
        #[arg(long, value_name = "A,B")]
        labels: Option<String>,
    },
    /// The engines registered on the board: name, host, labels, steps running, last seen.
    Engines {
        #[arg(long)]
        json: bool,
    },
    /// Pipeline definitions.
    #[command(subcommand)]
    Pipelines(PipelinesCmd),
    /// Agent profiles.
    #[command(subcommand)]
    Agents(AgentsCmd),
    /// Give up an interrupted task: it moves to its cancelled status.
    Dismiss {
        id: i64,
        /// The reason, kept in the history.
        #[arg(long)]
        note: Option<String>,
    },
    /// Re-run a finished, failed or cancelled task from STATUS (a new run; the steps
    /// before it and their handoffs are kept).
    Rerun {
        id: i64,
        #[arg(long, value_name = "STATUS")]
        from: String,
        /// Pause before this status's step.
        #[arg(long = "break", value_name = "STATUS")]
        brk: Option<String>,
    },
    /// Change the title or prompt of a task that is not running.
    Edit {
        id: i64,
        #[arg(long)]
        title: Option<String>,
        /// The new prompt; `-` reads it from stdin.
        #[arg(long)]
        prompt: Option<String>,
    },
    /// Hide a finished task from the board and `list` (`list --archived` shows it).
    Archive { id: i64 },
    /// Bring an archived task back to the board and `list`.
    Unarchive { id: i64 },
    /// Delete a task that is not running; its worktree and branch stay unless --purge.
    Delete {
        id: i64,
        /// Remove its worktree and branch too.
        #[arg(long)]
        purge: bool,
    },
    /// An MCP server on stdin/stdout, for coding agents (docs/api.md).
    Mcp,
    /// The HTTP API, event stream, webhooks and MCP at /mcp; token in .baton/token.
    Serve {
        /// Where to listen.
        #[arg(long, default_value = "127.0.0.1:7077", value_name = "ADDR:PORT")]
        listen: String,
    },
    /// API tokens: the workspace's, and one per person.
    #[command(subcommand)]
    Token(TokenCmd),
    /// The board's database: status, migrate, export, import, backup, verify.
    #[command(subcommand)]
    Db(db_cmd::DbCmd),
    /// The forge pull requests go to (`[forge]` in config.toml).
    #[command(subcommand)]
    Forge(forge_cmd::ForgeCmd),
    /// Print a shell completion script: `baton completions bash > ~/.local/share/bash-completion/completions/baton`.
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff): `baton man > ~/.local/share/man/man1/baton.1`.
    Man,
    /// Run one agent once in a scratch worktree (the playground): its log, handoff and diff;
    /// nothing reaches the board.
    Try(try_cmd::TryArgs),
    /// The configuration: user file layered under the workspace's.
    #[command(subcommand)]
    Config(config_cmd::ConfigCmd),
}

impl Command {
    /// Runs steps, agents, hooks or a server in this process, or talks to a database server:
    /// a step, a client, a model server or the database closing its end of a pipe or socket
    /// early must not end the process (see `main`). The rest only print (`baton list |
    /// head` ends quietly). Every command says which it is: a new one must choose.
    pub fn hosts_work(&self) -> bool {
        match self {
            // An engine, the API, the board's takeover and talks with agents.
            Command::Engine { .. }
            | Command::Run { .. }
            | Command::Serve { .. }
            | Command::Mcp
            | Command::Try(_)
            | Command::Say { .. }
            | Command::Answer { .. }
            | Command::Attach { .. }
            | Command::Shell { .. } => true,
            // With no engine running, these apply through the engine's code here, hooks
            // and webhooks included; the database and the forge are servers too.
            Command::New { .. }
            | Command::Start(_)
            | Command::Approve(_)
            | Command::Reject(_)
            | Command::Abort(_)
            | Command::Resume(_)
            | Command::Retry(_)
            | Command::Move { .. }
            | Command::Break { .. }
            | Command::Continue { .. }
            | Command::Dismiss { .. }
            | Command::Rerun { .. }
            | Command::Edit { .. }
            | Command::Archive { .. }
            | Command::Unarchive { .. }
            | Command::Delete { .. }
            | Command::Db(_)
            | Command::Forge(_) => true,
            Command::Init { .. }
            | Command::List { .. }
            | Command::Show { .. }
            | Command::Diff { .. }
            | Command::Logs { .. }
            | Command::Engines { .. }
            | Command::Pipelines(_)
            | Command::Agents(_)
            | Command::Token(_)
            | Command::Completions { .. }
            | Command::Man
            | Command::Config(_) => false,
        }
    }
}

/// `start|approve|reject|abort|resume|retry ID [--note TEXT]`.
#[derive(Debug, Args)]
pub struct ActionArgs {
    pub id: i64,
    /// A note kept in the history and handed to the next step.
    #[arg(long)]
    pub note: Option<String>,
}

/// `baton pipelines …`.
#[derive(Debug, Subcommand)]
pub enum PipelinesCmd {
    /// Every pipeline (built-in and the workspace's).
    List,
    /// One pipeline's statuses and transitions.
    Show { id: String },
    /// Check pipeline files (default: the workspace's); exits 1 on any error.
    Validate { files: Vec<PathBuf> },
    /// The state machine as a Graphviz dot graph (`--text`: drawn for the terminal).
    Graph {
        id: String,
        /// Draw it as text, as the board's `g` does, instead of Graphviz.
        #[arg(long)]
        text: bool,
    },
}

/// `baton agents …`.
#[derive(Debug, Subcommand)]
pub enum AgentsCmd {
    /// Every agent profile.
    List,
    /// Whether each profile's backend answers.
    Check,
}

/// An error for people: the sentence to print and the exit code.
#[derive(Debug)]
pub struct Failure {
    pub message: String,
    pub code: i32,
}

impl Failure {
    /// A plain error with exit code 1.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            code: exit::ERROR,
        }
    }
}

impl From<EngineError> for Failure {
    fn from(e: EngineError) -> Self {
        Self::new(e.to_string())
    }
}
impl From<StoreError> for Failure {
    fn from(e: StoreError) -> Self {
        Self::new(e.to_string())
    }
}
impl From<WorkspaceError> for Failure {
    fn from(e: WorkspaceError) -> Self {
        Self::new(e.to_string())
    }
}

/// What a command returns: an exit code, or a failure to report.
pub type Outcome = Result<i32, Failure>;

/// The command line as clap sees it: the commands grouped in `--help`, task and pipeline
/// ids completed from the workspace (`COMPLETE=bash baton`).
pub fn command() -> clap::Command {
    use clap::CommandFactory;
    help::grouped(complete::with_candidates(Cli::command()))
}

/// Answers a shell's completion request (`COMPLETE=<shell>` in the environment) and exits;
/// does nothing otherwise.
pub fn complete_if_asked() {
    clap_complete::CompleteEnv::with_factory(command)
        .bin("baton")
        .complete();
}

/// Parses the command line. Help is rendered through [`command`]; a command that runs is
/// parsed without building the grouped list of commands (which walks every command).
pub fn parse() -> Result<Cli, clap::Error> {
    use clap::error::ErrorKind;
    use clap::{CommandFactory, FromArgMatches};
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let mut cmd = Cli::command();
    let matches = match cmd.try_get_matches_from_mut(&args) {
        Ok(m) => m,
        Err(e)
            if matches!(
                e.kind(),
                ErrorKind::DisplayHelp | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            ) =>
        {
            return Err(command().try_get_matches_from_mut(&args).err().unwrap_or(e));
        }
        Err(e) => return Err(e),
    };
    Cli::from_arg_matches(&matches).map_err(|e| e.format(&mut cmd))
}

/// Finds the workspace: `--dir`/`BATON_DIR`, else walking up from the cwd.
pub fn workspace(dir: Option<&PathBuf>) -> Result<Workspace, Failure> {
    Workspace::find(dir.map(PathBuf::as_path)).map_err(Failure::new)
}

/// Where the workspace's board lives: `BATON_DATABASE_URL`, else `[store] store` in the
/// config files, else `.baton/baton.db`.
pub fn store_location(ws: &Workspace) -> Result<crate::store::Location, Failure> {
    let setting = crate::workspace::store_setting(
        &ws.config_path(),
        crate::workspace::layered::user_config_path().as_deref(),
    )?;
    let env = std::env::var("BATON_DATABASE_URL").ok();
    crate::store::Location::resolve(
        &ws.db_path(),
        env.as_deref(),
        setting.as_ref().map(|(u, f)| (u.as_str(), f.as_path())),
    )
    .map_err(Failure::new)
}

/// A task id as written in a list (`3, 4` as well as `3,4`).
fn task_id(text: &str) -> Result<i64, String> {
    let t = text.trim();
    match t.parse::<i64>() {
        Ok(id) if id > 0 => Ok(id),
        _ if t.is_empty() => Err("an empty entry is not a task id; give ids like 3,4".into()),
        _ => Err(format!("`{t}` is not a task id; give ids like 3,4")),
    }
}

/// Runs a headless subcommand.
pub fn dispatch(dir: Option<&PathBuf>, command: Command) -> Outcome {
    match command {
        Command::Init { agent } => tasks::init(dir, agent.as_deref()),
        Command::Pipelines(cmd) => pipelines::run(dir, cmd),
        Command::Agents(cmd) => pipelines::agents(dir, cmd),
        Command::Completions { shell } => shell::completions(shell),
        Command::Man => shell::man(),
        Command::Config(cmd) => config_cmd::run(dir, cmd),
        Command::Try(args) => try_cmd::run(dir, args),
        Command::Engine {
            exit_when_idle,
            quiet,
            name,
            labels,
        } => engine_cmd::run(
            &workspace(dir)?,
            exit_when_idle,
            quiet,
            (name.as_deref(), labels.as_deref()),
        ),
        Command::Engines { json } => engines_cmd::list(&workspace(dir)?, json),
        c @ (Command::Dismiss { .. }
        | Command::Rerun { .. }
        | Command::Edit { .. }
        | Command::Archive { .. }
        | Command::Unarchive { .. }
        | Command::Delete { .. }) => task_edits::run(&workspace(dir)?, c),
        c @ (Command::Say { .. } | Command::Answer { .. }) => talk::run(&workspace(dir)?, c),
        Command::Shell { id, here } => shell_cmd::run(&workspace(dir)?, id, here),
        Command::Attach {
            id,
            here,
            signal,
            board,
            hold,
        } => attach_cmd::run(
            &workspace(dir)?,
            attach_cmd::AttachArgs {
                id,
                here,
                signal,
                board,
                hold,
            },
        ),
        Command::Mcp => serve::mcp(&workspace(dir)?),
        Command::Serve { listen } => serve::serve(&workspace(dir)?, &listen),
        Command::Token(cmd) => people::token(&workspace(dir)?, cmd),
        Command::Db(cmd) => db_cmd::run(&workspace(dir)?, cmd),
        Command::Forge(cmd) => forge_cmd::run(dir, cmd),
        other => tasks::run(&workspace(dir)?, other),
    }
}
