//! `docs/keymap.md`, generated from the keymap tables so the document cannot drift from the
//! keys (`tests/docs.rs` checks it; `BATON_BLESS=1 cargo test --test docs` rewrites it).

use super::keymap::{BINDINGS, FULL_LOG, help_sections_for, key_name};
use super::keys_file::action_names;

/// The whole of `docs/keymap.md`.
pub fn markdown() -> String {
    let mut md = String::from(
        "# Keymap\n\n\
         <!-- Generated from src/tui/keymap.rs: run `BATON_BLESS=1 cargo test --test docs` after \
         changing a key; do not edit by hand. -->\n\n\
         The board's keys, as the `?` screen lists them. Keys follow lazygit and k9s habits. \
         A key is looked up in the sections that apply where the focus is, most specific first: \
         on the board *Board*, *Selected task*, *Anywhere*; in the detail pane *Log*, *Detail \
         pane*, *Selected task*, *Anywhere*. Forms and menus take their own keys first.\n",
    );
    for (ctx, rows) in help_sections_for(BINDINGS) {
        md.push_str(&format!(
            "\n## {}\n\n| key | does |\n|---|---|\n",
            ctx.title()
        ));
        for (keys, desc) in rows {
            md.push_str(&format!("| {} | {desc} |\n", code_list(&keys)));
        }
    }
    md.push_str("\n## Full-screen log (`L`)\n\nBesides the *Log* keys above:\n\n| key | does |\n|---|---|\n");
    for b in FULL_LOG {
        md.push_str(&format!("| `{}` | {} |\n", key_name(b), b.desc));
    }
    md.push_str(
        "\n## Rebinding keys: `keys.toml`\n\n\
         Put `keys.toml` in your config folder (`$XDG_CONFIG_HOME/baton/keys.toml`, else \
         `~/.config/baton/keys.toml`) for every workspace, or in a workspace's `.baton/keys.toml` \
         (applied after yours, so it wins). Each line gives an action its key or keys:\n\n\
         ```toml\napprove = \"A\"\nquit = [\"q\", \"ctrl+q\"]\nfull_log = \"f2\"\n```\n\n\
         The action keeps its places and description and loses its default keys. If another \
         action had that key in the same place, it loses it, and the board says so in its \
         status line when it opens; so do unknown actions and keys it cannot read (they are \
         ignored, the board opens anyway). The `?` screen shows the keys in force. Keys are \
         written `a`, `A`, `ctrl+x`, `enter`, `esc`, `tab`, `shift+tab`, `space`, `up`, `down`, \
         `left`, `right`, `pgup`, `pgdn`, `home`, `end`, `f1`…`f12`. The full-screen log's own \
         keys above are not rebound.\n\n\
         | action | default keys |\n|---|---|\n",
    );
    for (name, action) in action_names() {
        let mut keys: Vec<String> = Vec::new();
        for b in BINDINGS.iter().filter(|b| b.action == action) {
            let k = key_name(b);
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
        md.push_str(&format!("| `{name}` | {} |\n", code_list(&keys.join(" "))));
    }
    md.push_str(COMMANDS);
    md
}

/// `[[command]]` and `[board]` in `keys.toml`.
const COMMANDS: &str = r#"
## From a card to its code

`o` opens a shell (`$SHELL`) in the selected task's worktree: inside tmux in a new window
there (`tmux new-window -c`), elsewhere in the foreground with the board suspended until the
shell exits. `E` opens `$VISUAL` (else `$EDITOR`, else `vi`) on the worktree, the board
suspended. `baton shell ID` does what `o` does from the command line (`--here` keeps it in
the current tmux pane). `y` and `Y` copy the task's branch and worktree path to the
clipboard with OSC 52 (inside tmux through its passthrough, which needs
`set -g allow-passthrough on`); only those words are ever copied, never step output.

`T` takes the task over: the agent's own interactive UI (`claude --resume`, `codex resume`,
`opencode --session`; the profile's `attach_argv`) opens on the task's last agent session, in
the folder its step ran in and with its step's `BATON_*` environment; inside tmux in a new
window, elsewhere with the board suspended. An agent without an interactive resume, or a task
with no session yet, gets `$SHELL` there instead, and the status line says so. When you quit
it, baton commits what the session left in the worktree to the task branch, the history says
`taken over by <you>` (`BATON_USER`, else git's `user.name`), and the move menu opens on the
task for its next move. `T` is refused while the task's step runs. `baton attach ID` does the
same from the command line and prints the next commands.

`D` shows the task's diff through your git pager when one is set (`GIT_PAGER`, else
`git config core.pager`, e.g. `delta`), with the board suspended until you quit it;
`baton diff` pages the same way on a terminal (`GIT_PAGER=cat` turns it off).

### Your own commands: `[[command]]`

Like lazygit's custom commands or k9s's plugins, `keys.toml` can bind a key (on the board
and in the detail pane) to a program run in the selected task's worktree, the board
suspended until it exits:

```toml
[[command]]
key = "G"
run = ["lazygit"]
description = "lazygit in the worktree"

[[command]]
key = "ctrl+o"
run = ["code", "{{worktree}}"]
```

`run` is the program and its arguments. `{{worktree}}`, `{{branch}}` and `{{id}}` are
replaced inside each argument, which stays one argument: no shell reads it. To use a shell,
pass the values as its arguments: `run = ["sh", "-c", "git log "$1"", "sh", "{{branch}}"]`.
A command whose key a default binding had takes it, with a warning when the board opens.

### Board settings: `[board]`

```toml
[board]
mouse = true     # the mouse wheel scrolls the log and the cards (off by default)
diff = "popup"   # keep `D` in a popup even when git has a pager ("pager" is the default)
```
"#;

/// `h ←` → `` `h` `←` ``, with `|` escaped for tables.
fn code_list(keys: &str) -> String {
    keys.split(' ')
        .map(|k| format!("`{}`", k.replace('|', "\\|")))
        .collect::<Vec<_>>()
        .join(" ")
}
