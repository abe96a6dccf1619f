//! The crate's structure, read from its source: the front ends reach the store only through
//! the engine's client, and the top-level modules import each other down the floors
//! (front ends → engine → executors, store, workspace → pipelines, handoffs), with no
//! circle between them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Each top-level module's floor: a module may import those on its floor or below.
const FLOORS: &[(&str, u8)] = &[
    ("tui", 1),
    ("cli", 1),
    ("api", 1),
    ("engine", 2),
    ("exec", 3),
    ("store", 3),
    ("workspace", 3),
    ("agents", 3),
    ("forge", 3),
    ("pipeline", 4),
    ("handoff", 4),
    ("questions", 4),
    ("testcounts", 4),
    ("ansi", 5),
];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every `.rs` file under `dir`.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out
}

/// A file's code without its inline test module and its comments.
fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let inline_tests = text.match_indices("#[cfg(test)]").find(|(i, m)| {
        let after = text[i + m.len()..].trim_start();
        after.strip_prefix("mod ").is_some_and(|rest| {
            let rest = rest.trim_start_matches(|c: char| c.is_alphanumeric() || c == '_');
            rest.trim_start().starts_with('{')
        })
    });
    let text = match inline_tests {
        Some((i, _)) => &text[..i],
        None => &text[..],
    };
    text.lines()
        .map(|l| l.split("//").next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The top-level module a file belongs to (None for the crate's root files).
fn top_of(path: &Path) -> Option<String> {
    let rel = path.strip_prefix(src()).ok()?;
    let first = rel.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (!matches!(name, "lib" | "main")).then(|| name.to_string())
}

/// The top-level modules a piece of code names through `crate::` paths, grouped `use
/// crate::{a, b::c}` included.
fn named_tops(code: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (i, _) in code.match_indices("crate::") {
        let rest = &code[i + "crate::".len()..];
        let rest = rest.trim_start();
        if let Some(group) = rest.strip_prefix('{') {
            // Each item of the group starts a path: at depth 0, after `{` or `,`.
            let mut depth = 0;
            let mut start = true;
            for (j, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => start = true,
                    c if c.is_whitespace() => {}
                    _ if start && depth == 0 => {
                        start = false;
                        out.insert(ident(&group[j..]));
                    }
                    _ => {}
                }
            }
        } else {
            out.insert(ident(rest));
        }
    }
    out
}

fn ident(s: &str) -> String {
    s.chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect()
}

/// Top-level module → the top-level modules it imports.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let floors: BTreeMap<&str, u8> = FLOORS.iter().copied().collect();
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for path in files(&src()) {
        let Some(top) = top_of(&path) else { continue };
        for named in named_tops(&code(&path)) {
            if named != top && floors.contains_key(named.as_str()) {
                g.entry(top.clone()).or_default().insert(named);
            }
        }
    }
    g
}

#[test]
fn no_front_end_holds_a_store_of_its_own() {
    let mut found = Vec::new();
    for dir in ["tui", "cli", "api"] {
        for path in files(&src().join(dir)) {
            // `baton db`: administration of the file itself, on purpose.
            if path.ends_with("cli/db_cmd.rs") {
                continue;
            }
            let text = code(&path);
            for needle in ["StoreHandle", "Store::open", "rusqlite", "Connection::open"] {
                if text.contains(needle) {
                    found.push(format!("{} uses {needle}", path.display()));
                }
            }
        }
    }
    assert!(found.is_empty(), "{found:#?}");
}

#[test]
fn imports_run_down_the_floors() {
    let floors: BTreeMap<&str, u8> = FLOORS.iter().copied().collect();
    let g = graph();
    assert!(
        g.get("engine").is_some_and(|to| to.contains("store")),
        "the source was not read: {g:?}"
    );
    let mut up = Vec::new();
    for (from, tos) in &g {
        for to in tos {
            let (a, b) = (floors.get(from.as_str()), floors.get(to.as_str()));
            if let (Some(a), Some(b)) = (a, b)
                && a > b
            {
                up.push(format!("{from} (floor {a}) imports {to} (floor {b})"));
            }
        }
    }
    assert!(up.is_empty(), "{up:#?}");
}

#[test]
fn no_circle_between_top_level_modules() {
    let g = graph();
    // A module is in a circle when it reaches itself.
    let mut circles = Vec::new();
    for start in g.keys() {
        let mut seen = BTreeSet::new();
        let mut stack: Vec<(String, Vec<String>)> = vec![(start.clone(), vec![start.clone()])];
        while let Some((at, path)) = stack.pop() {
            for next in g.get(&at).into_iter().flatten() {
                if next == start {
                    circles.push(format!("{} → {start}", path.join(" → ")));
                } else if seen.insert(next.clone()) {
                    let mut p = path.clone();
                    p.push(next.clone());
                    stack.push((next.clone(), p));
                }
            }
        }
    }
    assert!(circles.is_empty(), "{circles:#?}");
}
