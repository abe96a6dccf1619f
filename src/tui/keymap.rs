//! Keys as data: each binding names a context, a key, an [`Intent`] and a description.
//! Key handling looks bindings up here and the `?` screen is generated from the same table,
//! so help cannot drift from the keys.

use super::intent::Intent;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// Where a binding applies. Lookups try the contexts of the current focus in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ctx {
    /// Everywhere outside forms and popups.
    Global,
    /// The board has focus.
    Board,
    /// Acts on the selected task (board or detail).
    Task,
    /// The detail pane has focus.
    Detail,
    /// Log scrolling (detail pane and full-screen log).
    Log,
    /// Forms (new task, reject note).
    Form,
    /// Menus and confirmations.
    Popup,
}

impl Ctx {
    /// Section title in the help screen.
    pub fn title(self) -> &'static str {
        match self {
            Ctx::Global => "Anywhere",
            Ctx::Board => "Board",
            Ctx::Task => "Selected task",
            Ctx::Detail => "Detail pane",
            Ctx::Log => "Log (detail pane and L)",
            Ctx::Form => "Forms",
            Ctx::Popup => "Menus and confirmations",
        }
    }
}

/// One key binding.
#[derive(Debug, Clone, Copy)]
pub struct Binding {
    pub ctx: Ctx,
    pub code: KeyCode,
    pub mods: KeyModifiers,
    pub action: Intent,
    pub desc: &'static str,
}

const fn k(ctx: Ctx, code: KeyCode, action: Intent, desc: &'static str) -> Binding {
    Binding {
        ctx,
        code,
        mods: KeyModifiers::NONE,
        action,
        desc,
    }
}

const fn c(ctx: Ctx, ch: char, action: Intent, desc: &'static str) -> Binding {
    k(ctx, KeyCode::Char(ch), action, desc)
}

const fn ctrl(ctx: Ctx, ch: char, action: Intent, desc: &'static str) -> Binding {
    Binding {
        ctx,
        code: KeyCode::Char(ch),
        mods: KeyModifiers::CONTROL,
        action,
        desc,
    }
}

use Ctx::*;
use Intent as A;

/// Every binding, in help order.
pub static BINDINGS: &[Binding] = &[
    c(Global, '?', A::Help, "help (this screen)"),
    c(Global, 'q', A::Quit, "quit (asks first while steps run)"),
    ctrl(Global, 'c', A::Quit, "quit"),
    c(Global, 'n', A::NewTask, "new task"),
    c(Global, 'p', A::Playground, "playground: try an agent once"),
    c(Global, '[', A::PrevTab, "previous pipeline"),
    c(Global, ']', A::NextTab, "next pipeline"),
    c(
        Global,
        'z',
        A::ToggleCollapse,
        "collapse done/failed/cancelled",
    ),
    c(Global, '1', A::Tab(1), "pipeline tab by its number"),
    c(Global, '2', A::Tab(2), "pipeline tab by its number"),
    c(Global, '3', A::Tab(3), "pipeline tab by its number"),
    c(Global, '4', A::Tab(4), "pipeline tab by its number"),
    c(Global, '5', A::Tab(5), "pipeline tab by its number"),
    c(Global, '6', A::Tab(6), "pipeline tab by its number"),
    c(Global, '7', A::Tab(7), "pipeline tab by its number"),
    c(Global, '8', A::Tab(8), "pipeline tab by its number"),
    c(Global, '9', A::Tab(9), "pipeline tab by its number"),
    c(Board, 'h', A::Left, "column left"),
    k(Board, KeyCode::Left, A::Left, "column left"),
    c(Board, 'l', A::Right, "column right"),
    k(Board, KeyCode::Right, A::Right, "column right"),
    c(Board, 'k', A::Up, "card up"),
    k(Board, KeyCode::Up, A::Up, "card up"),
    c(Board, 'j', A::Down, "card down"),
    k(Board, KeyCode::Down, A::Down, "card down"),
    k(
        Board,
        KeyCode::Enter,
        A::Open,
        "open the task (focus its detail)",
    ),
    c(Board, '/', A::Filter, "filter cards"),
    k(Board, KeyCode::Esc, A::Back, "clear the filter"),
    c(Task, 's', A::Start, "start"),
    c(Task, 'a', A::Approve, "approve"),
    c(Task, 'r', A::Reject, "reject (with a note)"),
    c(Task, 'i', A::Say, "say something to the agent"),
    c(Task, 'I', A::Answer, "answer the agent's open questions"),
    c(Task, 'm', A::Move, "move to another status"),
    c(Task, 'x', A::Abort, "abort (asks first)"),
    c(Task, 'R', A::Resume, "resume an interrupted or failed step"),
    c(Task, 'F', A::Retry, "retry from scratch"),
    c(Task, 'd', A::Dismiss, "dismiss an interrupted task"),
    c(Task, 'b', A::Breakpoint, "set or clear a breakpoint"),
    c(Task, 'c', A::Continue, "continue past the breakpoint"),
    c(Task, 'f', A::Rerun, "re-run a finished task from a status"),
    c(Task, 'e', A::Edit, "edit title and prompt"),
    c(Task, 'A', A::Archive, "archive a finished task"),
    c(Task, 'D', A::Diff, "diff of the task's worktree"),
    c(
        Task,
        'o',
        A::Shell,
        "shell in the task's worktree (in tmux: a new window)",
    ),
    c(Task, 'E', A::Editor, "$EDITOR in the task's worktree"),
    c(Task, 'T', A::TakeOver, "take over: the agent's own UI"),
    c(Task, 'y', A::CopyBranch, "copy the task's branch"),
    c(Task, 'Y', A::CopyPath, "copy the task's worktree path"),
    c(Task, 'L', A::FullLog, "full-screen log"),
    c(
        Task,
        'g',
        A::Graph,
        "the task's pipeline as a graph (board)",
    ),
    c(Detail, 'k', A::Up, "previous step"),
    k(Detail, KeyCode::Up, A::Up, "previous step"),
    c(Detail, 'j', A::Down, "next step"),
    k(Detail, KeyCode::Down, A::Down, "next step"),
    k(
        Detail,
        KeyCode::Esc,
        A::Back,
        "clear search, else to the board",
    ),
    c(Detail, 'h', A::Back, "clear search, else to the board"),
    k(
        Detail,
        KeyCode::Left,
        A::Back,
        "clear search, else to the board",
    ),
    c(Log, 'K', A::ScrollUp, "scroll up (pauses follow)"),
    c(Log, 'J', A::ScrollDown, "scroll down"),
    k(Log, KeyCode::PageUp, A::PageUp, "page up"),
    ctrl(Log, 'u', A::PageUp, "page up"),
    k(Log, KeyCode::PageDown, A::PageDown, "page down"),
    ctrl(Log, 'd', A::PageDown, "page down"),
    c(Log, 'g', A::Top, "oldest line"),
    c(Log, 'G', A::Bottom, "newest line, follow"),
    c(Log, '/', A::Search, "search"),
    c(Log, 'N', A::PrevMatch, "previous match"),
    c(Log, 'w', A::ToggleWrap, "wrap long lines"),
    ctrl(Form, 's', A::Submit, "submit"),
    k(Form, KeyCode::Tab, A::NextField, "next field"),
    k(Form, KeyCode::BackTab, A::PrevField, "previous field"),
    k(
        Form,
        KeyCode::Esc,
        A::Back,
        "cancel (new task/edit: asks first)",
    ),
    k(Popup, KeyCode::Up, A::Up, "previous option"),
    c(Popup, 'k', A::Up, "previous option"),
    k(Popup, KeyCode::Down, A::Down, "next option"),
    c(Popup, 'j', A::Down, "next option"),
    k(Popup, KeyCode::Enter, A::Open, "choose"),
    c(Popup, 'y', A::Yes, "yes"),
    c(Popup, 'n', A::No, "no"),
    k(Popup, KeyCode::Esc, A::Back, "close"),
];

/// The bindings in force: [`BINDINGS`] with the user's `keys.toml` applied (`keys_file`).
static ACTIVE: std::sync::OnceLock<Vec<Binding>> = std::sync::OnceLock::new();

/// The bindings in force ([`BINDINGS`] until [`install`] is called).
pub fn active() -> &'static [Binding] {
    ACTIVE.get().map_or(BINDINGS, Vec::as_slice)
}

/// Puts `table` in force for the rest of the process; false if one already was.
pub fn install(table: Vec<Binding>) -> bool {
    ACTIVE.set(table).is_ok()
}

/// [`BINDINGS`] means the bindings in force; any other table is itself.
fn resolve(table: &[Binding]) -> &[Binding] {
    if std::ptr::eq(table, BINDINGS) {
        active()
    } else {
        table
    }
}

/// Bindings for keys that only exist in the full-screen log (plain j/k scroll there).
pub const FULL_LOG: &[Binding] = &[
    c(Log, 'k', A::ScrollUp, "scroll up"),
    k(Log, KeyCode::Up, A::ScrollUp, "scroll up"),
    c(Log, 'j', A::ScrollDown, "scroll down"),
    k(Log, KeyCode::Down, A::ScrollDown, "scroll down"),
    c(Log, 'n', A::NextMatch, "next match (in L)"),
    k(Log, KeyCode::Esc, A::Back, "clear search, else close"),
    c(Log, 'L', A::Close, "close"),
    c(Log, 'q', A::Close, "close"),
];

/// A hint in a bar of keys: the actions whose keys it names, and a word or two.
#[derive(Debug, Clone, Copy)]
pub struct Hint {
    pub actions: &'static [Intent],
    pub label: &'static str,
    /// Hints with a lower rank are dropped first when the bar is too narrow.
    pub rank: u8,
}

const fn h(actions: &'static [Intent], label: &'static str, rank: u8) -> Hint {
    Hint {
        actions,
        label,
        rank,
    }
}

const BOARD_HINTS: &[Hint] = &[
    h(&[A::Open], "open", 3),
    h(&[A::NewTask], "new", 3),
    h(&[A::Start], "start", 2),
    h(&[A::Approve], "approve", 2),
    h(&[A::Move], "move", 1),
    h(&[A::Filter], "filter", 1),
    // Shown only while terminal columns are collapsed.
    h(&[A::ToggleCollapse], "expand", 2),
    h(&[A::Help], "help", 4),
    h(&[A::Quit], "quit", 4),
];

const DETAIL_HINTS: &[Hint] = &[
    h(&[A::Down, A::Up], "step", 3),
    h(&[A::ScrollDown, A::ScrollUp], "scroll", 3),
    h(&[A::Bottom], "follow", 1),
    h(&[A::Search], "search", 2),
    h(&[A::ToggleWrap], "wrap", 1),
    h(&[A::FullLog], "full log", 2),
    h(&[A::Back], "board", 3),
    h(&[A::Help], "help", 4),
];

const FULL_LOG_HINTS: &[Hint] = &[
    h(&[A::ScrollDown, A::ScrollUp], "scroll", 3),
    h(&[A::Bottom], "follow", 2),
    h(&[A::Search], "search", 2),
    h(&[A::NextMatch, A::PrevMatch], "match", 1),
    h(&[A::ToggleWrap], "wrap", 1),
    h(&[A::Back], "close", 4),
];

/// The screens a bar of hints is shown for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bar {
    Board,
    /// The board, its selected task interrupted.
    Interrupted,
    /// The board, its selected task paused at a breakpoint.
    Paused,
    /// The board, its selected task done, failed or cancelled.
    Finished,
    /// The board, its selected task waiting at a gate for approval.
    Gate,
    Detail,
    FullLog,
}

impl Bar {
    /// The hints of this bar, in display order.
    pub fn hints(self) -> &'static [Hint] {
        match self {
            Bar::Board => BOARD_HINTS,
            Bar::Interrupted => super::task_menus::INTERRUPTED_HINTS,
            Bar::Paused => super::task_menus::PAUSED_HINTS,
            Bar::Finished => super::task_menus::FINISHED_HINTS,
            Bar::Gate => super::task_menus::GATE_HINTS,
            Bar::Detail => DETAIL_HINTS,
            Bar::FullLog => FULL_LOG_HINTS,
        }
    }

    /// Where this bar's keys are looked up, in the order key handling tries them.
    fn lookup(self) -> (&'static [Binding], &'static [Ctx]) {
        match self {
            Bar::Board | Bar::Interrupted | Bar::Paused | Bar::Finished | Bar::Gate => {
                (BINDINGS, &[Board, Task, Global])
            }
            Bar::Detail => (BINDINGS, &[Log, Detail, Task, Global]),
            Bar::FullLog => (FULL_LOG, &[Log]),
        }
    }

    /// The first key that does `action` on this screen (not an arrow when there is another,
    /// so `j` rather than `↓`), as the help screen names it.
    pub fn key_for(self, action: Intent) -> Option<String> {
        let (table, ctxs) = self.lookup();
        // The full-screen log falls back to the log and task keys of the main table.
        let fallback: &[Ctx] = if self == Bar::FullLog {
            &[Log, Task]
        } else {
            &[]
        };
        let candidates = |table: &'static [Binding], ctxs: &'static [Ctx]| {
            ctxs.iter().flat_map(move |ctx| {
                resolve(table)
                    .iter()
                    .filter(move |b| b.ctx == *ctx && b.action == action)
            })
        };
        let all: Vec<&Binding> = candidates(table, ctxs)
            .chain(candidates(BINDINGS, fallback))
            .collect();
        // Only a binding that key handling would reach for this key counts.
        let reachable = |b: &&&Binding| {
            let key = KeyEvent::new(b.code, b.mods);
            let found = lookup(table, ctxs, &key).or_else(|| lookup(BINDINGS, fallback, &key));
            found == Some(action)
        };
        all.iter()
            .filter(reachable)
            .find(|b| {
                !matches!(
                    b.code,
                    KeyCode::Up | KeyCode::Down | KeyCode::Left | KeyCode::Right
                )
            })
            .or_else(|| all.iter().find(reachable))
            .map(|b| key_name(b))
    }

    /// The bar's hints with their keys, joined with `/` (`j/k`).
    pub fn rows(self) -> Vec<(String, &'static Hint)> {
        self.hints()
            .iter()
            .filter_map(|hint| {
                let keys: Option<Vec<String>> =
                    hint.actions.iter().map(|a| self.key_for(*a)).collect();
                Some((keys?.join("/"), hint))
            })
            .collect()
    }
}

fn matches(b: &Binding, key: &KeyEvent) -> bool {
    // Shifted letters arrive as the upper-case char, with or without SHIFT set.
    let mods = key.modifiers - KeyModifiers::SHIFT;
    let want = b.mods - KeyModifiers::SHIFT;
    key.code == b.code && mods == want
}

/// The action bound to `key` in the first of `ctxs` that binds it.
pub fn lookup(table: &[Binding], ctxs: &[Ctx], key: &KeyEvent) -> Option<Intent> {
    let table = resolve(table);
    ctxs.iter().find_map(|ctx| {
        table
            .iter()
            .find(|b| b.ctx == *ctx && matches(b, key))
            .map(|b| b.action)
    })
}

/// A key's name as the help screen shows it.
pub fn key_name(b: &Binding) -> String {
    let base = match b.code {
        KeyCode::Char(' ') => "space".to_string(),
        KeyCode::Char(ch) => ch.to_string(),
        KeyCode::Enter => "enter".into(),
        KeyCode::Esc => "esc".into(),
        KeyCode::Tab => "tab".into(),
        KeyCode::BackTab => "shift+tab".into(),
        KeyCode::Left => "←".into(),
        KeyCode::Right => "→".into(),
        KeyCode::Up => "↑".into(),
        KeyCode::Down => "↓".into(),
        KeyCode::PageUp => "pgup".into(),
        KeyCode::PageDown => "pgdn".into(),
        other => format!("{other:?}").to_lowercase(),
    };
    if b.mods.contains(KeyModifiers::CONTROL) {
        format!("ctrl+{base}")
    } else {
        base
    }
}

/// Help rows: for each context, `(keys, description)` with the keys of one action merged.
pub fn help_sections() -> Vec<(Ctx, Vec<(String, &'static str)>)> {
    help_sections_for(active())
}

/// The `?` screen's sections for the bindings `table`.
pub fn help_sections_for(table: &[Binding]) -> Vec<(Ctx, Vec<(String, &'static str)>)> {
    let mut out: Vec<(Ctx, Vec<(String, &'static str)>)> = Vec::new();
    let mut seen: Vec<(Ctx, Intent)> = Vec::new();
    // The number keys share one row.
    let row_of = |a: Intent| match a {
        A::Tab(_) => A::Tab(0),
        a => a,
    };
    for b in table
        .iter()
        .chain(FULL_LOG.iter().filter(|b| b.action == A::NextMatch))
    {
        if seen.contains(&(b.ctx, row_of(b.action))) {
            continue;
        }
        seen.push((b.ctx, row_of(b.action)));
        let keys: Vec<String> = table
            .iter()
            .chain(FULL_LOG.iter().filter(|b| b.action == A::NextMatch))
            .filter(|o| o.ctx == b.ctx && row_of(o.action) == row_of(b.action))
            .map(key_name)
            .collect();
        // The nine number keys read as one range.
        let keys = match b.action {
            A::Tab(_) if keys.len() > 2 => format!("{}…{}", keys[0], keys[keys.len() - 1]),
            _ => keys.join(" "),
        };
        let row = (keys, b.desc);
        match out.iter_mut().find(|(c, _)| *c == b.ctx) {
            Some((_, rows)) => rows.push(row),
            None => out.push((b.ctx, vec![row])),
        }
    }
    out
}

#[cfg(test)]
#[path = "keymap_tests.rs"]
mod tests;
