//! Apps' feeds (`feeds.rs`): a filter subscriber on one node hears the messages of its app
//! published through another node, to channels its node does not follow, each once (also when
//! its connection holds a matching channel's exact subscription), from the moment its subscribe
//! is ready; and once its last filter is gone, no node sends the app's messages to the feed.

use std::collections::BTreeSet;

use herald_core::engine::SubscribeRequest;
use herald_core::name::topic::filter::TopicFilter;
use herald_core::outbox::{OutFrame, Outbox};
use herald_core::tenant::AppId;
use herald_core::ChannelName;
use herald_testkit::Redis;

use crate::harness::{eventually, Node};
use crate::{bounded, stores};

/// Takes what `outbox` is handed until every (channel, seq) of `expected` has arrived
/// (bounded by the test): the (channel, seq) of each message, in order, repeats included.
/// The paths (node A's feed, node B's own publishes coming back on the feed, the exact
/// subscription's channel stream) reach the outbox in no fixed order with each other.
async fn until(outbox: &Outbox, expected: &BTreeSet<(String, u64)>) -> Vec<(String, u64)> {
    let mut got = Vec::new();
    loop {
        let (frames, closed) = outbox.next_batch().await;
        assert!(closed.is_none(), "closed: {closed:?}");
        for frame in frames {
            if let OutFrame::Message(m) | OutFrame::Replayed(m) = frame {
                got.push((m.channel.public().to_owned(), m.seq));
            }
        }
        if expected.iter().all(|e| got.contains(e)) {
            return got;
        }
    }
}

/// The set of (channel, seq) pairs.
fn pairs(of: &[(&str, u64)]) -> BTreeSet<(String, u64)> {
    of.iter().map(|(c, s)| (c.to_string(), *s)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_filter_subscriber_hears_other_nodes_once_and_the_feed_stops_after_it() {
    let redis = Redis::start().expect("redis");
    let (log, tenancy) = stores();
    bounded(async {
        let a = Node::start(&[redis.url()], &log, &tenancy).await;
        let b = Node::start(&[redis.url()], &log, &tenancy).await;
        let app = AppId::default_app();
        assert!(!a.bus.feeds_app(&app), "no filter anywhere yet");

        // On node B, one connection (one outbox) subscribed to `sensors/#` and to the channel
        // `sensors/kitchen` exactly; node A has a subscriber of that channel too.
        let outbox = Outbox::new(1 << 20);
        let kitchen = ChannelName::parse("sensors/kitchen").unwrap();
        let catchup = b
            .engine
            .subscribe(&kitchen, &outbox, &SubscribeRequest::default())
            .await
            .expect("subscribed");
        catchup.go_live(None);
        let _on_a = a.subscribe("sensors/kitchen").await;
        // Node B sees node A alive in the presence records (the nodes a filter's subscribe
        // waits for).
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
        while b.bus.cluster_subscribers(&kitchen).await.ok() != Some(2) {
            assert!(tokio::time::Instant::now() < deadline, "node A's presence");
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        let mut filters = b.hub.filters().subscriber(&app, outbox.clone(), None);
        assert!(filters.add(TopicFilter::parse("sensors/#").unwrap()));
        b.hub.filters().feed_ready(&app).await;
        assert!(
            a.bus.feeds_app(&app),
            "node A sends the app's messages to the feed"
        );

        // Published through node A at once: nothing of it is missed, nothing twice. Node B's
        // own publish to a channel it does not follow reaches its filters through the feed too.
        a.publish("sensors/kitchen", 1).await;
        a.publish("sensors/hall", 1).await;
        a.publish("elsewhere", 1).await;
        a.publish("sensors/kitchen", 2).await;
        b.publish("sensors/cellar", 1).await;
        a.publish("sensors/zz", 1).await;
        let expected = pairs(&[
            ("sensors/kitchen", 1),
            ("sensors/kitchen", 2),
            ("sensors/hall", 1),
            ("sensors/cellar", 1),
            ("sensors/zz", 1),
        ]);
        let got = until(&outbox, &expected).await;
        assert_eq!(got.len(), expected.len(), "each once: {got:?}");
        assert_eq!(got.iter().cloned().collect::<BTreeSet<_>>(), expected);
        let kitchen_seqs: Vec<u64> = got
            .iter()
            .filter(|(c, _)| c == "sensors/kitchen")
            .map(|(_, s)| *s)
            .collect();
        assert_eq!(kitchen_seqs, [1, 2], "in order");
        assert!(b.bus.stats().feed_received > 0);

        // The last filter leaves: every node stops sending the app's messages to the feed.
        drop(filters);
        eventually("node A hears the feed is off", || !a.bus.feeds_app(&app)).await;
        eventually("node B's feed is off", || !b.bus.feeds_app(&app)).await;
        let before = a.bus.stats();
        a.publish("sensors/kitchen", 3).await;
        assert_eq!(
            until(&outbox, &pairs(&[("sensors/kitchen", 3)])).await,
            [("sensors/kitchen".to_owned(), 3)]
        );
        eventually("node A published the batch", || {
            a.bus.stats().published_batches > before.published_batches
        })
        .await;
        assert_eq!(
            a.bus.stats().feed_published,
            before.feed_published,
            "not on the feed"
        );
    })
    .await;
}
