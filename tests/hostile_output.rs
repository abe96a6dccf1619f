//! Text from steps, task titles and notes reaches a terminal only sanitised: colours (where
//! colour is on) and nothing else — no clipboard writes, window titles, screen clears,
//! hyperlinks, 8-bit controls or bells, on a terminal or through a pipe.

mod common;
use common::Ws;
use std::io::Read;
use std::os::fd::OwnedFd;
use std::process::Stdio;

/// A step printing OSC 52 (clipboard), OSC 0 (title), CSI 2J (clear), DCS, OSC 8, the 8-bit
/// CSI, BEL and BS around some text, a colour, and a progress bar redrawn with CR.
const HOSTILE_SH: &str = r#"printf 'x\033]52;c;ZXZpbA==\007 \033]0;PWNED\007 \033[2J\033Pq#0\033\\ \033]8;;http://evil\007link\033]8;;\007\n'
printf 'bell\007 bs\010 c1\302\2332J end\n'
printf '\033[32mgreen\033[0m\n'
printf '10%%\r50%%\r100%%\n'
"#;

const HOSTILE: &str = r#"{
  "id": "hostile",
  "statuses": [
    {"id": "todo", "kind": "queue"},
    {"id": "build", "step": {"run": "sh hostile.sh"}},
    {"id": "review", "kind": "gate"},
    {"id": "done", "kind": "done"},
    {"id": "failed", "kind": "failed"},
    {"id": "cancelled", "kind": "cancelled"}
  ]
}"#;

/// Runs `baton ARGS` in the workspace with its stdout and stderr on a pseudo-terminal, colour
/// allowed; returns everything it wrote.
fn on_a_terminal(ws: &Ws, args: &[&str]) -> String {
    let pty = nix::pty::openpty(None, None).expect("openpty");
    let out: OwnedFd = pty.slave.try_clone().expect("dup");
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("baton"))
        .current_dir(ws.root())
        .env_remove("BATON_DIR")
        .env_remove("NO_COLOR")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::from(out))
        .stderr(Stdio::from(pty.slave))
        .spawn()
        .expect("baton starts");
    let status = child.wait().expect("wait");
    assert!(status.success(), "baton {args:?} failed");
    // Every slave end is closed now: the master reads what is buffered, then EIO.
    let mut master = std::fs::File::from(pty.master);
    let mut bytes = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = master.read(&mut buf) {
        if n == 0 {
            break;
        }
        bytes.extend_from_slice(&buf[..n]);
    }
    String::from_utf8(bytes).expect("utf8")
}

fn ran_hostile_step(ws: &Ws) {
    ws.pipeline("hostile.json", HOSTILE);
    std::fs::write(ws.root().join("hostile.sh"), HOSTILE_SH).unwrap();
    let out = ws
        .baton(&["run", "hostile", "--title", "t", "--wait"])
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
}

/// Everything that must never reach a terminal from task or step text.
fn assert_inert(text: &str) {
    for bad in [
        "]52", "PWNED", "\x1b[2J", "\x1bP", "]8;", "evil", "\x07", "\x08", "\u{9b}",
    ] {
        assert!(!text.contains(bad), "{bad:?} got through: {text:?}");
    }
}

#[test]
fn logs_on_a_terminal_keep_colours_and_drop_every_other_sequence() {
    let ws = Ws::new();
    ran_hostile_step(&ws);
    let shown = on_a_terminal(&ws, &["logs", "1"]);
    assert_inert(&shown);
    assert!(shown.contains("\x1b[32mgreen\x1b[0m"), "{shown:?}");
    assert!(shown.contains("x   link"), "{shown:?}");
    assert!(shown.contains("bell bs c1 end"), "{shown:?}");
    // The progress bar shows its last state only.
    assert!(
        shown.contains("100%") && !shown.contains("50%"),
        "{shown:?}"
    );
}

#[test]
fn logs_through_a_pipe_are_plain_text() {
    let ws = Ws::new();
    ran_hostile_step(&ws);
    let piped = ws.ok(&["logs", "1"]);
    assert_inert(&piped);
    assert!(
        !piped.contains('\x1b') && !piped.contains('\r'),
        "{piped:?}"
    );
    assert!(piped.contains("bell bs c1 end\n"), "{piped:?}");
    assert!(piped.contains("green\n100%\n"), "{piped:?}");
}

#[test]
fn show_and_list_sanitise_titles_prompts_and_notes() {
    let ws = Ws::new();
    ws.pipeline("gate.json", common::GATE);
    let title = "fix \x1b]0;PWNED\x07it\u{9b}2J\x1b[2J";
    let id = ws
        .ok(&[
            "new",
            "placeholder",
            "--pipeline",
            "gate",
            "--prompt",
            "line \x1b]52;c;ZXZpbA==\x07one\x07\x08",
        ])
        .trim()
        .to_string();
    // No front end takes such a title now; an older board may hold one.
    ws.store_raw_title(id.parse().unwrap(), title);
    ws.ok(&["start", &id]);
    ws.drain();
    ws.ok(&["approve", &id, "--note", "ok \x1b]8;;http://evil\x07go"]);
    for shown in [
        ws.ok(&["show", &id]),
        on_a_terminal(&ws, &["show", &id]),
        ws.ok(&["list"]),
        on_a_terminal(&ws, &["list"]),
    ] {
        assert_inert(&shown);
        assert!(!shown.contains('\x1b'), "{shown:?}");
        assert!(shown.contains("fix it"), "{shown:?}");
    }
    let shown = ws.ok(&["show", &id]);
    assert!(shown.contains("line one"), "{shown:?}");
    assert!(shown.contains("ok go"), "{shown:?}");
    // `--json` is data, not terminal output: it keeps the text exactly.
    assert_eq!(ws.show(id.parse().unwrap())["title"], title);
}

#[test]
fn errors_quoting_user_text_are_sanitised() {
    let ws = Ws::new();
    let out = ws
        .baton(&["new", "t", "--pipeline", "x\x1b]0;PWNED\x07y"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert_inert(&err);
    assert!(err.contains("no pipeline `xy`"), "{err:?}");
}
