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
    md
}

/// `h ←` → `` `h` `←` ``, with `|` escaped for tables.
fn code_list(keys: &str) -> String {
    keys.split(' ')
        .map(|k| format!("`{}`", k.replace('|', "\\|")))
        .collect::<Vec<_>>()
        .join(" ")
}
