//! The script an ssh step sends to the remote host on standard input.
//!
//! The remote command line is a constant (see [`BOOTSTRAP`]); everything that varies — the
//! branch, the step's script, its environment, the context files — travels in this script,
//! each value quoted with [`sh_quote`], so no task text is ever parsed by a shell as code.

use super::quote::{is_env_name, sh_quote};
use crate::exec::executor::remote_git::LOCAL_PATHS;
use std::fmt::Write;

/// The remote command: reads the job script (its length, then its bytes: `dd bs=1` never
/// reads past them) into a private file and runs it with `sh`, standard input still open.
/// It holds no variable text, so any POSIX login shell reads it alike.
pub const BOOTSTRAP: &str = "sh -c 'umask 077; IFS= read -r n || exit 97; f=$(mktemp) || exit 97; dd bs=1 count=\"$n\" of=\"$f\" 2>/dev/null || exit 97; sh \"$f\"; c=$?; rm -f \"$f\"; exit $c'";

/// What baton writes to the remote command's standard input: the job script's length on a
/// line, then the script. The rest of the input stays open while the step runs: when it
/// closes (the connection or baton went away), the host ends the step.
pub fn stdin_for(script: &str) -> String {
    format!("{}\n{script}", script.len())
}

/// A file to recreate on the host before the step runs, and the variable naming it there.
#[derive(Debug, Clone)]
pub struct ContextFile {
    /// The variable that points at the file (`BATON_TASK_PROMPT_FILE`).
    pub var: String,
    /// The file name inside the remote context folder.
    pub name: String,
    /// Its contents (text: prompts and handoffs).
    pub content: String,
}

/// One step's work on the host.
#[derive(Debug, Clone)]
pub struct RemoteJob<'a> {
    /// The bare mirror, relative to the remote home or absolute.
    pub mirror: &'a str,
    /// The folder of this step run on the host (worktree, context, pid file).
    pub run_dir: &'a str,
    /// The branch pushed to the mirror, and updated there with the step's commits.
    pub branch: &'a str,
    /// The step's working folder inside the worktree ("" for its top).
    pub subdir: &'a str,
    /// Marks baton's own lines in the output; random per run.
    pub nonce: &'a str,
    /// The step's shell script.
    pub script: &'a str,
    /// The step's environment.
    pub vars: &'a [(String, String)],
    /// Files the step's variables point at, recreated in the remote context folder.
    pub files: &'a [ContextFile],
    /// Seconds between the polite stop and the kill when the connection goes away.
    pub grace_secs: u64,
}

impl RemoteJob<'_> {
    /// The job script. Its last line of output is `NONCE exit CODE`; before the step starts
    /// it prints `NONCE pgid PID`; output without the first is a lost connection.
    pub fn render(&self) -> String {
        let mut s = String::from("set -u\ncd \"$HOME\" || exit 97\n");
        for (name, value) in [
            ("mirror", self.mirror),
            ("run", self.run_dir),
            ("branch", self.branch),
            ("sub", self.subdir),
            ("nonce", self.nonce),
            ("step", self.script),
            ("grace", &self.grace_secs.max(1).to_string()),
        ] {
            let _ = writeln!(s, "{name}={}", sh_quote(value));
        }
        s.push_str(PREPARE);
        for f in self.files {
            let _ = writeln!(
                s,
                "printf %s {} >\"$run/context/\"{}",
                sh_quote(&f.content),
                sh_quote(&f.name)
            );
        }
        for (k, v) in self.vars {
            if is_env_name(k) && !LOCAL_PATHS.contains(&k.as_str()) {
                let _ = writeln!(s, "export {k}={}", sh_quote(v));
            }
        }
        s.push_str("export BATON_CONTEXT_DIR=\"$abs/context\" BATON_WORKSPACE=\"$abs/wt\"\n");
        for f in self.files {
            if is_env_name(&f.var) {
                let _ = writeln!(s, "export {}=\"$abs/context/\"{}", f.var, sh_quote(&f.name));
            }
        }
        s.push_str(RUN);
        s
    }
}

/// Makes the run folder and checks the pushed branch out there, detached so later pushes
/// to the branch are never refused.
const PREPARE: &str = r#"exec 3<&0
say() { printf '%s %s\n' "$nonce" "$*"; }
case $run in /*) abs=$run ;; *) abs=$HOME/$run ;; esac
case $mirror in /*) ;; *) mirror=$HOME/$mirror ;; esac
rm -rf "$abs" && mkdir -p "$abs/context" || { say "setup cannot make $abs"; exit 97; }
git -C "$mirror" worktree prune 2>/dev/null
git -C "$mirror" worktree add -q --detach "$abs/wt" "refs/heads/$branch" >&2 || { say "setup cannot check out $branch"; exit 97; }
"#;

/// Runs the step in its own process group (recorded for abort as the `kill` target `-PGID`),
/// then stores its commits on the branch and removes the worktree. Without `setsid` (macOS,
/// some BusyBox; `BATON_SSH_NO_SETSID=1` forces this path) the shell's job control gives the
/// step its own group, else `perl`'s setpgrp; failing both, only the step's own process is
/// the target. When the connection goes, the step gets TERM, then KILL after `$grace` s.
const RUN: &str = r#"cd "$abs/wt/$sub" || { say "setup no folder $sub in the worktree"; exit 97; }
if [ -z "${BATON_SSH_NO_SETSID-}" ] && command -v setsid >/dev/null 2>&1; then
  setsid sh -c "$step" </dev/null 3<&- &
  target=-$!
else
  set -m 2>/dev/null
  case $- in
  *m*) sh -c "$step" </dev/null 3<&- & target=-$! ;;
  *) if command -v perl >/dev/null 2>&1; then
       perl -e 'setpgrp(0, 0); exec @ARGV' sh -c "$step" </dev/null 3<&- & target=-$!
     else
       sh -c "$step" </dev/null 3<&- & target=$!
     fi ;;
  esac
  set +m 2>/dev/null
fi
pid=$!
echo "$target" >"$abs/pid"
# Standard input (kept as fd 3: a background list's own is /dev/null) closes when the
# connection or baton goes away: then end the step, politely first.
( cat <&3 >/dev/null 2>&1
  [ -e "$abs/pid" ] && kill -TERM "$target" && sleep "$grace" && [ -e "$abs/pid" ] && kill -KILL "$target"
) >/dev/null 2>&1 &
exec 3<&-
watchdog=$!
say "pgid $pid"
wait "$pid"
code=$?
rm -f "$abs/pid"
kill "$watchdog" 2>/dev/null
cd "$HOME"
dirty=$(git -C "$abs/wt" status --porcelain 2>/dev/null | wc -l)
[ "$dirty" -gt 0 ] && say "dirty $dirty"
git -C "$abs/wt" update-ref "refs/heads/$branch" HEAD || say "setup cannot record the commits on $branch"
git -C "$mirror" worktree remove --force "$abs/wt" 2>/dev/null
rm -rf "$abs"
say "exit $code"
"#;

/// What a line of the remote output means to baton.
#[derive(Debug, PartialEq, Eq)]
pub enum Marker {
    /// The step's process group on the host.
    Pgid(u32),
    /// The step ended with this status.
    Exit(i32),
    /// The step left this many uncommitted changes behind.
    Dirty(u64),
    /// The host could not prepare the step.
    Setup(String),
}

/// Splits a stdout line into the step's own text (before the marker) and baton's marker.
/// A line without the nonce is all the step's.
pub fn parse_line<'a>(line: &'a str, nonce: &str) -> (&'a str, Option<Marker>) {
    let Some(at) = line.find(nonce) else {
        return (line, None);
    };
    let rest = line[at + nonce.len()..].trim_start();
    let (word, arg) = rest.split_once(' ').unwrap_or((rest, ""));
    let marker = match word {
        "pgid" => arg.trim().parse().ok().map(Marker::Pgid),
        "exit" => arg.trim().parse().ok().map(Marker::Exit),
        "dirty" => arg.trim().parse().ok().map(Marker::Dirty),
        "setup" => Some(Marker::Setup(arg.to_string())),
        _ => None,
    };
    match marker {
        Some(m) => (&line[..at], Some(m)),
        None => (line, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    #[test]
    fn markers_are_found_after_partial_step_output() {
        assert_eq!(parse_line("N1 exit 3", "N1"), ("", Some(Marker::Exit(3))));
        assert_eq!(
            parse_line("no newlineN1 exit 0", "N1"),
            ("no newline", Some(Marker::Exit(0)))
        );
        assert_eq!(parse_line("N1 pgid 42", "N1"), ("", Some(Marker::Pgid(42))));
        assert_eq!(parse_line("hello", "N1"), ("hello", None));
        // The nonce with an unknown word is the step's text, not a marker.
        assert_eq!(parse_line("N1 exitt 3", "N1"), ("N1 exitt 3", None));
        assert_eq!(
            parse_line("N1 setup cannot check out x", "N1"),
            ("", Some(Marker::Setup("cannot check out x".into())))
        );
    }

    #[test]
    fn the_bootstrap_has_no_single_quote_inside() {
        let inner = BOOTSTRAP
            .strip_prefix("sh -c '")
            .unwrap()
            .strip_suffix('\'')
            .unwrap();
        assert!(!inner.contains('\''));
    }

    /// Runs a rendered job against a real local mirror with the real `sh`, as the host would.
    #[test]
    fn a_job_runs_in_a_worktree_of_the_mirror_and_records_its_commit() {
        let home = tempfile::tempdir().unwrap();
        let git = |args: &[&str], dir: &std::path::Path| {
            let ok = Command::new("git")
                .args(args)
                .current_dir(dir)
                .stdout(Stdio::null())
                .status()
                .unwrap()
                .success();
            assert!(ok, "git {args:?}");
        };
        let src = home.path().join("src");
        std::fs::create_dir(&src).unwrap();
        git(&["init", "-q", "-b", "main"], &src);
        std::fs::write(src.join("a"), "a").unwrap();
        git(&["add", "a"], &src);
        git(
            &[
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "commit",
                "-qm",
                "a",
            ],
            &src,
        );
        git(&["init", "-q", "--bare", "m.git"], home.path());
        git(
            &["push", "-q", "../m.git", "HEAD:refs/heads/baton/1-x"],
            &src,
        );
        let title = "it's $(id) `x`\nline two \\ end".to_string();
        let vars = vec![
            ("BATON_TASK_TITLE".to_string(), title.clone()),
            ("BATON_CONTEXT_DIR".to_string(), "/local/only".to_string()),
            ("bad-name".to_string(), "skipped".to_string()),
        ];
        let files = vec![ContextFile {
            var: "BATON_TASK_PROMPT_FILE".into(),
            name: "prompt.md".into(),
            content: "prompt 'with' quotes\n".into(),
        }];
        let job = RemoteJob {
            mirror: "m.git",
            run_dir: "runs/1",
            branch: "baton/1-x",
            subdir: "",
            nonce: "NONCE7",
            script: "printf '%s' \"$BATON_TASK_TITLE\" > title.txt && cat \"$BATON_TASK_PROMPT_FILE\" > p.txt && git add . && git -c user.name=t -c user.email=t@t commit -qm step && echo done",
            vars: &vars,
            files: &files,
            grace_secs: 2,
        };
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(BOOTSTRAP.strip_prefix("sh -c ").unwrap().trim_matches('\''))
            .env("HOME", home.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::{BufRead, Write as _};
        let mut stdin = child.stdin.take().unwrap();
        stdin
            .write_all(stdin_for(&job.render()).as_bytes())
            .unwrap();
        // Standard input stays open until the job has said how it ended, as ssh keeps it.
        let mut text = String::new();
        for line in std::io::BufReader::new(child.stdout.take().unwrap()).lines() {
            let line = line.unwrap();
            text.push_str(&line);
            text.push('\n');
            if matches!(parse_line(&line, "NONCE7").1, Some(Marker::Exit(_))) {
                break;
            }
        }
        drop(stdin);
        child.wait().unwrap();
        let lines: Vec<_> = text.lines().collect();
        assert!(
            matches!(parse_line(lines[0], "NONCE7").1, Some(Marker::Pgid(_))),
            "{text}"
        );
        assert_eq!(lines[1], "done");
        assert_eq!(parse_line(lines[2], "NONCE7").1, Some(Marker::Exit(0)));
        let show = |path: &str| {
            let o = Command::new("git")
                .args(["--git-dir", "m.git", "show", &format!("baton/1-x:{path}")])
                .current_dir(home.path())
                .output()
                .unwrap();
            String::from_utf8(o.stdout).unwrap()
        };
        assert_eq!(show("title.txt"), title);
        assert_eq!(show("p.txt"), "prompt 'with' quotes\n");
        assert!(
            !home.path().join("runs/1").exists(),
            "the run folder is removed"
        );
    }
}
