//! The parking's slots: where each parked connection's record is kept, by slot number and
//! generation (a slot's generation changes every time it is freed, so a stale wake or epoll
//! event for a connection that has left is ignored), with the second its record asked to be
//! revived at (so the parking's queue of expiries names a slot and that second, and an entry
//! for a connection that has left is ignored the same way). The slots are paged
//! ([`herald_core::paged`]): their room stays within half a page of the connections parked.

use herald_core::paged::PagedVec;
use tokio_util::task::task_tracker::TaskTrackerToken;

use super::Parked;

/// A parked connection taken out of its slot to be given a task again.
pub(super) struct Revived {
    pub(super) record: Box<dyn Parked>,
    pub(super) tracker: TaskTrackerToken,
}

/// A slot's generation is the low 30 bits of [`Slot::mark`]; a generation handed out is one of
/// those (it wraps at 2^30, as a stale wake needs only to differ from the current one).
const GENERATION: u32 = (1 << 30) - 1;
/// In [`Slot::mark`]: a connection is on its way in (no record is parked in the slot yet, or
/// its record is lent out).
const RESERVED: u32 = 1 << 30;
/// In [`Slot::mark`], with [`RESERVED`]: something woke the connection meanwhile.
const WOKEN: u32 = 1 << 31;

/// One slot: 32 bytes (jemalloc's pages of 256 slots in its 8 KiB class). It was 40 while
/// free, reserved and parked were an enum of their own, whose tag took a word.
struct Slot {
    /// The generation (the low 30 bits) and, while no record is parked, whether the slot is
    /// reserved and woken (the top two; neither: free).
    mark: u32,
    /// When the connection parked here is revived at the latest (seconds since the Unix
    /// epoch, [`Parked::expires`]), 0 for never; kept while its record is lent out.
    expires: u32,
    /// The record parked here and its tracker token.
    parked: Option<(Box<dyn Parked>, TaskTrackerToken)>,
}

impl Slot {
    fn generation(&self) -> u32 {
        self.mark & GENERATION
    }

    /// Reserved (no record parked): `Some(woken)`.
    fn reserved(&self) -> Option<bool> {
        (self.parked.is_none() && self.mark & RESERVED != 0).then_some(self.mark & WOKEN != 0)
    }

    /// Reserved, not woken.
    fn reserve(&mut self) {
        self.mark = self.generation() | RESERVED;
    }

    /// Remembers a wake of a reserved slot.
    fn wake_reserved(&mut self) {
        self.mark |= WOKEN;
    }
}

/// Every slot, in use or free.
#[derive(Default)]
pub(super) struct Slots {
    slots: PagedVec<Slot>,
    free: Vec<u32>,
    parked: usize,
}

impl Slots {
    /// A slot for a connection about to park.
    pub(super) fn reserve(&mut self) -> (u32, u32) {
        let slot = match self.free.pop() {
            Some(slot) => slot,
            None => u32::try_from(self.slots.push(Slot {
                mark: 0,
                expires: 0,
                parked: None,
            }))
            .expect("fewer than 2^32 parked connections"),
        };
        let s = &mut self.slots[slot as usize];
        s.reserve();
        (slot, s.generation())
    }

    /// Frees a reserved slot the connection did not park in after all.
    pub(super) fn cancel(&mut self, slot: u32, generation: u32) {
        if let Some(s) = self.slot(slot, generation) {
            if s.reserved().is_some() {
                self.release(slot);
            }
        }
    }

    /// Stores a parked connection in its reserved slot, with the second it is revived at
    /// the latest (0 for never; `None` keeps the one it had when it was lent out); hands it
    /// back at once (revived) if it was woken while on its way in.
    pub(super) fn store(
        &mut self,
        slot: u32,
        generation: u32,
        record: Box<dyn Parked>,
        tracker: TaskTrackerToken,
        expires: Option<u32>,
    ) -> Option<Revived> {
        let Some(s) = self.slot(slot, generation) else {
            return Some(Revived { record, tracker });
        };
        match s.reserved() {
            Some(false) => {
                if let Some(expires) = expires {
                    s.expires = expires;
                }
                s.mark = s.generation();
                s.parked = Some((record, tracker));
                self.parked += 1;
                None
            }
            _ => {
                self.release(slot);
                Some(Revived { record, tracker })
            }
        }
    }

    /// A wake for the connection of `generation` in `slot`: a parked one is taken out (and the
    /// slot freed); a reserved one remembers the wake.
    pub(super) fn wake(&mut self, slot: u32, generation: u32) -> Option<Revived> {
        let s = self.slot(slot, generation)?;
        if s.reserved().is_some() {
            s.wake_reserved();
            return None;
        }
        let (record, tracker) = s.parked.take()?;
        self.parked -= 1;
        self.release(slot);
        Some(Revived { record, tracker })
    }

    /// An expiry at second `expires` for `slot`: its connection is woken as by
    /// [`Slots::wake`] if that is still the second it is revived at (not a connection that
    /// has left, or one that parked again since with another expiry).
    pub(super) fn expire(&mut self, slot: u32, expires: u32) -> Option<Revived> {
        let s = self.slots.get(slot as usize)?;
        if expires == 0 || s.expires != expires {
            return None;
        }
        let generation = s.generation();
        self.wake(slot, generation)
    }

    /// Whether an expiry at second `expires` for `slot` would still wake a connection.
    pub(super) fn is_due_at(&self, slot: u32, expires: u32) -> bool {
        expires != 0
            && self
                .slots
                .get(slot as usize)
                .is_some_and(|s| s.expires == expires)
    }

    /// Lends the connection of `generation` parked in `slot` out to answer a wake: the slot
    /// stays reserved for it, so a wake meanwhile is remembered, and [`Slots::store`] takes it
    /// back (or hands it back revived). A reserved slot remembers the wake instead.
    pub(super) fn lend(&mut self, slot: u32, generation: u32) -> Option<Revived> {
        let s = self.slot(slot, generation)?;
        if s.reserved().is_some() {
            s.wake_reserved();
            return None;
        }
        let (record, tracker) = s.parked.take()?;
        s.reserve();
        self.parked -= 1;
        Some(Revived { record, tracker })
    }

    /// How many connections are parked.
    pub(super) fn parked(&self) -> usize {
        self.parked
    }

    /// Whether nothing is parked or on its way in.
    pub(super) fn is_empty(&self) -> bool {
        self.free.len() == self.slots.len()
    }

    fn slot(&mut self, slot: u32, generation: u32) -> Option<&mut Slot> {
        self.slots
            .get_mut(slot as usize)
            .filter(|s| s.generation() == generation)
    }

    fn release(&mut self, slot: u32) {
        let s = &mut self.slots[slot as usize];
        s.parked = None;
        s.expires = 0;
        s.mark = s.generation().wrapping_add(1) & GENERATION;
        self.free.push(slot);
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::os::fd::RawFd;
    use std::pin::Pin;

    use tokio_util::task::TaskTracker;

    use super::*;

    struct Record;

    impl Parked for Record {
        fn socket(&self) -> RawFd {
            -1
        }
        fn expires(&self) -> Option<u64> {
            None
        }
        fn answer(&mut self, _: super::super::Cause<'_>) -> bool {
            true
        }
        fn resume(self: Box<Self>) -> Pin<Box<dyn Future<Output = ()> + Send>> {
            Box::pin(async {})
        }
    }

    #[test]
    fn a_wake_revives_a_parked_connection_once_and_ignores_stale_generations() {
        let tracker = TaskTracker::new();
        let mut slots = Slots::default();
        let (slot, generation) = slots.reserve();
        assert!(slots
            .store(slot, generation, Box::new(Record), tracker.token(), Some(0))
            .is_none());
        assert_eq!(slots.parked(), 1);
        assert!(
            slots.wake(slot, generation + 1).is_none(),
            "another generation"
        );
        assert!(slots.wake(slot, generation).is_some());
        assert!(slots.wake(slot, generation).is_none(), "revived once");
        assert!(slots.is_empty());
        let (again, next) = slots.reserve();
        assert_eq!(
            (again, next),
            (slot, generation + 1),
            "the slot is reused, newer"
        );
    }

    #[test]
    fn a_wake_before_the_record_is_stored_revives_it_on_arrival() {
        let tracker = TaskTracker::new();
        let mut slots = Slots::default();
        let (slot, generation) = slots.reserve();
        assert!(slots.wake(slot, generation).is_none());
        assert!(slots
            .store(slot, generation, Box::new(Record), tracker.token(), Some(0))
            .is_some());
        assert!(slots.is_empty());
        assert_eq!(slots.parked(), 0);
    }

    #[test]
    fn a_lent_connection_goes_back_unless_woken_meanwhile() {
        let tracker = TaskTracker::new();
        let mut slots = Slots::default();
        let (slot, generation) = slots.reserve();
        assert!(slots
            .store(slot, generation, Box::new(Record), tracker.token(), Some(0))
            .is_none());
        let lent = slots.lend(slot, generation).expect("parked");
        assert_eq!(slots.parked(), 0);
        assert!(slots
            .store(slot, generation, lent.record, lent.tracker, None)
            .is_none());
        assert_eq!(slots.parked(), 1);
        let lent = slots.lend(slot, generation).expect("parked");
        assert!(slots.lend(slot, generation).is_none(), "lent once");
        assert!(slots
            .store(slot, generation, lent.record, lent.tracker, None)
            .is_some());
        assert!(slots.is_empty());
    }

    #[test]
    fn an_expiry_wakes_only_the_connection_that_asked_for_it() {
        let tracker = TaskTracker::new();
        let mut slots = Slots::default();
        let (slot, generation) = slots.reserve();
        let stored = slots.store(
            slot,
            generation,
            Box::new(Record),
            tracker.token(),
            Some(50),
        );
        assert!(stored.is_none());
        assert!(slots.is_due_at(slot, 50) && !slots.is_due_at(slot, 49));
        assert!(slots.expire(slot, 49).is_none(), "another second");
        // Lent out and back, the expiry stays (the record may have moved its own later: the
        // revived task parks it again then).
        let lent = slots.lend(slot, generation).expect("parked");
        assert!(slots.is_due_at(slot, 50), "kept while lent");
        let stored = slots.store(slot, generation, lent.record, lent.tracker, None);
        assert!(stored.is_none());
        assert!(slots.expire(slot, 50).is_some(), "woken at its second");
        assert!(slots.expire(slot, 50).is_none(), "once");
        // The slot's next connection does not get the one that left's expiry.
        let (again, next) = slots.reserve();
        assert_eq!(again, slot);
        assert!(!slots.is_due_at(slot, 50));
        let stored = slots.store(again, next, Box::new(Record), tracker.token(), Some(0));
        assert!(stored.is_none());
        assert!(slots.expire(slot, 50).is_none() && !slots.is_due_at(slot, 0));
        assert!(slots.expire(slot, 0).is_none(), "0 is never");
        assert_eq!(slots.parked(), 1);
    }

    #[test]
    fn a_slot_is_32_bytes() {
        // The record's box, its tracker token, the expiry and the generation with the
        // reserved and woken marks: 256 slots a page fill jemalloc's 8 KiB class exactly (40
        // bytes, the 10 KiB class, while the state was an enum of its own).
        assert_eq!(size_of::<Slot>(), 32);
    }

    #[test]
    fn a_generation_wraps_within_its_bits_and_a_wake_meanwhile_is_kept() {
        let tracker = TaskTracker::new();
        let mut slots = Slots::default();
        let (slot, _) = slots.reserve();
        slots.slots[slot as usize].mark = GENERATION | RESERVED;
        assert!(
            slots.wake(slot, GENERATION).is_none(),
            "reserved: remembered"
        );
        let stored = slots.store(slot, GENERATION, Box::new(Record), tracker.token(), Some(5));
        assert!(stored.is_some(), "woken on its way in: handed back");
        // Released: the next generation wraps to 0, free, nothing parked.
        let (again, next) = slots.reserve();
        assert_eq!((again, next), (slot, 0));
        assert!(slots.wake(slot, GENERATION).is_none(), "the old generation");
        let stored = slots.store(slot, 0, Box::new(Record), tracker.token(), Some(5));
        assert!(stored.is_none() && slots.parked() == 1);
        // Lent out: reserved again, a wake meanwhile remembered, the return handed back.
        let lent = slots.lend(slot, 0).expect("parked");
        assert!(slots.parked() == 0 && slots.is_due_at(slot, 5));
        assert!(slots.wake(slot, 0).is_none());
        assert!(slots
            .store(slot, 0, lent.record, lent.tracker, None)
            .is_some());
        assert!(slots.is_empty());
    }

    #[test]
    fn a_cancelled_reservation_frees_its_slot() {
        let mut slots = Slots::default();
        let (slot, generation) = slots.reserve();
        slots.cancel(slot, generation);
        assert!(slots.is_empty());
        assert!(slots.wake(slot, generation).is_none());
    }
}
