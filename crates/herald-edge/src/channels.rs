//! Subscribing an HTTP stream (SSE or long-poll) to the channels named in its query string, and
//! tracking the per-channel positions its cursor string reports.

use std::sync::Arc;

use herald_core::auth::Client;
use herald_core::engine::{SubscribeOutcome, SubscribeRequest};
use herald_core::hub::Subscription;
use herald_core::outbox::{OutFrame, Outbox};
use herald_core::usage::ConnectionGuard;
use herald_core::{ChannelName, Cursor, Engine, HeraldError, StoredMessage};

use axum::http::HeaderMap;

use crate::http::{client_token, parse_bool, query_pairs};
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
}

impl StreamRequest {
    /// Authenticates and parses the request. The cursor string is `cursor` when the transport
    /// has one of its own (SSE's `Last-Event-ID`), else the `since` parameter.
    pub fn parse(
        edge: &Edge,
        query: Option<&str>,
        headers: &HeaderMap,
        cursor: Option<&str>,
    ) -> Result<StreamRequest, HeraldError> {
        let pairs = query_pairs(query);
        let client = edge.authenticate(client_token(&pairs, headers).as_deref())?;
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
        Ok(StreamRequest {
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
    for (_, value) in pairs.iter().filter(|(k, _)| k == "channel") {
        let name = client.app.parse_channel(value)?;
        if !names.contains(&name) {
            names.push(name);
        }
    }
    if names.is_empty() {
        return Err(HeraldError::bad_request(
            "name at least one channel: ?channel=NAME (repeat for more)",
        ));
    }
    if names.len() > edge.settings.max_subscriptions {
        return Err(HeraldError::new(
            herald_core::ErrorCode::TooManySubscriptions,
            format!(
                "{} channels named; at most {} per connection",
                names.len(),
                edge.settings.max_subscriptions
            ),
        ));
    }
    Ok(names)
}

/// The subscriptions of one HTTP stream; dropping it unsubscribes them all, so a client that
/// goes away leaves nothing behind.
pub struct Subscriptions {
    engine: Arc<Engine>,
    _counted: ConnectionGuard,
    subs: Vec<(ChannelName, Arc<Subscription>)>,
    /// The channels, in the order the client named them (= cursor order).
    pub names: Vec<ChannelName>,
    /// Last position written to the client, per channel, in `names` order.
    pub positions: Vec<Cursor>,
    /// Each channel's subscribe outcome, in `names` order.
    pub outcomes: Vec<SubscribeOutcome>,
}

impl Subscriptions {
    /// Subscribes `outbox` to every channel, resuming each from its cursor. `reply` may queue a
    /// confirmation frame ahead of each channel's replay.
    pub async fn open(
        edge: &Edge,
        request: &StreamRequest,
        outbox: &Arc<Outbox>,
        reply: impl Fn(&ChannelName, &SubscribeOutcome) -> Option<OutFrame>,
    ) -> Result<Subscriptions, HeraldError> {
        let client = &request.client;
        let plan = if request.inbox {
            Some(edge.inbox.plan(client).await?)
        } else {
            None
        };
        let names = match &plan {
            Some(plan) => plan.logs.to_vec(),
            None => request.names.clone(),
        };
        let cursors = request.cursors.clone();
        let last = request.last;
        for name in names.iter().filter(|_| plan.is_none()) {
            client.check_subscribe(name.public())?;
        }
        let mut this = Subscriptions {
            engine: edge.engine.clone(),
            _counted: edge.usage.connect(&client.app)?,
            subs: Vec::with_capacity(names.len()),
            names: Vec::new(),
            positions: Vec::with_capacity(names.len()),
            outcomes: Vec::with_capacity(names.len()),
        };
        for (i, (name, since)) in names.iter().zip(cursors).enumerate() {
            // An inbox log resumes from the client's cursor, else from the acknowledged one.
            let since = match &plan {
                Some(plan) => Some(
                    since.unwrap_or_else(|| [&plan.cursor.app, &plan.cursor.device][i].clone()),
                ),
                None => since,
            };
            let catchup = match (&plan, &since) {
                (Some(plan), Some(from)) => {
                    edge.inbox.subscribe(plan, i, from.clone(), outbox).await?
                }
                _ => {
                    let request = SubscribeRequest {
                        since: since.clone(),
                        last,
                        replay_retained_if_lost: request.replay_retained_if_lost,
                    };
                    edge.engine.subscribe(name, outbox, &request).await?
                }
            };
            let outcome = catchup.outcome.clone();
            // The position before anything is written: just before the first replayed message
            // (so a long-poll answer cut short by its limit resumes there), else the cursor
            // resumed from, else where the channel stands.
            let seq = match (catchup.messages.first(), since) {
                (Some(first), _) => first.seq - 1,
                (None, Some(since)) if outcome.recovered => since.seq,
                (None, _) => outcome.seq,
            };
            let position = Cursor {
                epoch: outcome.epoch.clone(),
                seq,
            };
            let sub = catchup.go_live(reply(name, &outcome));
            this.subs.push((name.clone(), sub));
            this.positions.push(position);
            this.outcomes.push(outcome);
        }
        this.names = names;
        Ok(this)
    }

    /// Records that `message` was written; returns false if it is not one of these channels.
    pub fn advance(&mut self, message: &StoredMessage) -> bool {
        match self.names.iter().position(|n| *n == message.channel) {
            Some(i) => {
                self.positions[i] = Cursor {
                    epoch: message.epoch.clone(),
                    seq: message.seq,
                };
                true
            }
            None => false,
        }
    }

    /// The cursor string for the current positions.
    pub fn cursor(&self) -> String {
        herald_proto::cursor::encode(&self.positions)
    }
}

impl Drop for Subscriptions {
    fn drop(&mut self) {
        for (name, sub) in &self.subs {
            self.engine.unsubscribe(name, sub);
        }
    }
}
