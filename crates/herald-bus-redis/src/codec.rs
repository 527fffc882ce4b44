//! The bus's binary encoding of committed messages: one [`Batch`] per Redis publish, holding
//! one channel's messages (several when they queued up) and the newest seq the publishing node
//! knows for that channel, so a receiver that sees `head` beyond what it holds knows it has a
//! gap even when the batch carries no message (a head notice, sent after a dropped publish).
//!
//! ```text
//! u8  version (1)
//! u64 origin node id
//! u16 channel length, channel bytes (the full, app-scoped name)
//! u64 head
//! u16 message count, then per message:
//!     u8 epoch length, epoch bytes; u64 seq; i64 time (ms);
//!     u8 0 | 1 (client id?), [u16 length, client id bytes];
//!     u32 data length, data bytes
//! ```
//! All integers big-endian. Parsing checks every length against what is left and every name
//! against its grammar: a malformed payload is an error, never a panic.

use std::sync::Arc;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use herald_core::message::{Epoch, SharedMessage, StoredMessage};
use herald_core::ChannelName;

use crate::error::DecodeError;

const VERSION: u8 = 1;

/// One publish: messages of one channel, in seq order, from one node.
#[derive(Debug, Clone)]
pub struct Batch {
    /// The node that committed them.
    pub origin: u64,
    /// Their channel.
    pub channel: ChannelName,
    /// The newest seq the origin knows for the channel (at least the last message's).
    pub head: u64,
    /// The messages, oldest first (none for a head notice).
    pub messages: Vec<SharedMessage>,
}

/// Encodes a batch of `channel`'s messages (all of that channel, oldest first).
pub fn encode_batch(
    origin: u64,
    channel: &ChannelName,
    head: u64,
    messages: &[SharedMessage],
) -> Bytes {
    let size: usize = messages
        .iter()
        .map(|m| {
            32 + m.epoch.as_str().len() + m.client_id.as_ref().map_or(0, String::len) + m.data.len()
        })
        .sum();
    let mut out = BytesMut::with_capacity(16 + channel.as_str().len() + size);
    out.put_u8(VERSION);
    out.put_u64(origin);
    put_str16(&mut out, channel.as_str());
    out.put_u64(head);
    // A batch never holds more than u16::MAX messages: the sender splits longer runs.
    out.put_u16(messages.len().min(u16::MAX as usize) as u16);
    for m in messages.iter().take(u16::MAX as usize) {
        let epoch = m.epoch.as_str();
        out.put_u8(epoch.len().min(255) as u8);
        out.put_slice(&epoch.as_bytes()[..epoch.len().min(255)]);
        out.put_u64(m.seq);
        out.put_i64(m.time);
        match &m.client_id {
            Some(id) => {
                out.put_u8(1);
                put_str16(&mut out, id);
            }
            None => out.put_u8(0),
        }
        out.put_u32(m.data.len() as u32);
        out.put_slice(&m.data);
    }
    out.freeze()
}

/// Parses a batch; message data are slices of `payload` (no copy).
pub fn decode_batch(payload: &Bytes) -> Result<Batch, DecodeError> {
    let mut r = Reader(payload.clone());
    if r.u8()? != VERSION {
        return Err(DecodeError::Version);
    }
    let origin = r.u64()?;
    let name = r.str16()?;
    let channel = herald_core::tenant::parse_full(&name).map_err(|_| DecodeError::Channel)?;
    let head = r.u64()?;
    let count = r.u16()?;
    let mut messages = Vec::with_capacity(usize::from(count).min(r.0.len() / 22 + 1));
    for _ in 0..count {
        let epoch_len = usize::from(r.u8()?);
        let epoch = r.string(epoch_len)?;
        let seq = r.u64()?;
        let time = r.i64()?;
        let client_id = match r.u8()? {
            0 => None,
            1 => Some(r.str16()?),
            _ => return Err(DecodeError::Malformed("client id flag")),
        };
        let data_len = r.u32()? as usize;
        let data = r.take(data_len)?;
        messages.push(Arc::new(StoredMessage::new(
            channel.clone(),
            Epoch::new(&epoch),
            seq,
            client_id,
            time,
            data,
        )));
    }
    if !r.0.is_empty() {
        return Err(DecodeError::Malformed("trailing bytes"));
    }
    Ok(Batch {
        origin,
        channel,
        head,
        messages,
    })
}

pub(crate) fn put_str16(out: &mut BytesMut, s: &str) {
    let len = s.len().min(u16::MAX as usize);
    out.put_u16(len as u16);
    out.put_slice(&s.as_bytes()[..len]);
}

/// A cursor over a payload that fails instead of panicking when it runs short.
pub(crate) struct Reader(pub(crate) Bytes);

impl Reader {
    fn need(&self, n: usize) -> Result<(), DecodeError> {
        if self.0.remaining() < n {
            Err(DecodeError::Truncated)
        } else {
            Ok(())
        }
    }
    pub(crate) fn u8(&mut self) -> Result<u8, DecodeError> {
        self.need(1)?;
        Ok(self.0.get_u8())
    }
    pub(crate) fn u16(&mut self) -> Result<u16, DecodeError> {
        self.need(2)?;
        Ok(self.0.get_u16())
    }
    pub(crate) fn u32(&mut self) -> Result<u32, DecodeError> {
        self.need(4)?;
        Ok(self.0.get_u32())
    }
    pub(crate) fn u64(&mut self) -> Result<u64, DecodeError> {
        self.need(8)?;
        Ok(self.0.get_u64())
    }
    pub(crate) fn i64(&mut self) -> Result<i64, DecodeError> {
        self.need(8)?;
        Ok(self.0.get_i64())
    }
    pub(crate) fn take(&mut self, n: usize) -> Result<Bytes, DecodeError> {
        self.need(n)?;
        Ok(self.0.split_to(n))
    }
    pub(crate) fn string(&mut self, n: usize) -> Result<String, DecodeError> {
        let bytes = self.take(n)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| DecodeError::Malformed("text"))
    }
    pub(crate) fn str16(&mut self) -> Result<String, DecodeError> {
        let n = usize::from(self.u16()?);
        self.string(n)
    }
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn message(
        channel: &ChannelName,
        seq: u64,
        id: Option<&str>,
        data: &'static [u8],
    ) -> SharedMessage {
        Arc::new(StoredMessage::new(
            channel.clone(),
            Epoch::new("5f3a09c1"),
            seq,
            id.map(str::to_owned),
            1_700_000_000_123,
            Bytes::from_static(data),
        ))
    }

    #[test]
    fn a_batch_round_trips() {
        let channel = herald_core::tenant::parse_full("shop~prices/EURUSD").unwrap();
        let messages = vec![
            message(&channel, 41, Some("order-7"), br#"{"bid":1.0841}"#),
            message(&channel, 42, None, b""),
        ];
        let payload = encode_batch(0xfeed, &channel, 43, &messages);
        let batch = decode_batch(&payload).unwrap();
        assert_eq!((batch.origin, batch.head), (0xfeed, 43));
        assert_eq!(batch.channel, channel);
        assert_eq!(batch.messages.len(), 2);
        for (got, sent) in batch.messages.iter().zip(&messages) {
            assert_eq!(got.channel, sent.channel);
            assert_eq!(got.epoch, sent.epoch);
            assert_eq!(got.seq, sent.seq);
            assert_eq!(got.client_id, sent.client_id);
            assert_eq!(got.time, sent.time);
            assert_eq!(got.data, sent.data);
        }
        let notice = decode_batch(&encode_batch(1, &channel, 9, &[])).unwrap();
        assert!(notice.messages.is_empty());
        assert_eq!(notice.head, 9);
    }

    #[test]
    fn malformed_batches_are_errors() {
        let channel = ChannelName::parse("news").unwrap();
        let good = encode_batch(1, &channel, 1, &[message(&channel, 1, Some("a"), b"{}")]);
        for cut in 0..good.len() {
            assert!(decode_batch(&good.slice(..cut)).is_err(), "cut at {cut}");
        }
        let mut bad_name = good.to_vec();
        bad_name[11] = b'/'; // "news" -> "/ews"
        assert!(matches!(
            decode_batch(&Bytes::from(bad_name)),
            Err(DecodeError::Channel)
        ));
        let mut longer = good.to_vec();
        longer.push(0);
        assert!(decode_batch(&Bytes::from(longer)).is_err());
    }

    proptest! {
        #[test]
        fn nothing_malformed_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = decode_batch(&Bytes::from(bytes.clone()));
            let mut versioned = vec![VERSION];
            versioned.extend(bytes);
            let _ = decode_batch(&Bytes::from(versioned));
        }

        #[test]
        fn corrupting_a_good_batch_never_panics(at in 0usize..64, value: u8) {
            let channel = ChannelName::parse("a/b").unwrap();
            let good = encode_batch(7, &channel, 2, &[message(&channel, 2, Some("x"), b"[1]")]);
            let mut bytes = good.to_vec();
            let at = at % bytes.len();
            bytes[at] = value;
            let _ = decode_batch(&Bytes::from(bytes));
        }
    }
}
