//! Careless input gets a plain, located answer instead of a raw OS error, a silent choice
//! or a step that cannot run.

mod common;
use common::Ws;

fn pipeline(id: &str, first_status: &str) -> String {
    format!(
        r#"{{
  "id": "{id}",
  "statuses": [
    {{"id": "{first_status}", "step": {{"run": "true"}}}},
    {{"id": "done", "kind": "done"}},
    {{"id": "failed", "kind": "failed"}}
  ]
}}"#
    )
}

#[test]
fn init_where_baton_is_a_file_says_so_in_one_sentence() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(".baton"), "not a folder").unwrap();
    let ws = Ws::at(dir, "");
    let out = ws.baton(&["init"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains(
            ".baton exists but is not a folder — move it aside, then run `baton init` again"
        ),
        "{err}"
    );
    assert!(!err.contains("os error"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[test]
fn the_same_pipeline_id_in_two_files_is_an_error_naming_both() {
    let ws = Ws::new();
    let a = ws.pipeline("a.json", &pipeline("twin", "work"));
    let b = ws.pipeline("b.json", &pipeline("twin", "work"));
    let out = ws.baton(&["pipelines", "validate"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        err.contains(&format!(
            "{}: error: pipeline id `twin` is already defined by {}",
            b.display(),
            a.display()
        )),
        "{err}"
    );
    assert_eq!(stdout.matches(": ok").count(), 1, "{stdout}");
    // Overriding a built-in pipeline stays allowed.
    std::fs::remove_file(&b).unwrap();
    ws.pipeline("b.json", &pipeline("demo", "work"));
    ws.ok(&["pipelines", "validate"]);
}

#[test]
fn a_status_id_that_climbs_out_of_the_workspace_is_refused_where_it_stands() {
    let ws = Ws::new();
    let file = ws.pipeline("p.json", &pipeline("p", "../../escape"));
    let out = ws.baton(&["pipelines", "validate"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains(&format!(
            "{}:4:12: error: status id `../../escape` contains `.`; ids use only ASCII letters, digits, `_` and `-`",
            file.display()
        )),
        "{err}"
    );
    // Left out of the catalog, so no task can run it.
    let out = ws.baton(&["new", "t", "--pipeline", "p"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn a_pipeline_file_with_a_byte_order_mark_loads() {
    let ws = Ws::new();
    let text = format!("\u{feff}{}", pipeline("bom", "work"));
    ws.pipeline("bom.json", &text);
    let out = ws.ok(&["pipelines", "validate"]);
    assert!(out.contains("bom.json: ok (bom, 3 statuses)"), "{out}");
}

#[test]
fn a_duplicate_json_key_is_a_located_error() {
    let ws = Ws::new();
    let text = pipeline("dup", "work").replace(r#""id": "dup","#, r#""id": "dup", "id": "other","#);
    let file = ws.pipeline("dup.json", &text);
    let out = ws.baton(&["pipelines", "validate"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains(&format!(
            "{}:2:16: error: duplicate key `id`",
            file.display()
        )),
        "{err}"
    );
}

#[test]
fn a_zero_default_timeout_is_refused_before_any_step_runs() {
    let ws = Ws::new();
    ws.config("default_timeout = \"0s\"\n");
    let out = ws
        .baton(&["engine", "--exit-when-idle"])
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("default_timeout must be more than zero") && err.contains("(at line 1)"),
        "{err}"
    );
}

#[test]
fn listing_an_unknown_pipeline_says_it_is_unknown() {
    let ws = Ws::new();
    let out = ws
        .baton(&["list", "--pipeline", "nosuch"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("there is no pipeline `nosuch`"), "{err}");
    // A known pipeline with no tasks is just an empty list.
    assert!(
        ws.ok(&["list", "--pipeline", "feature"])
            .contains("no tasks match")
    );
    // A pipeline whose file is gone, with only archived tasks left, is not a typo.
    let file = ws.pipeline(
        "gone.json",
        r#"{"id": "gone", "name": "Gone", "statuses": [
            {"id": "q", "label": "Queue", "kind": "queue"},
            {"id": "done", "label": "Done", "kind": "done"}],
          "transitions": [{"from": "q", "to": "done", "on": "approve"}]}"#,
    );
    let id = ws.ok(&["new", "--pipeline", "gone", "old work"]);
    ws.ok(&["move", id.trim(), "done"]);
    ws.ok(&["archive", id.trim()]);
    std::fs::remove_file(file).unwrap();
    assert_eq!(
        ws.ok(&["list", "--pipeline", "gone"]).trim(),
        "no tasks of pipeline `gone` on the board; 1 archived — `baton list --archived --pipeline gone` shows it"
    );
    assert!(
        ws.ok(&["list", "--archived", "--pipeline", "gone"])
            .contains("old work")
    );
    // Its statuses are gone with its file: a status is not called unknown for that.
    assert!(
        ws.ok(&["list", "--pipeline", "gone", "--status", "done"])
            .contains("1 archived")
    );
    assert_eq!(
        ws.ok(&["list", "--archived", "--pipeline", "gone", "--status", "q"])
            .trim(),
        "no archived tasks match — `baton list --archived` shows them all"
    );
}

#[test]
fn a_title_of_only_escape_codes_or_a_nul_byte_is_refused() {
    let ws = Ws::new();
    ws.pipeline("p.json", &pipeline("p", "work"));
    let out = ws
        .baton(&["new", "\x1b[31m\x07", "-p", "p"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("a task needs a title"), "{err}");
    // A title is one line of plain text, as over the API.
    let out = ws
        .baton(&["new", "two\nlines", "-p", "p"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "the title holds a control character (U+000A); a title is one line of plain text"
        ),
        "{err}"
    );
    // A NUL cannot travel in argv: it comes through the prompt on stdin.
    let out = ws
        .baton(&["new", "fine", "-p", "p", "--prompt", "-"])
        .write_stdin("before\0after")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("the prompt holds a NUL byte"), "{err}");
    assert_eq!(ws.ok(&["list", "--json"]).trim(), "[]");
    // An edit is held to the same rules as a new task.
    let id = ws.new_task("p", "fine").to_string();
    for (args, stdin, said) in [
        (
            vec!["edit", &id, "--prompt", "-"],
            "before\0after",
            "the prompt holds a NUL byte",
        ),
        (
            vec!["edit", &id, "--title", "\x1b[31m\x07"],
            "",
            "a task needs a title",
        ),
        (
            vec!["edit", &id, "--title", "red \x1b[31malert"],
            "",
            "the title holds a control character (U+001B)",
        ),
    ] {
        let out = ws.baton(&args).write_stdin(stdin).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(said), "{args:?}: {err}");
    }
    assert_eq!(ws.show(id.parse().unwrap())["title"], "fine");
}

#[test]
fn a_task_for_a_pipeline_whose_file_is_broken_names_the_file_and_its_error() {
    let ws = Ws::new();
    let file = ws.pipeline(
        "s.json",
        "{\"id\": \"s\", \"statuses\": [\n  {\"id\": \"a\", \"kind\": \"nope\"}\n]}\n",
    );
    let out = ws.baton(&["new", "x", "--pipeline", "s"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains(&format!(
            "no pipeline `s` could be loaded: {}:2:",
            file.display()
        )),
        "{err}"
    );
    assert!(err.contains("unknown kind `nope`"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    // Another missing id says it is unknown, and mentions the broken file only as a maybe.
    let out = ws
        .baton(&["new", "x", "--pipeline", "zz"])
        .output()
        .unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("no pipeline `zz` — `baton pipelines list`"),
        "{err}"
    );
    assert!(err.contains("if `zz` is in it, fix the file"), "{err}");
}

#[test]
fn listing_by_an_empty_name_is_refused() {
    let ws = Ws::new();
    let out = ws.baton(&["list", "--by", " "]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("`--by` needs a name"), "{err}");
}

#[test]
fn a_broken_pipeline_file_keeps_new_from_guessing_the_default() {
    let ws = Ws::new();
    // Alone in the workspace, it would have been the default; `quick_fix`, an agent
    // pipeline, was taken instead, silently.
    ws.pipeline("mine.json", r#"{"id": "mine",}"#);
    let out = ws.baton(&["new", "x"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("no pipeline was named, and which one is the default is not known")
            && err.contains("mine.json:1:"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(ws.ok(&["list"]).contains("no tasks"), "nothing made");
    // Naming one still works.
    assert_eq!(ws.ok(&["new", "x", "--pipeline", "demo"]).trim(), "1");
    // A good file that sorts first is the default whatever comes after it.
    ws.pipeline("a.json", &pipeline("a", "work"));
    assert_eq!(ws.ok(&["new", "y"]).trim(), "2");
    assert_eq!(ws.show(2)["pipeline"], "a");
}

#[test]
fn an_agent_that_cannot_start_here_is_said_before_its_step_fails() {
    // `init` looks on its own PATH: one that holds git and nothing else.
    let bin = tempfile::tempdir().unwrap();
    let git = std::env::split_paths(&std::env::var_os("PATH").unwrap())
        .map(|d| d.join("git"))
        .find(|g| g.is_file())
        .expect("git on PATH");
    std::os::unix::fs::symlink(git, bin.path().join("git")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ws = Ws::at(dir, "");
    let out = ws
        .baton(&["init"])
        .env("PATH", bin.path())
        .output()
        .unwrap();
    assert!(out.status.success());
    let init = String::from_utf8(out.stdout).unwrap();
    assert!(
        init.contains(
            "next: agent `coder` of pipeline `quick_fix` cannot start here: `claude` is not on PATH"
        ),
        "{init}"
    );
    // The built-in coder, overridden with a program no machine has.
    std::fs::write(
        ws.root().join(".baton/agents/coder.json"),
        r#"{"id": "coder", "backend": "command", "argv": ["no-such-agent-cli-7f3"]}"#,
    )
    .unwrap();
    let out = ws.baton(&["new", "x", "--start"]).output().unwrap();
    assert!(out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains(
            "note: task 1: agent `coder` of pipeline `quick_fix` cannot start here: `no-such-agent-cli-7f3` is not on PATH"
        ),
        "{err}"
    );
    // Planning a task is not running it: nothing said.
    let out = ws.baton(&["new", "y"]).output().unwrap();
    assert!(
        !String::from_utf8(out.stderr)
            .unwrap()
            .contains("cannot start")
    );
    // `run --wait` runs an engine of its own: said there too, then the failure it meant.
    let out = ws
        .baton(&["run", "quick_fix", "--title", "z", "--wait"])
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("note: task 3: agent `coder` of pipeline `quick_fix` cannot start here"),
        "{err}"
    );
}
