//! A stream-json conversation with a running CLI (`"input": "stream-json"`): the prompt
//! and what is said to the step while it runs go to its standard input as user messages,
//! and the input closes once each has had its turn.

use crate::exec::executor::MoreInput;
use tokio::sync::mpsc;

/// A stream-json conversation with a running CLI: the user messages written to its input,
/// and the turns it has ended.
pub(super) struct Talk {
    /// The input's sender; dropped (closing the input) once every message has its turn.
    tx: Option<mpsc::UnboundedSender<Vec<u8>>>,
    pub input: MoreInput,
    /// The messages said to the step, when this step takes them.
    inbox: Option<mpsc::UnboundedReceiver<super::LiveMessage>>,
    sent: usize,
    ended: usize,
}

impl Talk {
    pub fn new(inbox: Option<&super::Inbox>) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        Self {
            tx: Some(tx),
            input: MoreInput::new(rx),
            inbox: inbox.and_then(|i| i.lock().ok()?.take()),
            // The prompt is the first message.
            sent: 1,
            ended: 0,
        }
    }

    /// Writes a user message; false when the input is closed (or was never taken).
    pub fn send(&mut self, text: &str) -> bool {
        let Some(tx) = &self.tx else { return false };
        if tx.send(user_line(text)).is_err() {
            self.close();
            return false;
        }
        self.sent += 1;
        true
    }

    /// A `result` event: once each message sent has had its turn, the input is closed, or
    /// the CLI would wait for more.
    pub fn turn_ended(&mut self) {
        self.ended += 1;
        if self.ended >= self.sent {
            self.close();
        }
    }

    /// Closes the input, and the inbox with it: what is said from now on is refused at once
    /// (the engine keeps it for the next step) instead of waiting here unread.
    fn close(&mut self) {
        self.tx = None;
        self.inbox = None;
    }
}

/// The next message said to the step; pending forever when there is none to wait for.
pub(super) async fn next_said(talk: &mut Option<Talk>) -> super::LiveMessage {
    let inbox = talk
        .as_mut()
        .filter(|t| t.tx.is_some())
        .and_then(|t| t.inbox.as_mut());
    match inbox {
        Some(rx) => match rx.recv().await {
            Some(m) => m,
            None => std::future::pending().await,
        },
        None => std::future::pending().await,
    }
}

/// A user message as Claude Code's `--input-format stream-json` reads it: one JSON line.
pub(super) fn user_line(text: &str) -> Vec<u8> {
    let mut line = serde_json::to_vec(&serde_json::json!({
        "type": "user",
        "message": {"role": "user", "content": text},
    }))
    .unwrap_or_default();
    line.push(b'\n');
    line
}

/// True for a stream-json `result` event (the end of a turn).
pub(super) fn is_result(line: &str) -> bool {
    line.contains("\"result\"")
        && serde_json::from_str::<serde_json::Value>(line)
            .is_ok_and(|v| v.get("type").and_then(|t| t.as_str()) == Some("result"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_input_closes_once_every_message_has_had_its_turn() {
        let mut t = Talk::new(None);
        assert!(t.send("also add tests"));
        t.turn_ended();
        assert!(t.tx.is_some(), "the second message has not had its turn");
        t.turn_ended();
        assert!(t.tx.is_none());
        assert!(!t.send("too late"), "a closed input takes nothing");
        let line = user_line("a \"quote\"\nand a line");
        assert_eq!(line.last(), Some(&b'\n'));
        assert_eq!(line.iter().filter(|b| **b == b'\n').count(), 1, "one line");
        let v: serde_json::Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(v["type"], "user");
        assert_eq!(v["message"]["role"], "user");
        assert_eq!(v["message"]["content"], "a \"quote\"\nand a line");
        assert!(is_result(
            r#"{"type":"result","subtype":"success","result":"x"}"#
        ));
        assert!(!is_result(
            r#"{"type":"assistant","message":{"content":"result"}}"#
        ));
    }

    #[test]
    fn a_closed_input_refuses_what_is_said_from_then_on() {
        let (said, rx) = mpsc::unbounded_channel();
        let inbox: super::super::Inbox = std::sync::Arc::new(std::sync::Mutex::new(Some(rx)));
        let mut t = Talk::new(Some(&inbox));
        assert!(inbox.lock().unwrap().is_none(), "the talk took the inbox");
        let m = |id| super::super::LiveMessage {
            id,
            text: "hi".into(),
            heard: None,
        };
        assert!(said.send(m(1)).is_ok(), "an open input hears it");
        t.turn_ended();
        // The sender sees it at once: the engine keeps the message for the next step.
        assert!(said.send(m(2)).is_err(), "a closed input must refuse it");
    }
}
