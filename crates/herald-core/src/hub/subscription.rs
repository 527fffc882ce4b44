//! One connection's subscription to one channel: what it receives ([`Filter`]), and what it does
//! with each message the hub hands it. This module owns a subscriber's state (live or catching
//! up, the seq its catch-up covered, its [`Pager`]) and its delivery: filtering and counting
//! ([`Tally`]), parking while catching up, queueing to its outbox one message or one run at a
//! time, and the catch-up's pages ([`Subscription::next_read`], [`Subscription::on_page`]) up to
//! [`Subscription::go_live`]. The registry that finds a channel's subscribers is the hub's
//! ([`super`]).
//!
//! A new subscription starts in catch-up mode: it holds a [`Pager`] that parks live messages
//! until the subscriber has queued its reply and the history it missed (or, paging a long
//! catch-up, drops them while a later page will read them), then it goes live. That is what
//! makes resume exact (no gap, no duplicate) without blocking publishers.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, MutexGuard};

use crate::catchup::{Gap, LiveAction, Page, PageDone, PageRequest, Pager};
use crate::message::{SharedMessage, StoredMessage};
use crate::outbox::{CloseReason, OutFrame, Outbox};
use crate::presence::Membership;

/// Decides which of a channel's messages a subscription receives (live and replayed); a
/// device's subscription to its app's broadcast log keeps only pushes whose audience admits it.
pub type Admit = Arc<dyn Fn(&StoredMessage) -> bool + Send + Sync>;

/// Told how many messages were queued for a subscription (replayed and live), as they are
/// queued: a device's usage counts its deliveries with it.
pub type Tally = Arc<dyn Fn(u64) + Send + Sync>;

/// What a subscription receives ([`Admit`]) and who counts what it was sent ([`Tally`]).
#[derive(Clone, Default)]
pub struct Filter {
    /// Keeps only the messages it admits; none means all.
    pub admit: Option<Admit>,
    /// Counts the messages queued.
    pub tally: Option<Tally>,
}

/// About how many bytes of a run of messages one outbox lock queues (see
/// [`Subscription::send_live_run`]).
const RUN_PIECE_BYTES: usize = 16 * 1024;

/// Live messages a subscription may park while catching up before it counts as slow.
const MAX_PARKED: usize = 10_000;

/// One connection's subscription to one channel.
///
/// Every idle subscriber holds one, so it is kept to 48 bytes (64 with the `Arc`'s counts, one
/// jemalloc class; 64 and the 80-byte class until session 36): the filter, which most
/// subscriptions lack, is one pointer; the catch-up and the presence membership, each needed
/// by few subscriptions and never on a live delivery's path, are one pointer under one lock,
/// `None` for a live subscription outside presence; and whether it is live, whether it holds a
/// membership and the seq its catch-up covered share one word (`State`). A unit test pins
/// the size.
pub struct Subscription {
    id: u64,
    outbox: Arc<Outbox>,
    /// [`State`]'s bits: live, in presence, and the seq up to which the subscriber was caught
    /// up from the log. A message committed before that read can still reach the hub
    /// afterwards (the commit sink runs after the commit), so live delivery skips anything at
    /// or below it.
    state: AtomicU64,
    aside: Mutex<Option<Box<Aside>>>,
    /// What it receives and who counts it; `None` (one word) for the many subscriptions that
    /// receive everything and count nothing.
    filter: Option<Box<Filter>>,
}

/// The bits of [`Subscription::state`].
struct State;

impl State {
    /// The subscription is live (caught up).
    const LIVE: u64 = 1 << 63;
    /// [`Aside::presence`] holds a membership: the one load an unsubscribe from any other
    /// channel makes.
    const IN_PRESENCE: u64 = 1 << 62;
    /// The seq the catch-up covered: seqs stay below 2^62 (one a nanosecond would take 146
    /// years to get there); a higher one is kept as 2^62 - 1.
    const SEQ: u64 = (1 << 62) - 1;
}

/// What a subscription keeps beside its live path, under one lock, allocated only while there
/// is any.
struct Aside {
    /// The catch-up while the subscription is not live ([`crate::catchup`]): parks live messages
    /// while a read may miss them, drops them while a later page will read them. `None` once
    /// live, or once the subscription ended (unsubscribed, or its catch-up lost its place).
    catchup: Option<Pager<SharedMessage>>,
    /// Its share of a presence channel's members ([`Subscription::set_presence`]).
    presence: Option<Box<Membership>>,
}

/// The catch-up, locked ([`Subscription::catchup`]).
struct Catchup<'a>(MutexGuard<'a, Option<Box<Aside>>>);

impl Catchup<'_> {
    /// The pager, while catching up.
    fn pager(&mut self) -> Option<&mut Pager<SharedMessage>> {
        self.0.as_mut().and_then(|aside| aside.catchup.as_mut())
    }

    fn is_some(&self) -> bool {
        self.0.as_ref().is_some_and(|aside| aside.catchup.is_some())
    }

    /// Takes the pager (the catch-up ended or went live), freeing what is aside if nothing
    /// else is there.
    fn take(&mut self) -> Option<Pager<SharedMessage>> {
        let aside = self.0.as_mut()?;
        let pager = aside.catchup.take();
        if aside.presence.is_none() {
            *self.0 = None;
        }
        pager
    }
}

/// What a catch-up's reader does next ([`Subscription::next_read`]).
#[derive(Debug, PartialEq, Eq)]
pub enum NextRead {
    /// Read this page.
    Read(PageRequest),
    /// Wait for the outbox to drain, then ask again.
    Wait,
    /// Nothing more: the subscription is live, or it ended.
    Done,
}

impl Subscription {
    /// A subscription in catch-up mode, with a [`Pager`] that queues about `catchup_budget`
    /// bytes of catch-up at a time (see [`Hub::subscribe_with`](super::Hub::subscribe_with)).
    pub(super) fn new(id: u64, outbox: Arc<Outbox>, filter: Filter, catchup_budget: usize) -> Self {
        let filtered = filter.admit.is_some() || filter.tally.is_some();
        Subscription {
            filter: filtered.then(|| Box::new(filter)),
            id,
            outbox,
            state: AtomicU64::new(0),
            aside: Mutex::new(Some(Box::new(Aside {
                catchup: Some(Pager::new(0, catchup_budget, MAX_PARKED)),
                presence: None,
            }))),
        }
    }

    /// The catch-up, locked (see [`Aside::catchup`]).
    fn catchup(&self) -> Catchup<'_> {
        Catchup(self.aside.lock())
    }

    /// Whether the subscription is live, with `ordering` (`Acquire` where what went live
    /// before must be seen).
    fn live(&self, ordering: Ordering) -> bool {
        self.state.load(ordering) & State::LIVE != 0
    }

    /// The seq up to which the catch-up covered the channel.
    fn caught_up_to(&self) -> u64 {
        self.state.load(Ordering::Relaxed) & State::SEQ
    }

    /// Sets the seq the catch-up covered (and `also`'s bits), keeping the other bits.
    fn set_caught_up_to(&self, seq: u64, also: u64) {
        let seq = seq.min(State::SEQ);
        let _ = self
            .state
            .fetch_update(Ordering::Release, Ordering::Relaxed, |state| {
                Some((state & !State::SEQ) | seq | also)
            });
    }

    /// Keeps `membership` (this subscription's share of its presence channel's members) until
    /// the subscription is unsubscribed, or [`Subscription::take_presence`] takes it.
    pub fn set_presence(&self, membership: Membership) {
        let mut aside = self.aside.lock();
        let aside = aside.get_or_insert_with(|| {
            Box::new(Aside {
                catchup: None,
                presence: None,
            })
        });
        aside.presence = Some(Box::new(membership));
        self.state.fetch_or(State::IN_PRESENCE, Ordering::Release);
    }

    /// Takes the membership [`Subscription::set_presence`] gave (to give it back later than
    /// the unsubscribe: a long-poll keeps its user a member between polls).
    pub fn take_presence(&self) -> Option<Membership> {
        if self.state.load(Ordering::Acquire) & State::IN_PRESENCE == 0 {
            return None;
        }
        let mut locked = self.aside.lock();
        let aside = locked.as_mut()?;
        let membership = aside.presence.take();
        if aside.catchup.is_none() {
            *locked = None;
        }
        membership.map(|m| *m)
    }

    /// Whether this subscription receives `message`.
    pub fn admits(&self, message: &StoredMessage) -> bool {
        self.filter
            .as_ref()
            .and_then(|filter| filter.admit.as_ref())
            .is_none_or(|admit| admit(message))
    }

    fn tally(&self, n: u64) {
        let tally = self
            .filter
            .as_ref()
            .and_then(|filter| filter.tally.as_ref());
        if let Some(tally) = tally.filter(|_| n > 0) {
            tally(n);
        }
    }

    /// Queues a live message unless the catch-up already covered it.
    fn send_live(&self, message: &SharedMessage) {
        if message.seq > self.caught_up_to() && self.outbox.push(OutFrame::Message(message.clone()))
        {
            self.tally(1);
        }
    }

    /// Queues the live messages of `run` (consecutive messages of this subscription's channel,
    /// in commit order) that the catch-up did not cover, with one lock of the outbox and one wake
    /// of its writer.
    ///
    /// The run goes in pieces of about [`RUN_PIECE_BYTES`], the lock released between them, so
    /// a writer draining the outbox meanwhile makes room as it did between single messages: a
    /// backlog gathered while the fan-out thread waited for a core is no more likely to overflow
    /// a reader's queue than the same messages delivered one at a time.
    fn send_live_run(&self, run: &[SharedMessage]) {
        let caught_up_to = self.caught_up_to();
        let mut queued = 0;
        let mut rest = run;
        while !rest.is_empty() {
            let mut bytes = 0;
            let len = rest
                .iter()
                .position(|m| {
                    bytes += m.data.len() + 64;
                    bytes >= RUN_PIECE_BYTES
                })
                .map_or(rest.len(), |last| last + 1);
            let (piece, after) = rest.split_at(len);
            queued += self.outbox.push_many(
                piece
                    .iter()
                    .filter(|m| m.seq > caught_up_to && self.admits(m))
                    .map(|m| OutFrame::Message(m.clone())),
            );
            rest = after;
        }
        self.tally(queued as u64);
    }

    /// Delivers `run` (see [`Subscription::send_live_run`]); while catching up, each message is
    /// parked as [`Subscription::deliver`] parks it.
    pub(super) fn deliver_run(&self, run: &[SharedMessage]) {
        if let [message] = run {
            return self.deliver(message);
        }
        if self.live(Ordering::Acquire) {
            return self.send_live_run(run);
        }
        for message in run {
            self.deliver(message);
        }
    }

    /// The subscription's id, unique in this process.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The outbox the subscription queues to.
    pub fn outbox(&self) -> &Arc<Outbox> {
        &self.outbox
    }

    /// Whether the subscription is live (caught up).
    pub fn is_live(&self) -> bool {
        self.live(Ordering::Acquire)
    }

    pub(super) fn deliver(&self, message: &SharedMessage) {
        if !self.admits(message) {
            return;
        }
        if self.live(Ordering::Acquire) {
            self.send_live(message);
            return;
        }
        let mut catchup = self.catchup();
        if self.live(Ordering::Acquire) {
            drop(catchup);
            self.send_live(message);
            return;
        }
        let Some(pager) = catchup.pager() else {
            return; // ended
        };
        match pager.on_live(message.clone()) {
            LiveAction::Nothing => {}
            LiveAction::Queue(m) => {
                // Only a live pager queues, and a live pager is dropped as it goes live.
                drop(catchup);
                self.send_live(&m);
            }
            LiveAction::Overflow => {
                drop(catchup);
                self.outbox.close(CloseReason::SlowConsumer);
            }
        }
    }

    /// The next page this subscription's catch-up needs, if one is due now (see
    /// [`Pager::next_read`]: paced by the catch-up bytes its outbox still holds).
    pub fn next_read(&self) -> NextRead {
        let mut catchup = self.catchup();
        match catchup.pager() {
            None => NextRead::Done,
            Some(pager) => match pager.next_read(self.outbox.catchup_queued()) {
                Some(request) => NextRead::Read(request),
                None => NextRead::Wait,
            },
        }
    }

    /// A page asked for by [`Subscription::next_read`] came back: queues it (what the filter
    /// admits, shaped by `shape`), and, when it reached the log's head, the parked live
    /// messages above it, and goes live. Returns whether the subscription is now live (or
    /// ended), or the [`Gap`] that ends exact resume (the subscription then ends: see
    /// [`Subscription::end`]).
    pub fn on_page(&self, page: Page<SharedMessage>, shape: Shape) -> Result<bool, Gap> {
        self.take_page(Vec::new(), |pager| pager.on_page(page), shape)
    }

    /// Queues `first` (reply frames) and the first page, read with `limit` after `after`, as
    /// [`Subscription::on_page`] does.
    pub fn on_first_page(
        &self,
        first: Vec<OutFrame>,
        after: u64,
        limit: usize,
        page: Page<SharedMessage>,
        shape: Shape,
    ) -> Result<bool, Gap> {
        self.take_page(
            first,
            |pager| pager.on_first_page(after, limit, page),
            shape,
        )
    }

    fn take_page(
        &self,
        first: Vec<OutFrame>,
        read: impl FnOnce(&mut Pager<SharedMessage>) -> Result<PageDone<SharedMessage>, Gap>,
        shape: Shape,
    ) -> Result<bool, Gap> {
        let mut catchup = self.catchup();
        let Some(pager) = catchup.pager() else {
            return Ok(true);
        };
        let done = read(pager)?;
        let mut messages = done.frames;
        messages.retain(|m| self.admits(m));
        if let Some(shape) = shape {
            shape(&mut messages);
        }
        let n = messages.len() as u64;
        let frames = first
            .into_iter()
            .chain(messages.into_iter().map(OutFrame::Replayed));
        if self.outbox.push_catchup(frames) {
            self.tally(n);
        }
        if done.live {
            let cursor = pager.cursor();
            catchup.take();
            self.set_caught_up_to(cursor, State::LIVE);
        }
        Ok(done.live)
    }

    /// Ends the catch-up without going live: the subscription receives nothing more (its
    /// reader stops). For a catch-up that lost its place, and for an unsubscribe.
    pub fn end(&self) {
        let ended = self.catchup().take();
        if ended.is_some() {
            self.outbox.wake_catchup();
        }
    }

    /// Whether the subscription is still catching up (neither live nor ended).
    pub fn is_catching_up(&self) -> bool {
        self.catchup().is_some()
    }

    /// Queues `first` (reply and catch-up frames), then every parked live message with a seq
    /// above `caught_up_to`, and switches to live delivery (which keeps skipping seqs up to
    /// `caught_up_to`), all under the parking lock so no live message can slip in between.
    pub fn go_live(&self, first: Vec<OutFrame>, caught_up_to: u64) {
        let mut catchup = self.catchup();
        self.set_caught_up_to(caught_up_to, 0);
        let mut frames = first;
        if let Some(mut pager) = catchup.take() {
            frames.extend(
                pager
                    .finish_at(caught_up_to)
                    .into_iter()
                    .map(OutFrame::Message),
            );
        }
        let messages = frames
            .iter()
            .filter(|f| matches!(f, OutFrame::Message(_) | OutFrame::Replayed(_)))
            .count();
        if self.outbox.push_all_unbounded(frames) {
            self.tally(messages as u64);
        }
        self.state.fetch_or(State::LIVE, Ordering::Release);
    }
}

/// Reshapes each page of a catch-up before it is queued (a device inbox drops pushes a later
/// one in the same page replaces).
pub type Shape = Option<fn(&mut Vec<SharedMessage>)>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::head::{Head, HeadLookup};
    use crate::hub::tests::{msg, seqs};
    use crate::hub::Hub;
    use crate::message::Epoch;
    use crate::name::ChannelName;
    use bytes::Bytes;

    #[test]
    fn a_subscription_fits_jemallocs_64_byte_class() {
        // Every idle subscriber holds one: 48 bytes, plus the Arc's two counts.
        assert!(
            size_of::<Subscription>() <= 48,
            "Subscription is {} bytes",
            size_of::<Subscription>()
        );
    }

    #[test]
    fn a_live_subscription_keeps_nothing_aside_and_its_bits_apart() {
        let hub = Hub::new();
        let ch = ChannelName::parse("news").unwrap();
        let (sub, _) = hub.subscribe(&ch, Outbox::new(1 << 20));
        assert!(sub.aside.lock().is_some(), "catching up: the pager");
        assert!(sub.is_catching_up() && !sub.is_live());
        sub.go_live(vec![], 7);
        assert!(sub.is_live() && !sub.is_catching_up());
        assert!(sub.aside.lock().is_none(), "live: nothing aside");
        assert_eq!(sub.caught_up_to(), 7);
        assert_eq!(sub.take_presence().map(|_| ()), None);
        sub.set_caught_up_to(u64::MAX, 0);
        assert!(sub.is_live(), "a seq past 2^62 leaves the flags");
        assert_eq!(sub.caught_up_to(), State::SEQ);
    }

    #[test]
    fn a_run_parks_while_catching_up_and_overflows_as_a_slow_consumer() {
        let hub = Hub::new();
        let ch = ChannelName::parse("r").unwrap();
        let out = Outbox::new(1 << 20);
        let (sub, _) = hub.subscribe(&ch, out.clone());
        hub.deliver_all(&[msg(&ch, 1), msg(&ch, 2), msg(&ch, 3)]);
        assert!(seqs(&out).is_empty(), "parked while catching up");
        sub.go_live(vec![OutFrame::Replayed(msg(&ch, 1))], 1);
        hub.deliver_all(&[msg(&ch, 4), msg(&ch, 5)]);
        assert_eq!(seqs(&out), vec![1, 2, 3, 4, 5]);

        let small = Outbox::new(200);
        let (sub, _) = hub.subscribe(&ch, small.clone());
        sub.go_live(vec![], 5);
        let big = |seq| {
            Arc::new(StoredMessage::new(
                ch.clone(),
                Epoch::new("e"),
                seq,
                None,
                0,
                Bytes::from(vec![b'1'; 100]),
            ))
        };
        hub.deliver_all(&[big(6), big(7), big(8)]);
        assert_eq!(small.closed(), Some(CloseReason::SlowConsumer));
        assert!(seqs(&small).is_empty());
        assert_eq!(
            seqs(&out),
            vec![6, 7, 8],
            "the other subscriber is unaffected"
        );
    }

    #[test]
    fn the_tally_counts_what_is_queued_and_nothing_else() {
        let hub = Hub::new();
        let ch = ChannelName::parse("inbox").unwrap();
        let out = Outbox::new(1 << 20);
        let counted = Arc::new(AtomicU64::new(0));
        let tally = counted.clone();
        let filter = Filter {
            // Odd seqs only.
            admit: Some(Arc::new(|m: &StoredMessage| m.seq % 2 == 1)),
            tally: Some(Arc::new(move |n| {
                tally.fetch_add(n, Ordering::Relaxed);
            })),
        };
        let (sub, _, _) = hub.subscribe_with(&ch, out.clone(), filter);
        for seq in [3, 4, 5] {
            hub.deliver(&msg(&ch, seq)); // parked: 3 and 5 (4 is not admitted)
        }
        assert_eq!(counted.load(Ordering::Relaxed), 0, "parked is not sent");
        // The catch-up covered up to 3: one reply, two replayed messages; parked 3 is dropped.
        sub.go_live(
            vec![
                OutFrame::Control(bytes::Bytes::from_static(b"reply")),
                OutFrame::Replayed(msg(&ch, 1)),
                OutFrame::Replayed(msg(&ch, 3)),
            ],
            3,
        );
        assert_eq!(seqs(&out), vec![1, 3, 5]);
        assert_eq!(counted.load(Ordering::Relaxed), 3);
        hub.deliver(&msg(&ch, 6));
        hub.deliver(&msg(&ch, 7));
        assert_eq!(counted.load(Ordering::Relaxed), 4, "live: 7 only");
        out.close(CloseReason::Shutdown);
        hub.deliver(&msg(&ch, 9));
        assert_eq!(
            counted.load(Ordering::Relaxed),
            4,
            "a closed outbox takes nothing"
        );
    }

    #[test]
    fn a_paging_subscription_drops_live_messages_while_behind_and_parks_while_closing() {
        let hub = Hub::new();
        let ch = ChannelName::parse("news").unwrap();
        let out = Outbox::new(1 << 20);
        let (sub, _) = hub.subscribe(&ch, out.clone());
        let page = |seqs: std::ops::RangeInclusive<u64>, last_seq| Page {
            messages: seqs.map(|seq| msg(&ch, seq)).collect(),
            last_seq,
        };
        hub.deliver(&msg(&ch, 5)); // parked: the first read is in flight
        let live = sub.on_first_page(Vec::new(), 0, 3, page(1..=3, 5), None);
        assert_eq!(live, Ok(false), "that first page (1..=3) was full: behind");
        hub.deliver(&msg(&ch, 6)); // dropped: a page reads it
        assert_eq!(seqs(&out), vec![1, 2, 3], "no live message while behind");
        let NextRead::Read(request) = sub.next_read() else {
            panic!("a page is due once the outbox drained");
        };
        assert_eq!(request.after, 3);
        assert_eq!(sub.next_read(), NextRead::Wait, "one read at a time");
        // The next page (4..=6) reached the head: parking again.
        assert_eq!(sub.on_page(page(4..=6, 6), None), Ok(false));
        hub.deliver(&msg(&ch, 6)); // a late delivery of a seq the page covered
        hub.deliver(&msg(&ch, 7));
        assert_eq!(seqs(&out), vec![4, 5, 6], "parked, not queued");
        let NextRead::Read(request) = sub.next_read() else {
            panic!("the closing read is due");
        };
        assert_eq!(request.after, 6);
        let empty = Page {
            messages: Vec::new(),
            last_seq: 6,
        };
        assert_eq!(sub.on_page(empty, None), Ok(true), "live");
        assert_eq!(sub.next_read(), NextRead::Done);
        hub.deliver(&msg(&ch, 7));
        hub.deliver(&msg(&ch, 8));
        assert_eq!(seqs(&out), vec![7, 8], "the parked 7 once, then live");
    }

    #[test]
    fn a_trim_under_a_paging_subscription_ends_it() {
        let hub = Hub::new();
        let ch = ChannelName::parse("news").unwrap();
        let out = Outbox::new(1 << 20);
        let (sub, _) = hub.subscribe(&ch, out.clone());
        let full = Page {
            messages: (1..=3).map(|seq| msg(&ch, seq)).collect(),
            last_seq: 9,
        };
        assert_eq!(sub.on_first_page(Vec::new(), 0, 3, full, None), Ok(false));
        assert!(matches!(sub.next_read(), NextRead::Read(_)));
        let holed = Page {
            messages: (6..=9).map(|seq| msg(&ch, seq)).collect(),
            last_seq: 9,
        };
        assert_eq!(sub.on_page(holed, None), Err(Gap { expected: 4 }));
        sub.end();
        assert_eq!(sub.next_read(), NextRead::Done);
        hub.deliver(&msg(&ch, 10));
        assert_eq!(seqs(&out), vec![1, 2, 3], "nothing after the gap");
    }

    #[test]
    fn parks_until_live_then_dedupes() {
        let hub = Hub::new();
        let ch = ChannelName::parse("news").unwrap();
        let out = Outbox::new(1 << 20);
        let (sub, head) = hub.subscribe(&ch, out.clone());
        assert!(
            matches!(head, HeadLookup::Load),
            "first subscriber loads the head"
        );
        hub.deliver(&msg(&ch, 3));
        hub.deliver(&msg(&ch, 4));
        assert!(seqs(&out).is_empty(), "nothing before go_live");
        // history read covered up to 3
        sub.go_live(
            vec![
                OutFrame::Message(msg(&ch, 2)),
                OutFrame::Message(msg(&ch, 3)),
            ],
            3,
        );
        hub.deliver(&msg(&ch, 5));
        assert_eq!(seqs(&out), vec![2, 3, 4, 5]);
        let (_, head) = hub.subscribe(&ch, Outbox::new(1024));
        assert!(
            matches!(head, HeadLookup::Known(h) if h.last_seq == 5),
            "head tracked from deliveries"
        );
        hub.learn_head(
            &ch,
            Head {
                epoch: Epoch::new("e"),
                last_seq: 4,
            },
        );
        assert_eq!(hub.known_head(&ch).map(|h| h.last_seq), Some(5));
    }

    #[test]
    fn message_read_from_the_log_but_delivered_after_going_live_is_not_repeated() {
        // The log read saw seq 7 (committed) before the commit sink handed it to the hub.
        let hub = Hub::new();
        let ch = ChannelName::parse("late").unwrap();
        let out = Outbox::new(1 << 20);
        let (sub, _) = hub.subscribe(&ch, out.clone());
        sub.go_live(vec![OutFrame::Message(msg(&ch, 7))], 7);
        hub.deliver(&msg(&ch, 7));
        hub.deliver(&msg(&ch, 8));
        assert_eq!(seqs(&out), vec![7, 8]);
    }
}
