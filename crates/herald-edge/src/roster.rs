//! The roster of open WebSocket connections (and SSE streams served without hyper), by their
//! outboxes. The keep-alive clock and shutdown reach every connection through it (a ping
//! request, a close with a reason), so an idle connection waits on its socket and its outbox
//! only, and holds no timer, channel receiver or cancellation future of its own.
//!
//! Each entry is a weak reference: the roster never keeps an outbox alive, and an entry whose
//! connection is gone without leaving is reclaimed on the next walk.

use std::sync::{Arc, Weak};

use herald_core::outbox::Outbox;
use herald_core::paged::PagedVec;
use parking_lot::Mutex;

/// Shards, so connections opening and closing on different threads rarely share a lock.
const SHARDS: usize = 16;

/// Where a connection's entry is, to leave the roster with: its shard in the top four bits
/// and its slot in the shard below, four bytes (a parked connection's record keeps it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Place(u32);

/// The bits of a [`Place`] below its shard.
const SLOT_BITS: u32 = 28;

impl Place {
    fn new(shard: usize, slot: u32) -> Place {
        Place(((shard as u32) << SLOT_BITS) | slot)
    }

    fn shard(self) -> usize {
        (self.0 >> SLOT_BITS) as usize
    }

    fn slot(self) -> u32 {
        self.0 & ((1 << SLOT_BITS) - 1)
    }
}

const _: () = assert!(SHARDS <= 1 << (32 - SLOT_BITS));

/// A shard's entries, by slot number; paged ([`herald_core::paged`]), so their room stays
/// within half a page of the connections (a doubling `Vec` held up to twice that).
#[derive(Default)]
struct Shard {
    slots: PagedVec<Option<Weak<Outbox>>>,
    free: Vec<u32>,
}

/// Every open WebSocket connection's (and direct SSE stream's) outbox.
pub struct Roster {
    shards: Box<[Mutex<Shard>]>,
    next: std::sync::atomic::AtomicUsize,
}

impl Default for Roster {
    fn default() -> Self {
        Roster {
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
            next: Default::default(),
        }
    }
}

impl Roster {
    /// Adds a connection's outbox.
    pub fn join(&self, outbox: &Arc<Outbox>) -> Place {
        let shard = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % SHARDS;
        let mut s = self.shards[shard].lock();
        let entry = Some(Arc::downgrade(outbox));
        let slot = match s.free.pop() {
            Some(slot) => {
                s.slots[slot as usize] = entry;
                slot
            }
            None => {
                let slot = s.slots.push(entry);
                u32::try_from(slot)
                    .ok()
                    .filter(|slot| *slot < 1 << SLOT_BITS)
                    .expect("fewer than 2^28 connections per shard")
            }
        };
        Place::new(shard, slot)
    }

    /// Removes the entry `join` returned.
    pub fn leave(&self, place: Place) {
        let mut s = self.shards[place.shard()].lock();
        if let Some(entry) = s.slots.get_mut(place.slot() as usize) {
            if entry.take().is_some() {
                s.free.push(place.slot());
            }
        }
    }

    /// Calls `f` with every outbox still alive; reclaims the entries of outboxes that are gone.
    pub fn for_each(&self, mut f: impl FnMut(&Outbox)) {
        for shard in self.shards.iter() {
            // Upgrade under the lock, act outside it: `f` wakes tasks.
            let live: Vec<Arc<Outbox>> = {
                let mut s = shard.lock();
                let mut live = Vec::with_capacity(s.slots.len());
                let mut dead = Vec::new();
                for (i, entry) in s.slots.iter_mut().enumerate() {
                    if let Some(weak) = entry {
                        match weak.upgrade() {
                            Some(o) => live.push(o),
                            None => {
                                *entry = None;
                                dead.push(i as u32);
                            }
                        }
                    }
                }
                s.free.extend(dead);
                live
            };
            for o in &live {
                f(o);
            }
        }
    }

    /// How many connections are on the roster.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| {
                let s = s.lock();
                s.slots.len() - s.free.len()
            })
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use herald_core::outbox::CloseReason;

    #[test]
    fn a_place_keeps_its_shard_and_slot_in_four_bytes() {
        assert_eq!(size_of::<Place>(), 4);
        let last = (1 << SLOT_BITS) - 1;
        for (shard, slot) in [(0, 0), (SHARDS - 1, 0), (3, 12_345), (SHARDS - 1, last)] {
            let place = Place::new(shard, slot);
            assert_eq!((place.shard(), place.slot()), (shard, slot));
        }
    }

    #[test]
    fn reaches_every_member_and_forgets_those_that_left_or_died() {
        let roster = Roster::default();
        let boxes: Vec<_> = (0..40).map(|_| Outbox::new(1024)).collect();
        let places: Vec<_> = boxes.iter().map(|b| roster.join(b)).collect();
        assert_eq!(roster.len(), 40);
        roster.leave(places[3]);
        roster.leave(places[3]);
        assert_eq!(roster.len(), 39, "leaving twice frees one slot");
        let mut boxes = boxes;
        drop(boxes.remove(10)); // gone without leaving
        let mut reached = 0;
        roster.for_each(|o| {
            o.close(CloseReason::Shutdown);
            reached += 1;
        });
        assert_eq!(reached, 38);
        assert_eq!(roster.len(), 38, "the dead entry was reclaimed");
        assert_eq!(boxes[0].take().1, Some(CloseReason::Shutdown));
        assert_eq!(boxes[3].take().1, None, "the one that left was not reached");
        // One more in every shard: the two shards with a freed slot reuse it.
        let again: Vec<_> = (0..SHARDS).map(|_| Outbox::new(1024)).collect();
        let reused = again
            .iter()
            .filter(|o| places.contains(&roster.join(o)))
            .count();
        assert_eq!(reused, 2, "freed slots are reused");
        assert_eq!(roster.len(), 38 + SHARDS);
    }
}
