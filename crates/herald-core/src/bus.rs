//! The [`Bus`] seam: how committed messages, cache-invalidation events and lifecycle events
//! reach every node, and [`LocalBus`], the one-node bus (committed messages go to this node's
//! fan-out thread, events to this node's [`Caches`] at once, lifecycle events straight to this
//! node's listeners). [`ChannelQuery`] and [`OccupiedChannels`] are what
//! [`Bus::occupied_channels`] is asked and answers.

use std::sync::Arc;

use futures_util::future::BoxFuture;

use crate::caches::{CacheEvent, Caches};
use crate::claims::ClusterClaims;
use crate::fanout::FanOut;
use crate::head::HeadSource;
use crate::hub::Hub;
use crate::log::CommitSink;
use crate::message::SharedMessage;
use crate::tenant::{split_app, AppId};
use crate::ChannelName;

/// Cross-node fan-out of committed messages ([`CommitSink::committed`], fed by the store's
/// commits) and of cache-invalidation events ([`Bus::publish`], fed by the admin API after its
/// store write).
///
/// A bus is built over this node's [`FanOut`] (see [`crate::Engine::open_with_bus`]) and must
/// hand it every committed message of every node. A networked bus (Redis) must guarantee:
///
/// - **Per-channel order**: a channel's messages reach each node's fan-out in seq order (one
///   stream or topic per channel or per channel shard, never spread over unordered ones).
/// - **At least once**: a message may arrive twice (a reconnect, a redelivery); the hub drops
///   any seq not newer than the channel's head, so duplicates never reach a subscriber.
/// - **Gaps are repaired from the durable log**: a node that missed messages (a dropped
///   connection to the bus, a full queue) must not deliver around the gap. It tells the
///   affected subscribers to resume (they read what they missed from the log with their
///   `(epoch, seq)` cursor, as after a slow-consumer disconnect), or reads the missed range from
///   the log itself before delivering newer messages.
/// - **Events after the write**: [`Bus::publish`] is called after the store holds the change,
///   and must apply the event on this node before returning (so a key created answers at once
///   on the node that created it) and on every other node soon after. A node that may have
///   missed events reloads its caches from the store. Token secrets are carried in events;
///   a networked bus must keep its transport private or send only the app id and let each node
///   read the secret from the store.
///
/// `committed` is on the publish path: it must not block on the network, allocate or lock per
/// message beyond what the local fan-out does.
///
/// **Lifecycle events** ([`crate::lifecycle`]) cross nodes through the bus too. Each event is
/// delivered once in the cluster, to the listeners of one node (every node registers the
/// same listeners, so a consumer such as webhooks queues each event once):
///
/// - `connected`, `disconnected`, `subscribed` and `unsubscribed` on the node holding the
///   connection, as they happen.
/// - `channel.occupied` when a channel's first subscriber on any node arrives, and
///   `channel.vacated` when its last subscriber on any node leaves, each transition once, on
///   the node whose subscriber made it. A networked bus sets a
///   [`Relay`](crate::lifecycle::Relay) on the hub's lifecycle registry that holds this
///   node's own transitions, counts them across nodes and delivers the cluster's; a one-node
///   bus ([`LocalBus`]) sets none, since this node's transitions are the cluster's.
/// - `user.online` when a user's (an app's token `sub`) first connection on any node
///   arrives, `user.offline` when its last on any node ends, likewise once.
/// - **A node that dies** (killed, crashed, cut off) has its connections' departures
///   (`disconnected`, reason `node_lost`), the vacancies of the channels only it held and the
///   users only it held going offline emitted by another node, one node for each lost node,
///   within a bound the bus states
///   (`RedisBus`: 6 seconds after the lost node's last heartbeat, plus a round trip). A node
///   that stops cleanly reports its own departures and leaves nothing to claim.
///
/// "Once" is at most once where the network fails: a transition whose change reached the
/// other nodes but whose answer was lost is not reported, and a node claimed while cut off
/// that then comes back reports its connections' real departures after the `node_lost` ones
/// (a listener keys departures by connection id). docs/cluster.md says how `RedisBus` does it.
///
/// A networked bus does this work only while a listener has joined: without one the relay is
/// never called, and the bus adds nothing to Redis or to any path.
///
/// **Claims** ([`crate::claims`], [`Bus::claims`]): a networked bus keeps which node holds
/// each claimed name of an app (an MQTT client identifier) and carries takeovers between
/// nodes: a claim of a name another node holds tells that node's
/// [`ClaimHolder`](crate::claims::ClaimHolder) and waits (bounded) for its answer that it let
/// the name go, what it held stored; a claim of a name nobody else holds costs one round trip
/// and no wait. A one-node bus has none: every holder is in this process.
///
/// **Occupied channels** ([`Bus::occupied_channels`]): the channels of an app that have
/// subscribers on any node, each with its subscribers on every node, as the bus's presence
/// counts them (this node's share now, the others' as they last reported them, within a bound
/// the bus states). A one-node bus lists this node's.
pub trait Bus: CommitSink {
    /// Applies `event` on this node at once and sends it to every other node.
    fn publish(&self, event: CacheEvent);

    /// Whether this bus reaches the other nodes now, for `/readyz`. Answered from what the bus
    /// already knows (its connections' state), never by a round trip. A one-node bus has
    /// nothing to reach: [`BusLink::Local`].
    fn link(&self) -> BusLink {
        BusLink::Local
    }

    /// Where the engine learns the heads of channels new to this node without a store read,
    /// if this bus keeps them ([`HeadSource`]); `None` (the default, and [`LocalBus`]'s): the
    /// engine reads the store.
    fn head_source(&self) -> Option<Arc<dyn HeadSource>> {
        None
    }

    /// The cluster's claims on names ([`crate::claims`]), if this bus spans nodes; `None` (the
    /// default, and [`LocalBus`]'s): one node, whose own tables are the cluster's.
    fn claims(&self) -> Option<Arc<dyn ClusterClaims>> {
        None
    }

    /// The channels `query` asks for that have subscribers on any node (one subscriber is
    /// enough), sorted by name, each with its count over every node, at most `query.limit`
    /// of them ([`OccupiedChannels::truncated`] says when more matched). A networked bus
    /// answers within a bound of its own, like its other cluster-wide reads; when it cannot
    /// read the other nodes in time it answers this node's channels and counts, saying so
    /// ([`OccupiedChannels::this_node_only`]). A one-node bus ([`LocalBus`]) answers this
    /// node's ([`ChannelQuery::on_this_node`]).
    fn occupied_channels(&self, query: ChannelQuery) -> BoxFuture<'_, OccupiedChannels>;
}

/// Which channels [`Bus::occupied_channels`] lists: an app's, narrowed by how their names
/// within the app begin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelQuery {
    /// The app whose channels are listed.
    pub app: AppId,
    /// The names within the app (as [`AppId::channel`] scopes them) that are listed start
    /// with one of these; none: every channel of the app (its push logs included).
    pub prefixes: Vec<String>,
    /// The most channels listed.
    pub limit: usize,
}

impl ChannelQuery {
    /// Whether the query lists `channel` (a full name) when it has subscribers.
    pub fn matches(&self, channel: &ChannelName) -> bool {
        let (app, local) = split_app(channel.as_str());
        app == self.app.as_str()
            && (self.prefixes.is_empty() || self.prefixes.iter().any(|p| local.starts_with(p)))
    }

    /// How the full names of the channels listed begin: the app's scope followed by each
    /// prefix (the scope alone without prefixes), none beginning with another (a prefix that
    /// begins with another one is left out, its channels being the other's too), so a channel
    /// begins with one of them at most. For the default app, whose scope is empty, other apps'
    /// channels begin so too: [`ChannelQuery::matches`] tells them apart.
    pub fn full_prefixes(&self) -> Vec<String> {
        let scope = self.app.scope_prefix();
        if self.prefixes.is_empty() {
            return vec![scope];
        }
        let mut prefixes: Vec<&String> = self.prefixes.iter().collect();
        // Sorted, a prefix comes right after the shortest kept one it begins with, if any.
        prefixes.sort();
        prefixes.dedup();
        let mut kept: Vec<&String> = Vec::with_capacity(prefixes.len());
        for prefix in prefixes {
            if !kept.last().is_some_and(|k| prefix.starts_with(k.as_str())) {
                kept.push(prefix);
            }
        }
        kept.into_iter().map(|p| format!("{scope}{p}")).collect()
    }

    /// This node's channels the query lists, with their subscribers on this node: sorted by
    /// name, the first `limit` of them.
    pub fn on_this_node(&self, hub: &Hub) -> OccupiedChannels {
        let mut channels: Vec<(ChannelName, u64)> = hub
            .occupied_channels(|channel| self.matches(channel))
            .into_iter()
            .map(|(channel, n)| (channel, n as u64))
            .collect();
        channels.sort_unstable_by(|a, b| a.0.as_str().cmp(b.0.as_str()));
        let truncated = channels.len() > self.limit;
        channels.truncate(self.limit);
        OccupiedChannels {
            channels,
            truncated,
            this_node_only: false,
        }
    }
}

/// What [`Bus::occupied_channels`] answers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OccupiedChannels {
    /// The channels, sorted by name, each with its subscribers (above 0).
    pub channels: Vec<(ChannelName, u64)>,
    /// More channels matched than the query's limit: `channels` holds `limit` of them (this
    /// node's first, by name; then others' as they were found) and leaves the rest out, which
    /// a query with narrower prefixes lists.
    pub truncated: bool,
    /// A networked bus could not read the other nodes now (Redis did not answer in time):
    /// `channels` are this node's, with this node's counts. Never set by a one-node bus, whose
    /// node is the whole server.
    pub this_node_only: bool,
}

/// Whether a bus reaches the other nodes ([`Bus::link`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BusLink {
    /// One node: there are no other nodes to reach.
    Local,
    /// Connected: what this node commits reaches the other nodes, and theirs reach it.
    Connected,
    /// Not connected now (the bus reconnects by itself): why, in words an operator can act
    /// on. Publishes still succeed, but other nodes' subscribers hear of them only once the
    /// bus is back (they read what they missed from the log then).
    Disconnected {
        /// What is down.
        reason: String,
    },
}

/// Cluster-wide counts a networked bus keeps from every node's reports (presence). Each
/// node's own share is exact; the others' are as they last reported them (a networked bus
/// says how stale that can be).
#[async_trait::async_trait]
pub trait Presence: Send + Sync {
    /// Subscribers of `channel` on every node; `None` if the bus cannot tell now.
    async fn subscribers(&self, channel: &ChannelName) -> Option<u64>;
}

/// The one-node bus: today's behaviour.
pub struct LocalBus {
    fan_out: Arc<FanOut>,
    caches: Arc<Caches>,
}

impl LocalBus {
    /// A bus delivering committed messages through `fan_out` and events to `caches`. The
    /// live clients of `caches` share the hub's lifecycle registry from now on: on one node,
    /// every transition this node sees is the whole story, so no relay stands between.
    pub fn new(fan_out: Arc<FanOut>, caches: Arc<Caches>) -> Arc<LocalBus> {
        caches.live.set_lifecycle(fan_out.hub().lifecycle().clone());
        Arc::new(LocalBus { fan_out, caches })
    }

    /// The caches this bus applies events to.
    pub fn caches(&self) -> &Arc<Caches> {
        &self.caches
    }
}

impl CommitSink for LocalBus {
    #[inline]
    fn committed(&self, messages: &[SharedMessage]) {
        self.fan_out.committed(messages);
    }
}

impl Bus for LocalBus {
    fn publish(&self, event: CacheEvent) {
        self.caches.apply(&event);
    }

    /// None: on one node no other node holds a name, and nothing crosses a network.
    fn claims(&self) -> Option<Arc<dyn ClusterClaims>> {
        None
    }

    /// This node's: on one node they are the server's.
    fn occupied_channels(&self, query: ChannelQuery) -> BoxFuture<'_, OccupiedChannels> {
        let listed = query.on_this_node(self.fan_out.hub());
        Box::pin(std::future::ready(listed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::{hash_api_key, ClientClaims};
    use crate::caches::TokenSecret;
    use crate::hub::Hub;
    use crate::tenancy::AppLimits;
    use crate::tenant::AppId;

    #[test]
    fn events_published_on_a_local_bus_reach_the_caches() {
        let caches = Caches::new(b"default-secret");
        let bus = LocalBus::new(FanOut::start(Hub::new()).unwrap(), caches.clone());
        let shop = AppId::parse("shop").unwrap();
        let limits = AppLimits {
            max_devices: Some(3),
            ..AppLimits::default()
        };
        bus.publish(CacheEvent::AppCreated {
            app: shop.clone(),
            limits,
        });
        bus.publish(CacheEvent::TokenSecretSet {
            app: shop.clone(),
            secret: TokenSecret("hs_shop".into()),
        });
        let hash = hash_api_key("hk_shop");
        bus.publish(CacheEvent::KeyAdded {
            app: shop.clone(),
            hash: hash.clone(),
        });
        assert_eq!(caches.keys.check("hk_shop"), Some(shop.clone()));
        assert_eq!(caches.usage.app(&shop).limits(), limits);
        let claims = ClientClaims {
            sub: "alice".into(),
            exp: None,
            channels: vec![],
            publish: vec![],
            device: None,
            ..Default::default()
        };
        let token = caches.tokens.mint(&shop, &claims).expect("a secret");
        assert_eq!(caches.tokens.verify(&token).unwrap().app, shop);

        bus.publish(CacheEvent::LimitsChanged {
            app: shop.clone(),
            limits: AppLimits::default(),
        });
        assert_eq!(caches.usage.app(&shop).limits(), AppLimits::default());
        bus.publish(CacheEvent::KeyRemoved {
            app: shop.clone(),
            key_id: hash[..12].to_owned(),
        });
        assert_eq!(caches.keys.check("hk_shop"), None);
        bus.publish(CacheEvent::KeyAdded {
            app: shop.clone(),
            hash,
        });
        bus.publish(CacheEvent::AppDeleted { app: shop.clone() });
        assert_eq!(caches.keys.check("hk_shop"), None, "a deleted app's key");
        assert!(
            caches.tokens.mint(&shop, &claims).is_none(),
            "a deleted app's token secret"
        );
        assert_eq!(format!("{:?}", TokenSecret("x".into())), "TokenSecret(..)");
    }

    #[test]
    fn a_local_bus_lists_its_own_occupied_channels_of_one_app_by_prefix_and_limit() {
        let hub = Hub::new();
        let bus = LocalBus::new(FanOut::start(hub.clone()).unwrap(), Caches::new(b"s"));
        let out = crate::outbox::Outbox::new(1 << 20);
        let shop = AppId::parse("shop").unwrap();
        let full = |name: &str| shop.channel(&ChannelName::parse(name).unwrap());
        let plain = |name: &str| ChannelName::parse(name).unwrap();
        let mut subscriptions = Vec::new();
        for channel in [
            full("presence-b"),
            full("presence-a"),
            full("presence-a"),
            full("news"),
            plain("presence-default"),
        ] {
            subscriptions.push(hub.subscribe(&channel, out.clone()).0);
        }
        let list = |prefixes: &[&str], limit| {
            let query = ChannelQuery {
                app: shop.clone(),
                prefixes: prefixes.iter().map(|p| p.to_string()).collect(),
                limit,
            };
            futures_util::FutureExt::now_or_never(bus.occupied_channels(query)).unwrap()
        };
        let presence = list(&["presence-"], 10);
        assert_eq!(
            presence.channels,
            vec![(full("presence-a"), 2), (full("presence-b"), 1)]
        );
        assert!(!presence.truncated && !presence.this_node_only);
        let every = list(&[], 10);
        assert_eq!(every.channels.len(), 3, "{every:?}: not the default app's");
        let first = list(&["presence-", "news"], 2);
        assert_eq!(
            first.channels,
            vec![(full("news"), 1), (full("presence-a"), 2)]
        );
        assert!(first.truncated, "three matched, two listed");
        let default = ChannelQuery {
            app: AppId::default_app(),
            prefixes: vec![],
            limit: 10,
        };
        assert_eq!(default.full_prefixes(), vec![String::new()]);
        let overlapping = ChannelQuery {
            app: shop.clone(),
            prefixes: ["s", "=s", "server:", "sa", "=s"]
                .map(String::from)
                .to_vec(),
            limit: 10,
        };
        assert_eq!(overlapping.full_prefixes(), ["shop~=s", "shop~s"]);
        let listed = futures_util::FutureExt::now_or_never(bus.occupied_channels(default));
        assert_eq!(
            listed.unwrap().channels,
            vec![(plain("presence-default"), 1)],
            "the default app's, not shop's"
        );
    }
}
