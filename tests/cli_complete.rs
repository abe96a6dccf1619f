//! Dynamic shell completion offers the workspace's task ids and pipeline ids (not file
//! names), and `--help` lists the commands in groups.

mod common;

use common::Ws;

/// What the shell would offer for the last word of `words`, as `COMPLETE=fish` answers
/// (one candidate a line, its help after a tab).
fn offered(ws: &Ws, words: &[&str]) -> Vec<String> {
    let mut args = vec!["--", "baton"];
    args.extend_from_slice(words);
    let out = ws.baton(&args).env("COMPLETE", "fish").output().unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn task_ids_complete_with_their_titles() {
    let ws = Ws::new();
    std::fs::write(ws.root().join("notes.txt"), "a file, never a candidate").unwrap();
    let a = ws.new_task("demo", "Tidy the settings");
    let b = ws.new_task("demo", "Fix the login");
    for words in [
        &["show", ""][..],
        &["approve", ""],
        &["new", "x", "--after", ""],
    ] {
        let got = offered(&ws, words);
        assert!(
            got.contains(&format!("{b}\tFix the login (backlog)")),
            "{words:?}: {got:?}"
        );
        assert!(
            got.contains(&format!("{a}\tTidy the settings (backlog)")),
            "{words:?}: {got:?}"
        );
        assert!(!got.iter().any(|c| c.contains("notes.txt")), "{got:?}");
    }
}

#[test]
fn pipeline_ids_complete_built_in_and_the_workspace_s_own() {
    let ws = Ws::new();
    ws.pipeline(
        "mine.json",
        r#"{"id": "mine", "name": "Mine", "statuses": [
        {"id": "todo", "kind": "queue"}, {"id": "done", "kind": "done"}]}"#,
    );
    for words in [
        &["new", "x", "--pipeline", ""][..],
        &["run", ""],
        &["pipelines", "show", ""],
    ] {
        let got = offered(&ws, words);
        assert!(
            got.contains(&"mine\tMine".to_string()),
            "{words:?}: {got:?}"
        );
        assert!(
            got.contains(&"demo\tDemo".to_string()),
            "{words:?}: {got:?}"
        );
        assert!(
            !got.iter().any(|c| c.starts_with('1')),
            "no task ids: {got:?}"
        );
    }
}

#[test]
fn the_completion_script_calls_baton_back() {
    let ws = Ws::new();
    let out = ws.baton(&[]).env("COMPLETE", "bash").output().unwrap();
    let script = String::from_utf8_lossy(&out.stdout);
    assert!(script.contains("complete -o nospace"), "{script}");
    assert!(script.contains("COMPLETE=\"bash\""), "{script}");
}

#[test]
fn help_lists_the_commands_in_groups() {
    let ws = Ws::new();
    let help = ws.ok(&["--help"]);
    let at = |needle: &str| {
        help.find(needle)
            .unwrap_or_else(|| panic!("`{needle}` missing from:\n{help}"))
    };
    let groups = [
        "Tasks:",
        "Pipelines and agents:",
        "Servers:",
        "Setup:",
        "Options:",
    ];
    let places: Vec<usize> = groups.iter().map(|g| at(g)).collect();
    assert!(places.windows(2).all(|w| w[0] < w[1]), "{help}");
    // Each command under its own heading.
    assert!(at("\n  approve ") < places[1], "{help}");
    assert!(
        (places[1]..places[2]).contains(&at("\n  pipelines ")),
        "{help}"
    );
    assert!(
        (places[2]..places[3]).contains(&at("\n  engine ")),
        "{help}"
    );
    assert!(
        (places[3]..places[4]).contains(&at("\n  completions ")),
        "{help}"
    );
    assert!(help.contains("Exit codes:"), "{help}");
    // `help` for one command is clap's own.
    let show = ws.ok(&["help", "show"]);
    assert!(show.contains("Usage: baton show [OPTIONS] <ID>"), "{show}");
    assert!(!show.contains("Servers:"), "{show}");
    let show = ws.ok(&["show", "--help"]);
    assert!(show.contains("Usage: baton show [OPTIONS] <ID>"), "{show}");
}
