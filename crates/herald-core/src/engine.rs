//! The channel engine: the one place that publishes (durable append, then fan-out through the
//! hub in seq order), subscribes with exact resume, and answers history and channel questions.
//! Transports and the HTTP API call only this.

use std::sync::Arc;

use crate::error::HeraldError;
use crate::head::{Head, HeadLookup};
use crate::hub::{Filter, Hub, Subscription};
use crate::log::{Appended, ChannelLog, ChannelState, LogSlice, ReadFrom};
use crate::message::{Cursor, Epoch, NewMessage, SharedMessage};
use crate::name::ChannelName;
use crate::namespace::Namespaces;
use crate::outbox::{OutFrame, Outbox};

/// Longest idempotency key (message id) a publisher may give.
pub const MAX_MESSAGE_ID_LEN: usize = 256;

/// Messages read per page while catching a subscriber up.
const CATCH_UP_PAGE: usize = 1000;

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

/// A subscription that has read its catch-up and is ready to go live.
pub struct Catchup {
    /// The registered subscription.
    pub subscription: Arc<Subscription>,
    /// What to tell the client.
    pub outcome: SubscribeOutcome,
    /// Messages to replay, in order, after the reply.
    pub messages: Vec<SharedMessage>,
}

impl Catchup {
    /// Queues `reply` (if any), the replayed messages and any live messages that arrived
    /// meanwhile, then switches the subscription to live delivery.
    pub fn go_live(self, reply: Option<OutFrame>) -> Arc<Subscription> {
        let frames = reply
            .into_iter()
            .chain(self.messages.into_iter().map(OutFrame::Replayed))
            .collect();
        self.subscription.go_live(frames, self.outcome.seq);
        self.subscription
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
}

impl Engine {
    /// An engine over `log`, whose commit sink must hand every committed message, in order, to
    /// [`Hub::deliver`] of `hub` (as [`crate::fanout::FanOut`] does). Private to the crate:
    /// [`Engine::open`] is the constructor that guarantees it. `namespaces` holds the options of
    /// every channel, including the reserved logs other crates registered (see
    /// [`Namespaces::reserve`]).
    pub(crate) fn new(log: Arc<dyn ChannelLog>, hub: Arc<Hub>, namespaces: Namespaces) -> Self {
        Engine {
            log,
            hub,
            namespaces,
        }
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

    /// Registers a subscription on `outbox` and reads what it must replay. The caller queues its
    /// reply with [`Catchup::go_live`]; until then live messages are held back.
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
        let (subscription, lookup) = self.hub.subscribe_with(channel, outbox.clone(), filter);
        match self.catch_up(channel, request, lookup).await {
            Ok((outcome, mut messages)) => {
                messages.retain(|m| subscription.admits(m));
                Ok(Catchup {
                    subscription,
                    outcome,
                    messages,
                })
            }
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
    ) -> Result<(SubscribeOutcome, Vec<SharedMessage>), HeraldError> {
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
                        let outcome = SubscribeOutcome {
                            epoch: head.epoch,
                            seq: head.last_seq,
                            recovered: false,
                        };
                        return Ok((outcome, Vec::new()));
                    }
                    Some(since) if at_head(since) => {
                        let outcome = SubscribeOutcome {
                            epoch: head.epoch,
                            seq: head.last_seq,
                            recovered: true,
                        };
                        return Ok((outcome, Vec::new()));
                    }
                    Some(_) => {}
                }
            }
        }
        // A resuming subscriber reads the channel's state and its first page of messages in one
        // store call; the page is its replay when the cursor turns out to be resumable.
        let (state, first_page) = match &request.since {
            Some(since) => {
                let slice = self
                    .read(channel, ReadFrom::After(since.seq), CATCH_UP_PAGE)
                    .await?;
                (slice.state.clone(), Some(slice))
            }
            None => (
                self.log.state(channel).await.map_err(HeraldError::from)?,
                None,
            ),
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
                self.read_contiguous_after(channel, from.seq, page).await?
            }
            None => None,
        };
        let (state, messages, recovered) = match replay {
            Some((state, messages)) => (state, messages, retained.is_none()),
            None if last => {
                let slice = self.read(channel, ReadFrom::Tail(1), 1).await?;
                (slice.state, slice.messages, false)
            }
            None => (state, Vec::new(), false),
        };
        let outcome = SubscribeOutcome {
            epoch: state.epoch,
            seq: state.last_seq,
            recovered,
        };
        Ok((outcome, messages))
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

    /// Every message after `after`, page by page (starting with `first_page`, the read after
    /// `after`, when the caller has it), or `None` if they are no longer all there (retention
    /// removed some between the resumability check and the reads).
    async fn read_contiguous_after(
        &self,
        channel: &ChannelName,
        after: u64,
        first_page: Option<LogSlice>,
    ) -> Result<Option<(ChannelState, Vec<SharedMessage>)>, HeraldError> {
        let mut all = Vec::new();
        let mut expected = after + 1;
        let mut next_page = first_page;
        loop {
            let slice = match next_page.take() {
                Some(slice) => slice,
                None => {
                    self.read(channel, ReadFrom::After(expected - 1), CATCH_UP_PAGE)
                        .await?
                }
            };
            for m in &slice.messages {
                if m.seq != expected {
                    return Ok(None);
                }
                expected += 1;
            }
            let full = slice.messages.len() == CATCH_UP_PAGE;
            all.extend(slice.messages);
            if !full {
                if slice.state.last_seq >= expected {
                    return Ok(None);
                }
                return Ok(Some((slice.state, all)));
            }
        }
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

    /// Live subscribers of a channel on this node.
    pub fn subscriber_count(&self, channel: &ChannelName) -> usize {
        self.hub.subscriber_count(channel)
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
