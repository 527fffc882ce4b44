//! The subscription task's commands to Redis: what a round of channels newly followed costs.

use std::sync::Arc;

use herald_core::outbox::Outbox;
use herald_core::ChannelName;
use herald_testkit::Redis;

use crate::harness::{eventually, receive, vouched_pair, Node, SharedLog};

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

/// A channel new to a node costs one read of its head: the engine's subscribers are told the
/// head Redis holds once it has confirmed the node's subscription, and the bus starts the
/// channel there without checking the head again (before, every new channel's head was read
/// twice: for the engine, then by the repair task once Redis confirmed it). What is published
/// afterwards arrives exactly, and no round's marker channel stays subscribed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_channel_new_to_a_node_has_its_head_read_once() {
    let redis = Redis::start().expect("redis");
    crate::bounded(async {
        let (a, b, _) = vouched_pair(&redis).await;
        const CHANNELS: usize = 2000;
        // A few channels have a message already, its head in Redis.
        a.publish_to_every("once", CHANNELS, 400).await;
        let subscribers = b.subscribe_storm("once", CHANNELS).await;
        let stats = b.bus.stats();
        println!(
            "{CHANNELS} new channels: {} head reads from Redis, {} channels checked again",
            stats.heads_from_redis, stats.checked_channels
        );
        assert_eq!(
            stats.checked_channels, 0,
            "channels whose head the repair task read again after the engine's read"
        );
        assert_eq!(
            stats.repairs, 0,
            "log reads of channels nobody published to"
        );
        for (i, (outbox, head)) in subscribers.iter().enumerate().step_by(200) {
            assert_eq!(*head, u64::from(i % 400 == 0), "once/{i}'s head");
            let seq = a.publish(&format!("once/{i}"), 2).await;
            assert_eq!(
                receive(outbox, 1).await,
                vec![(seq, "2".to_owned())],
                "once/{i}"
            );
        }
        eventually("every round's marker channel unsubscribed", || {
            let markers = redis
                .cli(&["PUBSUB", "SHARDCHANNELS", "herald:*:round:*"])
                .unwrap();
            markers.trim().is_empty()
        })
        .await;
    })
    .await;
}

/// Subscribers of channels new to a node while another node publishes to them, many times
/// each: each subscriber is told a head and then gets every later message once and in order,
/// whether its node started the channel at a head read after Redis confirmed the
/// subscription or checked it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribers_of_new_channels_get_everything_after_their_head_while_another_node_publishes()
{
    let redis = Redis::start().expect("redis");
    let log = Arc::new(SharedLog::default());
    let tenancy = Arc::default();
    crate::bounded(async {
        let a = Arc::new(Node::start(&[redis.url()], &log, &tenancy).await);
        let b = Node::start(&[redis.url()], &log, &tenancy).await;
        const CHANNELS: usize = 300;
        const ROUNDS: u64 = 30;
        let names: Vec<String> = (0..CHANNELS).map(|i| format!("busy/{i}")).collect();
        let publisher = {
            let (a, names) = (a.clone(), names.clone());
            tokio::spawn(async move {
                for round in 1..=ROUNDS {
                    for name in &names {
                        assert_eq!(a.publish(name, round).await, round, "{name}'s seq");
                    }
                }
            })
        };
        let subscribers =
            futures_util::future::join_all(names.iter().map(|name| b.subscribe_at_head(name)))
                .await;
        publisher.await.expect("the publisher ran");
        for ((outbox, head), name) in subscribers.iter().zip(&names) {
            let missing = (ROUNDS - head) as usize;
            let got = receive(outbox, missing).await;
            let want: Vec<(u64, String)> =
                (head + 1..=ROUNDS).map(|s| (s, s.to_string())).collect();
            assert_eq!(got, want, "{name} after its head {head}");
        }
        // Nothing more (a duplicate would follow the last).
        let extra = a.publish(&names[0], ROUNDS + 1).await;
        assert_eq!(
            receive(&subscribers[0].0, 1).await,
            vec![(extra, (ROUNDS + 1).to_string())],
            "the next message, once"
        );
    })
    .await;
}
