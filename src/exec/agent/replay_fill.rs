//! Placeholders in a recording, so a replayed answer speaks of the task it is replayed for:
//! `{{title}}` (the task's title) and `{{files}}` (the files its worktree changed, as `git
//! status` lists them). In the JSON formats a placeholder sits inside a JSON string, so its
//! value is written JSON-escaped; the recording stays valid JSON whatever the title holds.

use crate::agents::{Format, fill};
use std::path::Path;
use std::process::Command;

/// The most file names `{{files}}` lists.
const MAX_FILES: usize = 6;

/// What the placeholders of a recording stand for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fill {
    pub title: String,
    /// The files, already written as a phrase (`` `a.txt` and `b.rs` ``).
    pub files: String,
}

/// `text` with `{{title}}` and `{{files}}` filled for `format`; other placeholders stay.
pub fn apply(text: &str, format: Format, values: &Fill) -> String {
    let json = !matches!(format, Format::Text);
    let escape = |v: &str| -> String {
        if !json {
            return v.to_string();
        }
        let quoted = serde_json::to_string(v).unwrap_or_default();
        quoted[1..quoted.len().saturating_sub(1).max(1)].to_string()
    };
    let (title, files) = (escape(&values.title), escape(&values.files));
    fill(text, |name| match name {
        "title" => Some(title.as_str()),
        "files" => Some(files.as_str()),
        _ => None,
    })
}

/// The files the worktree at `dir` changed, as a phrase for a review; read with `git
/// status` (a read: it takes no lock a step or the git queue waits for).
pub fn changed_files(dir: &Path) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["status", "--porcelain", "--untracked-files=all"])
        .output();
    let names: Vec<String> = match out {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter_map(|l| l.get(3..))
            .map(|n| {
                n.rsplit(" -> ")
                    .next()
                    .unwrap_or(n)
                    .trim_matches('"')
                    .to_string()
            })
            .collect(),
        _ => Vec::new(),
    };
    phrase(&names)
}

/// `` `a` ``, `` `a` and `b` ``, `` `a`, `b` and 3 more files ``; "no file" for none.
pub fn phrase(names: &[String]) -> String {
    let shown: Vec<String> = names
        .iter()
        .take(MAX_FILES)
        .map(|n| format!("`{n}`"))
        .collect();
    let more = names.len().saturating_sub(MAX_FILES);
    match (shown.as_slice(), more) {
        ([], _) => "no file".into(),
        ([one], 0) => one.clone(),
        (many, 0) => format!(
            "{} and {}",
            many[..many.len() - 1].join(", "),
            many[many.len() - 1]
        ),
        (many, n) => format!("{} and {n} more files", many.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_escaped_inside_json_and_left_as_they_are_in_text() {
        let values = Fill {
            title: "Say \"hi\"\n{{files}}".into(),
            files: "`a.txt`".into(),
        };
        let line = r#"{"content":"Review of {{title}} ({{files}}) {{other}}"}"#;
        let filled = apply(line, Format::OpenaiSse, &values);
        let v: serde_json::Value = serde_json::from_str(&filled).expect("still JSON");
        assert_eq!(
            v["content"],
            "Review of Say \"hi\"\n{{files}} (`a.txt`) {{other}}"
        );
        assert_eq!(
            apply("{{title}}: {{files}}", Format::Text, &values),
            "Say \"hi\"\n{{files}}: `a.txt`"
        );
    }

    #[test]
    fn files_read_as_a_phrase() {
        let names = |n: usize| (0..n).map(|i| format!("f{i}")).collect::<Vec<_>>();
        assert_eq!(phrase(&[]), "no file");
        assert_eq!(phrase(&names(1)), "`f0`");
        assert_eq!(phrase(&names(3)), "`f0`, `f1` and `f2`");
        assert_eq!(
            phrase(&names(8)),
            "`f0`, `f1`, `f2`, `f3`, `f4`, `f5` and 2 more files"
        );
    }
}
