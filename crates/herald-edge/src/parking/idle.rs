//! When a served connection counts as idle: [`IdleTimer`], one boxed timer per connection in a
//! task (none once it parks), re-armed lazily so a busy connection never touches it.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::{Instant, Sleep};

/// Fires once a connection has done nothing for a whole delay: every wake marks it busy, and a
/// busy connection's timer is only re-armed when it fires, so the connection parks between one
/// and two delays after its last activity.
pub(crate) struct IdleTimer {
    sleep: Pin<Box<Sleep>>,
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
                sleep: Box::pin(tokio::time::sleep(Duration::from_millis(delay_ms.into()))),
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
}
