//! The cluster's occupied channels ([`Bus::occupied_channels`]): one node lists an app's
//! channels occupied only on another, by prefix and within a limit, each with its count over
//! both nodes, and stops listing them once they are vacated everywhere.

use std::sync::Arc;
use std::time::Duration;

use herald_core::bus::{Bus, ChannelQuery, OccupiedChannels};
use herald_core::engine::SubscribeRequest;
use herald_core::hub::Subscription;
use herald_core::outbox::Outbox;
use herald_core::tenant::AppId;
use herald_core::ChannelName;
use herald_testkit::Redis;

use crate::harness::{Node, SharedLog, SharedTenancy};

/// The full name of `name` in `app`.
fn full(app: &AppId, name: &str) -> ChannelName {
    app.channel(&ChannelName::parse(name).unwrap())
}

/// A subscription of a bare outbox to the full channel `channel` on `node`.
async fn subscribe(node: &Node, channel: &ChannelName) -> Arc<Subscription> {
    let outbox = Outbox::new(1024);
    node.engine
        .subscribe(channel, &outbox, &SubscribeRequest::default())
        .await
        .expect("subscribed")
        .go_live(None)
}

fn query(app: &AppId, prefixes: &[&str], limit: usize) -> ChannelQuery {
    ChannelQuery {
        app: app.clone(),
        prefixes: prefixes.iter().map(|p| p.to_string()).collect(),
        limit,
    }
}

/// Asks `node` for `query` until it answers `wanted` (the other node's figures are at most a
/// presence period old), or panics with the last answer after a deadline.
async fn listed(node: &Node, query: ChannelQuery, wanted: OccupiedChannels) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let got = node.bus.occupied_channels(query.clone()).await;
        if got == wanted {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{query:?}: wanted {wanted:?}, got {got:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn answer(channels: Vec<(ChannelName, u64)>, truncated: bool) -> OccupiedChannels {
    OccupiedChannels {
        channels,
        truncated,
        this_node_only: false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_lists_the_channels_occupied_only_on_another_until_they_are_vacated() {
    let redis = Redis::start().expect("redis");
    let (log, tenancy): (Arc<SharedLog>, Arc<SharedTenancy>) = (Arc::default(), Arc::default());
    let test = async {
        let a = Node::start(&[redis.url()], &log, &tenancy).await;
        let b = Node::start(&[redis.url()], &log, &tenancy).await;
        let shop = AppId::parse("shop").unwrap();
        let room = full(&shop, "presence-room");
        let mine = full(&shop, "presence-mine");
        let news = full(&shop, "news");
        // Only B holds room (twice) and news; both hold mine; the default app's lobby is B's.
        let lobby = ChannelName::parse("presence-lobby").unwrap();
        let on_b = [
            (room.clone(), subscribe(&b, &room).await),
            (room.clone(), subscribe(&b, &room).await),
            (news.clone(), subscribe(&b, &news).await),
            (mine.clone(), subscribe(&b, &mine).await),
            (lobby.clone(), subscribe(&b, &lobby).await),
        ];
        let _on_a = subscribe(&a, &mine).await;

        listed(
            &a,
            query(&shop, &["presence-"], 10),
            answer(vec![(mine.clone(), 2), (room.clone(), 2)], false),
        )
        .await;
        listed(
            &a,
            query(&shop, &[], 10),
            answer(
                vec![(news.clone(), 1), (mine.clone(), 2), (room.clone(), 2)],
                false,
            ),
        )
        .await;
        listed(
            &a,
            query(&AppId::default_app(), &[], 10),
            answer(vec![(lobby.clone(), 1)], false),
        )
        .await;
        // Past the limit: A's own channel first, the rest left out and said so.
        listed(
            &a,
            query(&shop, &["presence-", "news"], 1),
            answer(vec![(mine.clone(), 2)], true),
        )
        .await;

        // Vacated on B: A lists only its own, with its own count, within a period or so.
        for (channel, subscription) in &on_b {
            assert!(b.engine.unsubscribe(channel, subscription));
        }
        listed(
            &a,
            query(&shop, &[], 10),
            answer(vec![(mine.clone(), 1)], false),
        )
        .await;
        listed(
            &a,
            query(&AppId::default_app(), &[], 10),
            answer(vec![], false),
        )
        .await;
    };
    tokio::time::timeout(Duration::from_secs(60), test)
        .await
        .expect("the test finished in time");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_redis_a_node_lists_its_own_channels_and_says_so() {
    let mut redis = Redis::start().expect("redis");
    let (log, tenancy): (Arc<SharedLog>, Arc<SharedTenancy>) = (Arc::default(), Arc::default());
    let test = async {
        let a = Node::start(&[redis.url()], &log, &tenancy).await;
        let b = Node::start(&[redis.url()], &log, &tenancy).await;
        let shop = AppId::parse("shop").unwrap();
        let mine = full(&shop, "mine");
        let theirs = full(&shop, "theirs");
        let _on_a = subscribe(&a, &mine).await;
        let _on_b = subscribe(&b, &theirs).await;
        listed(
            &a,
            query(&shop, &[], 10),
            answer(vec![(mine.clone(), 1), (theirs.clone(), 1)], false),
        )
        .await;
        redis.kill();
        let own = a.bus.occupied_channels(query(&shop, &[], 10)).await;
        assert_eq!(
            own,
            OccupiedChannels {
                channels: vec![(mine.clone(), 1)],
                truncated: false,
                this_node_only: true,
            }
        );
    };
    tokio::time::timeout(Duration::from_secs(60), test)
        .await
        .expect("the test finished in time");
}
