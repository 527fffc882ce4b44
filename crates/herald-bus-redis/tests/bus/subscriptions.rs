//! The subscription task's commands to Redis: what a round of channels newly followed costs.

use std::sync::Arc;

use herald_core::outbox::Outbox;
use herald_core::ChannelName;
use herald_testkit::Redis;

use crate::harness::{eventually, Node, SharedLog};

/// `SSUBSCRIBE` commands `redis` has run since it started.
fn ssubscribe_calls(redis: &Redis) -> usize {
    let stats = redis.cli(&["INFO", "commandstats"]).unwrap();
    stats
        .lines()
        .find_map(|l| l.strip_prefix("cmdstat_ssubscribe:calls="))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// On a single Redis server, the channels a node starts following in one round are named in
/// one `SSUBSCRIBE`, whatever hash tags they fall in (a Redis Cluster takes one slot's channels
/// per command, so there it is one per tag): a round of 2,000 new channels is one command, not
/// one for each of the 256 tags. On one thread, the hub's 2,000 interest changes are all queued
/// before the subscription task runs, so they make one round.
#[tokio::test(flavor = "current_thread")]
async fn a_round_of_new_channels_is_one_ssubscribe_on_a_single_server() {
    let redis = Redis::start().expect("redis");
    let log = Arc::new(SharedLog::default());
    let tenancy = Arc::default();
    crate::bounded(async {
        let node = Node::start(&[redis.url()], &log, &tenancy).await;
        const CHANNELS: usize = 2000;
        let before = ssubscribe_calls(&redis);
        let outbox = Outbox::new(1 << 20);
        // Registered below the engine, with no await between them.
        let subscriptions: Vec<_> = (0..CHANNELS)
            .map(|i| {
                let channel = ChannelName::parse(&format!("storm/{i}")).unwrap();
                node.hub.subscribe(&channel, outbox.clone())
            })
            .collect();
        eventually("the node to listen to every channel", || {
            node.bus.listening_channels() == CHANNELS
        })
        .await;
        let calls = ssubscribe_calls(&redis) - before;
        println!("{CHANNELS} new channels in one round: {calls} SSUBSCRIBE commands");
        assert_eq!(
            calls, 1,
            "SSUBSCRIBE commands for one round of {CHANNELS} new channels"
        );
        drop(subscriptions);
    })
    .await;
}
