//! When a served connection counts as idle: [`IdleTimer`], one boxed timer per connection in a
//! task (none once it parks), re-armed lazily so a busy connection never touches it; and
//! [`TaskTimer`], the box every timer of a connection's task is kept in.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::{Instant, Sleep};

/// Bytes of a [`TaskTimer`] beyond its `Sleep`, so that the two make 192 bytes.
const TIMER_ROOM: usize = 192 - size_of::<Sleep>();

pin_project_lite::pin_project! {
    /// A tokio timer in a box of 192 bytes (64-byte aligned), for the timers a connection
    /// keeps only while it is in its task (the idle timer, the driver's expiry timer).
    ///
    /// Why the size: a `Sleep` alone is 97-112 bytes, jemalloc's 112-byte class, which is
    /// also the class of every connection's outbox. The outboxes of a wave of new connections
    /// were allocated between their timers, so when the connections parked and freed the
    /// timers, the outboxes kept about half of each 112-byte slab empty (measured with
    /// jemalloc's statistics at 19,500 idle MQTT connections: 46 % used, ~130 B of RSS per
    /// connection; docs/design/idle-connections.md). The box was then 128 bytes, until the
    /// parked MQTT record moved into that class (session 37): an MQTT connection in its task
    /// keeps two timers, so the records of a wave, allocated between the timers they outlive,
    /// left each 128-byte slab about half empty (~80 B more by RSS per idle MQTT connection).
    /// No object a connection keeps while parked is in the 192-byte class, so slabs of freed
    /// timers empty out and are given back.
    #[repr(align(64))]
    pub(crate) struct TaskTimer {
        #[pin]
        sleep: Sleep,
        _room: [u8; TIMER_ROOM],
    }
}

impl TaskTimer {
    /// A boxed timer that fires after `duration`.
    pub(crate) fn after(duration: Duration) -> Pin<Box<TaskTimer>> {
        Box::pin(TaskTimer {
            sleep: tokio::time::sleep(duration),
            _room: [0; TIMER_ROOM],
        })
    }

    /// Moves the deadline to `deadline`.
    pub(crate) fn reset(self: Pin<&mut Self>, deadline: Instant) {
        self.project().sleep.reset(deadline);
    }
}

impl Future for TaskTimer {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.project().sleep.poll(cx)
    }
}

/// Fires once a connection has done nothing for a whole delay: every wake marks it busy, and a
/// busy connection's timer is only re-armed when it fires, so the connection parks between one
/// and two delays after its last activity.
pub(crate) struct IdleTimer {
    sleep: Pin<Box<TaskTimer>>,
    /// The delay in milliseconds: with the flag, the timer is 16 bytes of every connection's
    /// task, not 32.
    delay_ms: u32,
    busy: bool,
}

impl IdleTimer {
    /// A timer for `delay`, if parking is on.
    pub(crate) fn new(delay: Option<Duration>) -> Option<IdleTimer> {
        delay.map(|delay| {
            let delay_ms = u32::try_from(delay.as_millis()).unwrap_or(u32::MAX).max(1);
            IdleTimer {
                sleep: TaskTimer::after(Duration::from_millis(delay_ms.into())),
                delay_ms,
                busy: false,
            }
        })
    }

    /// The connection did something.
    pub(crate) fn busy(&mut self) {
        self.busy = true;
    }

    /// Ready once a whole delay has passed without [`IdleTimer::busy`].
    pub(crate) fn poll_idle(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        loop {
            if self.sleep.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            if !self.busy {
                return Poll::Ready(());
            }
            self.busy = false;
            let next = Instant::now() + Duration::from_millis(self.delay_ms.into());
            self.sleep.as_mut().reset(next);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_timer_is_small() {
        assert_eq!(size_of::<Option<IdleTimer>>(), 16);
    }

    #[test]
    fn a_task_timer_is_in_jemallocs_192_byte_class() {
        // Not the 112-byte class of every connection's outbox, nor the 128-byte class of the
        // parked MQTT record (see `TaskTimer`).
        assert_eq!(size_of::<TaskTimer>(), 192);
        assert!(size_of::<Sleep>() > 96, "{} bytes", size_of::<Sleep>());
    }
}
