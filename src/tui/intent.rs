//! The TUI's vocabulary: every key resolves to one of these (see `keymap`), and the
//! reducer in `app` acts on them.

/// Something the user asked the UI to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Intent {
    Quit,
    Help,
    PrevTab,
    NextTab,
    Left,
    Right,
    Up,
    Down,
    /// Focus the detail pane (on the board) / open the selected option (in menus).
    Open,
    /// Close the top layer or go back to the board (a log search is cleared first).
    Back,
    /// Close the full-screen log at once.
    Close,
    NewTask,
    Start,
    Approve,
    Reject,
    /// `i`: say something to the task's agent.
    Say,
    /// `I`: answer the open questions of the task's agent.
    Answer,
    Move,
    Abort,
    Resume,
    Retry,
    Diff,
    /// The task's pipeline as a graph.
    Graph,
    FullLog,
    /// `/` on the board.
    Filter,
    /// `/` in a log.
    Search,
    NextMatch,
    PrevMatch,
    ToggleCollapse,
    ToggleWrap,
    /// Give up the selected interrupted task (to its cancelled status, for good).
    Dismiss,
    /// `b`: set or clear a breakpoint, chosen from a list.
    Breakpoint,
    /// `c`: continue a task paused at its breakpoint.
    Continue,
    /// `f`: re-run a finished task from a chosen status.
    Rerun,
    /// `e`: edit the title and prompt.
    Edit,
    /// `A`: archive a finished task.
    Archive,
    ScrollUp,
    ScrollDown,
    PageUp,
    PageDown,
    Top,
    Bottom,
    /// Forms: send.
    Submit,
    /// Forms: next / previous field.
    NextField,
    PrevField,
    /// `p`: the agent playground (try an agent once).
    Playground,
    /// Confirm popups.
    Yes,
    No,
    /// `o`: a shell in the task's worktree (a new tmux window inside tmux).
    Shell,
    /// `E`: `$EDITOR` in the task's worktree.
    Editor,
    /// `T`: take over: the agent's own UI on the task's session, in its worktree.
    TakeOver,
    /// `y`: copy the task's branch (OSC 52).
    CopyBranch,
    /// `Y`: copy the task's worktree path (OSC 52).
    CopyPath,
    /// A `[[command]]` of `keys.toml`, by its place in the file.
    Custom(u8),
    /// `1`…`9`: the pipeline tab of that number.
    Tab(u8),
}
