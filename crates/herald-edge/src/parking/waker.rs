//! The waker a parked connection leaves in its outbox: it names the connection's slot and
//! generation, and waking it revives the connection ([`super::Shared::wake`]) on the waking
//! thread, so a delivery to a parked connection costs no hop through the parking thread (a
//! keep-alive ping request alone is answered there without reviving it).

use std::sync::Arc;
use std::task::{Wake, Waker};

use super::Shared;

struct SlotWaker {
    shared: Arc<Shared>,
    slot: u32,
    generation: u32,
}

impl Wake for SlotWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let waker = Waker::from(self.clone());
        let cause = super::Cause::Outbox(&waker);
        self.shared.wake(self.slot, self.generation, Some(cause));
    }
}

/// The waker of the connection of `generation` in `slot`.
pub(super) fn slot_waker(shared: Arc<Shared>, slot: u32, generation: u32) -> Waker {
    Waker::from(Arc::new(SlotWaker {
        shared,
        slot,
        generation,
    }))
}
