//! A stored message's encode-once frame cache, and the slots that name what it holds.
//!
//! Each wire encoding of a message (a WebSocket text frame, SSE `data:` lines, a Meteor
//! `~text~`, ...) has a [`FrameSlot`]. Core's own encodings, the ones `herald-proto` defines and
//! [`crate::frames`] builds (the JSON entry that history and long-poll carry, the WebSocket
//! `message` push and the SSE `data:` lines), have well-known slots, because history (in
//! `herald-api`) and Herald's transports (in `herald-edge`) both need them and both reach them
//! through `crate::frames`. Any other protocol reserves its slot once, at start, with
//! [`FrameSlot::reserve`] (as a crate that owns reserved logs registers their options with
//! [`crate::namespace::Namespaces::reserve`]) and keeps the handle in a static; core never names
//! it.
//!
//! A message's [`FrameCache`] holds only the encodings asked of it: an append-only list of
//! (slot, frame) nodes hung off one link, so a message nobody sent holds one empty link whatever
//! the number of protocols compiled in, and each encoding used adds one node. Nodes are appended
//! at the tail and never removed or changed until the message is dropped.
//!
//! Concurrency: the fan-out thread and every connection's writer may ask for the same frame at
//! once. Reading takes no lock: it walks the list, one atomic (acquire) load per node (a plain
//! load on x86), the list being as long as the encodings used (two for a WebSocket message: its
//! JSON entry, then the push built from it). A thread that finds no node encodes outside any lock,
//! then appends at the tail it saw; if another thread appended there first, it walks on from
//! there, and if that thread appended the same slot, it drops its own encoding and shares the one
//! kept. So each slot holds exactly one frame, and every caller gets that one.

use std::fmt;
use std::sync::{Mutex, OnceLock, PoisonError};

use bytes::Bytes;

/// Which encoding of a message a frame is: a handle to a slot of every message's frame cache.
/// Core's own encodings have well-known slots; another protocol gets one from
/// [`FrameSlot::reserve`].
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct FrameSlot(u32);

/// The names of core's well-known slots, by index.
const CORE_SLOTS: [&str; 3] = ["json entry", "websocket json", "sse data"];

/// The names of the slots other crates reserved, by index less [`CORE_SLOTS`]'s length.
static RESERVED: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());

impl FrameSlot {
    /// The message's JSON entry (`{"channel","seq","epoch","id","time","data"}`).
    pub(crate) const JSON_ENTRY: FrameSlot = FrameSlot(0);
    /// The WebSocket push of a message, `{"message":{...entry...}}`.
    pub(crate) const WS_JSON: FrameSlot = FrameSlot(1);
    /// The SSE `data:` lines of a message.
    pub(crate) const SSE_DATA: FrameSlot = FrameSlot(2);

    /// Reserves a new slot for an encoding named `name` (for diagnostics). Call it once per
    /// encoding, when the protocol starts, and keep the handle (in a `LazyLock` static, say):
    /// every call reserves another slot, and encodings in different slots are cached apart.
    pub fn reserve(name: &'static str) -> FrameSlot {
        let mut reserved = RESERVED.lock().unwrap_or_else(PoisonError::into_inner);
        reserved.push(name);
        let index = CORE_SLOTS.len() + reserved.len() - 1;
        FrameSlot(u32::try_from(index).expect("fewer than 2^32 frame slots reserved"))
    }

    /// The name the slot was reserved with.
    pub fn name(self) -> &'static str {
        let index = self.0 as usize;
        match index.checked_sub(CORE_SLOTS.len()) {
            None => CORE_SLOTS[index],
            Some(reserved) => RESERVED.lock().unwrap_or_else(PoisonError::into_inner)[reserved],
        }
    }
}

impl fmt::Debug for FrameSlot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FrameSlot({} {:?})", self.0, self.name())
    }
}

/// The frames of one message, one per slot asked for (see the module doc).
#[derive(Default)]
pub(crate) struct FrameCache {
    first: Link,
}

/// Where the next node of the list is, once one is appended.
type Link = OnceLock<Box<FrameNode>>;

/// One cached encoding of the message.
struct FrameNode {
    slot: FrameSlot,
    frame: Bytes,
    next: Link,
}

impl FrameCache {
    /// The frame in `slot`, encoding it with `encode` when no caller has yet kept one.
    pub(crate) fn get_or_encode(&self, slot: FrameSlot, encode: impl FnOnce() -> Bytes) -> &Bytes {
        let mut tail = match find(&self.first, slot) {
            Ok(frame) => return frame,
            Err(tail) => tail,
        };
        // `encode` may itself ask this cache for another slot (the WebSocket push is built from
        // the JSON entry), appending to `tail`; that is one more node to walk past below.
        let mut node = Box::new(FrameNode {
            slot,
            frame: encode(),
            next: Link::new(),
        });
        loop {
            match tail.set(node) {
                Ok(()) => return &tail.get().expect("this thread just set it").frame,
                Err(ours) => {
                    node = ours;
                    match find(tail, slot) {
                        // Another thread kept this slot first: share its frame, drop ours.
                        Ok(kept) => return kept,
                        Err(end) => tail = end,
                    }
                }
            }
        }
    }

    /// How many frames are cached.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        let mut link = &self.first;
        let mut len = 0;
        while let Some(node) = link.get() {
            len += 1;
            link = &node.next;
        }
        len
    }
}

/// Walks the list from `link`: the frame in `slot`, or the empty link at the list's end.
fn find(mut link: &Link, slot: FrameSlot) -> Result<&Bytes, &Link> {
    while let Some(node) = link.get() {
        if node.slot == slot {
            return Ok(&node.frame);
        }
        link = &node.next;
    }
    Err(link)
}

/// The heap one cached frame adds to a message besides the frame's own bytes: one list node.
#[cfg(test)]
pub(crate) const NODE_BYTES: usize = std::mem::size_of::<FrameNode>();

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Barrier};

    use super::*;

    #[test]
    fn reserved_slots_are_distinct_and_keep_their_names() {
        let text = FrameSlot::reserve("test text");
        let packet = FrameSlot::reserve("test packet");
        assert_ne!(text, packet);
        for core in [
            FrameSlot::JSON_ENTRY,
            FrameSlot::WS_JSON,
            FrameSlot::SSE_DATA,
        ] {
            assert_ne!(text, core);
            assert_ne!(packet, core);
        }
        assert_eq!(text.name(), "test text");
        assert_eq!(packet.name(), "test packet");
        assert_eq!(FrameSlot::WS_JSON.name(), "websocket json");
        assert_eq!(
            format!("{packet:?}"),
            format!("FrameSlot({} \"test packet\")", packet.0)
        );
    }

    #[test]
    fn two_protocols_keep_their_own_frames_each_encoded_once() {
        let text = FrameSlot::reserve("protocol a");
        let packet = FrameSlot::reserve("protocol b");
        let cache = FrameCache::default();
        let encodings = AtomicUsize::new(0);
        let encode = |bytes: &'static [u8]| {
            encodings.fetch_add(1, Ordering::Relaxed);
            Bytes::from_static(bytes)
        };
        assert_eq!(&cache.get_or_encode(text, || encode(b"text"))[..], b"text");
        assert_eq!(
            &cache.get_or_encode(packet, || encode(b"packet"))[..],
            b"packet"
        );
        for _ in 0..3 {
            assert_eq!(&cache.get_or_encode(text, || encode(b"again"))[..], b"text");
            assert_eq!(
                &cache.get_or_encode(packet, || encode(b"again"))[..],
                b"packet"
            );
        }
        assert_eq!(encodings.load(Ordering::Relaxed), 2);
        assert_eq!(cache.len(), 2);
    }

    #[test]
    fn an_encoding_may_ask_for_another_slot() {
        let inner = FrameSlot::reserve("inner");
        let outer = FrameSlot::reserve("outer");
        let cache = FrameCache::default();
        let wrapped = cache.get_or_encode(outer, || {
            let inner = cache.get_or_encode(inner, || Bytes::from_static(b"entry"));
            Bytes::from(format!("[{}]", std::str::from_utf8(inner).unwrap()))
        });
        assert_eq!(&wrapped[..], b"[entry]");
        assert_eq!(&cache.get_or_encode(inner, Bytes::new)[..], b"entry");
        assert_eq!(cache.len(), 2);
    }

    /// Every thread finds the slot empty and encodes (none can finish encoding before all have
    /// started): one encoding is kept, and every thread gets that one.
    #[test]
    fn a_slot_asked_for_by_many_threads_at_once_keeps_one_encoding() {
        const THREADS: usize = 8;
        let slots = [FrameSlot::reserve("race a"), FrameSlot::reserve("race b")];
        let cache = Arc::new(FrameCache::default());
        let all_encoding = Arc::new(Barrier::new(THREADS));
        let threads: Vec<_> = (0..THREADS)
            .map(|i| {
                let (cache, all_encoding) = (cache.clone(), all_encoding.clone());
                let slot = slots[i % 2];
                std::thread::spawn(move || {
                    let frame = cache.get_or_encode(slot, || {
                        all_encoding.wait();
                        Bytes::from(format!("thread {i}"))
                    });
                    (slot, frame.clone())
                })
            })
            .collect();
        let frames: Vec<(FrameSlot, Bytes)> =
            threads.into_iter().map(|t| t.join().unwrap()).collect();
        assert_eq!(cache.len(), 2, "one node per slot");
        for (slot, frame) in &frames {
            let kept = cache.get_or_encode(*slot, Bytes::new);
            assert_eq!(frame.as_ptr(), kept.as_ptr(), "shared, not a copy");
            assert_eq!(frame, kept);
        }
        assert_ne!(
            cache.get_or_encode(slots[0], Bytes::new),
            cache.get_or_encode(slots[1], Bytes::new)
        );
    }

    #[test]
    fn many_threads_reserving_get_distinct_slots() {
        let threads: Vec<_> = (0..4)
            .map(|_| {
                std::thread::spawn(|| {
                    (0..50)
                        .map(|_| FrameSlot::reserve("many"))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let mut all: Vec<u32> = threads
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .map(|slot| slot.0)
            .collect();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), 200);
    }
}
