//! `baton engines`: the engines registered on the board, as a table or as JSON.

use super::tasks::one_line;
use super::{Outcome, exit};
use crate::engine::Reader;
use crate::store::{EngineView, rfc3339};
use crate::workspace::Workspace;
use serde_json::{Value, json};

/// `running` (heartbeat within its lease), `stopped` (a clean stop) or `gone` (not seen
/// within its lease: killed, or cut off).
fn state(e: &EngineView) -> &'static str {
    match (e.live, e.row.stopped_at) {
        (true, _) => "running",
        (false, Some(_)) => "stopped",
        (false, None) => "gone",
    }
}

fn item(e: &EngineView) -> Value {
    let r = &e.row;
    json!({
        "name": r.name,
        "host": r.host,
        "pid": r.pid,
        "labels": r.labels,
        "version": r.version,
        "state": state(e),
        "running_steps": e.running,
        "started_at": rfc3339(r.started_at),
        "heartbeat_at": rfc3339(r.heartbeat_at),
        "stopped_at": r.stopped_at.map(rfc3339),
        "seen_ago_ms": e.seen_ago_ms,
    })
}

/// How long ago, for people: `3 s ago`, `4 min ago`, `2 h ago`, `5 d ago`.
fn ago(ms: i64) -> String {
    let s = ms.max(0) / 1000;
    match s {
        0..=119 => format!("{s} s ago"),
        120..=7199 => format!("{} min ago", s / 60),
        7200..=172_799 => format!("{} h ago", s / 3600),
        _ => format!("{} d ago", s / 86_400),
    }
}

/// `baton engines [--json]`.
pub fn list(ws: &Workspace, as_json: bool) -> Outcome {
    let engines = Reader::open(ws)?.engines()?;
    if as_json {
        let items: Vec<_> = engines.iter().map(item).collect();
        outln!("{}", Value::Array(items));
        return Ok(exit::OK);
    }
    if engines.is_empty() {
        outln!(
            "no engine has run on this board yet — `baton engine` starts one (the board `baton` runs its own)"
        );
        return Ok(exit::OK);
    }
    outln!(
        "{:<20} {:<20} {:>8}  {:<16} {:>5}  {:<8} LAST SEEN",
        "NAME",
        "HOST",
        "PID",
        "LABELS",
        "STEPS",
        "STATE"
    );
    for e in &engines {
        let r = &e.row;
        let labels = if r.labels.is_empty() {
            "-".to_string()
        } else {
            r.labels.join(",")
        };
        outln!(
            "{:<20} {:<20} {:>8}  {:<16} {:>5}  {:<8} {}",
            one_line(&r.name, 64),
            one_line(&r.host, 64),
            r.pid,
            one_line(&labels, 64),
            e.running,
            state(e),
            ago(e.seen_ago_ms)
        );
    }
    Ok(exit::OK)
}
