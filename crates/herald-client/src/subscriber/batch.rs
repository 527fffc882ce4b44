//! Sending a connection's subscribes as batches (docs/protocol.md, "Batches": a JSON array of
//! commands in one WebSocket message, each answered as if sent alone), and falling back to one
//! command a message with a server that predates them. Such a server answers a batch with one
//! `bad_request` error without an id (`frame is not a JSON object`) and runs nothing of it: the
//! commands of that batch are sent again one to a message, and so is everything after it on
//! that connection. A server that closes the connection with 1009 (message too big: its
//! `max_frame_bytes` is below a batch) makes every later connection send one to a message.

use std::collections::VecDeque;

use herald_proto::command::ClientFrame;
use herald_proto::reply::ErrorBody;

/// At most this many commands in one batch.
pub(super) const MAX_BATCH_COMMANDS: usize = 100;
/// At most this many bytes of commands in one batch: a quarter of the server's default
/// `max_frame_bytes` (64 KiB).
pub(super) const MAX_BATCH_BYTES: usize = 16 * 1024;
/// The WebSocket close code for a message over the server's size limit.
const MESSAGE_TOO_BIG: u16 = 1009;

/// One command, written: its id and its JSON text.
#[derive(Debug)]
struct Written {
    id: Option<u64>,
    text: String,
}

/// Whether batches are sent, and the batches of the current connection not yet known to be
/// understood.
#[derive(Debug, Default)]
pub(super) struct Batching {
    /// A server closed a connection with 1009: batches are never sent again.
    too_big: bool,
    /// The current connection's server refused a batch: one command a message from now on.
    refused: bool,
    /// Batches sent on this connection before any of their commands was answered, oldest first.
    unconfirmed: VecDeque<Vec<Written>>,
}

impl Batching {
    /// A new connection: batches are tried again (unless a server found them too big).
    pub(super) fn new_connection(&mut self) {
        self.refused = false;
        self.unconfirmed.clear();
    }

    /// The text messages that carry `frames`: batches of at most [`MAX_BATCH_COMMANDS`]
    /// commands and [`MAX_BATCH_BYTES`] bytes while batches are on (a batch of one command is
    /// that command alone), else one command a message. Batches are remembered until answered.
    pub(super) fn plan(&mut self, frames: &[ClientFrame]) -> Vec<String> {
        let written = frames.iter().map(|frame| Written {
            id: frame.id,
            // A command always serialises: its fields are strings, numbers and JSON values.
            text: serde_json::to_string(frame).unwrap_or_default(),
        });
        if self.too_big || self.refused {
            return written.map(|w| w.text).collect();
        }
        let mut out = Vec::new();
        let mut batch: Vec<Written> = Vec::new();
        let mut bytes = 2;
        for w in written {
            let size = w.text.len() + 1;
            if !batch.is_empty()
                && (batch.len() == MAX_BATCH_COMMANDS || bytes + size > MAX_BATCH_BYTES)
            {
                out.push(self.close(std::mem::take(&mut batch)));
                bytes = 2;
            }
            bytes += size;
            batch.push(w);
        }
        if !batch.is_empty() {
            out.push(self.close(batch));
        }
        out
    }

    /// The message holding `batch`.
    fn close(&mut self, mut batch: Vec<Written>) -> String {
        if batch.len() == 1 {
            return batch.remove(0).text;
        }
        let mut text =
            String::with_capacity(batch.iter().map(|w| w.text.len() + 1).sum::<usize>() + 1);
        for (i, w) in batch.iter().enumerate() {
            text.push(if i == 0 { '[' } else { ',' });
            text.push_str(&w.text);
        }
        text.push(']');
        self.unconfirmed.push_back(batch);
        text
    }

    /// A frame answering request `id`: the server understood the batches sent before it.
    pub(super) fn answered(&mut self, id: u64) {
        if self
            .unconfirmed
            .iter()
            .any(|b| b.iter().any(|w| w.id == Some(id)))
        {
            self.unconfirmed.clear();
        }
    }

    /// An `error` without an id: when it is a server's refusal of the oldest batch still
    /// unanswered, that batch's commands to send again, one a message (and batches stop for
    /// this connection); `None` when it is some other error.
    pub(super) fn refused(&mut self, error: &ErrorBody<'_>) -> Option<Vec<String>> {
        let refusal =
            error.code == "bad_request" && error.message.starts_with("frame is not a JSON object");
        if !refusal {
            return None;
        }
        let batch = self.unconfirmed.pop_front()?;
        self.refused = true;
        Some(batch.into_iter().map(|w| w.text).collect())
    }

    /// The connection closed with `code`: 1009 turns batches off for good.
    pub(super) fn closed_with(&mut self, code: u16) {
        if code == MESSAGE_TOO_BIG && !self.unconfirmed.is_empty() {
            self.too_big = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use herald_proto::command::{Command, Subscribe};
    use std::borrow::Cow;

    fn subscribes(ids: std::ops::RangeInclusive<u64>, channel: &str) -> Vec<ClientFrame> {
        ids.map(|id| ClientFrame {
            id: Some(id),
            command: Command::Subscribe(Subscribe {
                channel: channel.into(),
                ..Default::default()
            }),
        })
        .collect()
    }

    /// How many commands each message holds.
    fn sizes(out: &[String]) -> Vec<usize> {
        out.iter()
            .map(|text| match serde_json::from_str(text).unwrap() {
                serde_json::Value::Array(a) => a.len(),
                _ => 1,
            })
            .collect()
    }

    fn old_servers_answer() -> ErrorBody<'static> {
        ErrorBody {
            code: Cow::Borrowed("bad_request"),
            message: Cow::Borrowed(
                "frame is not a JSON object: invalid type: sequence, expected a map at line 1 column 1",
            ),
        }
    }

    #[test]
    fn batches_are_bounded_by_count_and_bytes() {
        let mut b = Batching::default();
        let out = b.plan(&subscribes(1..=250, "news"));
        assert_eq!(sizes(&out), [100, 100, 50]);
        assert!(
            out[0].starts_with(r#"[{"id":1,"subscribe":{"channel":"news"}},{"id":2,"#),
            "{}",
            &out[0][..80]
        );
        let long = "n".repeat(4000);
        let out = b.plan(&subscribes(1..=9, &long));
        assert_eq!(sizes(&out), [4, 4, 1], "16 KiB at most");
        assert!(out.iter().all(|m| m.len() <= MAX_BATCH_BYTES));
        let out = b.plan(&subscribes(1..=1, "alone"));
        assert_eq!(out, [r#"{"id":1,"subscribe":{"channel":"alone"}}"#]);
    }

    #[test]
    fn a_refused_batch_is_sent_again_alone_and_batches_stop_on_that_connection() {
        let mut b = Batching::default();
        b.plan(&subscribes(1..=150, "c"));
        let again = b.refused(&old_servers_answer()).expect("the first batch");
        assert_eq!(again.len(), 100);
        assert_eq!(again[0], r#"{"id":1,"subscribe":{"channel":"c"}}"#);
        let again = b.refused(&old_servers_answer()).expect("the second batch");
        assert_eq!(again.len(), 50);
        assert!(b.refused(&old_servers_answer()).is_none(), "none left");
        assert_eq!(sizes(&b.plan(&subscribes(1..=3, "c"))), [1, 1, 1]);
        b.new_connection();
        assert_eq!(sizes(&b.plan(&subscribes(1..=3, "c"))), [3]);
    }

    #[test]
    fn an_answer_confirms_batches_and_other_errors_are_not_refusals() {
        let mut b = Batching::default();
        b.plan(&subscribes(1..=3, "c"));
        let other = ErrorBody {
            code: Cow::Borrowed("bad_request"),
            message: Cow::Borrowed("binary messages are not supported"),
        };
        assert!(b.refused(&other).is_none());
        b.answered(2);
        assert!(b.refused(&old_servers_answer()).is_none(), "understood");
        b.closed_with(1009);
        assert_eq!(sizes(&b.plan(&subscribes(1..=2, "c"))), [2]);
    }

    #[test]
    fn a_batch_too_big_for_the_server_turns_batches_off() {
        let mut b = Batching::default();
        b.plan(&subscribes(1..=3, "c"));
        b.closed_with(1009);
        b.new_connection();
        assert_eq!(sizes(&b.plan(&subscribes(1..=3, "c"))), [1, 1, 1]);
    }
}
