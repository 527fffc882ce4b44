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
    delay: Duration,
    busy: bool,
}

impl IdleTimer {
    /// A timer for `delay`, if parking is on.
    pub(crate) fn new(delay: Option<Duration>) -> Option<IdleTimer> {
        delay.map(|delay| IdleTimer {
            sleep: Box::pin(tokio::time::sleep(delay)),
            delay,
            busy: false,
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
            let next = Instant::now() + self.delay;
            self.sleep.as_mut().reset(next);
        }
    }
}
