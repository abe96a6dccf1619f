//! Who moved a task away from a status, and when: what the loser of a race is told
//! ("alice approved it 2 s ago"), read from the history row that moved it.

use crate::store::{Db, HistoryEntry, now_ms};

/// The phrase for the latest move of task `task` away from `from`; None when its history
/// has no such move (or cannot be read: the refusal is then told without it).
pub fn left(db: &Db, task: i64, from: &str) -> Option<String> {
    let history = db.history(task).ok()?;
    let h = history
        .iter()
        .rev()
        .find(|h| h.from.as_deref() == Some(from))?;
    Some(phrase(h, now_ms()))
}

/// `alice approved it 2 s ago`, `engine moved it to test (success) 1 min ago`.
pub fn phrase(h: &HistoryEntry, now: i64) -> String {
    let who = crate::ansi::strip(&h.actor);
    let did = match h.trigger.as_str() {
        "approve" => "approved it".to_string(),
        "reject" => "rejected it".to_string(),
        "abort" => "aborted it".to_string(),
        "start" => "started it".to_string(),
        "resume" => "resumed it".to_string(),
        "retry" => "started it over".to_string(),
        "manual" => format!("moved it to {}", h.to),
        other => format!("moved it to {} ({other})", h.to),
    };
    format!("{who} {did} {}", ago(now - h.at))
}

/// `just now`, `2 s ago`, `3 min ago`, `1 h ago`, `4 d ago`.
fn ago(ms: i64) -> String {
    let s = ms.max(0) / 1000;
    match s {
        0 => "just now".into(),
        1..60 => format!("{s} s ago"),
        60..3600 => format!("{} min ago", s / 60),
        3600..86400 => format!("{} h ago", s / 3600),
        _ => format!("{} d ago", s / 86400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(actor: &str, trigger: &str, at: i64) -> HistoryEntry {
        HistoryEntry {
            id: 1,
            task_id: 7,
            run_id: None,
            from: Some("plan_review".into()),
            to: "build".into(),
            trigger: trigger.into(),
            actor: actor.into(),
            reason: None,
            guards: serde_json::Value::Null,
            hooks: serde_json::Value::Null,
            at,
        }
    }

    #[test]
    fn the_winner_is_named_with_what_they_did_and_when() {
        let now = 1_000_000_000;
        assert_eq!(
            phrase(&row("alice", "approve", now - 2_400), now),
            "alice approved it 2 s ago"
        );
        assert_eq!(
            phrase(&row("bob", "reject", now - 180_000), now),
            "bob rejected it 3 min ago"
        );
        assert_eq!(
            phrase(&row("carol", "manual", now), now),
            "carol moved it to build just now"
        );
        assert_eq!(
            phrase(&row("engine", "success", now - 7_200_000), now),
            "engine moved it to build (success) 2 h ago"
        );
        assert_eq!(
            phrase(&row("\x1b[31mmallory", "approve", now - 90_000_000), now),
            "mallory approved it 1 d ago"
        );
    }
}
