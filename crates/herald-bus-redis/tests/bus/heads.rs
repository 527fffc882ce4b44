//! Channels' heads kept in Redis: a node learns where a channel new to it stands, and whether
//! it missed anything while subscribing, from Redis, so a subscribe storm reads nothing from
//! the log (PostgreSQL in a cluster) for channels that had no message meanwhile.

use std::sync::Arc;
use std::time::Duration;

use herald_testkit::Redis;

use crate::harness::{eventually, receive, Node, SharedLog};

/// The clients of a lost node reconnecting to another, each to channels of its own: most never
/// had a message, a few have some. Every head comes from Redis (the engine's answers and the
/// bus's checks once Redis confirmed the subscriptions); the log is not read for any channel,
/// and each subscriber still gets what is published afterwards, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscribe_storm_of_new_channels_reads_no_channel_from_the_log() {
    let redis = Redis::start().expect("redis");
    let log = Arc::new(SharedLog::like_postgres(Duration::from_millis(2)));
    let tenancy = Arc::default();
    crate::bounded(async {
        let a = Node::start(&[redis.url()], &log, &tenancy).await;
        let b = Node::start(&[redis.url()], &log, &tenancy).await;
        eventually("Redis to vouch for the heads on both nodes", || {
            a.bus.heads_vouched() && b.bus.heads_vouched()
        })
        .await;
        const CHANNELS: usize = 2000;
        const PUBLISHED: usize = 4;
        for i in (0..CHANNELS).step_by(CHANNELS / PUBLISHED) {
            a.publish(&format!("storm/{i}"), 1).await;
        }
        eventually("A to publish its messages to Redis", || {
            a.bus.stats().published_batches >= PUBLISHED as u64
        })
        .await;
        let (reads, channels_read) = (log.reads(), log.channels_read());
        let names: Vec<String> = (0..CHANNELS).map(|i| format!("storm/{i}")).collect();
        let outboxes =
            futures_util::future::join_all(names.iter().map(|name| b.subscribe_at_head(name)))
                .await;
        eventually("B to listen to every channel and check it", || {
            b.bus.listening_channels() == CHANNELS && b.bus.unrepaired_channels() == 0
        })
        .await;
        let stats = b.bus.stats();
        println!(
            "{CHANNELS} new channels subscribed: {} log reads of {} channels, {} batches of \
             heads from Redis, {} not vouched for",
            log.reads() - reads,
            log.channels_read() - channels_read,
            stats.heads_from_redis,
            stats.heads_not_vouched
        );
        assert_eq!(
            (log.reads() - reads, log.channels_read() - channels_read),
            (0, 0),
            "log reads (and channels they read) for a storm of {CHANNELS} subscribes to new \
             channels"
        );
        assert_eq!(stats.repairs, 0, "no channel had a gap to read");
        assert!(stats.heads_from_redis > 0, "{stats:?}");
        for (i, (outbox, head)) in outboxes.iter().enumerate().step_by(CHANNELS / 8) {
            let published = i % (CHANNELS / PUBLISHED) == 0;
            assert_eq!(*head, u64::from(published), "storm/{i}'s head, from Redis");
            let seq = a.publish(&format!("storm/{i}"), 2).await;
            assert_eq!(seq, *head + 1);
            let got = receive(outbox, 1).await;
            assert_eq!(got, vec![(seq, "2".to_owned())], "storm/{i}");
        }
    })
    .await;
}

/// A message committed while a node subscribes (on another node or on this one; before or
/// after it was told the channel's head, before or after Redis confirmed the subscription)
/// reaches the new subscriber if it was not counted in the head it was told, once, in order:
/// from Redis, or from the log when the head read after the subscription shows it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_committed_while_a_node_subscribes_reaches_the_new_subscriber_once() {
    let redis = Redis::start().expect("redis");
    let log = Arc::new(SharedLog::like_postgres(Duration::from_millis(2)));
    let tenancy = Arc::default();
    crate::bounded(async {
        let a = Node::start(&[redis.url()], &log, &tenancy).await;
        let b = Node::start(&[redis.url()], &log, &tenancy).await;
        eventually("Redis to vouch for the heads on both nodes", || {
            a.bus.heads_vouched() && b.bus.heads_vouched()
        })
        .await;
        for round in 0..20 {
            let channel = format!("racing/{round}");
            let publisher = if round % 2 == 0 { &a } else { &b };
            let (subscribed, published) = tokio::join!(
                b.subscribe_at_head(&channel),
                publisher.publish(&channel, 1)
            );
            let (outbox, head) = subscribed;
            assert_eq!(published, 1);
            let next = publisher.publish(&channel, 2).await;
            let expected: Vec<(u64, String)> = (head + 1..=next)
                .map(|seq| (seq, seq.to_string()))
                .collect();
            let got = receive(&outbox, expected.len()).await;
            assert_eq!(got, expected, "{channel}, told {head}");
        }
    })
    .await;
}
