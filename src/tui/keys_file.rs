//! `keys.toml`: the user's key bindings over the defaults. One line per action, its key or
//! keys, e.g. `approve = "A"` or `quit = ["q", "ctrl+q"]`. The action keeps its contexts and
//! description and loses its default keys; a key another action used in the same context is
//! taken from it. Problems and conflicts are warnings: the board opens anyway. Read from the
//! user's config folder, then the workspace's `.baton/keys.toml` (which wins).

use super::intent::Intent;
use super::keymap::{BINDINGS, Binding, key_name};
use super::settings::BoardSettings;
use crossterm::event::{KeyCode, KeyModifiers};
use std::path::{Path, PathBuf};

/// Every action a `keys.toml` can name, as it names it (`new_task`, `full_log`, …).
pub fn action_names() -> Vec<(String, Intent)> {
    let mut out: Vec<(String, Intent)> = Vec::new();
    for b in BINDINGS {
        if !out.iter().any(|(_, a)| *a == b.action) {
            out.push((snake(&format!("{:?}", b.action)), b.action));
        }
    }
    out
}

fn snake(camel: &str) -> String {
    let mut s = String::new();
    // `Tab(3)` is written `tab_3`.
    let camel = camel.replace('(', "_").replace(')', "");
    for (i, ch) in camel.chars().enumerate() {
        if ch.is_uppercase() && i > 0 {
            s.push('_');
        }
        s.push(ch.to_ascii_lowercase());
    }
    s
}

/// `a`, `A`, `ctrl+x`, `enter`, `esc`, `tab`, `shift+tab`, `space`, arrows (`up`), `pgup`,
/// `pgdn`, `home`, `end`, `f1`…`f12`.
pub fn parse_key(text: &str) -> Option<(KeyCode, KeyModifiers)> {
    let (mods, rest) = match text.strip_prefix("ctrl+") {
        Some(r) => (KeyModifiers::CONTROL, r),
        None => (KeyModifiers::NONE, text),
    };
    let mut chars = rest.chars();
    let code = match (chars.next(), chars.next()) {
        (Some(c), None) => KeyCode::Char(c),
        _ => match rest.to_ascii_lowercase().as_str() {
            "enter" => KeyCode::Enter,
            "esc" => KeyCode::Esc,
            "tab" => KeyCode::Tab,
            "shift+tab" => KeyCode::BackTab,
            "space" => KeyCode::Char(' '),
            "up" => KeyCode::Up,
            "down" => KeyCode::Down,
            "left" => KeyCode::Left,
            "right" => KeyCode::Right,
            "pgup" => KeyCode::PageUp,
            "pgdn" => KeyCode::PageDown,
            "home" => KeyCode::Home,
            "end" => KeyCode::End,
            f => KeyCode::F(
                f.strip_prefix('f')?
                    .parse()
                    .ok()
                    .filter(|n| (1..=12).contains(n))?,
            ),
        },
    };
    Some((code, mods))
}

/// `table` with the bindings of `text` (a `keys.toml` called `file`) applied, and the
/// warnings to show.
pub fn apply(table: &[Binding], file: &str, text: &str) -> (Vec<Binding>, Vec<String>) {
    let mut out = table.to_vec();
    let mut warnings = Vec::new();
    let doc: toml::Table = match toml::from_str(text) {
        Ok(d) => d,
        Err(e) => {
            warnings.push(format!(
                "{file}: {} — its bindings are ignored",
                e.message()
            ));
            return (out, warnings);
        }
    };
    let names = action_names();
    for (name, value) in doc {
        // The board's settings and commands (`settings`), not bindings.
        if name == "board" || name == "command" {
            continue;
        }
        let Some(action) = names.iter().find(|(n, _)| *n == name).map(|(_, a)| *a) else {
            warnings.push(format!(
                "{file}: unknown action `{name}` is ignored (see docs/keymap.md for the names)"
            ));
            continue;
        };
        let keys: Vec<String> = match value {
            toml::Value::String(s) => vec![s],
            toml::Value::Array(items) => items
                .into_iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect(),
            _ => Vec::new(),
        };
        let parsed: Vec<(KeyCode, KeyModifiers)> = keys
            .iter()
            .filter_map(|k| {
                let p = parse_key(k);
                if p.is_none() {
                    warnings.push(format!(
                        "{file}: `{name}`: `{k}` is not a key (write \"a\", \"ctrl+x\", \"enter\", \"f2\"…)"
                    ));
                }
                p
            })
            .collect();
        if parsed.is_empty() {
            warnings.push(format!(
                "{file}: `{name}` names no usable key; its default keys stay"
            ));
            continue;
        }
        // The action's contexts and descriptions, in the order of its default bindings.
        let mut places: Vec<(super::keymap::Ctx, &'static str)> = Vec::new();
        for b in out.iter().filter(|b| b.action == action) {
            if !places.iter().any(|(c, _)| *c == b.ctx) {
                places.push((b.ctx, b.desc));
            }
        }
        out.retain(|b| b.action != action);
        for (ctx, desc) in places {
            for &(code, mods) in &parsed {
                let new = Binding {
                    ctx,
                    code,
                    mods,
                    action,
                    desc,
                };
                if let Some(i) = out
                    .iter()
                    .position(|b| b.ctx == ctx && b.code == code && b.mods == mods)
                {
                    let old = out.remove(i);
                    warnings.push(format!(
                        "{file}: `{}` was {} in {}; it is now `{name}`",
                        key_name(&new),
                        snake(&format!("{:?}", old.action)),
                        ctx.title()
                    ));
                }
                out.push(new);
            }
        }
    }
    (out, warnings)
}

/// The user's `keys.toml` (beside the user config) and the workspace's, in the order they
/// apply.
pub fn files(workspace_dir: Option<&Path>) -> Vec<PathBuf> {
    let user = crate::workspace::layered::user_config_path()
        .and_then(|p| p.parent().map(|d| d.join("keys.toml")));
    user.into_iter()
        .chain(workspace_dir.map(|d| d.join("keys.toml")))
        .collect()
}

/// Reads the keys files that exist and applies them over the defaults.
pub fn load(workspace_dir: Option<&Path>) -> (Vec<Binding>, Vec<String>) {
    let (table, _, warnings) = load_all(workspace_dir);
    (table, warnings)
}

/// The bindings, the board's settings (`[board]`, `[[command]]`) and the warnings of the
/// keys files that exist.
pub fn load_all(workspace_dir: Option<&Path>) -> (Vec<Binding>, BoardSettings, Vec<String>) {
    let mut table = BINDINGS.to_vec();
    let mut settings = BoardSettings::default();
    let mut warnings = Vec::new();
    for path in files(workspace_dir) {
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => {
                warnings.push(format!("{}: cannot read: {e}", path.display()));
                continue;
            }
        };
        let file = path.display().to_string();
        let (next, w) = apply(&table, &file, &text);
        table = next;
        warnings.extend(w);
        if let Ok(doc) = toml::from_str::<toml::Table>(&text) {
            warnings.extend(super::settings::apply(
                &mut table,
                &mut settings,
                &file,
                &doc,
            ));
        }
    }
    (table, settings, warnings)
}

#[cfg(test)]
#[path = "keys_file_tests.rs"]
mod tests;
