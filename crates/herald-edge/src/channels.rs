//! The query-string side of the client session: parsing what an SSE, long-poll (or Meteor)
//! stream asks for, opening its subscriptions through the session's steps
//! ([`crate::session::open`]), and tracking the per-channel positions its cursor string reports.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use herald_core::auth::Client;
use herald_core::engine::{SubscribeOutcome, SubscribeRequest};
use herald_core::hub::Subscription;
use herald_core::lifecycle::{DisconnectReason, Transport};
use herald_core::live::Registration;
use herald_core::outbox::{OutFrame, Outbox};
use herald_core::presence::Membership;
use herald_core::usage::ConnectionGuard;
use herald_core::{ChannelName, Cursor, Engine, HeraldError, StoredMessage};

use axum::http::HeaderMap;

use crate::http::{client_token, parse_bool, query_pairs};
use crate::session::open::{
    authorise, check_limit, open_channel, open_inbox, register, Opened, PresenceAsk, Wanted,
};
use crate::Edge;

/// What an SSE or long-poll request asks for: who is asking, which channels, from where.
pub struct StreamRequest {
    /// The query string's `key=value` pairs, in order.
    pub pairs: Vec<(String, String)>,
    /// The authenticated (or anonymous) client.
    pub client: Client,
    /// The channels named, validated, in order.
    pub names: Vec<ChannelName>,
    /// Where to resume each channel, in `names` order.
    pub cursors: Vec<Option<Cursor>>,
    /// `last=` if given.
    pub last: Option<bool>,
    /// A device token named no channel: the stream carries the device's inbox (`$app`, then
    /// `$device`), resumed from the given cursor or else from the device's acknowledged one.
    pub inbox: bool,
    /// When a cursor cannot be resumed exactly, replay what is still retained after it instead
    /// of nothing (Meteor's `.r<id>` does this; Herald's own transports report the gap).
    pub replay_retained_if_lost: bool,
    /// `presence=true`: the presence channels' `members`, joins and leaves.
    pub presence: bool,
    /// `member=` (JSON text): the member data for the presence channels, when the token has
    /// no `user_info`.
    pub member: Option<String>,
}

impl StreamRequest {
    /// Waits (bounded) for the key set the request's token needs when its app's JWKS is not
    /// cached yet or lacks the token's key id; returns at once otherwise. Call before
    /// [`StreamRequest::parse`].
    pub async fn prepare_keys(edge: &Edge, query: Option<&str>, headers: &HeaderMap) {
        if let Some(token) = client_token(&query_pairs(query), headers) {
            edge.tokens.prepare(&token).await;
        }
    }

    /// Authenticates and parses the request. The cursor string is `cursor` when the transport
    /// has one of its own (SSE's `Last-Event-ID`), else the `since` parameter.
    pub fn parse(
        edge: &Edge,
        query: Option<&str>,
        headers: &HeaderMap,
        cursor: Option<&str>,
    ) -> Result<StreamRequest, HeraldError> {
        let pairs = query_pairs(query);
        let client = authorise(edge, client_token(&pairs, headers).as_deref())?;
        let inbox = client.device.is_some() && !pairs.iter().any(|(k, _)| k == "channel");
        let names = if inbox {
            Vec::new()
        } else {
            channel_params(edge, &client, &pairs)?
        };
        let cursor = cursor.or_else(|| param(&pairs, "since")).unwrap_or("");
        let positions = if inbox { 2 } else { names.len() };
        let cursors = herald_proto::cursor::decode(cursor, positions)?;
        let last = param(&pairs, "last").map(parse_bool).transpose()?;
        let presence = param(&pairs, "presence")
            .map(parse_bool)
            .transpose()?
            .unwrap_or(false);
        let member = param(&pairs, "member").map(str::to_owned);
        Ok(StreamRequest {
            presence,
            member,
            client,
            names,
            cursors,
            last,
            pairs,
            inbox,
            replay_retained_if_lost: false,
        })
    }

    /// The first value of query parameter `key`.
    pub fn param(&self, key: &str) -> Option<&str> {
        param(&self.pairs, key)
    }
}

fn param<'a>(pairs: &'a [(String, String)], key: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

/// Channel names from repeated `channel=` parameters, validated and de-duplicated.
fn channel_params(
    edge: &Edge,
    client: &Client,
    pairs: &[(String, String)],
) -> Result<Vec<ChannelName>, HeraldError> {
    let mut names: Vec<ChannelName> = Vec::new();
    // A set, not a scan of `names`: a request naming 1,000 channels made 500,000 comparisons
    // (a quarter of the server's CPU in a long-poll subscribe storm).
    let mut seen: HashSet<ChannelName> = HashSet::new();
    for (_, value) in pairs.iter().filter(|(k, _)| k == "channel") {
        let name = client.app.parse_channel(value)?;
        if seen.insert(name.clone()) {
            names.push(name);
        }
    }
    if names.is_empty() {
        return Err(HeraldError::bad_request(
            "name at least one channel: ?channel=NAME (repeat for more)",
        ));
    }
    check_limit(edge, Wanted::Named(names.len()))?;
    Ok(names)
}

/// The subscriptions of one HTTP stream; dropping it unsubscribes them all, so a client that
/// goes away leaves nothing behind. Opened through the client session's steps
/// ([`crate::session::open`]); the client itself is not kept once they are done.
pub struct Subscriptions {
    engine: Arc<Engine>,
    _counted: ConnectionGuard,
    /// The stream's place among the live clients (revocations close it there).
    registered: Registration,
    /// Each channel, in the order the client named them (= cursor order).
    channels: Vec<Channel>,
    /// Each channel's place in `channels`, for a stream of more than [`SCAN_UP_TO`] channels
    /// (finding a message's channel by a scan would cost a comparison per channel per message).
    /// Boxed on purpose: one pointer in every stream's struct, where a `HashMap` would be 48
    /// bytes, and most streams have no index.
    #[allow(clippy::box_collection)]
    index: Option<Box<HashMap<ChannelName, usize>>>,
}

/// Up to this many channels a stream finds a message's channel by scanning its list.
const SCAN_UP_TO: usize = 16;

/// One channel of a stream.
struct Channel {
    name: ChannelName,
    subscription: Arc<Subscription>,
    /// The last position written to the client.
    position: Cursor,
}

/// What each channel's subscribe found, in the order the client named them.
pub type Outcomes = Vec<(ChannelName, SubscribeOutcome)>;

impl Subscriptions {
    /// Subscribes `outbox` to every channel (or the device's inbox) of a stream over
    /// `transport` (SSE, long-poll, Meteor; its lifecycle events name it), resuming each from its
    /// cursor. `reply` may queue a confirmation frame ahead of each channel's replay.
    pub async fn open(
        transport: Transport,
        edge: &Edge,
        request: &StreamRequest,
        outbox: &Arc<Outbox>,
        reply: impl Fn(&ChannelName, &SubscribeOutcome) -> Option<OutFrame> + Sync,
    ) -> Result<(Subscriptions, Outcomes), HeraldError> {
        let client = &request.client;
        // Registered first, so a device deactivated or a token revoked while the stream opens
        // closes it too.
        let registered = register(edge, client, outbox, transport);
        let plan = if request.inbox {
            Some(edge.inbox.plan(client).await?)
        } else {
            for name in &request.names {
                client.check_subscribe(name.public())?;
            }
            None
        };
        let count = plan.as_ref().map_or(request.names.len(), |p| p.logs.len());
        let mut this = Subscriptions {
            engine: edge.engine.clone(),
            _counted: edge.usage.connect(&client.app)?,
            registered,
            channels: Vec::with_capacity(count),
            index: None,
        };
        let mut outcomes = Vec::with_capacity(count);
        let mut keep = |o: Opened| {
            this.channels.push(Channel {
                name: o.name.clone(),
                subscription: o.subscription,
                position: o.position,
            });
            outcomes.push((o.name, o.outcome));
        };
        match &plan {
            Some(plan) => {
                let mut since = request.cursors.iter().cloned();
                let since = [since.next().flatten(), since.next().flatten()];
                open_inbox(edge, plan, since, outbox, |_| false, &reply, &mut keep).await?;
            }
            None => {
                for (name, since) in request.names.iter().zip(request.cursors.iter().cloned()) {
                    let subscribe = SubscribeRequest {
                        since,
                        last: request.last,
                        replay_retained_if_lost: request.replay_retained_if_lost,
                    };
                    let presence = PresenceAsk {
                        frames: request.presence,
                        member: request.member.as_deref(),
                    };
                    let opened =
                        open_channel(edge, client, outbox, name, &subscribe, &presence, &reply)
                            .await?;
                    keep(opened);
                }
            }
        }
        if this.channels.len() > SCAN_UP_TO {
            let places = this.channels.iter().enumerate();
            this.index = Some(Box::new(places.map(|(i, c)| (c.name.clone(), i)).collect()));
        }
        Ok((this, outcomes))
    }

    /// Says why the stream is about to end, for its `disconnected` lifecycle event (see
    /// [`Registration::set_disconnect_reason`]).
    pub fn set_disconnect_reason(&self, reason: DisconnectReason) {
        self.registered.set_disconnect_reason(reason);
    }

    /// Records that `message` was written; returns its channel's place in cursor order, or
    /// `None` if it is not one of these channels.
    pub fn advance(&mut self, message: &StoredMessage) -> Option<usize> {
        let i = match &self.index {
            Some(index) => *index.get(&message.channel)?,
            None => self
                .channels
                .iter()
                .position(|c| c.name == message.channel)?,
        };
        self.channels[i].position = Cursor {
            epoch: message.epoch.clone(),
            seq: message.seq,
        };
        Some(i)
    }

    /// The current positions, in cursor order.
    pub fn positions(&self) -> impl ExactSizeIterator<Item = &Cursor> {
        self.channels.iter().map(|c| &c.position)
    }

    /// The current position of the channel at `i` in cursor order.
    pub fn position(&self, i: usize) -> &Cursor {
        &self.channels[i].position
    }

    /// Takes the presence memberships of the stream's subscriptions (no frames any more), so
    /// that they outlive its unsubscribes: a long-poll's user stays a member between polls.
    pub fn take_presence(&self) -> Vec<Membership> {
        self.channels
            .iter()
            .filter_map(|c| c.subscription.take_presence())
            .map(|mut m| {
                m.unwatch();
                m
            })
            .collect()
    }

    /// The cursor string for the current positions.
    pub fn cursor(&self) -> String {
        herald_proto::cursor::encode(self.positions())
    }
}

impl Drop for Subscriptions {
    fn drop(&mut self) {
        for c in &self.channels {
            self.engine.unsubscribe(&c.name, &c.subscription);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_streams_subscriptions_stay_small() {
        // The engine, the usage guard, the live-client registration, one vector (each channel
        // with its subscription and position: one allocation) and the index a wide stream has
        // (one pointer): the client is not kept.
        let parts = size_of::<Arc<Engine>>()
            + size_of::<ConnectionGuard>()
            + size_of::<Registration>()
            + size_of::<Vec<Channel>>()
            + size_of::<usize>();
        assert_eq!(size_of::<Subscriptions>(), parts);
        assert!(
            size_of::<Subscriptions>() <= 128,
            "{}",
            size_of::<Subscriptions>()
        );
    }
}
