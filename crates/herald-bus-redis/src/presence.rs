//! Presence: cluster-wide subscriber counts per channel and connection counts per app. Every
//! [`crate::BusOptions::presence_period`] each node writes its own counts to a Redis hash of
//! its own (`PREFIX:presence:NODE`, fields `c:CHANNEL` and `a:APP`; only the fields that
//! changed, looking only at the channels the hub said changed, and the whole hash again after
//! a reconnect or a failed write), which expires after three periods,
//! and notes the time in `PREFIX:nodes` (this node's heartbeat: `lost_nodes.rs` claims a
//! node whose time lapsed, and `fence.rs` fences this node before its own does). A read
//! sums this node's live count with every other live node's last written one.
//!
//! How exact: another node's figure is at most one period (plus a round trip) old, so a
//! cluster-wide count lags changes on other nodes by up to a period; a node that died is
//! counted until its hash expires (three periods). This node's own share is always current.
//! A read waits half a second at most for Redis, then fails (the caller falls back to this
//! node's own count).
//!
//! **Occupied channels** ([`RedisBus::cluster_channels`], the bus's
//! [`Bus::occupied_channels`](herald_core::bus::Bus::occupied_channels)): this node's channels
//! from its hub, merged with every other live node's fields `c:` + a full-name prefix of the
//! query, read with `HSCAN ... MATCH` (the prefix's glob characters escaped), the nodes' scans
//! side by side, one round trip per node and page. As exact as the counts (a channel vacated
//! on another node stays listed for up to a period), bounded the same way: when Redis does not
//! answer in half a second the bus answers this node's channels alone, saying so. What the
//! listing holds stays within the query's limit (past it, channels found later are left out
//! and the listing says it was cut); the scans still read every matching field, so the
//! channels listed get every node's count.
//!
//! **Webhook `subscription_count` claims** ([`RedisBus::claim_count_report`]): the node that
//! tells a channel's count for the next interval sets `PREFIX:hook-count-claim:CHANNEL` with
//! `SET NX PX interval`, so one node tells it per interval; the count it told is kept in
//! `PREFIX:hook-count:CHANNEL` (deleted when it is 0), so the next node to claim it tells
//! nothing when the count is back where that left it. Neither is read by anything else.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use fred::prelude::{ClientLike, HashesInterface, KeysInterface, Value};
use fred::types::scan::Scanner;
use fred::types::{ClusterHash, CustomCommand, Expiration, SetOptions};
use futures_util::StreamExt;
use herald_core::bus::{ChannelQuery, OccupiedChannels};
use herald_core::message::now_millis;
use herald_core::tenant::{parse_full, AppId};
use herald_core::ChannelName;

use crate::bus::{RedisBus, Shared};
use crate::error::BusError;
use crate::followed::{ChannelHasher, ChannelMap};

fn channel_field(channel: &ChannelName) -> String {
    let name = channel.as_str();
    let mut field = String::with_capacity(2 + name.len());
    field.push_str("c:");
    field.push_str(name);
    field
}

fn app_field(app: &AppId) -> String {
    format!("a:{}", app.as_str())
}

/// What this node last wrote to its presence hash: each channel's subscriber count and each
/// app's connection count (zeros are not written: their fields are deleted).
#[derive(Default)]
struct Written {
    channels: ChannelMap<i64>,
    apps: HashMap<AppId, i64>,
}

/// The hash fields to set and to delete for one write. Each field is named once in `set`
/// (a list, not a map: a storm's tens of thousands of new counts are not hashed again).
#[derive(Default)]
struct Changes {
    set: Vec<(String, i64)>,
    delete: Vec<String>,
}

/// The changes that bring `written` to `channels` (only those that differ), updating it as
/// if the write succeeded.
fn channel_changes(
    shared: &Shared,
    written: &mut ChannelMap<i64>,
    channels: impl IntoIterator<Item = (ChannelName, i64)>,
    changes: &mut Changes,
) {
    let mut read = 0;
    for (channel, n) in channels {
        read += 1;
        if n > 0 {
            match written.entry(channel) {
                Entry::Occupied(mut known) if *known.get() != n => {
                    known.insert(n);
                    changes.set.push((channel_field(known.key()), n));
                }
                Entry::Occupied(_) => {}
                Entry::Vacant(new) => {
                    changes.set.push((channel_field(new.key()), n));
                    new.insert(n);
                }
            }
        } else if written.remove(&channel).is_some() {
            changes.delete.push(channel_field(&channel));
        }
    }
    shared
        .counters
        .presence_counts_read
        .fetch_add(read, std::sync::atomic::Ordering::Relaxed);
}

/// This node's counts now: after a reconnect or a failed write, every channel's (the whole
/// hash is written again); otherwise only the channels whose count changed since the last
/// write, with the count the hub told last (`InterestHook::subscribers_changed`), so a round
/// costs what changed, not one look per followed channel, nor a look in the hub per changed
/// one. Apps are few: all of them each round.
fn changes(shared: &Shared, written: &mut Written, everything: bool) -> Changes {
    let hub = shared.fan_out.hub();
    let mut changes = Changes::default();
    let told = std::mem::take(&mut *shared.counts_changed.lock());
    if everything {
        written.channels.clear();
        let now: Vec<(ChannelName, i64)> = shared
            .followed
            .all()
            .into_iter()
            .chain(told.into_keys())
            .map(|c| {
                let n = hub.subscriber_count(&c) as i64;
                (c, n)
            })
            .collect();
        // The hash rewritten whole (the task deletes every other field it holds): every
        // channel counted once (one both followed and told is read twice, written once).
        channel_changes(shared, &mut written.channels, now, &mut Changes::default());
        changes.set.extend(
            written
                .channels
                .iter()
                .map(|(channel, n)| (channel_field(channel), *n)),
        );
    } else {
        let now = told.into_iter().map(|(c, n)| (c, n as i64));
        channel_changes(shared, &mut written.channels, now, &mut changes);
    }
    let apps: HashMap<AppId, i64> = shared
        .caches
        .usage
        .connections()
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .map(|(app, n)| (app, n as i64))
        .collect();
    for (app, n) in &apps {
        if everything || written.apps.get(app) != Some(n) {
            changes.set.push((app_field(app), *n));
        }
    }
    for app in written.apps.keys().filter(|a| !apps.contains_key(*a)) {
        changes.delete.push(app_field(app));
    }
    written.apps = apps;
    changes
}

pub(crate) async fn run(shared: Arc<Shared>) {
    let period = shared.options.presence_period;
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let key = shared.names.presence(shared.node);
    let node = format!("{:016x}", shared.node);
    let mut written = Written::default();
    // Everything is written in the first round, after a reconnect and after a failed write.
    let mut everything = true;
    let mut reconnects_seen = 0;
    loop {
        tick.tick().await;
        let reconnects = shared
            .counters
            .reconnects
            .load(std::sync::atomic::Ordering::Relaxed);
        if reconnects != reconnects_seen {
            // Redis may have restarted empty: write everything again.
            reconnects_seen = reconnects;
            everything = true;
        }
        let changes = changes(&shared, &mut written, everything);
        let publisher = &shared.publisher;
        let result = async {
            let Changes { set, mut delete } = changes;
            if everything {
                // Fields a failed write (or another life of this node's hash) left behind.
                let present: Vec<String> = publisher.hkeys(&key).await?;
                let kept: HashSet<&str, ChannelHasher> =
                    set.iter().map(|(field, _)| field.as_str()).collect();
                delete.extend(present.into_iter().filter(|f| !kept.contains(f.as_str())));
            }
            if !set.is_empty() {
                // `HSET` with its fields as arguments: no map of fred's (hashed again with
                // SipHash) for a storm's tens of thousands of changed counts.
                let mut args: Vec<Value> = Vec::with_capacity(1 + 2 * set.len());
                args.push(Value::from(key.as_str()));
                for (field, n) in set {
                    // Moved, not copied.
                    args.push(Value::from(field));
                    args.push(Value::from(n));
                }
                let hset = CustomCommand::new_static("HSET", ClusterHash::FirstKey, false);
                publisher.custom::<Value, _>(hset, args).await?;
            }
            if !delete.is_empty() {
                publisher.hdel::<(), _, _>(&key, delete).await?;
            }
            let ttl = (period * 3).as_millis() as i64;
            publisher.pexpire::<(), _>(&key, ttl, None).await?;
            if shared.fence.is_fenced() {
                // What the fence let go is ended before this node is alive again.
                crate::fence::heal(&shared).await?;
            }
            let (sent, at_ms) = (tokio::time::Instant::now(), now_millis());
            publisher
                .hset::<(), _, _>(shared.names.nodes(), (node.as_str(), at_ms))
                .await?;
            shared.fence.beat(sent, at_ms);
            Ok::<_, fred::error::Error>(())
        };
        // Bounded: a write stuck on a connection that answers nothing would hold the
        // heartbeat back after Redis is back (the fence's deadline runs meanwhile).
        let lapse = crate::lost_nodes::lapse(period);
        let result = match tokio::time::timeout(lapse, result).await {
            Ok(result) => result,
            Err(_) => Err(fred::error::Error::new(
                fred::error::ErrorKind::Timeout,
                "no answer within the lapse",
            )),
        };
        match result {
            Ok(()) => everything = false,
            Err(error) => {
                everything = true;
                let error = crate::error::in_words(&error);
                tracing::debug!(%error, "the Redis bus cannot write presence yet");
            }
        }
    }
}

impl RedisBus {
    /// Subscribers of `channel` on every node: this node's now, the others' as they last
    /// wrote them (see the module documentation for how exact).
    pub async fn cluster_subscribers(&self, channel: &ChannelName) -> Result<u64, BusError> {
        let local = self.shared.fan_out.hub().subscriber_count(channel) as u64;
        Ok(local + self.remote_sum(&channel_field(channel)).await?)
    }

    /// Live connections of `app` on every node (see the module documentation for how exact).
    pub async fn cluster_connections(&self, app: &AppId) -> Result<u64, BusError> {
        let local = self
            .shared
            .caches
            .usage
            .connections()
            .into_iter()
            .find(|(a, _)| a == app)
            .map_or(0, |(_, n)| n);
        Ok(local + self.remote_sum(&app_field(app)).await?)
    }

    /// The other live nodes' figure for `field`. Bounded by [`REMOTE_READ_WAIT`]: while Redis
    /// is away its commands wait for the reconnection, and a caller (an HTTP request, a
    /// connection limit) must not wait with them.
    async fn remote_sum(&self, field: &str) -> Result<u64, BusError> {
        tokio::time::timeout(REMOTE_READ_WAIT, self.remote_sum_unbounded(field))
            .await
            .map_err(|_| BusError::Redis(format!("no answer within {REMOTE_READ_WAIT:?}")))?
    }

    async fn remote_sum_unbounded(&self, field: &str) -> Result<u64, BusError> {
        let shared = &self.shared;
        let mut sum = 0u64;
        for id in self.other_live_nodes().await? {
            let count: Option<i64> = shared
                .publisher
                .hget(shared.names.presence(id), field)
                .await
                .map_err(failed)?;
            sum += count.unwrap_or(0).max(0) as u64;
        }
        Ok(sum)
    }

    /// The other nodes that wrote their presence within the last three periods.
    async fn other_live_nodes(&self) -> Result<Vec<u64>, BusError> {
        let shared = &self.shared;
        let nodes: HashMap<String, i64> = shared
            .publisher
            .hgetall(shared.names.nodes())
            .await
            .map_err(failed)?;
        let alive_since = now_millis() - (shared.options.presence_period * 3).as_millis() as i64;
        Ok(nodes
            .into_iter()
            .filter(|(_, seen)| *seen >= alive_since)
            .filter_map(|(node, _)| u64::from_str_radix(&node, 16).ok())
            .filter(|id| *id != shared.node)
            .collect())
    }

    /// The channels `query` lists with subscribers on any node, each with its count over every
    /// node (see the module documentation for how exact and how bounded); an error when Redis
    /// does not answer within half a second.
    pub async fn cluster_channels(
        &self,
        query: &ChannelQuery,
    ) -> Result<OccupiedChannels, BusError> {
        tokio::time::timeout(REMOTE_READ_WAIT, self.cluster_channels_unbounded(query))
            .await
            .map_err(|_| BusError::Redis(format!("no answer within {REMOTE_READ_WAIT:?}")))?
    }

    async fn cluster_channels_unbounded(
        &self,
        query: &ChannelQuery,
    ) -> Result<OccupiedChannels, BusError> {
        let shared = &self.shared;
        let mut listing = Listing::new(query.on_this_node(shared.fan_out.hub()), query.limit);
        let patterns: Vec<String> = query
            .full_prefixes()
            .iter()
            .map(|prefix| glob_prefix(&format!("c:{prefix}")))
            .collect();
        let scans = self.other_live_nodes().await?.into_iter().flat_map(|node| {
            patterns.iter().map(move |pattern| {
                shared
                    .publisher
                    .hscan(
                        shared.names.presence(node),
                        pattern.clone(),
                        Some(SCAN_PAGE),
                    )
                    .map(move |page| (node, page))
                    .boxed()
            })
        });
        let mut pages = futures_util::stream::select_all(scans);
        while let Some((node, page)) = pages.next().await {
            let Some(fields) = page.map_err(failed)?.take_results() else {
                continue;
            };
            for (field, count) in fields.inner() {
                let Some(name) = field.as_str().and_then(|f| f.strip_prefix("c:")) else {
                    continue;
                };
                let Ok(channel) = parse_full(name) else {
                    continue;
                };
                let count = count.as_i64().unwrap_or(0);
                if count > 0 && query.matches(&channel) {
                    listing.add(node, channel, count as u64);
                }
            }
        }
        Ok(listing.finish())
    }
}

/// The answer to [`Bus::occupied_channels`](herald_core::bus::Bus::occupied_channels): the
/// cluster's listing, or this node's when Redis does not answer in time.
pub(crate) async fn occupied_channels(bus: &RedisBus, query: ChannelQuery) -> OccupiedChannels {
    match bus.cluster_channels(&query).await {
        Ok(listing) => listing,
        Err(error) => {
            tracing::debug!(%error, "the Redis bus lists this node's channels only");
            OccupiedChannels {
                this_node_only: true,
                ..query.on_this_node(bus.shared.fan_out.hub())
            }
        }
    }
}

/// A cluster listing being gathered: this node's channels, then the other nodes' counts
/// added as their scans find them, new channels only while there is room.
struct Listing {
    counts: HashMap<ChannelName, u64>,
    /// The (node, channel) counts already added: a scan may return a field twice (when the
    /// hash grows or shrinks meanwhile), a count is added once. Only listed channels' go in.
    added: HashSet<(u64, ChannelName)>,
    limit: usize,
    truncated: bool,
}

impl Listing {
    fn new(here: OccupiedChannels, limit: usize) -> Listing {
        Listing {
            counts: here.channels.into_iter().collect(),
            added: HashSet::new(),
            limit,
            truncated: here.truncated,
        }
    }

    /// `node` holds `count` subscribers of `channel`.
    fn add(&mut self, node: u64, channel: ChannelName, count: u64) {
        if !self.counts.contains_key(&channel) && self.counts.len() >= self.limit {
            self.truncated = true;
            return;
        }
        if self.added.insert((node, channel.clone())) {
            *self.counts.entry(channel).or_insert(0) += count;
        }
    }

    fn finish(self) -> OccupiedChannels {
        let mut channels: Vec<(ChannelName, u64)> = self.counts.into_iter().collect();
        channels.sort_unstable_by(|a, b| a.0.as_str().cmp(b.0.as_str()));
        OccupiedChannels {
            channels,
            truncated: self.truncated,
            this_node_only: false,
        }
    }
}

/// A Redis glob pattern matching `literal` followed by anything: its glob characters
/// (`* ? [ ] \`) escaped.
fn glob_prefix(literal: &str) -> String {
    let mut pattern = String::with_capacity(literal.len() + 4);
    for c in literal.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push('*');
    pattern
}

/// A Redis error in Herald's words.
fn failed(error: fred::error::Error) -> BusError {
    BusError::Redis(error.details().to_string())
}

/// What [`RedisBus::claim_count_report`] answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CountClaim {
    /// This node tells the channel's count this interval; the count last told (0 if none).
    Claimed {
        /// The count last told about the channel, by any node.
        last: u64,
    },
    /// Another node claimed it; its claim ends in this long.
    Held(Duration),
}

impl RedisBus {
    /// Claims the telling of `channel`'s webhook `subscription_count` for `interval`, across
    /// the cluster (see the module documentation). Bounded like the counts' reads.
    pub async fn claim_count_report(
        &self,
        channel: &ChannelName,
        interval: Duration,
    ) -> Result<CountClaim, BusError> {
        let shared = &self.shared;
        let prefix = &shared.options.prefix;
        let claim_key = format!("{prefix}:hook-count-claim:{}", channel.as_str());
        let last_key = format!("{prefix}:hook-count:{}", channel.as_str());
        let node = format!("{:016x}", shared.node);
        let claim = async {
            let set: Option<String> = shared
                .publisher
                .set(
                    &claim_key,
                    node,
                    Some(Expiration::PX(interval.as_millis().max(1) as i64)),
                    Some(SetOptions::NX),
                    false,
                )
                .await
                .map_err(failed)?;
            if set.is_none() {
                let left: i64 = shared.publisher.pttl(&claim_key).await.map_err(failed)?;
                // -1 (no expiry) or -2 (gone meanwhile): look again soon.
                let left = u64::try_from(left).unwrap_or(1).max(1);
                return Ok(CountClaim::Held(Duration::from_millis(left)));
            }
            let last: Option<u64> = shared.publisher.get(&last_key).await.map_err(failed)?;
            Ok(CountClaim::Claimed {
                last: last.unwrap_or(0),
            })
        };
        tokio::time::timeout(REMOTE_READ_WAIT, claim)
            .await
            .map_err(|_| BusError::Redis(format!("no answer within {REMOTE_READ_WAIT:?}")))?
    }

    /// `count` was told about `channel` (after [`RedisBus::claim_count_report`] claimed it):
    /// the next claim's `last`.
    pub async fn count_reported(&self, channel: &ChannelName, count: u64) -> Result<(), BusError> {
        let shared = &self.shared;
        let key = format!("{}:hook-count:{}", shared.options.prefix, channel.as_str());
        let write = async {
            if count == 0 {
                shared.publisher.del::<(), _>(&key).await
            } else {
                shared
                    .publisher
                    .set::<(), _, _>(&key, count as i64, None, None, false)
                    .await
            }
        };
        tokio::time::timeout(REMOTE_READ_WAIT, write)
            .await
            .map_err(|_| BusError::Redis(format!("no answer within {REMOTE_READ_WAIT:?}")))?
            .map_err(failed)
    }
}

/// How long a cluster-wide count waits for Redis before the caller falls back.
const REMOTE_READ_WAIT: Duration = Duration::from_millis(500);

/// How many fields one `HSCAN` of a presence hash asks for.
const SCAN_PAGE: u32 = 1000;

/// The default period between presence writes.
pub(crate) const DEFAULT_PERIOD: Duration = Duration::from_secs(1);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefix_pattern_matches_its_glob_characters_themselves() {
        assert_eq!(glob_prefix("c:shop~presence-"), "c:shop~presence-*");
        assert_eq!(glob_prefix("c:a*b?[c]\\"), "c:a\\*b\\?\\[c\\]\\\\*");
    }

    #[test]
    fn a_listing_counts_each_node_once_and_stays_within_its_limit() {
        let name = |n: &str| ChannelName::parse(n).unwrap();
        let here = OccupiedChannels {
            channels: vec![(name("a"), 2)],
            ..OccupiedChannels::default()
        };
        let mut listing = Listing::new(here, 2);
        listing.add(7, name("a"), 1);
        listing.add(7, name("a"), 1); // the same field, returned twice by a scan
        listing.add(8, name("a"), 3);
        listing.add(7, name("b"), 1);
        listing.add(8, name("c"), 1); // no room
        listing.add(8, name("b"), 4);
        assert_eq!(
            listing.finish(),
            OccupiedChannels {
                channels: vec![(name("a"), 6), (name("b"), 5)],
                truncated: true,
                this_node_only: false,
            }
        );
    }
}
