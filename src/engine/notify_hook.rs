//! The `notify` hook: a message for people. Every attached board rings its bell and posts a
//! desktop notification (OSC 777 and OSC 9) through the engine's events; the engine calls
//! `notify-send` where it is installed (argv only, never a shell) and writes the message to
//! its log. The text is sanitised here and again where a terminal receives it.

use super::EngineEvent;
use crate::store::Task;
use serde_json::Value;
use std::time::Duration;
use tokio::sync::broadcast;

/// Longest message a notification carries.
const MAX_MESSAGE: usize = 300;
/// How long `notify-send` may take.
const SEND_TIMEOUT: Duration = Duration::from_secs(5);

/// The notification's title and body for a task's move `from` → `to`.
pub fn message(spec: &Value, task: &Task, from: &str, to: &str) -> (String, String) {
    let id = task.id.to_string();
    let template = spec
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("{{title}}: {{from}} → {{to}}");
    let body = crate::agents::fill(template, |name| match name {
        "title" => Some(task.title.as_str()),
        "id" => Some(id.as_str()),
        "from" => Some(from),
        "to" | "status" => Some(to),
        "pipeline" => Some(task.pipeline_id.as_str()),
        _ => None,
    });
    let clean = |s: &str| -> String {
        crate::ansi::strip(s)
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .take(MAX_MESSAGE)
            .collect::<String>()
            .trim()
            .to_string()
    };
    (clean(&format!("baton: task {}", task.id)), clean(&body))
}

/// Sends the notification; its one-line result for the hook's record.
pub(super) async fn notify(
    events: &broadcast::Sender<EngineEvent>,
    spec: &Value,
    task: &Task,
    from: &str,
    to: &str,
) -> Result<String, String> {
    let (title, body) = message(spec, task, from, to);
    tracing::info!("notify: {title}: {body}");
    let boards = events
        .send(EngineEvent::Notify {
            task_id: task.id,
            title: title.clone(),
            body: body.clone(),
        })
        .unwrap_or(0);
    let desktop = notify_send(&title, &body).await;
    Ok(format!("{body} ({boards} subscriber(s){desktop})"))
}

/// Runs `notify-send TITLE BODY` when it is on PATH; what happened, for the record.
async fn notify_send(title: &str, body: &str) -> String {
    let Some(path) = find_on_path("notify-send") else {
        return String::new();
    };
    let child = tokio::process::Command::new(path)
        .arg("--app-name=baton")
        .arg("--")
        .arg(title)
        .arg(body)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .status();
    match tokio::time::timeout(SEND_TIMEOUT, child).await {
        Ok(Ok(s)) if s.success() => ", notify-send".into(),
        Ok(Ok(s)) => format!(", notify-send failed ({s})"),
        Ok(Err(e)) => format!(", notify-send failed ({e})"),
        Err(_) => ", notify-send timed out".into(),
    }
}

fn find_on_path(name: &str) -> Option<std::path::PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn task(title: &str) -> Task {
        let dir = tempfile::tempdir().unwrap();
        let mut store = crate::store::Store::open(&dir.path().join("t.db")).unwrap();
        let demo = crate::pipeline::load_catalog(None, None)
            .get("demo")
            .unwrap()
            .clone();
        let id = store
            .write(|db| super::super::create_task(db, &demo, title, ""))
            .unwrap();
        store.read().task(id).unwrap()
    }

    #[test]
    fn the_message_is_filled_and_stripped_of_escapes() {
        let t = task("ship \x1b]0;owned\x07it\nnow");
        let (title, body) = message(&json!({}), &t, "review", "done");
        assert_eq!(title, format!("baton: task {}", t.id));
        assert!(!body.contains('\x1b') && !body.contains('\n'), "{body:?}");
        assert!(body.ends_with("review → done"), "{body:?}");
        let (_, body) = message(&json!({"message": "#{{id}} {{to}}"}), &t, "a", "b");
        assert_eq!(body, format!("#{} b", t.id));
    }
}
