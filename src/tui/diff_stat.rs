//! A diff's summary as `git diff --stat` prints it, for the playground's result.

/// `git diff --stat` from a diff: one line per file with its added and removed lines, then
/// the totals (`(no changes)` for an empty diff).
pub fn diff_stat(diff: &str) -> Vec<String> {
    let mut files: Vec<(String, usize, usize)> = Vec::new();
    for line in diff.lines() {
        if let Some(rest) = line.strip_prefix("diff --git ") {
            let name = rest.rsplit(" b/").next().unwrap_or(rest).to_string();
            files.push((name, 0, 0));
        } else if let Some(f) = files.last_mut() {
            if line.starts_with('+') && !line.starts_with("+++") {
                f.1 += 1;
            } else if line.starts_with('-') && !line.starts_with("---") {
                f.2 += 1;
            }
        }
    }
    if files.is_empty() {
        return vec!["(no changes)".into()];
    }
    let width = files.iter().map(|f| f.0.chars().count()).max().unwrap_or(0);
    let mut out: Vec<String> = files
        .iter()
        .map(|(name, add, del)| {
            let bar = format!(
                "{}{}",
                "+".repeat((*add).min(30)),
                "-".repeat((*del).min(30))
            );
            format!("{name:<width$} | {:>4} {bar}", add + del)
        })
        .collect();
    let (add, del): (usize, usize) = files.iter().fold((0, 0), |a, f| (a.0 + f.1, a.1 + f.2));
    out.push(format!(
        "{} file{} changed, {add} insertion{}(+), {del} deletion{}(-)",
        files.len(),
        if files.len() == 1 { "" } else { "s" },
        if add == 1 { "" } else { "s" },
        if del == 1 { "" } else { "s" },
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diff_stat_counts_lines_per_file() {
        let diff = "diff --git a/src/a.rs b/src/a.rs\n--- a/src/a.rs\n+++ b/src/a.rs\n@@ -1 +1,2 @@\n-old\n+new\n+more\ndiff --git a/README b/README\n+++ b/README\n+x\n";
        let stat = diff_stat(diff);
        assert_eq!(stat[0], "src/a.rs |    3 ++-");
        assert_eq!(stat[1], "README   |    1 +");
        assert_eq!(stat[2], "2 files changed, 3 insertions(+), 1 deletion(-)");
        assert_eq!(diff_stat(""), vec!["(no changes)".to_string()]);
    }
}
