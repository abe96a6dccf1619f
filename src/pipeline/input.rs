//! Checks shared by the files people write for baton (pipelines, agent profiles): a leading
//! byte-order mark, duplicate JSON keys, and the syntax of ids.

use super::locate::{Locator, Pos};

/// `text` without a leading UTF-8 byte-order mark, which some editors write and JSON and
/// TOML readers reject.
pub fn strip_bom(text: &str) -> &str {
    text.strip_prefix('\u{feff}').unwrap_or(text)
}

/// Why `id` is not a valid id of a pipeline, status or agent, or `None` when it is. Ids name
/// files, branches and log paths, so they use ASCII letters, digits, `_` and `-` only.
pub fn id_problem(id: &str) -> Option<String> {
    let ok = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    if id.chars().all(ok) {
        return None;
    }
    let bad: String = id.chars().filter(|&c| !ok(c)).take(1).collect();
    Some(format!(
        "id `{}` contains {}; ids use only ASCII letters, digits, `_` and `-` (they name files, branches and log paths)",
        id.escape_debug(),
        match bad.as_str() {
            " " => "a space".to_string(),
            b => format!("`{}`", b.escape_debug()),
        }
    ))
}

/// Why `name` cannot name an engine, or `None` when it can: 1 to 64 ASCII letters, digits,
/// `.`, `-` and `_` (a host name is one).
pub fn engine_name_problem(name: &str) -> Option<String> {
    let ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_');
    if name.is_empty() {
        Some("an engine name cannot be empty".into())
    } else if name.len() > 64 || !name.chars().all(ok) {
        Some(format!(
            "`{}` cannot name an engine; use up to 64 ASCII letters, digits, `.`, `-` and `_`, like `devbox` or `gpu-1`",
            name.escape_debug()
        ))
    } else {
        None
    }
}

/// The longest engine label.
pub const MAX_LABEL: usize = 32;

/// Why `label` is not an engine label, or `None` when it is: a lowercase word of ASCII
/// letters and digits, `-` and `_` (`gpu`, `big-disk`), starting with a letter or digit.
pub fn label_problem(label: &str) -> Option<String> {
    let shown = label.escape_debug();
    let ok = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_';
    if label.is_empty() {
        Some("is empty; a label is a lowercase word like `gpu`".into())
    } else if label.chars().count() > MAX_LABEL {
        Some(format!("`{shown}` is longer than {MAX_LABEL} characters"))
    } else if !label.chars().all(ok) || label.starts_with(['-', '_']) {
        Some(format!(
            "`{shown}` is not a lowercase word; labels use a-z, 0-9, `-` and `_`, like `gpu` or `big-disk`"
        ))
    } else {
        None
    }
}

/// Each key that appears twice in one object of `text` (valid JSON): the key and where its
/// later occurrence starts. JSON readers keep one of the two silently.
pub(crate) fn duplicate_keys(text: &str) -> Vec<(String, Pos)> {
    Locator::duplicates_in(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_ascii_letters_digits_underscore_and_dash() {
        for ok in ["plan", "plan_review", "build-2", "A9"] {
            assert_eq!(id_problem(ok), None, "{ok}");
        }
        for bad in ["../x", "a/b", "a b", "é", "x.y", "\"];evil["] {
            let why = id_problem(bad).unwrap_or_else(|| panic!("{bad} passed"));
            assert!(why.contains("ASCII letters, digits, `_` and `-`"), "{why}");
        }
        assert!(id_problem("a/b").unwrap().contains("contains `/`"));
    }

    #[test]
    fn duplicates_are_found_per_object_with_the_later_position() {
        let text = "{\"id\": \"a\",\n \"x\": {\"id\": 1},\n \"id\": \"b\"}";
        assert_eq!(duplicate_keys(text), vec![("id".to_string(), (3, 2))]);
        assert!(duplicate_keys("[{\"a\": 1}, {\"a\": 2}]").is_empty());
        let nested = "{\"x\": {\"a\": 1}, \"x\": {\"a\": 2}}";
        assert_eq!(duplicate_keys(nested), vec![("x".to_string(), (1, 17))]);
    }

    const MINIMAL: &str = r#"{
  "id": "p",
  "statuses": [
    {"id": "todo", "kind": "queue"},
    {"id": "done", "kind": "done"}
  ]
}"#;

    fn errors(text: &str) -> Vec<String> {
        let (_, diags) = crate::pipeline::parse_pipeline("p.json", text, None);
        diags
            .iter()
            .filter(|d| d.is_error())
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn a_status_id_that_is_a_path_is_a_located_error() {
        let text = MINIMAL.replace(r#""id": "todo""#, r#""id": "../../etc""#);
        let errs = errors(&text);
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(
            errs[0].starts_with("p.json:4:12: error: status id `../../etc` contains `.`"),
            "{errs:?}"
        );
        let text = MINIMAL.replace(r#""id": "p""#, r#""id": "a/b""#);
        assert!(errors(&text)[0].starts_with("p.json:2:9: error: pipeline id `a/b` contains `/`"));
    }

    #[test]
    fn a_byte_order_mark_is_skipped_and_positions_still_count_from_the_text() {
        let text = format!("\u{feff}{MINIMAL}");
        assert_eq!(errors(&text), Vec::<String>::new());
        let broken = format!(
            "\u{feff}{}",
            MINIMAL.replace(r#""kind": "done""#, r#""kind": "don""#)
        );
        assert!(
            errors(&broken)[0].starts_with("p.json:5:28: error:"),
            "{:?}",
            errors(&broken)
        );
    }

    #[test]
    fn a_duplicate_key_is_a_located_error() {
        let text = MINIMAL.replace(r#""id": "p","#, r#""id": "a", "id": "b","#);
        let errs = errors(&text);
        assert_eq!(
            errs,
            [
                "p.json:2:14: error: duplicate key `id`: this object already has one; keep only one of them"
            ]
        );
    }
}
