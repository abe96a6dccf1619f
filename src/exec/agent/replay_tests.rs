//! The replay backend reads every recorded format the way the real backend does.

use super::*;
use crate::agents::parse_profile;

fn play(format: Format, text: &str) -> (Vec<String>, AgentFinish) {
    let mut player = Player::new(format);
    let mut shown = Vec::new();
    for line in text.lines() {
        shown.extend(player.feed(line).unwrap().into_iter().map(|(_, l)| l));
    }
    shown.extend(player.flush().into_iter().map(|(_, l)| l));
    (shown, player.finish("agent `t`"))
}

fn done_text(f: &AgentFinish) -> &str {
    match f {
        AgentFinish::Done(run) => &run.text,
        other => panic!("not done: {other:?}"),
    }
}

fn builtin(id: &str) -> Profile {
    crate::agents::load_agents(None).get(id).unwrap().clone()
}

#[test]
fn the_demo_recordings_play_through_the_real_parsers() {
    let planner = builtin("demo-planner");
    let text = recording_text(&planner, pick(&planner, 1).unwrap()).unwrap();
    let (shown, fin) = play(planner.format, &text);
    assert!(
        shown.iter().any(|l| l.starts_with("[tool] Read")),
        "{shown:?}"
    );
    assert!(done_text(&fin).starts_with("## What Was Done"));
    let AgentFinish::Done(run) = &fin else {
        unreachable!()
    };
    assert_eq!(run.cost, Some(0.0123));
    assert_eq!(run.session.as_deref(), Some("demo-5f1c2b7e"));

    let coder = builtin("demo-coder");
    for attempt in [1, 2] {
        let text = recording_text(&coder, pick(&coder, attempt).unwrap()).unwrap();
        let (shown, fin) = play(coder.format, &text);
        assert!(
            shown.iter().any(|l| l.starts_with("[tool] edit")),
            "{shown:?}"
        );
        assert!(done_text(&fin).contains("## Next Agent Context"));
    }

    let reviewer = builtin("demo-reviewer");
    let outcomes: Vec<String> = (1..=3)
        .map(|attempt| {
            let text = recording_text(&reviewer, pick(&reviewer, attempt).unwrap()).unwrap();
            let (_, fin) = play(reviewer.format, &text);
            done_text(&fin).lines().last().unwrap().to_string()
        })
        .collect();
    // Changes requested once, then approved, and the last recording repeats.
    assert_eq!(
        outcomes,
        [
            "OUTCOME: changes_requested",
            "OUTCOME: success",
            "OUTCOME: success"
        ]
    );
}

#[test]
fn opencode_events_and_text_recordings_play() {
    let events = [
        r#"{"type":"message.updated","properties":{"info":{"id":"u1","sessionID":"s1","role":"user"}}}"#,
        r#"{"type":"message.part.updated","properties":{"part":{"id":"p0","messageID":"u1","sessionID":"s1","type":"text","text":"the prompt","time":{"end":1}}}}"#,
        r#"{"type":"message.updated","properties":{"info":{"id":"m1","sessionID":"s1","role":"assistant","cost":0.5,"tokens":{"input":10,"output":4}}}}"#,
        r#"{"type":"message.part.updated","properties":{"part":{"id":"t1","messageID":"m1","sessionID":"s1","type":"tool","tool":"read","callID":"c1","state":{"status":"completed","input":{"filePath":"a.rs"}}}}}"#,
        r###"{"type":"message.part.updated","properties":{"part":{"id":"p1","messageID":"m1","sessionID":"s1","type":"text","text":"## What Was Done\nread a.rs","time":{"end":2}}}}"###,
        r#"{"type":"session.idle","properties":{"sessionID":"s1"}}"#,
    ]
    .join("\n");
    let (shown, fin) = play(Format::OpencodeEvents, &events);
    assert!(
        shown.iter().any(|l| l.starts_with("[tool] read")),
        "{shown:?}"
    );
    assert_eq!(done_text(&fin), "## What Was Done\nread a.rs");
    let AgentFinish::Done(run) = &fin else {
        unreachable!()
    };
    assert_eq!(run.cost, Some(0.5));

    let (shown, fin) = play(Format::Text, "hello\nOUTCOME: success");
    assert_eq!(shown, ["hello", "OUTCOME: success"]);
    assert_eq!(done_text(&fin), "hello\nOUTCOME: success\n");
}

#[test]
fn broken_recordings_are_sentences_not_panics() {
    let (_, fin) = play(
        Format::OpenaiSse,
        "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}",
    );
    assert!(matches!(fin, AgentFinish::Error { ref error, .. } if error.contains("ends early")));
    let mut p = Player::new(Format::OpencodeEvents);
    assert!(p.feed("not json").unwrap_err().contains("not JSON"));
    let (_, fin) = play(Format::ClaudeStreamJson, "plain words");
    assert!(matches!(fin, AgentFinish::Error { .. }));
}

#[test]
fn recordings_resolve_next_to_the_profile() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("r1.txt"), "one").unwrap();
    let file = dir.path().join("a.json");
    let (p, d) = parse_profile(
        &file.display().to_string(),
        r#"{"id": "a", "backend": "replay", "recording": ["r1.txt", "missing.txt"]}"#,
    );
    let p = p.unwrap_or_else(|| panic!("{d:?}"));
    assert_eq!(recording_text(&p, pick(&p, 1).unwrap()).unwrap(), "one");
    let err = recording_text(&p, pick(&p, 2).unwrap()).unwrap_err();
    assert!(err.contains("missing.txt"), "{err}");
    // A workspace profile cannot reach the built-in recordings by their repository path.
    let (p, _) = parse_profile(
        &file.display().to_string(),
        r#"{"id": "a", "backend": "replay", "recording": "../../assets/replay/demo/planner.jsonl"}"#,
    );
    assert!(recording_text(&p.unwrap(), "../../assets/replay/demo/planner.jsonl").is_err());
    let (p, d) = parse_profile("x.json", r#"{"id": "a", "backend": "replay"}"#);
    assert!(
        p.is_none() && d[0].message.contains("needs `recording`"),
        "{d:?}"
    );
    let (p, d) = parse_profile(
        "x.json",
        r#"{"id": "a", "backend": "command", "argv": ["x"], "format": "openai-sse"}"#,
    );
    assert!(
        p.is_none() && d[0].message.contains("for replay profiles"),
        "{d:?}"
    );
}
