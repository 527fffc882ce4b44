//! The windows and their ticks on a clock the tests move (milliseconds given to each call, no
//! sleeping): changes within an interval told once with the last count, the first change in a
//! quiet channel told at the interval's end and not before, a count back where the last event
//! left it not told, a claim held by another node waited out, a cluster's count read again once
//! it settled, and the listener noting only for endpoints that named `subscription_count`.

use std::sync::atomic::{AtomicU64, Ordering};

use herald_core::lifecycle::LifecycleEvent;
use herald_core::tenant::AppId;
use serde_json::json;

use super::*;
use crate::memory::MemoryHookStore;
use crate::service::tests::{body, hooks_over, shop};
use crate::service::HooksConfig;

const INTERVAL: u64 = 5_000;

fn channel(name: &str) -> ChannelName {
    shop().parse_channel(name).unwrap()
}

/// A source whose count the test sets; one node's memory of what was told.
fn source(count: &Arc<AtomicU64>) -> Arc<dyn ChannelCounts> {
    let count = count.clone();
    Arc::new(LocalCounts::new(move |_: &ChannelName| {
        count.load(Ordering::SeqCst)
    }))
}

fn counts_with(count: &Arc<AtomicU64>) -> SubscriptionCounts {
    let counts = SubscriptionCounts::new(Duration::from_millis(INTERVAL));
    assert!(counts.set_source(source(count)));
    counts
}

/// (channel, subscription_count) of each event, checking the event's shape.
fn told(events: &[HookEvent]) -> Vec<(String, u64)> {
    events
        .iter()
        .map(|e| {
            assert_eq!(e.kind, EventType::SubscriptionCount);
            assert_eq!(e.app, shop());
            let json = e.to_json();
            assert_eq!(json["type"], "subscription_count");
            let channel = json["data"]["channel"].as_str().unwrap().to_owned();
            assert_eq!(e.channel.as_deref(), Some(channel.as_str()));
            assert_eq!(json["data"].as_object().unwrap().len(), 2, "{json}");
            (
                channel,
                json["data"]["subscription_count"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// The channels of `ended`, in order.
fn channels(ended: Vec<Ended>) -> Vec<ChannelName> {
    ended.into_iter().map(|e| e.channel).collect()
}

#[test]
fn a_window_opens_at_the_first_change_and_holds_the_rest() {
    let mut windows = Windows::default();
    let (a, b) = (channel("rooms/a"), channel("rooms/b"));
    assert!(windows.note(&a, 1_000, INTERVAL));
    assert!(!windows.note(&a, 2_000, INTERVAL));
    assert!(!windows.note(&a, 5_999, INTERVAL));
    assert!(windows.note(&b, 3_000, INTERVAL));
    assert_eq!(windows.next_end(), Some(6_000));
    assert!(windows.take_ended(5_999).is_empty());
    assert_eq!(
        windows.take_ended(6_000),
        [Ended {
            channel: a.clone(),
            last_change_ms: 5_999
        }],
        "the window's last change is noted"
    );
    // The next change opens the next window, an interval from it.
    assert!(windows.note(&a, 6_001, INTERVAL));
    assert_eq!(windows.next_end(), Some(8_000));
    assert_eq!(channels(windows.take_ended(20_000)), [b.clone(), a.clone()]);
    assert!(windows.is_empty() && windows.next_end().is_none());
    // Deferred: the window ends later; a later end already there is kept.
    windows.note(&a, 30_000, INTERVAL);
    windows.defer(a.clone(), 31_000, 29_000);
    assert_eq!(windows.next_end(), Some(35_000));
    windows.defer(b.clone(), 32_000, 3_000);
    assert_eq!(
        windows.take_ended(34_000),
        [Ended {
            channel: b,
            last_change_ms: 3_000
        }]
    );
    assert_eq!(
        windows.take_ended(35_000),
        [Ended {
            channel: a,
            last_change_ms: 30_000
        }],
        "the later change kept"
    );
}

#[tokio::test]
async fn changes_within_an_interval_are_told_once_with_the_last_count() {
    let count = Arc::new(AtomicU64::new(0));
    let counts = counts_with(&count);
    let rooms = channel("rooms/1");
    for (at, n) in [(0, 1), (100, 2), (2_000, 3), (4_999, 2)] {
        count.store(n, Ordering::SeqCst);
        counts.note_at(&rooms, at);
        assert!(
            counts.tick(at, 0).await.is_empty(),
            "nothing before the end"
        );
    }
    let events = counts.tick(INTERVAL, 77).await;
    assert_eq!(told(&events), [("rooms/1".to_owned(), 2)]);
    assert_eq!(events[0].at_ms, 77);
    // Told once: the next tick has nothing more.
    assert!(counts.tick(INTERVAL * 3, 0).await.is_empty());
}

#[tokio::test]
async fn the_first_change_in_a_quiet_channel_is_told_at_the_end_of_its_interval() {
    let count = Arc::new(AtomicU64::new(4));
    let counts = counts_with(&count);
    let rooms = channel("rooms/1");
    counts.note_at(&rooms, 60_000);
    assert!(counts.tick(60_000 + INTERVAL - 1, 0).await.is_empty());
    assert_eq!(
        told(&counts.tick(60_000 + INTERVAL, 0).await),
        [("rooms/1".to_owned(), 4)]
    );
    // A change long after is a new quiet channel's first: told an interval after it.
    count.store(5, Ordering::SeqCst);
    counts.note_at(&rooms, 100_000);
    assert!(counts.tick(100_000 + INTERVAL - 1, 0).await.is_empty());
    assert_eq!(
        told(&counts.tick(100_000 + INTERVAL, 0).await),
        [("rooms/1".to_owned(), 5)]
    );
}

#[tokio::test]
async fn a_count_back_where_the_last_event_left_it_is_not_told() {
    let count = Arc::new(AtomicU64::new(3));
    let counts = counts_with(&count);
    let rooms = channel("rooms/1");
    counts.note_at(&rooms, 0);
    assert_eq!(told(&counts.tick(INTERVAL, 0).await).len(), 1);
    // Up and back down within the next interval: still 3, nothing told.
    count.store(4, Ordering::SeqCst);
    counts.note_at(&rooms, 6_000);
    count.store(3, Ordering::SeqCst);
    counts.note_at(&rooms, 7_000);
    assert!(counts.tick(11_000, 0).await.is_empty());
    // A channel nobody was told about, subscribed and left within one interval: 0, as before.
    let lobby = channel("lobby");
    count.store(0, Ordering::SeqCst);
    counts.note_at(&lobby, 20_000);
    assert!(counts.tick(25_000, 0).await.is_empty());
    // Emptied: 0 is told, and then forgotten (as if never told).
    counts.note_at(&rooms, 30_000);
    assert_eq!(
        told(&counts.tick(35_000, 0).await),
        [("rooms/1".to_owned(), 0)]
    );
}

/// A cluster's claims as a node sees them: another node holds the first claim.
struct Cluster {
    claims: Mutex<Vec<Claim>>,
    told: Mutex<Vec<u64>>,
}

#[async_trait]
impl ChannelCounts for Cluster {
    async fn claim(&self, _channel: &ChannelName, interval: Duration) -> Claim {
        assert_eq!(interval, Duration::from_millis(INTERVAL));
        self.claims.lock().remove(0)
    }
    async fn told(&self, _channel: &ChannelName, count: u64) {
        self.told.lock().push(count);
    }
}

#[tokio::test]
async fn a_claim_another_node_holds_is_waited_out_then_told_if_it_differs() {
    let cluster = Arc::new(Cluster {
        claims: Mutex::new(vec![
            Claim::Taken {
                retry_in: Duration::from_millis(1_500),
            },
            Claim::Unavailable,
            Claim::Report { count: 7, last: 6 },
            Claim::Report { count: 7, last: 7 },
        ]),
        told: Mutex::new(Vec::new()),
    });
    let counts = SubscriptionCounts::new(Duration::from_millis(INTERVAL));
    counts.set_source(cluster.clone());
    let rooms = channel("rooms/1");
    counts.note_at(&rooms, 0);
    assert!(counts.tick(5_000, 0).await.is_empty(), "taken elsewhere");
    assert!(counts.tick(6_499, 0).await.is_empty());
    assert!(counts.tick(6_500, 0).await.is_empty(), "Redis away");
    assert!(counts.tick(11_499, 0).await.is_empty());
    assert_eq!(
        told(&counts.tick(11_500, 0).await),
        [("rooms/1".to_owned(), 7)]
    );
    assert_eq!(*cluster.told.lock(), [7]);
    // Another node's window: the count it finds is the one just told.
    counts.note_at(&rooms, 12_000);
    assert!(counts.tick(17_000, 0).await.is_empty());
    assert_eq!(*cluster.told.lock(), [7]);
}

/// A cluster node's counts: the other nodes' shares settle within `SETTLE` ms; each claim
/// reads the next count of `counts` and answers the last one told.
struct Settling {
    counts: Mutex<Vec<u64>>,
    told: Mutex<Vec<u64>>,
}

const SETTLE: u64 = 2_000;

#[async_trait]
impl ChannelCounts for Settling {
    async fn claim(&self, _channel: &ChannelName, _interval: Duration) -> Claim {
        let last = self.told.lock().last().copied().unwrap_or(0);
        Claim::Report {
            count: self.counts.lock().remove(0),
            last,
        }
    }
    async fn told(&self, _channel: &ChannelName, count: u64) {
        self.told.lock().push(count);
    }
    fn settle(&self) -> Option<Duration> {
        Some(Duration::from_millis(SETTLE))
    }
}

#[tokio::test]
async fn a_cluster_count_read_before_it_settled_is_read_again_once_it_has() {
    // The window's read misses another node's subscriber (1, not 2): its last change here was
    // 100 ms before the read, so the count is read again once settled, and the 2 told.
    let cluster = Arc::new(Settling {
        counts: Mutex::new(vec![1, 2]),
        told: Mutex::new(Vec::new()),
    });
    let counts = SubscriptionCounts::new(Duration::from_millis(INTERVAL));
    counts.set_source(cluster.clone());
    let rooms = channel("rooms/1");
    counts.note_at(&rooms, 0);
    counts.note_at(&rooms, 4_900);
    assert_eq!(
        told(&counts.tick(INTERVAL, 0).await),
        [("rooms/1".to_owned(), 1)]
    );
    // Read again an interval after the first read (later than 4,900 + SETTLE).
    assert_eq!(counts.windows.lock().next_end(), Some(2 * INTERVAL));
    assert!(counts.tick(2 * INTERVAL - 1, 0).await.is_empty());
    assert_eq!(
        told(&counts.tick(2 * INTERVAL, 0).await),
        [("rooms/1".to_owned(), 2)]
    );
    // That read was long after the change: nothing more is read.
    assert!(counts.windows.lock().is_empty());
    assert_eq!(*cluster.told.lock(), [1, 2]);

    // A window whose last change had settled when it ended is read once.
    let cluster = Arc::new(Settling {
        counts: Mutex::new(vec![3]),
        told: Mutex::new(Vec::new()),
    });
    let counts = SubscriptionCounts::new(Duration::from_millis(INTERVAL));
    counts.set_source(cluster.clone());
    counts.note_at(&rooms, 0);
    counts.note_at(&rooms, INTERVAL - SETTLE);
    assert_eq!(
        told(&counts.tick(INTERVAL, 0).await),
        [("rooms/1".to_owned(), 3)]
    );
    assert!(counts.windows.lock().is_empty());
}

#[tokio::test]
async fn without_a_source_nothing_is_told() {
    let counts = SubscriptionCounts::new(Duration::from_millis(INTERVAL));
    counts.note_at(&channel("rooms/1"), 0);
    assert!(counts.tick(INTERVAL, 0).await.is_empty());
}

#[tokio::test]
async fn the_listener_notes_channels_only_for_endpoints_that_named_subscription_count() {
    let hooks = hooks_over(Arc::new(MemoryHookStore::new()), HooksConfig::default()).await;
    let count = Arc::new(AtomicU64::new(1));
    hooks.subscription_counts().set_source(source(&count));
    let listener = hooks.listener();
    let unsubscribed = |app: &AppId, name: &str| LifecycleEvent::Unsubscribed {
        connection: None,
        channel: app.parse_channel(name).unwrap(),
    };
    let noted = || !hooks.subscription_counts().windows.lock().is_empty();
    // "*" leaves it out.
    hooks.create(&shop(), &body(&["*"])).await.unwrap();
    listener.on_event(&unsubscribed(&shop(), "rooms/1"));
    assert!(!noted(), "\"*\" does not include subscription_count");
    // Named, with a channel pattern.
    hooks
        .create(
            &shop(),
            &json!({"url": "http://127.0.0.1:9/", "events": ["subscription_count"],
                    "channels": ["rooms/*"]}),
        )
        .await
        .unwrap();
    listener.on_event(&unsubscribed(&shop(), "lobby"));
    listener.on_event(&unsubscribed(&AppId::parse("blog").unwrap(), "rooms/1"));
    assert!(!noted(), "another channel, another app");
    listener.on_event(&LifecycleEvent::ChannelVacated {
        channel: channel("rooms/2"),
    });
    listener.on_event(&unsubscribed(&shop(), "rooms/1"));
    let ended = hooks
        .subscription_counts()
        .windows
        .lock()
        .take_ended(u64::MAX);
    let mut ended = channels(ended);
    ended.sort();
    assert_eq!(ended, [channel("rooms/1"), channel("rooms/2")]);
}
