//! POSIX shell quoting for the few strings baton itself writes into a remote shell script.
//!
//! `ssh` joins its command arguments with spaces and hands the result to the remote login
//! shell, so every value that reaches the far side is quoted here first: wrapped in single
//! quotes, where a POSIX shell gives no character a special meaning, with each `'` written
//! as `'\''` (close, an escaped quote, reopen).

/// `s` as one single-quoted POSIX shell word that expands back to exactly `s`.
pub fn sh_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    for c in s.chars() {
        if c == '\'' {
            out.push_str("'\\''");
        } else {
            out.push(c);
        }
    }
    out.push('\'');
    out
}

/// True for a name a POSIX shell accepts in `export NAME=…`.
pub fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::process::Command;

    /// What `sh` makes of `word`: `printf %s WORD` run by a real shell.
    fn through_sh(word: &str) -> String {
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!("printf %s {word}"))
            .output()
            .expect("sh runs");
        assert!(out.status.success(), "sh rejected {word:?}");
        String::from_utf8(out.stdout).expect("utf-8 back")
    }

    #[test]
    fn a_table_of_awkward_words_survives_a_real_shell() {
        let cases = [
            "",
            "plain",
            "two words",
            "it's",
            "''",
            "'",
            "\\'",
            "$HOME",
            "$(touch /tmp/baton-quote-pwned)",
            "`id`",
            "a\nb\n",
            "tab\there",
            "semi; rm -rf /",
            "back\\slash\\",
            "\"double\"",
            "*?[]{}~!#&|<>()",
            "-n",
            "ünïcødé ✓",
        ];
        for case in cases {
            assert_eq!(through_sh(&sh_quote(case)), case, "quoting {case:?}");
        }
        assert!(!std::path::Path::new("/tmp/baton-quote-pwned").exists());
    }

    #[test]
    fn quotes_are_closed_and_reopened() {
        assert_eq!(sh_quote("it's"), r"'it'\''s'");
        assert_eq!(sh_quote(""), "''");
    }

    #[test]
    fn env_names() {
        for ok in ["A", "_", "BATON_TASK_ID", "x1"] {
            assert!(is_env_name(ok), "{ok}");
        }
        for bad in ["", "1A", "A-B", "A B", "A=B", "É"] {
            assert!(!is_env_name(bad), "{bad}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
        #[test]
        fn any_text_survives_a_real_shell(s in "[^\u{0}]{0,40}") {
            prop_assert_eq!(through_sh(&sh_quote(&s)), s);
        }

        #[test]
        fn shell_heavy_text_survives_a_real_shell(s in "['\"\\\\$`;&|*?~ \n\t(){}a-c]{0,30}") {
            prop_assert_eq!(through_sh(&sh_quote(&s)), s);
        }
    }
}
