//! Idle connections parked outside tokio ([`Parking`]). A WebSocket connection or a directly
//! served SSE stream that has had nothing to do for `park_idle_after` leaves its task: its
//! socket is taken off tokio's reactor and its state (the session, its subscriptions and
//! cursors, its token's expiry, its place on the keep-alive roster) is kept as one boxed record
//! in a slot here. One thread watches every parked socket with one epoll ([`mio`]) and the
//! parked tokens' expiries with one heap; no task, future or I/O registration is kept per
//! parked connection.
//!
//! A parked connection is revived into a task (spawned on the runtime in batches, tracked by
//! the edge's connection tracker) when its socket becomes readable, when its outbox is woken (a delivery,
//! a reply, a keep-alive ping request, a close for a revocation, a slow consumer or shutdown:
//! the outbox holds this slot's `waker` while it is parked), or when its token expires. The
//! revived task carries on exactly where the connection left off.
//!
//! A wake that needs no task is answered in the parking instead (`Parked::answer`): a
//! keep-alive ping request alone is written to the socket with one non-blocking send, and a
//! parked WebSocket's readable socket holding only pongs is read on the parking thread. The
//! record is lent out of its slot meanwhile (the slot stays reserved, so a wake in between is
//! remembered and revives it as soon as it is back).
//!
//! Parking never loses a wake: the slot is reserved and the outbox given the slot's waker
//! *before* the connection leaves its task (`Parking::reserve`); if the outbox has
//! something by then the connection does not park, and a wake that comes before the record is
//! stored (`Parking::park`) is remembered in the reserved slot and revives it at once.

pub(crate) mod idle;
mod slots;
mod waker;

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::future::Future;
use std::os::fd::{AsRawFd, RawFd};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use herald_core::outbox::{Batch, Outbox};
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll as Epoll, Registry, Token};
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;
use tokio_util::task::task_tracker::TaskTrackerToken;

use slots::{Revived, Slots};

/// The longest the parking thread sleeps, so a newly parked connection's expiry and shutdown
/// are looked at within a second.
const LONGEST_WAIT: Duration = Duration::from_secs(1);

/// A parked connection's state, as its transport keeps it. Revived, it becomes a task again.
pub trait Parked: Send + 'static {
    /// The socket the parking thread watches for readability.
    fn socket(&self) -> RawFd;
    /// When the connection's token expires (seconds since the Unix epoch), if it does.
    fn expires(&self) -> Option<u64>;
    /// Answers a wake without a task if that is all it needs (a keep-alive ping written, pongs
    /// read): true if the connection stays parked, false to revive it (having taken nothing
    /// the revived task needs, or having shut the socket down if the answer went wrong).
    fn answer(&mut self, cause: Cause<'_>) -> bool;
    /// The connection's task again, from where it parked.
    fn resume(self: Box<Self>) -> Pin<Box<dyn Future<Output = ()> + Send>>;
}

/// What woke a parked connection, when it might be answered without a task.
pub enum Cause<'a> {
    /// Its outbox: `waker` is the slot's, to leave in the outbox again if it stays parked.
    Outbox(&'a Waker),
    /// Its socket is readable.
    Readable,
}

/// A reserved slot: the outbox holds its waker; [`Parking::park`] stores the connection in it.
#[derive(Debug)]
#[must_use = "a reserved slot is freed only by parking into it"]
pub struct Ticket {
    slot: u32,
    generation: u32,
}

/// Where idle connections wait without a task (see the module docs). Disabled (nothing
/// parks) when built with no delay.
pub struct Parking {
    shared: Option<Arc<Shared>>,
}

struct Shared {
    slots: Mutex<Slots>,
    /// When parked connections are revived at the latest ([`Parked::expires`]): (seconds since
    /// the Unix epoch, slot), 8 bytes each. The slot keeps the second too, so an entry for a
    /// connection that has left (or parked again with another expiry) wakes nothing
    /// ([`Slots::expire`]).
    expiries: Mutex<BinaryHeap<Reverse<(u32, u32)>>>,
    registry: Registry,
    runtime: tokio::runtime::Handle,
    /// How long a connection has nothing to do before it parks.
    after: Duration,
    stopping: AtomicBool,
    parked: metrics::Gauge,
    /// Parked connections given a task again.
    revivals: metrics::Counter,
    /// Revived connections waiting for their batch's task ([`Shared::revived`]).
    reviving: Mutex<Vec<Revived>>,
}

impl Parking {
    /// Parking that never parks anything.
    pub fn disabled() -> Parking {
        Parking { shared: None }
    }

    /// Starts the parking thread (inside a tokio runtime, which revived connections run on);
    /// connections park after `after` with nothing to do. The thread ends once `shutdown` is
    /// cancelled and nothing is parked any more.
    pub fn start(after: Duration, shutdown: CancellationToken) -> std::io::Result<Parking> {
        let epoll = Epoll::new()?;
        let shared = Arc::new(Shared {
            slots: Mutex::new(Slots::default()),
            expiries: Mutex::new(BinaryHeap::new()),
            registry: epoll.registry().try_clone()?,
            runtime: tokio::runtime::Handle::current(),
            after,
            stopping: AtomicBool::new(false),
            parked: metrics::gauge!("herald_connections_parked"),
            revivals: metrics::counter!("herald_connections_revived_total"),
            reviving: Mutex::new(Vec::new()),
        });
        let watcher = shared.clone();
        std::thread::Builder::new()
            .name("herald-parking".into())
            .spawn(move || watcher.watch(epoll))?;
        let stopping = shared.clone();
        tokio::spawn(async move {
            shutdown.cancelled().await;
            stopping.stopping.store(true, Ordering::Relaxed);
        });
        Ok(Parking {
            shared: Some(shared),
        })
    }

    /// How long a connection waits with nothing to do before it parks; `None` when parking is
    /// off.
    pub fn delay(&self) -> Option<Duration> {
        self.shared.as_ref().map(|s| s.after)
    }

    /// Reserves a slot for a connection about to park and leaves the slot's waker in its
    /// outbox. If the outbox already has something, nothing is reserved and the caller gets it
    /// to act on instead (and its own waker is no longer in the outbox: it polls again).
    pub fn reserve(&self, outbox: &Outbox) -> Result<Ticket, Option<Batch>> {
        let Some(shared) = &self.shared else {
            return Err(None);
        };
        let (slot, generation) = shared.slots.lock().reserve();
        let waker = waker::slot_waker(shared.clone(), slot, generation);
        match outbox.poll_batch(&mut Context::from_waker(&waker)) {
            Poll::Pending => Ok(Ticket { slot, generation }),
            Poll::Ready(batch) => {
                shared.slots.lock().cancel(slot, generation);
                Err(Some(batch))
            }
        }
    }

    /// Frees a reserved slot the connection will not park in after all.
    pub fn cancel(&self, ticket: Ticket) {
        if let Some(shared) = &self.shared {
            shared.slots.lock().cancel(ticket.slot, ticket.generation);
        }
    }

    /// Parks a connection in its reserved slot: `tcp` leaves tokio's reactor and is handed to
    /// `record`, whose result waits here (counted by `tracker` as a connection still open)
    /// until something revives it. If the socket cannot leave tokio, the connection's state is
    /// dropped (which ends it) and the slot freed.
    pub fn park<P: Parked>(
        &self,
        ticket: Ticket,
        tcp: tokio::net::TcpStream,
        record: impl FnOnce(std::net::TcpStream) -> P,
        tracker: TaskTrackerToken,
    ) {
        let Some(shared) = &self.shared else {
            return;
        };
        let Ticket { slot, generation } = ticket;
        let Ok(socket) = tcp.into_std() else {
            shared.slots.lock().cancel(slot, generation);
            return;
        };
        let record: Box<dyn Parked> = Box::new(record(socket));
        let fd = record.socket();
        let token = Token(token_of(slot, generation));
        if shared
            .registry
            .register(&mut SourceFd(&fd), token, Interest::READABLE)
            .is_err()
        {
            // Not watched, so revived at once rather than left deaf.
            shared.slots.lock().cancel(slot, generation);
            shared.spawn(record, tracker);
            return;
        }
        let expires = record.expires().map_or(0, expiry_second);
        shared.parked.increment(1.0);
        let woken = (shared.slots.lock()).store(slot, generation, record, tracker, Some(expires));
        match woken {
            Some(revived) => shared.revived(revived),
            None if expires != 0 => shared.expiries.lock().push(Reverse((expires, slot))),
            None => {}
        }
    }
}

impl Shared {
    /// Revives the connection in `slot` if it is still the one of `generation`, unless the
    /// wake's `cause` can be answered without a task; a slot only reserved (or whose record is
    /// lent out) remembers the wake for when the record is stored.
    fn wake(self: &Arc<Self>, slot: u32, generation: u32, cause: Option<Cause<'_>>) {
        let Some(cause) = cause else {
            let revived = self.slots.lock().wake(slot, generation);
            if let Some(revived) = revived {
                self.revived(revived);
            }
            return;
        };
        let Some(mut lent) = self.slots.lock().lend(slot, generation) else {
            return;
        };
        if lent.record.answer(cause) {
            let woken = self
                .slots
                .lock()
                .store(slot, generation, lent.record, lent.tracker, None);
            if let Some(revived) = woken {
                self.revived(revived);
            }
        } else {
            self.slots.lock().cancel(slot, generation);
            self.revived(lent);
        }
    }

    /// Gives a revived connection a task again, in a batch: the waking thread (the fan-out
    /// thread for a delivery to many) only queues it, and the first of a batch spawns one task
    /// on the runtime that takes each queued connection's socket off the parking epoll and
    /// spawns its task from there.
    fn revived(self: &Arc<Self>, revived: Revived) {
        self.parked.decrement(1.0);
        self.revivals.increment(1);
        let first = {
            let mut queued = self.reviving.lock();
            queued.push(revived);
            queued.len() == 1
        };
        if first {
            let shared = self.clone();
            self.runtime.spawn(async move { shared.revive_queued() });
        }
    }

    /// The batch task of [`Shared::revived`].
    fn revive_queued(&self) {
        let batch = std::mem::take(&mut *self.reviving.lock());
        for revived in batch {
            let fd = revived.record.socket();
            let _ = self.registry.deregister(&mut SourceFd(&fd));
            self.spawn(revived.record, revived.tracker);
        }
    }

    fn spawn(&self, record: Box<dyn Parked>, tracker: TaskTrackerToken) {
        let task = record.resume();
        self.runtime.spawn(async move {
            task.await;
            drop(tracker);
        });
    }

    /// The parking thread: revives connections whose socket became readable or whose token
    /// expired.
    fn watch(self: Arc<Self>, mut epoll: Epoll) {
        let mut events = Events::with_capacity(1024);
        loop {
            let wait = self
                .next_expiry()
                .map_or(LONGEST_WAIT, |d| d.min(LONGEST_WAIT));
            if let Err(e) = epoll.poll(&mut events, Some(wait)) {
                if e.kind() != std::io::ErrorKind::Interrupted {
                    tracing::error!(error = %e, "the parking thread's epoll failed");
                    return;
                }
            }
            for event in events.iter() {
                let (slot, generation) = slot_of(event.token().0);
                self.wake(slot, generation, Some(Cause::Readable));
            }
            let now = unix_now();
            loop {
                let due = {
                    let mut expiries = self.expiries.lock();
                    match expiries.peek() {
                        Some(Reverse((exp, _))) if u64::from(*exp) <= now => expiries.pop(),
                        _ => None,
                    }
                };
                let Some(Reverse((exp, slot))) = due else {
                    break;
                };
                let revived = self.slots.lock().expire(slot, exp);
                if let Some(revived) = revived {
                    self.revived(revived);
                }
            }
            self.forget_stale_expiries();
            if self.stopping.load(Ordering::Relaxed) && self.slots.lock().is_empty() {
                return;
            }
        }
    }

    /// Drops the expiries of connections revived before they were due, and repeats of one
    /// (a connection parking again in the slot it left, with the same token), once they
    /// outnumber the parked connections (a connection that parks many times during a long
    /// token's life would otherwise leave one entry per parking).
    fn forget_stale_expiries(&self) {
        let parked = self.slots.lock().parked();
        let mut expiries = self.expiries.lock();
        if expiries.len() > 2 * parked + 1024 {
            let mut kept = std::mem::take(&mut *expiries).into_vec();
            {
                let slots = self.slots.lock();
                kept.retain(|Reverse((exp, slot))| slots.is_due_at(*slot, *exp));
            }
            kept.sort_unstable();
            kept.dedup();
            *expiries = BinaryHeap::from(kept);
        }
    }

    fn next_expiry(&self) -> Option<Duration> {
        let exp = self.expiries.lock().peek().map(|Reverse((exp, _))| *exp)?;
        Some(Duration::from_secs(
            u64::from(exp).saturating_sub(unix_now()),
        ))
    }
}

/// A parked connection's expiry ([`Parked::expires`]) as the slots keep it: in four bytes,
/// never 0 (which says none: an expiry at 0 is long past, as 1 is), and at most `u32::MAX`
/// (February 2106: a later one is not reached).
fn expiry_second(expires: u64) -> u32 {
    u32::try_from(expires).unwrap_or(u32::MAX).max(1)
}

fn token_of(slot: u32, generation: u32) -> usize {
    ((generation as usize) << 32) | slot as usize
}

fn slot_of(token: usize) -> (u32, u32) {
    ((token & 0xffff_ffff) as u32, (token >> 32) as u32)
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Describes the parking metrics, so `/metrics` has a `# HELP` line for each. Call it once the
/// recorder is installed.
pub fn describe_metrics() {
    metrics::describe_gauge!(
        "herald_connections_parked",
        "Idle connections waiting without a task (after park_idle_after), on this node."
    );
    metrics::describe_counter!(
        "herald_connections_revived_total",
        "Parked connections given a task again (a delivery, a command, a close or an expiry)."
    );
}

/// Writes a keep-alive ping (taken from `outbox` with [`Outbox::take_lone_ping`]) to a parked
/// socket with one non-blocking send: true if the socket took all of it. If it took none, the
/// ping is requested again for the task the connection is then revived into; if it took part
/// of it, or failed, the socket is shut down (the revived task then ends the connection as
/// gone, as a broken frame cannot be finished without a task).
pub fn send_ping(socket: &std::net::TcpStream, ping: &[u8], outbox: &Outbox) -> bool {
    use std::io::{ErrorKind, Write};
    match (&*socket).write(ping) {
        Ok(n) if n == ping.len() => true,
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {
            outbox.request_ping();
            false
        }
        _ => {
            let _ = socket.shutdown(std::net::Shutdown::Both);
            false
        }
    }
}

/// The raw descriptor of a parked socket, for [`Parked::socket`].
pub fn raw(socket: &std::net::TcpStream) -> RawFd {
    socket.as_raw_fd()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_expiry_is_kept_in_four_bytes_never_as_none() {
        assert_eq!(expiry_second(0), 1, "long past, not none");
        assert_eq!(expiry_second(1_900_000_000), 1_900_000_000);
        assert_eq!(expiry_second(u64::from(u32::MAX) + 1), u32::MAX);
        assert_eq!(expiry_second(u64::MAX), u32::MAX);
    }

    #[test]
    fn a_token_names_its_slot_and_generation() {
        for (slot, generation) in [(0, 0), (7, 3), (u32::MAX, u32::MAX), (1, u32::MAX)] {
            assert_eq!(slot_of(token_of(slot, generation)), (slot, generation));
        }
    }
}
