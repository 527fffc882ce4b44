//! Several subscribes of one connection run together ([`ClientSession::subscribe_all`]): a
//! client that sends many at once (a reconnecting client resubscribing, a subscribe storm)
//! waits for the channels' catch-ups side by side, not one after another. On one node that
//! changes little (a known channel's head is in memory); in a cluster a channel new to the
//! node waits for its head from the bus, and the engine reads the heads of every subscribe
//! waiting at that moment in one batch (`herald_core`'s state reads), so a connection's
//! pipelined subscribes share a round trip instead of taking one each.

use std::collections::HashSet;

use futures_util::future::join_all;
use herald_core::engine::SubscribeRequest;
use herald_core::{ChannelName, HeraldError};

use super::open::{self, Confirm, PresenceAsk};
use super::ClientSession;

/// Most subscribes [`ClientSession::subscribe_all`] is given at once: a transport hands it
/// runs of at most this many (their futures live together while they run).
pub const MAX_SUBSCRIBES_TOGETHER: usize = 256;

/// One channel of [`ClientSession::subscribe_all`], as [`ClientSession::subscribe`] takes it.
pub struct SubscribeAsk<'a> {
    /// The client's name for the channel.
    pub channel: &'a str,
    /// Where to start.
    pub request: &'a SubscribeRequest,
    /// What a presence channel's subscribe asks.
    pub presence: PresenceAsk<'a>,
    /// The confirmation queued ahead of the channel's catch-up.
    pub confirm: Confirm<'a>,
}

impl ClientSession {
    /// Subscribes to each channel of `asks` as [`ClientSession::subscribe`] would one after
    /// another (the same checks, in order: a channel named twice is refused the second time,
    /// the per-connection limit counts the ones before it), the catch-ups running together.
    /// Each confirmation is queued when its channel is live, so confirmations may come in
    /// another order than asked. Returns each ask's outcome, in order.
    pub async fn subscribe_all(
        &mut self,
        asks: &[SubscribeAsk<'_>],
    ) -> Vec<Result<(), HeraldError>> {
        let client = match self.client() {
            Ok(client) => client,
            Err(e) => return asks.iter().map(|_| Err(e.clone())).collect(),
        };
        let mut opening: Vec<ChannelName> = Vec::with_capacity(asks.len());
        // The channels of `opening`, looked up by hash: a run of hundreds of subscribes would
        // otherwise compare each name with every one before it.
        let mut opening_set: HashSet<ChannelName> = HashSet::with_capacity(asks.len());
        let mut checked: Vec<Result<usize, HeraldError>> = Vec::with_capacity(asks.len());
        for ask in asks {
            let name = client.app.parse_channel(ask.channel).and_then(|name| {
                client.check_subscribe(name.public())?;
                self.check_room_beside(&name, opening_set.contains(&name), opening.len())?;
                Ok(name)
            });
            checked.push(name.map(|name| {
                opening_set.insert(name.clone());
                opening.push(name);
                opening.len() - 1
            }));
        }
        drop(opening_set);
        let opens = checked
            .iter()
            .zip(asks)
            .filter_map(|(checked, ask)| checked.as_ref().ok().map(|&i| (i, ask)))
            .map(|(i, ask)| {
                open::open_channel(
                    &self.edge,
                    client,
                    &self.outbox,
                    &opening[i],
                    ask.request,
                    &ask.presence,
                    ask.confirm,
                )
            });
        let mut opened = join_all(opens).await.into_iter();
        let mut results = Vec::with_capacity(asks.len());
        let mut held = Vec::with_capacity(opening.len());
        for checked in checked {
            results.push(match checked {
                Err(e) => Err(e),
                Ok(_) => opened
                    .next()
                    .expect("one open per checked ask")
                    .map(|opened| held.push((opened.name.clone(), opened.subscription.clone()))),
            });
        }
        // Sorted into the set at once rather than each inserted into the middle of it.
        self.subscriptions.insert_all(held);
        results
    }
}
