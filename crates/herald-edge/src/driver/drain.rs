//! Helpers for encoding what an outbox hands out, shared by the transports that write a batch
//! of messages: SSE (served directly or as hyper's body, both through `SseStream`'s encoding),
//! long-poll and Meteor's subscribers. The WebSocket wire does the same in its own encoding
//! loop (`ws/wire.rs`), in the one pass over the batch that writes its frames.

use std::collections::VecDeque;

use herald_core::message::SharedMessage;
use herald_core::outbox::OutFrame;

/// Records the delivery lag of a batch's oldest live message (replayed ones are not live), as
/// every transport that writes a batch does once per batch.
pub fn record_lag(frames: &VecDeque<OutFrame>) {
    if let Some(OutFrame::Message(oldest)) =
        frames.iter().find(|f| matches!(f, OutFrame::Message(_)))
    {
        herald_core::message::record_delivery_lag(oldest);
    }
}

/// The messages of a batch (live and replayed), oldest first, without its control frames.
pub fn messages<'a>(
    frames: impl IntoIterator<Item = &'a OutFrame>,
) -> impl Iterator<Item = &'a SharedMessage> {
    frames.into_iter().filter_map(|f| match f {
        OutFrame::Message(m) | OutFrame::Replayed(m) => Some(m),
        OutFrame::Control(_) | OutFrame::Presence(_) => None,
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use bytes::Bytes;
    use herald_core::message::StoredMessage;
    use herald_core::{ChannelName, Epoch};

    fn message(seq: u64) -> SharedMessage {
        let channel = ChannelName::parse("news").expect("a channel name");
        let data = Bytes::from_static(b"{}");
        Arc::new(StoredMessage::new(
            channel,
            Epoch::new("e"),
            seq,
            None,
            0,
            data,
        ))
    }

    #[test]
    fn messages_are_the_live_and_replayed_ones_in_order() {
        let frames: VecDeque<OutFrame> = [
            OutFrame::Control(Bytes::from_static(b"subscribed")),
            OutFrame::Replayed(message(1)),
            OutFrame::Control(Bytes::from_static(b"reply")),
            OutFrame::Message(message(2)),
        ]
        .into();
        let seqs: Vec<u64> = messages(&frames).map(|m| m.seq).collect();
        assert_eq!(seqs, [1, 2]);
        let controls = [OutFrame::Control(Bytes::from_static(b"pong"))];
        assert_eq!(messages(&controls).count(), 0);
    }
}
