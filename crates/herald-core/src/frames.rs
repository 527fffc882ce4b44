//! Herald's own wire frames of a stored message (the JSON entry, the WebSocket push, the SSE
//! `data:` lines), encoded once per message and per frame through its frame cache
//! ([`StoredMessage::frame`], in core's well-known [`FrameSlot`]s) with `herald-proto`'s
//! encoders, and shared by every connection that sends them; plus history bodies built from those
//! cached entries. Other protocols reserve their own slots ([`FrameSlot::reserve`]).

use bytes::Bytes;
use herald_proto::frame::{self, HistoryHead, MessageView};

use crate::log::LogSlice;
use crate::message::{FrameSlot, StoredMessage};

/// The message's JSON entry (`{"channel","seq","epoch","id","time","data"}`), as history,
/// long-poll and the WebSocket `message` push carry it.
pub fn message_entry(m: &StoredMessage) -> Bytes {
    m.frame(FrameSlot::JSON_ENTRY, |m| {
        let id = m.id();
        frame::message_entry(&MessageView {
            channel: m.channel.public(),
            seq: m.seq,
            epoch: m.epoch.as_str(),
            id: &id,
            time: m.time,
            data: &m.data,
        })
    })
}

/// The WebSocket push of a message: `{"message":{...entry...}}`.
pub fn ws_message(m: &StoredMessage) -> Bytes {
    ws_message_ref(m).clone()
}

/// [`ws_message`], borrowed from the message's frame cache.
pub fn ws_message_ref(m: &StoredMessage) -> &Bytes {
    m.frame_ref(FrameSlot::WS_JSON, |m| frame::ws_message(&message_entry(m)))
}

/// The `data:` lines of an SSE event for a message (its entry, split on line breaks). The
/// `id:` line is per connection and not included.
pub fn sse_data(m: &StoredMessage) -> Bytes {
    m.frame(FrameSlot::SSE_DATA, |m| {
        frame::sse_data_lines(&message_entry(m))
    })
}

/// A history read as JSON: `{"channel","epoch","seq",["first_seq",]"messages":[...]}`. The HTTP
/// API includes `first_seq`; the WebSocket `history` reply does not.
pub fn history(slice: &LogSlice, with_first_seq: bool) -> Vec<u8> {
    let state = &slice.state;
    let entries: Vec<Bytes> = slice.messages.iter().map(|m| message_entry(m)).collect();
    frame::history(
        &HistoryHead {
            channel: state.name.public(),
            epoch: state.epoch.as_str(),
            seq: state.last_seq,
            first_seq: with_first_seq.then_some(state.first_seq),
        },
        &entries,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ChannelName, Epoch};

    fn msg(data: &'static str) -> StoredMessage {
        StoredMessage::new(
            ChannelName::parse("news").unwrap(),
            Epoch::new("e1"),
            58,
            None,
            1700,
            Bytes::from_static(data.as_bytes()),
        )
    }

    #[test]
    fn message_frames_are_encoded_once_and_agree_with_proto() {
        let m = msg(r#"{"t":"hello"}"#);
        let ws = ws_message(&m);
        assert_eq!(
            &ws[..],
            br#"{"message":{"channel":"news","seq":58,"epoch":"e1","id":"e1-58","time":1700,"data":{"t":"hello"}}}"#
        );
        assert_eq!(ws.as_ptr(), ws_message(&m).as_ptr(), "encoded once");
        let entry = message_entry(&m);
        assert_eq!(entry.as_ptr(), message_entry(&m).as_ptr(), "encoded once");
        assert_eq!(&sse_data(&m)[..], &frame::sse_data_lines(&entry)[..]);
    }

    #[test]
    fn history_carries_first_seq_only_when_asked() {
        let m = std::sync::Arc::new(msg("1"));
        let mut state = crate::log::ChannelState::empty(m.channel.clone());
        state.epoch = Epoch::new("e1");
        state.last_seq = 58;
        state.first_seq = 58;
        let slice = LogSlice {
            state,
            messages: vec![m],
        };
        let entry = r#"{"channel":"news","seq":58,"epoch":"e1","id":"e1-58","time":1700,"data":1}"#;
        assert_eq!(
            String::from_utf8(history(&slice, true)).unwrap(),
            format!(
                r#"{{"channel":"news","epoch":"e1","seq":58,"first_seq":58,"messages":[{entry}]}}"#
            )
        );
        assert_eq!(
            String::from_utf8(history(&slice, false)).unwrap(),
            format!(r#"{{"channel":"news","epoch":"e1","seq":58,"messages":[{entry}]}}"#)
        );
    }
}
