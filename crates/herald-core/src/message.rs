//! Messages: what a publisher sends, what the log stores and fans out, with its encode-once frame
//! cache (`frame_cache`: a message holds the encodings asked of it, each in the [`FrameSlot`] its
//! protocol reserved). The `(epoch, seq)` position every transport resumes from ([`Cursor`],
//! [`Epoch`]) is part of the wire contract and re-exported from `herald-proto`.

use std::any::Any;
use std::fmt;
use std::sync::{Arc, OnceLock};

use bytes::Bytes;

use crate::name::ChannelName;
use crate::tenant::AppId;

mod frame_cache;

use frame_cache::FrameCache;
pub use frame_cache::FrameSlot;
pub use herald_proto::cursor::{Cursor, Epoch};

/// A message as a publisher hands it to the engine.
#[derive(Debug, Clone)]
pub struct NewMessage {
    /// Client-supplied idempotency key, if any.
    pub id: Option<String>,
    /// The payload: JSON text, already validated.
    pub data: Bytes,
    /// What storing it does to its channel's retained message (MQTT's RETAIN flag); nothing
    /// for every transport but MQTT.
    pub retain: Retain,
    /// An MQTT persistent session's inbound QoS 2 state written with it ([`SessionHold`]): the
    /// hold its message takes, the releases riding its commit; none for every other message.
    pub hold: Option<Box<SessionHold>>,
}

/// What an append writes of an MQTT persistent session's inbound QoS 2 exchanges, in its own
/// transaction (herald-mqtt's `inbound.rs`, `session/flusher.rs`):
/// - the **hold** its message takes (a QoS 2 publish): the client's packet identifier and the
///   number `n` of the idempotency key the message is stored with, written whether the message
///   is new or a duplicate of one stored with its key, replacing a hold of the same packet
///   identifier, so the PUBREC waits for one commit and a hold in the store means its message
///   is stored;
/// - the **releases** of the session's earlier holds whose PUBREL came (and PUBCOMP went)
///   since: each deleted only if the session's hold of that packet identifier still has that
///   `n`, so a release rides the session's next append (of any QoS) instead of a commit of its
///   own. Written before the hold: a release never deletes a hold of its own append.
///
/// Kept apart from the channel's history, as the retained message is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionHold {
    /// The session's app.
    pub app: AppId,
    /// The session's client identifier.
    pub client_id: String,
    /// The packet identifier this message holds until its PUBREL, with its key's number;
    /// `None` for a message that carries releases only.
    pub held: Option<HeldPacket>,
    /// The session's holds released since its last append, each with its key's number.
    pub released: Vec<HeldPacket>,
}

/// One inbound QoS 2 exchange of an MQTT session ([`SessionHold`]): the client's packet
/// identifier and the number `n` in the idempotency key its message is stored with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HeldPacket {
    /// The client's packet identifier.
    pub packet_id: u16,
    /// The number in the message's idempotency key.
    pub n: u64,
}

/// What an append does to its channel's **retained message**, the one an MQTT client last
/// published with RETAIN 1 (docs/mqtt.md, "Retained messages"). The store writes it in the
/// append's own transaction, so it is as durable as the message and costs no commit of its own;
/// in a cluster the write with the higher seq wins. Kept apart from the channel's history:
/// trimming the history never removes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Retain {
    /// Leaves the retained message as it is (every message but an MQTT RETAIN 1 one).
    #[default]
    Untouched,
    /// The message becomes the retained message, until replaced, cleared, or (when set) the
    /// time `expires_at_ms` (ms since the Unix epoch; MQTT 5's Message Expiry Interval) passes.
    Keep {
        /// When it stops being retained, if ever.
        expires_at_ms: Option<u64>,
    },
    /// The channel has no retained message from now on (an MQTT retained empty payload).
    Clear,
}

/// A message as stored in a channel log and fanned out to subscribers.
pub struct StoredMessage {
    /// Channel it belongs to.
    pub channel: ChannelName,
    /// Position in the channel, from 1.
    pub seq: u64,
    /// Idempotency key supplied by the publisher, or `None` when generated.
    pub client_id: Option<String>,
    /// Time it was stored, in milliseconds since the Unix epoch.
    pub time: i64,
    /// The payload: JSON text.
    pub data: Bytes,
    /// The epoch of the log it was appended to.
    pub epoch: Epoch,
    /// The message's wire encodings, each encoded once and shared by every connection that
    /// sends it ([`StoredMessage::frame`]).
    frames: FrameCache,
    /// What another crate reads from the payload, parsed once per message and shared by every
    /// subscriber ([`StoredMessage::extension`]).
    extension: OnceLock<Option<Extension>>,
}

/// A value another crate derives from a message's payload (see [`StoredMessage::extension`]).
type Extension = Box<dyn Any + Send + Sync>;

impl StoredMessage {
    /// Builds a stored message.
    pub fn new(
        channel: ChannelName,
        epoch: Epoch,
        seq: u64,
        client_id: Option<String>,
        time: i64,
        data: Bytes,
    ) -> Self {
        StoredMessage {
            channel,
            seq,
            client_id,
            time,
            data,
            epoch,
            frames: Default::default(),
            extension: OnceLock::new(),
        }
    }

    /// The message id: the publisher's idempotency key, or `<epoch>-<seq>` when none was given.
    pub fn id(&self) -> String {
        match &self.client_id {
            Some(id) => id.clone(),
            None => {
                // Written without `format!`: every publish's answer and every message's frame
                // ask for it.
                let mut seq = itoa::Buffer::new();
                let seq = seq.format(self.seq);
                let epoch = self.epoch.as_str();
                let mut id = String::with_capacity(epoch.len() + 1 + seq.len());
                id.push_str(epoch);
                id.push('-');
                id.push_str(seq);
                id
            }
        }
    }

    /// What `parse` reads from this message, parsed the first time it is asked for and kept
    /// with the message, so every subscriber's filter shares one parse. `None` when `parse`
    /// found nothing. One message holds one extension: the channels that use this keep one
    /// kind of value in it (a later call asking for another type gets `None`).
    pub fn extension<T: Any + Send + Sync>(
        &self,
        parse: impl FnOnce(&StoredMessage) -> Option<T>,
    ) -> Option<&T> {
        self.extension
            .get_or_init(|| parse(self).map(|value| Box::new(value) as Extension))
            .as_ref()
            .and_then(|value| value.downcast_ref::<T>())
    }

    /// The message encoded as `slot` says, encoding it with `encode` the first time it is asked
    /// for. Threads asking at once may each encode; one encoding is kept and every caller gets it.
    /// `encode` must always give the same bytes for a slot: use one encoder per slot.
    pub fn frame(&self, slot: FrameSlot, encode: impl FnOnce(&StoredMessage) -> Bytes) -> Bytes {
        self.frame_ref(slot, encode).clone()
    }

    /// [`StoredMessage::frame`], borrowed: a writer that copies the frame into its own buffer
    /// then touches no reference count shared with every other subscriber's writer.
    pub fn frame_ref(
        &self,
        slot: FrameSlot,
        encode: impl FnOnce(&StoredMessage) -> Bytes,
    ) -> &Bytes {
        self.frames.get_or_encode(slot, || encode(self))
    }
}

impl fmt::Debug for StoredMessage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoredMessage")
            .field("channel", &self.channel)
            .field("seq", &self.seq)
            .field("epoch", &self.epoch)
            .field("client_id", &self.client_id)
            .finish_non_exhaustive()
    }
}

/// Records how long ago `message` was stored, as the `herald_delivery_lag_seconds` histogram:
/// the publish-to-write latency. Transports call it once per written batch, with the batch's
/// oldest message, so the cost does not grow with the number of subscribers.
pub fn record_delivery_lag(message: &StoredMessage) {
    let lag_ms = (now_millis() - message.time).max(0);
    crate::telemetry::telemetry()
        .delivery_lag
        .record(lag_ms as f64 / 1000.0);
}

/// Current time in milliseconds since the Unix epoch.
pub fn now_millis() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// A reference-counted stored message; what the hub and outboxes carry.
pub type SharedMessage = Arc<StoredMessage>;

/// A message of epoch `e`, stored at time 0, for the crate's unit tests.
#[cfg(test)]
pub(crate) fn test_message(channel: &ChannelName, seq: u64, data: &'static [u8]) -> SharedMessage {
    Arc::new(StoredMessage::new(
        channel.clone(),
        Epoch::new("e"),
        seq,
        None,
        0,
        Bytes::from_static(data),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stored message's size on a 64-bit target: one link to its list of frames, whatever the
    /// number of frame slots reserved (288 bytes when it held one inline frame cell per kind of
    /// frame, four of 40 bytes each). Pinned, so that a message growing is a decision.
    const STORED_MESSAGE_BYTES: usize = 144;

    #[test]
    #[cfg(target_pointer_width = "64")]
    fn a_stored_message_keeps_its_pinned_size() {
        assert_eq!(std::mem::size_of::<StoredMessage>(), STORED_MESSAGE_BYTES);
        // Each encoding used adds one list node on the heap; jemalloc's size class is 64 bytes.
        const { assert!(frame_cache::NODE_BYTES <= 64) };
    }

    #[test]
    fn a_message_id_is_the_publishers_key_or_epoch_dash_seq() {
        let channel = ChannelName::parse("news").unwrap();
        let at = |seq, id: Option<&str>| {
            StoredMessage::new(
                channel.clone(),
                Epoch::new("9f3c"),
                seq,
                id.map(str::to_owned),
                0,
                Bytes::new(),
            )
            .id()
        };
        assert_eq!(at(0, None), "9f3c-0");
        assert_eq!(at(42, None), "9f3c-42");
        assert_eq!(at(u64::MAX, None), "9f3c-18446744073709551615");
        assert_eq!(at(7, Some("order-17")), "order-17");
    }

    #[test]
    fn a_message_holds_only_the_encodings_asked_of_it() {
        let channel = ChannelName::parse("news").unwrap();
        let m = test_message(&channel, 1, b"1");
        assert_eq!(m.frames.len(), 0);
        crate::frames::message_entry(&m);
        assert_eq!(m.frames.len(), 1);
        crate::frames::ws_message(&m);
        assert_eq!(m.frames.len(), 2, "the entry and the push built from it");
        let text = FrameSlot::reserve("text");
        assert_eq!(&m.frame(text, |m| m.data.clone())[..], b"1");
        assert_eq!(&m.frame(text, |_| Bytes::from_static(b"again"))[..], b"1");
        assert_eq!(m.frames.len(), 3);
    }
}
