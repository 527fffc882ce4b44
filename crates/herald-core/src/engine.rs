//! The channel engine: the one place that publishes (durable append, then fan-out through the
//! hub in seq order), subscribes with exact resume, and answers history and channel questions.
//! Transports and the HTTP API call only this.

use std::sync::Arc;

use crate::catchup::pages::{PageReader, PageReads};
use crate::catchup::tail::TailReads;
use crate::catchup::{first_page_limit, Page};
use crate::error::HeraldError;
use crate::head::{Head, HeadLookup};
use crate::hub::{DeliveryMeter, Filter, Hub, Shape, Subscription};
use crate::log::{Appended, ChannelLog, ChannelState, LogSlice, ReadFrom, Retention};
use crate::message::{now_millis, Cursor, Epoch, NewMessage, SharedMessage};
use crate::name::ChannelName;
use crate::namespace::Namespaces;
use crate::outbox::{CloseReason, OutFrame, Outbox};
use crate::state_reads::StateReads;

/// Longest idempotency key (message id) a publisher may give.
pub const MAX_MESSAGE_ID_LEN: usize = 256;

/// What a subscriber asked for.
#[derive(Debug, Clone, Default)]
pub struct SubscribeRequest {
    /// Resume after this position.
    pub since: Option<Cursor>,
    /// Send the channel's last message first (`None` = the namespace default).
    pub last: Option<bool>,
    /// When `since` cannot be resumed exactly, replay everything still retained after it
    /// (reported as `recovered: false`) instead of nothing. Device inboxes resume this way:
    /// a device that was away longer than the log keeps still gets what is left.
    pub replay_retained_if_lost: bool,
}

/// The outcome of a subscribe, for the transport's reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubscribeOutcome {
    /// The channel's epoch.
    pub epoch: Epoch,
    /// The channel's newest seq when the subscription started; replayed messages end here.
    pub seq: u64,
    /// Whether the `since` cursor could be resumed exactly. False when no cursor was given.
    pub recovered: bool,
}

/// A subscription that has made its first read and is ready to go live.
pub struct Catchup {
    /// The registered subscription.
    pub subscription: Arc<Subscription>,
    /// What to tell the client.
    pub outcome: SubscribeOutcome,
    start: Start,
    shape: Shape,
    reader: ReaderParts,
}

/// What a subscribe's first read found to replay.
enum Start {
    /// Caught up to this seq after these messages (the channel's last one, or none).
    LiveAt(u64, Vec<SharedMessage>),
    /// Resuming after `after`, with the first page, read with `limit`: if it is full, a
    /// [`PageReader`] reads the rest as the outbox drains.
    Paging {
        after: u64,
        limit: usize,
        page: Page<SharedMessage>,
    },
}

/// What a [`PageReader`] needs besides the subscription.
struct ReaderParts {
    tail: TailReads,
    retention: Retention,
    channel: ChannelName,
    reads: Arc<PageReads>,
    low_water: usize,
}

impl Catchup {
    /// The channel's name as the hub keeps it, shared by all its subscribers: what a
    /// connection should hold for this subscription, rather than a copy of its own.
    pub fn channel(&self) -> &ChannelName {
        &self.reader.channel
    }

    /// Reshapes every page of the catch-up before it is queued (a device inbox collapses the
    /// pushes that a later one in the same page replaces).
    pub fn shape_pages(&mut self, shape: fn(&mut Vec<SharedMessage>)) {
        self.shape = Some(shape);
    }

    /// Seq of the first message that will be replayed after the reply, if the first read has
    /// one for this subscriber.
    pub fn first_replayed(&self) -> Option<u64> {
        let messages = match &self.start {
            Start::LiveAt(_, messages) => messages,
            Start::Paging { page, .. } => &page.messages,
        };
        let mut admitted: Vec<SharedMessage> = messages
            .iter()
            .filter(|m| self.subscription.admits(m))
            .cloned()
            .collect();
        if let Some(shape) = self.shape {
            shape(&mut admitted);
        }
        admitted.first().map(|m| m.seq)
    }

    /// Queues `reply` (if any) and the first page of replayed messages; if that page reached
    /// the channel's head, also the live messages that arrived meanwhile, and the subscription
    /// goes live. Otherwise a task reads the next pages as the outbox drains (see
    /// [`crate::catchup`]); must then be called within a Tokio runtime.
    pub fn go_live(self, reply: Option<OutFrame>) -> Arc<Subscription> {
        let first: Vec<OutFrame> = reply.into_iter().collect();
        let subscription = self.subscription;
        match self.start {
            Start::LiveAt(seq, mut messages) => {
                messages.retain(|m| subscription.admits(m));
                if let Some(shape) = self.shape {
                    shape(&mut messages);
                }
                let frames = first
                    .into_iter()
                    .chain(messages.into_iter().map(OutFrame::Replayed))
                    .collect();
                subscription.go_live(frames, seq);
            }
            Start::Paging { after, limit, page } => {
                match subscription.on_first_page(first, after, limit, page, self.shape) {
                    Ok(true) => {}
                    Ok(false) => {
                        let reader = PageReader {
                            tail: self.reader.tail,
                            retention: self.reader.retention,
                            channel: self.reader.channel,
                            subscription: subscription.clone(),
                            shape: self.shape,
                            reads: self.reader.reads,
                            low_water: self.reader.low_water,
                        };
                        tokio::spawn(reader.run());
                    }
                    Err(_) => {
                        // The engine checked the first page already; never happens.
                        subscription.end();
                        subscription.outbox().close(CloseReason::ResumeLost);
                    }
                }
            }
        }
        subscription
    }
}

/// A head load this subscriber owes the hub: finished with the head it read, or, if the read
/// failed or the subscribe was cancelled, given up so that waiting subscribers read themselves.
struct HeadLoad<'a> {
    hub: &'a Hub,
    channel: &'a ChannelName,
    done: bool,
}

impl HeadLoad<'_> {
    fn finish(&mut self, head: Head) {
        self.done = true;
        self.hub.finish_head_load(self.channel, Some(head));
    }
}

impl Drop for HeadLoad<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.hub.finish_head_load(self.channel, None);
        }
    }
}

/// The channel engine. Built only by [`Engine::open`] (or [`Engine::open_with_bus`],
/// [`Engine::open_with_sink`]), which
/// creates its hub and opens its log with a commit sink feeding that hub, so every committed
/// message reaches this engine's subscribers ([`crate::wiring`]).
pub struct Engine {
    log: Arc<dyn ChannelLog>,
    hub: Arc<Hub>,
    namespaces: Namespaces,
    /// The node-wide cap on catch-up page reads in flight.
    page_reads: Arc<PageReads>,
    /// Catch-up reads through the channels' shared recent tails.
    tail: TailReads,
    /// The state reads of subscribes gathered into batches, for a store that reads a batch
    /// in one round trip ([`ChannelLog::batches_states`]).
    state_reads: Option<Arc<StateReads>>,
}

impl Engine {
    /// An engine over `log`, whose commit sink must hand every committed message, in order, to
    /// [`Hub::deliver`] of `hub` (as [`crate::fanout::FanOut`] does). Private to the crate:
    /// [`Engine::open`] is the constructor that guarantees it. `namespaces` holds the options of
    /// every channel, including the reserved logs other crates registered (see
    /// [`Namespaces::reserve`]).
    pub(crate) fn new(log: Arc<dyn ChannelLog>, hub: Arc<Hub>, namespaces: Namespaces) -> Self {
        hub.set_linger_unpublished(!log.knows_unpublished_channels());
        Engine {
            tail: TailReads {
                log: log.clone(),
                hub: hub.clone(),
            },
            state_reads: log.batches_states().then(|| StateReads::new(log.clone())),
            log,
            hub,
            namespaces,
            page_reads: PageReads::per_core(),
        }
    }

    /// Has the subscribes to channels new to this node learn their heads from `source` (a
    /// bus's, [`crate::bus::Bus::head_source`]) before the store, for a store whose state
    /// reads are batched ([`ChannelLog::batches_states`]); called by the wiring.
    pub(crate) fn use_head_source(&self, source: Option<Arc<dyn crate::head::HeadSource>>) {
        if let (Some(reads), Some(source)) = (&self.state_reads, source) {
            reads.use_source(source);
        }
    }

    /// Sets how many bytes of catch-up a subscription queues at a time (the `catchup_bytes`
    /// setting; 64 KiB unless set): a subscriber resuming far behind reads its catch-up page by
    /// page as its connection drains, so it holds about twice this, whatever it missed.
    pub fn set_catchup_bytes(&self, bytes: usize) {
        self.hub.set_catchup_budget(bytes);
    }

    /// Sets the node-wide bytes of the shared recent-tail cache (the `tail_cache_bytes`
    /// setting; 64 MiB unless set, 0 turns it off): catch-ups resuming inside a channel's
    /// recent tail share one copy of it instead of each reading the store.
    pub fn set_tail_cache_bytes(&self, bytes: usize) {
        self.hub.set_tail_cache_bytes(bytes);
    }

    /// Sets how many deliveries may wait for the fan-out before publishes to channels with
    /// subscribers here wait for room (the `fanout_backlog` setting); `0` never makes them wait.
    pub fn set_fanout_backlog(&self, deliveries: usize) {
        self.hub.backlog().set_limit(if deliveries == 0 {
            usize::MAX
        } else {
            deliveries
        });
    }

    /// The options of every channel, by namespace.
    pub fn namespaces(&self) -> &Namespaces {
        &self.namespaces
    }

    /// This node's presence registry (the hub's, [`crate::presence`]).
    pub fn presence(&self) -> &Arc<crate::presence::Presence> {
        self.hub.presence()
    }

    /// This node's lifecycle registry (the hub's, [`crate::lifecycle`]): listeners join it
    /// at start to hear of connections, subscriptions and channels occupied and vacated.
    pub fn lifecycle(&self) -> &Arc<crate::lifecycle::Lifecycle> {
        self.hub.lifecycle()
    }

    /// Has the hub tell `meter` how many deliveries each channel's messages made on this node
    /// (the per-app counts of [`crate::usage::UsageMeter`]); `false` if a meter was set already.
    pub fn set_delivery_meter(&self, meter: Arc<dyn DeliveryMeter>) -> bool {
        self.hub.set_delivery_meter(meter)
    }

    /// Appends messages to a channel durably; subscribers receive them once stored.
    pub async fn publish(
        &self,
        channel: &ChannelName,
        messages: Vec<NewMessage>,
    ) -> Result<Vec<Appended>, HeraldError> {
        for id in messages.iter().filter_map(|m| m.id.as_deref()) {
            check_message_id(id)?;
        }
        let retention = self.namespaces.options(channel.as_str()).retention;
        let started = std::time::Instant::now();
        let n = messages.len() as u64;
        // A burst to a channel with subscribers here waits for the fan-out to catch up, so its
        // messages wait here, not behind each other in thousands of outboxes (see
        // `crate::fanout::backlog`).
        if self.hub.subscriber_count(channel) > 0 {
            self.hub.backlog().room().await;
        }
        let out = self
            .log
            .append(channel, messages, retention)
            .await
            .map_err(HeraldError::from)?;
        // The fan-out thread moves the hub's head as it delivers, possibly after this returns:
        // tell the hub now, so a subscriber that starts after the publisher has its answer is
        // told a seq at least this new (and skips these messages live if it replays them).
        if let Some(newest) = out.iter().map(|a| &a.message).max_by_key(|m| m.seq) {
            self.hub.learn_head(
                channel,
                Head {
                    epoch: newest.epoch.clone(),
                    last_seq: newest.seq,
                },
            );
        }
        let metrics = crate::telemetry::telemetry();
        metrics
            .publish_seconds
            .record(started.elapsed().as_secs_f64());
        metrics.published.increment(n);
        Ok(out)
    }

    /// Registers a subscription on `outbox` and reads the first page of what it must replay.
    /// The caller queues its reply with [`Catchup::go_live`]; until then live messages are held
    /// back.
    pub async fn subscribe(
        &self,
        channel: &ChannelName,
        outbox: &Arc<Outbox>,
        request: &SubscribeRequest,
    ) -> Result<Catchup, HeraldError> {
        self.subscribe_with(channel, outbox, request, Filter::default())
            .await
    }

    /// [`Engine::subscribe`] with a filter on what the subscriber receives, replayed or live.
    pub async fn subscribe_with(
        &self,
        channel: &ChannelName,
        outbox: &Arc<Outbox>,
        request: &SubscribeRequest,
        filter: Filter,
    ) -> Result<Catchup, HeraldError> {
        let (subscription, lookup, shared) =
            self.hub.subscribe_with(channel, outbox.clone(), filter);
        match self.catch_up(channel, request, lookup).await {
            Ok((outcome, start)) => Ok(Catchup {
                subscription,
                outcome,
                start,
                shape: None,
                reader: ReaderParts {
                    tail: self.tail.clone(),
                    retention: self.namespaces.options(channel.as_str()).retention,
                    channel: shared,
                    reads: self.page_reads.clone(),
                    low_water: self.hub.catchup_budget() / 2,
                },
            }),
            Err(e) => {
                self.hub.unsubscribe(channel, subscription.id());
                Err(e)
            }
        }
    }

    async fn catch_up(
        &self,
        channel: &ChannelName,
        request: &SubscribeRequest,
        lookup: HeadLookup,
    ) -> Result<(SubscribeOutcome, Start), HeraldError> {
        let last = request
            .last
            .unwrap_or(self.namespaces.options(channel.as_str()).last_on_subscribe);
        let mut load = matches!(lookup, HeadLookup::Load).then(|| HeadLoad {
            hub: &self.hub,
            channel,
            done: false,
        });
        if !last {
            if let Some(head) = self.await_head(channel, lookup).await {
                // The hub knows exactly where the channel stands: a live-only subscriber, or
                // one that has already seen the newest message (a long-poll or stream client
                // reconnecting), needs nothing from the store.
                let at_head = |since: &Cursor| {
                    since.seq == head.last_seq
                        && (since.epoch.as_str().is_empty() || since.epoch == head.epoch)
                };
                match &request.since {
                    None => {
                        let start = Start::LiveAt(head.last_seq, Vec::new());
                        let outcome = SubscribeOutcome {
                            epoch: head.epoch,
                            seq: head.last_seq,
                            recovered: false,
                        };
                        return Ok((outcome, start));
                    }
                    Some(since) if at_head(since) => {
                        let start = Start::LiveAt(head.last_seq, Vec::new());
                        let outcome = SubscribeOutcome {
                            epoch: head.epoch,
                            seq: head.last_seq,
                            recovered: true,
                        };
                        return Ok((outcome, start));
                    }
                    Some(_) => {}
                }
            }
        }
        // A resuming subscriber reads the channel's state and its first page of messages in one
        // store call; the page is its replay when the cursor turns out to be resumable. Pages
        // are sized to the catch-up budget; a full one is followed by more as the outbox drains.
        let limit = first_page_limit(self.hub.catchup_budget());
        let (state, first_page) = match &request.since {
            Some(since) => {
                let slice = self
                    .read_after(channel, since.seq, limit, Some(&since.epoch))
                    .await?;
                (slice.state.clone(), Some(slice))
            }
            None => {
                let state = match &self.state_reads {
                    Some(reads) => reads.state(channel).await,
                    None => self.log.state(channel).await,
                };
                (state.map_err(HeraldError::from)?, None)
            }
        };
        let head = Head {
            epoch: state.epoch.clone(),
            last_seq: state.last_seq,
        };
        match load.as_mut() {
            Some(load) => load.finish(head),
            None => self.hub.learn_head(channel, head),
        }
        let retained = request
            .since
            .as_ref()
            .filter(|since| request.replay_retained_if_lost && !is_resumable(since, &state))
            .map(|since| {
                let same_epoch = since.epoch == state.epoch || since.epoch.as_str().is_empty();
                let from = if same_epoch { since.seq } else { 0 };
                Cursor {
                    epoch: state.epoch.clone(),
                    seq: from
                        .max(state.first_seq.saturating_sub(1))
                        .min(state.last_seq),
                }
            });
        let resumable = retained.as_ref().or(request
            .since
            .as_ref()
            .filter(|since| is_resumable(since, &state)));
        let replay = match resumable {
            Some(from) => {
                // The page read after `since` serves a replay from that same seq only.
                let page = first_page
                    .filter(|_| request.since.as_ref().is_some_and(|s| s.seq == from.seq));
                self.first_page_after(channel, from.seq, limit, page)
                    .await?
                    .map(|slice| (from.seq, slice))
            }
            None => None,
        };
        let (state, start, recovered) = match replay {
            Some((after, slice)) => {
                let page = Page {
                    messages: slice.messages,
                    last_seq: slice.state.last_seq,
                };
                let start = Start::Paging { after, limit, page };
                (slice.state, start, retained.is_none())
            }
            // A channel that never had a message has no last one to read.
            None if last && state.last_seq > 0 => {
                let slice = self.read(channel, ReadFrom::Tail(1), 1).await?;
                let start = Start::LiveAt(slice.state.last_seq, slice.messages);
                (slice.state, start, false)
            }
            None => {
                // The hub may know a newer head than the one read: a publish on this node was
                // answered meanwhile, which the read did not count yet (a bus's heads may lag
                // this node's own commits). Start there: at or past every head the hub was
                // told, so whatever it delivers after its head floor reaches this subscriber
                // without a gap.
                let state = match self.hub.known_head(channel) {
                    Some(known) if known.last_seq > state.last_seq => ChannelState {
                        epoch: known.epoch,
                        last_seq: known.last_seq,
                        ..state
                    },
                    _ => state,
                };
                let start = Start::LiveAt(state.last_seq, Vec::new());
                (state, start, false)
            }
        };
        let outcome = SubscribeOutcome {
            epoch: state.epoch,
            seq: state.last_seq,
            recovered,
        };
        Ok((outcome, start))
    }

    /// The head the hub knows, or will know once another subscriber's load finishes; `None`
    /// when this subscriber must read the store itself.
    async fn await_head(&self, channel: &ChannelName, lookup: HeadLookup) -> Option<Head> {
        match lookup {
            HeadLookup::Known(head) => Some(head),
            HeadLookup::Load => None,
            HeadLookup::Wait(loading) => {
                let notified = loading.notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                if let Some(head) = self.hub.known_head(channel) {
                    return Some(head);
                }
                notified.await;
                // None if the load failed: read the store ourselves.
                self.hub.known_head(channel)
            }
        }
    }

    /// The first page of up to `limit` messages after `after` (`first_page` when the caller
    /// read it already), or `None` if the log no longer holds all of them (retention removed
    /// some between the resumability check and the read): the same checks a
    /// [`crate::catchup::Pager`] makes of every page, so the page it is handed passes them.
    async fn first_page_after(
        &self,
        channel: &ChannelName,
        after: u64,
        limit: usize,
        first_page: Option<LogSlice>,
    ) -> Result<Option<LogSlice>, HeraldError> {
        let slice = match first_page {
            Some(slice) => slice,
            None => self.read_after(channel, after, limit, None).await?,
        };
        let contiguous = slice
            .messages
            .iter()
            .zip(after + 1..)
            .all(|(m, expected)| m.seq == expected);
        let next = after + 1 + slice.messages.len() as u64;
        let trimmed = slice.messages.len() < limit && slice.state.last_seq >= next;
        Ok((contiguous && !trimmed).then_some(slice))
    }

    /// A catch-up read of up to `limit` messages after `after`: from the channel's shared
    /// recent tail when it holds them (for a cursor of `epoch`, when given), else the store.
    async fn read_after(
        &self,
        channel: &ChannelName,
        after: u64,
        limit: usize,
        epoch: Option<&Epoch>,
    ) -> Result<LogSlice, HeraldError> {
        let retention = self.namespaces.options(channel.as_str()).retention;
        self.tail
            .read_after(channel, after, limit, epoch, retention)
            .await
            .map_err(HeraldError::from)
    }

    /// Removes a subscription.
    pub fn unsubscribe(&self, channel: &ChannelName, subscription: &Subscription) -> bool {
        self.hub.unsubscribe(channel, subscription.id())
    }

    /// Reads from a channel's log.
    pub async fn read(
        &self,
        channel: &ChannelName,
        from: ReadFrom,
        limit: usize,
    ) -> Result<LogSlice, HeraldError> {
        self.log
            .read(channel, from, limit)
            .await
            .map_err(HeraldError::from)
    }

    /// A channel's state.
    pub async fn state(&self, channel: &ChannelName) -> Result<ChannelState, HeraldError> {
        self.log.state(channel).await.map_err(HeraldError::from)
    }

    /// A channel's retained message now ([`ChannelLog::retained`]).
    pub async fn retained(
        &self,
        channel: &ChannelName,
    ) -> Result<Option<SharedMessage>, HeraldError> {
        self.log
            .retained(channel, now_millis().max(0) as u64)
            .await
            .map_err(HeraldError::from)
    }

    /// The retained messages now of the channels whose full names start with `prefix`, in name
    /// order after `after`, at most `limit` ([`ChannelLog::retained_under`]).
    pub async fn retained_under(
        &self,
        prefix: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<SharedMessage>, HeraldError> {
        self.log
            .retained_under(prefix, after, limit, now_millis().max(0) as u64)
            .await
            .map_err(HeraldError::from)
    }

    /// Channels in name order after `after`.
    pub async fn list(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ChannelState>, HeraldError> {
        self.log.list(after, limit).await.map_err(HeraldError::from)
    }

    /// Why the log's writes fail now, if they do for longer than one request (see
    /// [`ChannelLog::write_fault`]).
    pub fn store_write_fault(&self) -> Option<crate::log::StoreError> {
        self.log.write_fault()
    }

    /// Whether the log takes writes now (see [`ChannelLog::takes_writes`]): `/readyz` asks it.
    pub async fn store_takes_writes(&self) -> Result<(), crate::log::StoreError> {
        self.log.takes_writes().await
    }

    /// This node's subscriptions to topic filters ([`crate::hub::filters`]).
    pub fn filters(&self) -> &Arc<crate::hub::filters::FilterRegistry> {
        self.hub.filters()
    }

    /// Live subscribers of a channel on this node.
    pub fn subscriber_count(&self, channel: &ChannelName) -> usize {
        self.hub.subscriber_count(channel)
    }

    /// The channels with live subscribers on this node that `wanted` accepts, with how many
    /// each has ([`Hub::occupied_channels`]).
    pub fn occupied_channels(
        &self,
        wanted: impl FnMut(&ChannelName) -> bool,
    ) -> Vec<(ChannelName, usize)> {
        self.hub.occupied_channels(wanted)
    }
}

/// Checks a publisher-supplied message id (idempotency key): 1 to 256 bytes.
pub fn check_message_id(id: &str) -> Result<(), HeraldError> {
    if id.is_empty() || id.len() > MAX_MESSAGE_ID_LEN {
        return Err(HeraldError::bad_request(format!(
            "a message id (idempotency key) must be 1 to {MAX_MESSAGE_ID_LEN} bytes"
        )));
    }
    Ok(())
}

/// Whether a client at `since` can be resumed exactly from a log in `state`. A cursor with an
/// empty epoch is taken to be in the current epoch; seq 0 is valid in any epoch.
pub fn is_resumable(since: &Cursor, state: &ChannelState) -> bool {
    let epoch_ok = since.seq == 0 || since.epoch.as_str().is_empty() || since.epoch == state.epoch;
    epoch_ok && since.seq <= state.last_seq && since.seq + 1 >= state.first_seq
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(epoch: &str, first: u64, last: u64) -> ChannelState {
        ChannelState {
            name: ChannelName::parse("c").unwrap(),
            epoch: Epoch::new(epoch),
            last_seq: last,
            first_seq: first,
        }
    }

    fn cur(epoch: &str, seq: u64) -> Cursor {
        Cursor {
            epoch: Epoch::new(epoch),
            seq,
        }
    }

    #[test]
    fn resumability() {
        let s = state("e1", 10, 20);
        assert!(is_resumable(&cur("e1", 9), &s));
        assert!(is_resumable(&cur("e1", 20), &s));
        assert!(is_resumable(&cur("", 15), &s));
        assert!(
            !is_resumable(&cur("e1", 8), &s),
            "gap before retained history"
        );
        assert!(!is_resumable(&cur("e2", 15), &s), "other epoch");
        assert!(!is_resumable(&cur("e1", 21), &s), "ahead of the log");
        assert!(is_resumable(&cur("zz", 0), &state("e1", 1, 5)));
        assert!(!is_resumable(&cur("zz", 0), &state("e1", 3, 5)));
        assert!(is_resumable(&cur("", 0), &state("", 1, 0)));
    }
}
