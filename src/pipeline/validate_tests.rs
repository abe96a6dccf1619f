//! Table tests for the loader's diagnostics: one case per kind of problem.

use super::*;
use std::collections::BTreeSet;

const A: &str = r#"{"id": "a", "kind": "queue"}"#;
const B: &str = r#"{"id": "b", "step": {"run": "make"}}"#;
const C: &str = r#"{"id": "c", "kind": "gate"}"#;
const DONE: &str = r#"{"id": "done", "kind": "done"}"#;
const FAILED: &str = r#"{"id": "failed", "kind": "failed"}"#;

/// A pipeline document with one status or transition per line, so locations are checkable.
fn doc(statuses: &[&str], transitions: &[&str]) -> String {
    format!(
        "{{\"id\": \"t\", \"name\": \"T\",\n  \"statuses\": [\n    {}\n  ],\n  \"transitions\": [\n    {}\n  ]\n}}\n",
        statuses.join(",\n    "),
        transitions.join(",\n    ")
    )
}

/// The usual statuses plus one extra (placed before the terminal ones).
fn with_status(extra: &str) -> String {
    doc(&[A, B, extra, C, DONE, FAILED], &[])
}

fn with_transition(t: &str) -> String {
    doc(&[A, B, C, DONE, FAILED], &[t])
}

fn known_agents() -> BTreeSet<String> {
    ["coder", "planner"].iter().map(|s| s.to_string()).collect()
}

/// 1-based line and column of the last occurrence of `snippet` in `text`.
fn position_of(text: &str, snippet: &str) -> (usize, usize) {
    let at = text.rfind(snippet).expect("snippet is in the text");
    let before = &text[..at];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, text[line_start..at].chars().count() + 1)
}

use Severity::{Error as E, Warning as W};

struct Case {
    name: &'static str,
    text: String,
    message: &'static str,
    severity: Severity,
    /// Where the diagnostic must point: the last occurrence of this text.
    at: Option<&'static str>,
}

fn case(
    name: &'static str,
    text: impl Into<String>,
    message: &'static str,
    severity: Severity,
    at: Option<&'static str>,
) -> Case {
    Case {
        name,
        text: text.into(),
        message,
        severity,
        at,
    }
}

#[rustfmt::skip]
fn cases() -> Vec<Case> {
    vec![
        // Document shape and required fields.
        case("root not object", "[1, 2]", "holds one JSON object, not an array", E, Some("[1, 2]")),
        case("missing id", r#"{"name": "T", "statuses": [{"id": "done", "kind": "done"}]}"#, "the pipeline: missing required field `id`", E, None),
        case("empty id", doc(&[A, DONE], &[]).replacen("\"t\"", "\" \"", 1), "the pipeline: `id` is empty", E, Some("\" \"")),
        case("name wrong type", doc(&[A, DONE], &[]).replacen("\"T\"", "5", 1), "`name` must be a string, not a number", E, Some("5,")),
        case("missing statuses", r#"{"id": "t"}"#, "missing required field `statuses`", E, None),
        case("statuses not array", r#"{"id": "t", "statuses": {"a": 1}}"#, "`statuses` must be an array, not an object", E, Some("{\"a\"")),
        case("statuses empty", r#"{"id": "t", "statuses": []}"#, "`statuses` is empty", E, Some("[]")),
        case("transitions not array", r#"{"id": "t", "statuses": [{"id": "d", "kind": "done"}], "transitions": 3}"#, "`transitions` must be an array, not a number", E, Some("3}")),
        // Statuses.
        case("status not object", with_status("\"x\""), "status 3 must be an object, not a string", E, Some("\"x\"")),
        case("status missing id", with_status(r#"{"kind": "gate"}"#), "status 3: missing required field `id`", E, Some(r#"{"kind": "gate"}"#)),
        case("status id wrong type", with_status(r#"{"id": 7, "kind": "gate"}"#), "status 3: `id` must be a string, not a number", E, Some("7,")),
        case("label wrong type", with_status(r#"{"id": "x", "label": [], "kind": "gate"}"#), "`label` must be a string, not an array", E, Some("[],")),
        case("duplicate status id", with_status(r#"{"id": "b", "kind": "gate"}"#), "duplicate status id `b`", E, Some("\"b\"")),
        case("star status id", with_status(r#"{"id": "*", "kind": "gate"}"#), "`*` is reserved", E, Some("\"*\"")),
        case("unknown kind", with_status(r#"{"id": "x", "kind": "finished"}"#), "status `x`: unknown kind `finished`", E, Some("\"finished\"")),
        case("no kind nor step", with_status(r#"{"id": "x"}"#), "status `x` needs a `kind`", E, Some(r#"{"id": "x"}"#)),
        case("step with non-step kind", with_status(r#"{"id": "x", "kind": "gate", "step": {"run": "y"}}"#), "status `x` has a `step` but kind `gate`", E, Some("\"gate\", \"step\"")),
        case("kind step without step", with_status(r#"{"id": "x", "kind": "step"}"#), "status `x` has kind `step` but no `step` object", E, Some("\"step\"}")),
        // Steps.
        case("step not object", with_status(r#"{"id": "x", "step": "make"}"#), "status `x`: `step` must be an object", E, Some("\"make\"}")),
        case("step without kind", with_status(r#"{"id": "x", "step": {"timeout": "1m"}}"#), "status `x`: the step says nothing to do", E, Some("{\"timeout\"")),
        case("unknown step kind", with_status(r#"{"id": "x", "step": {"python": "main.py"}}"#), "status `x`: unknown step kind `python`", E, Some("\"python\"")),
        case("cron out of range", doc(&[A, DONE], &[]).replacen("\"statuses\"", "\"triggers\": [{\"schedule\": \"61 * * * *\"}], \"statuses\"", 1), "trigger 1: schedule `61 * * * *`: minute 61 is out of range 0–59", E, Some("\"61 * * * *\"")),
        case("misspelt trigger field", doc(&[A, DONE], &[]).replacen("\"statuses\"", "\"triggers\": [{\"schedule\": \"0 3 * * *\", \"titel\": \"x\"}], \"statuses\"", 1), "trigger 1: unknown field `titel` — did you mean `title`?", E, Some("\"titel\"")),
        case("issue trigger without labels", doc(&[A, DONE], &[]).replacen("\"statuses\"", "\"triggers\": [{\"issue\": {}}], \"statuses\"", 1), "trigger 1: issue needs the labels that make an issue a task", E, Some("{}}]")),
        case("misspelt issue field", doc(&[A, DONE], &[]).replacen("\"statuses\"", "\"triggers\": [{\"issue\": {\"lables\": [\"baton\"], \"labels\": [\"x\"]}}], \"statuses\"", 1), "trigger 1: issue has no field `lables` — did you mean `labels`?", E, Some("\"lables\"")),
        case("blank issue label", doc(&[A, DONE], &[]).replacen("\"statuses\"", "\"triggers\": [{\"issue\": {\"labels\": [\"baton\", \" \"]}}], \"statuses\"", 1), "trigger 1: issue label 2 must be a label's name", E, Some("\" \"]")),
        case("issue labels not a list", doc(&[A, DONE], &[]).replacen("\"statuses\"", "\"triggers\": [{\"issue\": {\"labels\": \"baton\"}}], \"statuses\"", 1), "trigger 1: issue labels must be a list of one or more names", E, Some("\"baton\"}")),
        case("forge guard not a bool", with_transition(r#"{"from": "b", "to": "c", "on": "approve", "guards": [{"forge": "yes"}]}"#), "guard `forge` takes true or false, not \"yes\"", E, Some("\"yes\"")),
        case("misspelt step field", with_status(r#"{"id": "x", "step": {"run": "make", "retires": 2}}"#), "status `x`: unknown field `retires` — did you mean `retries`?", E, Some("\"retires\"")),
        case("misspelt step kind", with_status(r#"{"id": "x", "step": {"scirpt": "make"}}"#), "unknown field `scirpt` — did you mean `script`?", E, Some("\"scirpt\"")),
        case("two step kinds", with_status(r#"{"id": "x", "step": {"run": "a", "script": "b"}}"#), "exactly one of run, script, agent, docker, but this one has run and script", E, Some("{\"run\": \"a\"")),
        case("empty run", with_status(r#"{"id": "x", "step": {"run": ""}}"#), "status `x`: step: `run` is empty", E, Some("\"\"")),
        case("docker missing image", with_status(r#"{"id": "x", "step": {"docker": {"run": "make"}}}"#), "docker: missing required field `image`", E, Some("{\"run\": \"make\"}")),
        case("executor not object", with_status(r#"{"id": "x", "step": {"run": "y", "executor": "docker"}}"#), "status `x`: `executor` must be an object like", E, Some("\"docker\"}}")),
        case("executor two kinds", with_status(r#"{"id": "x", "step": {"run": "y", "executor": {"local": {}, "ssh": {"host": "b"}}}}"#), "`executor` names exactly one of local, docker, ssh or kubernetes", E, Some("{\"local\": {}")),
        case("executor unknown kind", with_status(r#"{"id": "x", "step": {"run": "y", "executor": {"podman": {}}}}"#), "unknown executor `podman`", E, Some("{}}}}")),
        case("executor docker without image", with_status(r#"{"id": "x", "step": {"run": "y", "executor": {"docker": {"network": "none"}}}}"#), "executor `docker`: missing required setting `image`", E, Some("{\"network\"")),
        case("executor bad memory", with_status(r#"{"id": "x", "step": {"run": "y", "executor": {"docker": {"image": "a", "memory": "lots"}}}}"#), "memory `lots` is not a size", E, Some("\"lots\"")),
        case("executor bad pull", with_status(r#"{"id": "x", "step": {"run": "y", "executor": {"docker": {"image": "a", "pull": "always"}}}}"#), "unknown pull policy `always`", E, Some("\"always\"")),
        case("executor ssh without host", with_status(r#"{"id": "x", "step": {"run": "y", "executor": {"ssh": {"dir": "/srv"}}}}"#), "executor `ssh`: missing required setting `host`", E, Some("{\"dir\"")),
        case("executor kubernetes bad resources", with_status(r#"{"id": "x", "step": {"run": "y", "executor": {"kubernetes": {"image": "a", "resources": {"gpu": "1"}}}}}"#), "unknown `resources` entry `gpu`", E, Some("\"1\"}")),
        case("docker step with executor", with_status(r#"{"id": "x", "step": {"docker": {"image": "a", "run": "b"}, "executor": {"local": {}}}}"#), "a `docker` step already runs in a container", E, Some("{\"local\": {}}")),
        case("unknown agent", with_status(r#"{"id": "x", "step": {"agent": "plannr"}}"#), "status `x`: unknown agent profile `plannr` (known: coder, planner)", E, Some("\"plannr\"")),
        case("bad timeout", with_status(r#"{"id": "x", "step": {"run": "y", "timeout": "soon"}}"#), "status `x`: bad timeout `soon`", E, Some("\"soon\"")),
        case("zero timeout", with_status(r#"{"id": "x", "step": {"run": "y", "timeout": "0s"}}"#), "timeout `0s` is zero", E, Some("\"0s\"")),
        case("timeout number", with_status(r#"{"id": "x", "step": {"run": "y", "timeout": 60}}"#), "timeout must be a string like \"15m\", not a number", E, Some("60}")),
        case("retries negative", with_status(r#"{"id": "x", "step": {"run": "y", "retries": -1}}"#), "`retries` must be a whole number", E, Some("-1}")),
        case("env sets baton's variable", with_status(r#"{"id": "x", "step": {"run": "y", "env": {"BATON_TASK_ID": "7"}}}"#), "status `x`: `env` may not set `BATON_TASK_ID`: baton sets it for the step itself — rename it", E, Some("\"BATON_TASK_ID\"")),
        case("env sets an executor's variable", with_status(r#"{"id": "x", "step": {"run": "y", "env": {"BATON_GIT_BRANCH": "main"}}}"#), "status `x`: `env` may not set `BATON_GIT_BRANCH`", E, Some("\"BATON_GIT_BRANCH\"")),
        case("env sets an ssh argument", with_status(r#"{"id": "x", "step": {"run": "y", "env": {"BATON_ARGV_0": "rm"}}}"#), "status `x`: `env` may not set `BATON_ARGV_0`", E, Some("\"BATON_ARGV_0\"")),
        case("env name with =", with_status(r#"{"id": "x", "step": {"run": "y", "env": {"BATON_TASK_ID=7": "x"}}}"#), "status `x`: `env` name \"BATON_TASK_ID=7\" names no variable: it holds `=` — rename it", E, Some("\"BATON_TASK_ID=7\"")),
        case("empty env name", with_status(r#"{"id": "x", "step": {"run": "y", "env": {"": "x"}}}"#), "status `x`: `env` name \"\" names no variable: it is empty", E, None),
        case("env not strings", with_status(r#"{"id": "x", "step": {"run": "y", "env": {"N": 1}}}"#), "env `N` must be a string, not a number", E, Some("1}}}")),
        // Transitions.
        case("transition not object", with_transition("\"a->b\""), "transition 1 must be an object", E, Some("\"a->b\"")),
        case("missing on", with_transition(r#"{"from": "a", "to": "b"}"#), "transition 1: missing required field `on`", E, Some(r#"{"from": "a""#)),
        case("unknown to", with_transition(r#"{"from": "a", "to": "nope", "on": "start"}"#), "transition 1: unknown status `nope` in `to` (statuses: a, b, c, done, failed)", E, Some("\"nope\"")),
        case("unknown from", with_transition(r#"{"from": "nope", "to": "a", "on": "manual"}"#), "transition 1: unknown status `nope` in `from`", E, Some("\"nope\"")),
        case("star to", with_transition(r#"{"from": "a", "to": "*", "on": "manual"}"#), "`to` must name one status", E, Some("\"*\"")),
        case("unknown trigger", with_transition(r#"{"from": "b", "to": "c", "on": "finish"}"#), "transition 1: unknown trigger `finish`", E, Some("\"finish\"")),
        case("empty outcome", with_transition(r#"{"from": "b", "to": "c", "on": "outcome:"}"#), "unknown trigger `outcome:`", E, Some("\"outcome:\"")),
        case("engine action trigger", with_transition(r#"{"from": "b", "to": "c", "on": "resume"}"#), "`resume` is an engine action", E, Some("\"resume\"")),
        case("guards not array", with_transition(r#"{"from": "b", "to": "c", "on": "success", "guards": {"budget": 1}}"#), "`guards` must be an array", E, Some("{\"budget\"")),
        case("unknown guard", with_transition(r#"{"from": "b", "to": "c", "on": "success", "guards": [{"max_runs": 3}]}"#), "unknown guard `max_runs`", E, Some("\"max_runs\"")),
        case("bad guard value", with_transition(r#"{"from": "b", "to": "c", "on": "success", "guards": [{"max_visits": "three"}]}"#), "guard `max_visits` takes a whole number", E, Some("\"three\"")),
        case("negative budget", with_transition(r#"{"from": "b", "to": "c", "on": "success", "guards": [{"budget": -2}]}"#), "guard `budget` takes a number of dollars", E, Some("-2")),
        case("guard with two keys", with_transition(r#"{"from": "b", "to": "c", "on": "success", "guards": [{"budget": 1, "max_visits": 2}]}"#), "each guard is an object with one key", E, Some("{\"budget\": 1,")),
        case("unknown hook", with_transition(r#"{"from": "b", "to": "c", "on": "success", "hooks": [{"email": "me"}]}"#), "unknown hook `email`", E, Some("\"email\"")),
        case("run hook not string", with_transition(r#"{"from": "b", "to": "c", "on": "success", "hooks": [{"run": ["ls"]}]}"#), "hook `run` takes a command line string", E, Some("[\"ls\"]")),
        // Whole-pipeline checks.
        case("no terminal status", doc(&[A, B, C], &[]), "no terminal status", E, Some("[\n    {\"id\": \"a\"")),
        case("step cannot be left", doc(&[A, DONE, B], &[]), "step status `b` cannot be left", E, Some("\"b\"")),
        // Warnings.
        case("unreachable status", doc(&[A, B, C, DONE, FAILED, r#"{"id": "island", "kind": "gate"}"#], &[]), "status `island` cannot be reached from `a`", W, Some("\"island\"")),
        case("unreachable after gate loop", doc(&[A, C, DONE, B, FAILED], &[]), "status `b` cannot be reached", W, Some("\"b\"")),
        case("explicit success overrides the default", doc(&[A, B, r#"{"id": "b2", "step": {"run": "x"}}"#, DONE, FAILED], &[r#"{"from": "b2", "to": "b", "on": "success"}"#]), "status `done` cannot be reached", W, Some("\"done\", \"kind\"")),
        case("failing step with nowhere to go", doc(&[A, B, DONE], &[]), "a failing step at `b` has nowhere to go", W, Some("\"b\"")),
        case("unknown field", with_status(r#"{"id": "x", "lable": "X", "kind": "gate"}"#), "status `x`: unknown field `lable` is ignored", W, Some("\"lable\"")),
        case("transition from terminal", with_transition(r#"{"from": "done", "to": "a", "on": "manual"}"#), "a transition from terminal status `done` is never taken", W, Some("\"done\", \"to\"")),
        case("last gate has no way out", doc(&[A, DONE, FAILED, C], &[]), "gate `c` is the last status", W, Some("\"c\"")),
    ]
}

#[test]
fn every_problem_kind_is_reported_and_located() {
    let agents = known_agents();
    for c in cases() {
        let (pipeline, diags) = parse_pipeline("pipelines/x.json", &c.text, Some(&agents));
        let found = diags
            .iter()
            .find(|d| d.message.contains(c.message))
            .unwrap_or_else(|| panic!("{}: no `{}` in {diags:#?}\n{}", c.name, c.message, c.text));
        assert_eq!(found.severity, c.severity, "{}", c.name);
        assert_eq!(found.file, "pipelines/x.json", "{}", c.name);
        assert!(
            found.line.is_some() && found.column.is_some(),
            "{}: not located",
            c.name
        );
        if let Some(snippet) = c.at {
            let (line, column) = position_of(&c.text, snippet);
            assert_eq!(
                (found.line, found.column),
                (Some(line), Some(column)),
                "{}: {found}",
                c.name
            );
        }
        match c.severity {
            Severity::Error => assert!(pipeline.is_none(), "{}: errors keep it out", c.name),
            Severity::Warning => {
                assert!(pipeline.is_some(), "{}: warnings only", c.name);
                assert!(
                    diags.iter().all(|d| !d.is_error()),
                    "{}: {diags:#?}",
                    c.name
                );
            }
        }
    }
}

#[test]
fn malformed_json_gives_one_located_diagnostic() {
    let cases = [
        (
            "{\"id\": \"t\",\n  \"statuses\": [\n    {\"id\": \"a\" \"kind\": \"queue\"}\n  ]\n}",
            3,
            "expected `,` or `}`",
        ),
        (
            "{\"id\": \"t\",\n  \"statuses\": [\n",
            3,
            "EOF while parsing",
        ),
        ("{\"id\": \"t\",}", 1, "trailing comma"),
        ("", 1, "EOF while parsing a value"),
    ];
    for (text, line, message) in cases {
        let (pipeline, diags) = parse_pipeline("pipelines/x.json", text, None);
        assert!(pipeline.is_none());
        assert_eq!(diags.len(), 1, "{diags:?}");
        let d = &diags[0];
        assert_eq!(d.line, Some(line), "{d}");
        assert!(d.column.is_some(), "{d}");
        assert!(d.message.contains(message), "{d}");
        assert!(
            d.message
                .ends_with("— fix the JSON and run `baton pipelines validate`"),
            "{d}"
        );
        assert!(!d.message.contains(" at line "), "{d}");
    }
    let (_, diags) = parse_pipeline("pipelines/x.json", cases[0].0, None);
    assert_eq!(
        diags[0].to_string(),
        "pipelines/x.json:3:16: error: expected `,` or `}` — fix the JSON and run `baton pipelines validate`"
    );
}

#[test]
fn every_error_is_reported_not_just_the_first() {
    let text = doc(
        &[
            A,
            r#"{"id": "b", "step": {"agent": "ghost", "timeout": "later"}}"#,
            A,
            DONE,
        ],
        &[
            r#"{"from": "a", "to": "nope", "on": "finish"}"#,
            r#"{"from": "b", "to": "done", "on": "success", "guards": [{"vibes": true}], "hooks": [{"pager": 1}]}"#,
        ],
    );
    let (pipeline, diags) = parse_pipeline("x.json", &text, Some(&known_agents()));
    assert!(pipeline.is_none());
    let messages: Vec<&str> = diags.iter().map(|d| d.message.as_str()).collect();
    for wanted in [
        "unknown agent profile `ghost`",
        "bad timeout `later`",
        "duplicate status id `a`",
        "unknown status `nope`",
        "unknown trigger `finish`",
        "unknown guard `vibes`",
        "unknown hook `pager`",
    ] {
        assert!(
            messages.iter().any(|m| m.contains(wanted)),
            "{wanted} missing from {messages:#?}"
        );
    }
}

#[test]
fn agents_are_only_checked_when_known() {
    let text = with_status(r#"{"id": "x", "step": {"agent": "anyone"}}"#);
    let (pipeline, diags) = parse_pipeline("x.json", &text, None);
    assert!(pipeline.is_some(), "{diags:?}");
}

#[test]
fn parsed_fields_and_defaults() {
    let text = doc(
        &[
            A,
            r#"{"id": "b", "label": "Build", "step": {"docker": {"image": "rust:1", "run": "cargo test"}, "timeout": "1h 30m", "retries": 2, "env": {"K": "v"}, "workdir": "sub"}}"#,
            DONE,
            FAILED,
        ],
        &[
            r#"{"from": "b", "to": "done", "on": "outcome:ship", "label": "Ship", "guards": [{"no_running_step": true}, {"has_handoff_field": "f"}, {"clean_worktree": false}, {"budget": 2.5}, {"max_visits": 2}], "hooks": [{"notify": {"to": "me"}}, {"run": "echo hi"}, {"start_task": {"pipeline": "x"}}, {"webhook": {"url": "http://x"}}, {"merge": {}}]}"#,
        ],
    );
    let (pipeline, diags) = parse_pipeline("x.json", &text, None);
    assert!(diags.is_empty(), "{diags:#?}");
    let p = pipeline.expect("parses");
    assert_eq!((p.id.as_str(), p.name.as_str()), ("t", "T"));
    assert_eq!(p.statuses[0].label, "a", "label defaults to the id");
    assert_eq!(p.statuses[1].label, "Build");
    assert_eq!(p.statuses[1].kind, StatusKind::Step);
    let step = p.statuses[1].step.as_ref().expect("step");
    assert_eq!(
        step.action,
        StepAction::Docker {
            image: "rust:1".into(),
            run: "cargo test".into()
        }
    );
    assert_eq!(step.timeout, Some(std::time::Duration::from_secs(5400)));
    assert_eq!(step.retries, 2);
    assert_eq!(step.env.get("K").map(String::as_str), Some("v"));
    assert_eq!(step.workdir.as_deref(), Some("sub"));
    let t = &p.transitions[0];
    assert_eq!(t.on, Trigger::Outcome("ship".into()));
    assert_eq!(t.label.as_deref(), Some("Ship"));
    assert_eq!(
        t.guards,
        vec![
            Guard::NoRunningStep(true),
            Guard::HasHandoffField("f".into()),
            Guard::CleanWorktree(false),
            Guard::Budget(2.5),
            Guard::MaxVisits(2)
        ]
    );
    let hooks: Vec<&str> = t.hooks.iter().map(Hook::name).collect();
    assert_eq!(hooks, ["notify", "run", "start_task", "webhook", "merge"]);
    // Name defaults to the id; triggers are kept raw.
    let text = r#"{"id": "n", "statuses": [{"id": "d", "kind": "done"}], "triggers": [{"schedule": "0 3 * * *"}]}"#;
    let (p, diags) = parse_pipeline("x.json", text, None);
    assert!(diags.is_empty(), "{diags:#?}");
    let p = p.expect("parses");
    assert_eq!(p.name, "n");
    assert_eq!(
        p.triggers,
        vec![serde_json::json!({"schedule": "0 3 * * *"})]
    );
}

#[test]
fn diagnostic_display() {
    let mut d = Diagnostic {
        file: "pipelines/x.json".into(),
        line: Some(3),
        column: Some(12),
        severity: Severity::Error,
        message: "boom".into(),
    };
    assert_eq!(d.to_string(), "pipelines/x.json:3:12: error: boom");
    d.column = None;
    assert_eq!(d.to_string(), "pipelines/x.json:3: error: boom");
    d.line = None;
    d.severity = Severity::Warning;
    assert_eq!(d.to_string(), "pipelines/x.json: warning: boom");
}
