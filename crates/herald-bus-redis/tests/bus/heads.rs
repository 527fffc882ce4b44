//! Channels' heads kept in Redis: a node learns where a channel new to it stands, and whether
//! it missed anything while subscribing, from Redis, so a subscribe storm reads nothing from
//! the log (PostgreSQL in a cluster) for channels that had no message meanwhile.

use std::sync::Arc;

use herald_bus_redis::BusOptions;
use herald_core::head::{Head, HeadLookup};
use herald_core::message::Epoch;
use herald_core::outbox::Outbox;
use herald_core::ChannelName;
use herald_testkit::Redis;

use crate::harness::{eventually, receive, vouched_pair, Node, SharedLog};

/// The clients of a lost node reconnecting to another, each to channels of its own: most never
/// had a message, a few have some. Every head comes from Redis (the engine's answers, read once
/// Redis confirmed the subscriptions); the log is not read for any channel,
/// and each subscriber still gets what is published afterwards, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscribe_storm_of_new_channels_reads_no_channel_from_the_log() {
    let redis = Redis::start().expect("redis");
    crate::bounded(async {
        let (a, b, log) = vouched_pair(&redis).await;
        const CHANNELS: usize = 2000;
        const PUBLISHED: usize = 4;
        a.publish_to_every("storm", CHANNELS, CHANNELS / PUBLISHED)
            .await;
        let (reads, channels_read) = (log.reads(), log.channels_read());
        let outboxes = b.subscribe_storm("storm", CHANNELS).await;
        let stats = b.bus.stats();
        println!(
            "{CHANNELS} new channels subscribed: {} log reads of {} channels, {} batches of \
             heads from Redis, {} not vouched for; {} channels checked, {} looked at",
            log.reads() - reads,
            log.channels_read() - channels_read,
            stats.heads_from_redis,
            stats.heads_not_vouched,
            stats.checked_channels,
            stats.repair_looks
        );
        assert_eq!(
            (log.reads() - reads, log.channels_read() - channels_read),
            (0, 0),
            "log reads (and channels they read) for a storm of {CHANNELS} subscribes to new \
             channels"
        );
        assert_eq!(stats.repairs, 0, "no channel had a gap to read");
        // Each channel's head is read once, for the engine, after Redis confirmed its
        // subscription, and the bus starts it there without checking it again
        // (`subscriptions::a_channel_new_to_a_node_has_its_head_read_once`); the repair task
        // looks at each once, when the hub learns its head (twice if the hub learned it before
        // the bus followed the channel), not when it is followed or confirmed before that, nor
        // every round while the hub waits for its head.
        assert_eq!(
            stats.checked_channels, 0,
            "channels checked for a storm of {CHANNELS} new channels: {stats:?}"
        );
        assert!(
            stats.repair_looks <= 2 * CHANNELS as u64,
            "the repair task looked at channels {} times for {CHANNELS} new channels: \
             {stats:?}",
            stats.repair_looks
        );
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

/// A channel whose head the hub has not learned yet (its first subscriber's read still
/// running) waits for it without the repair task looking at it round after round (in a
/// subscribe storm, thousands of channels wait so), and starts as soon as the hub learns it:
/// the hub tells the bus (`InterestHook::head_known`), and what was committed after the head
/// the hub was told reaches the subscriber from the log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_channel_waiting_for_its_head_starts_when_the_hub_learns_it() {
    let redis = Redis::start().expect("redis");
    let log = Arc::new(SharedLog::default());
    let tenancy = Arc::default();
    crate::bounded(async {
        let a = Node::start(&[redis.url()], &log, &tenancy).await;
        let b = Node::start(&[redis.url()], &log, &tenancy).await;
        assert_eq!(a.publish("waiting", 1).await, 1);
        let channel = ChannelName::parse("waiting").unwrap();
        let outbox = Outbox::new(1 << 20);
        // Registered below the engine, which would read the head at once: the read is this
        // test's to finish.
        let (sub, lookup) = b.hub.subscribe(&channel, outbox.clone());
        assert!(
            matches!(lookup, HeadLookup::Load),
            "the first subscriber loads the head"
        );
        sub.go_live(Vec::new(), 0);
        eventually("B to listen to the channel", || {
            b.bus.listening_channels() == 1
        })
        .await;
        // The look the confirmation asked for (at most one, if it had not run yet), then
        // none while the head is unknown.
        tokio::time::sleep(BusOptions::default().gap_wait).await;
        let looks = b.bus.stats().repair_looks;
        tokio::time::sleep(BusOptions::default().gap_wait * 5).await;
        let stats = b.bus.stats();
        assert!(
            stats.repair_looks - looks <= 1,
            "looks at a channel waiting for its head over about 15 of the repair task's rounds: \
             {stats:?}"
        );
        assert_eq!(
            b.bus.unrepaired_channels(),
            1,
            "not started without its head"
        );
        // Told an older head than the log's (the read was made before the publish).
        b.hub.finish_head_load(
            &channel,
            Some(Head {
                epoch: Epoch::new("e1"),
                last_seq: 0,
            }),
        );
        eventually("B to start the channel and check it", || {
            b.bus.unrepaired_channels() == 0
        })
        .await;
        assert_eq!(receive(&outbox, 1).await, vec![(1, "1".to_owned())]);
        assert_eq!(a.publish("waiting", 2).await, 2);
        assert_eq!(receive(&outbox, 1).await, vec![(2, "2".to_owned())]);
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
    crate::bounded(async {
        let (a, b, _) = vouched_pair(&redis).await;
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
