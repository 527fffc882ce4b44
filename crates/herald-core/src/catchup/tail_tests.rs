//! Unit tests of the shared recent tail: exactness of what it serves, its bounds, and single
//! flight through a counting log.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use parking_lot::Mutex;

use super::*;
use crate::log::{Appended, ChannelState};
use crate::message::{NewMessage, StoredMessage};
use crate::outbox::Outbox;

fn ch() -> ChannelName {
    ChannelName::parse("tail").unwrap()
}

fn msg_at(seq: u64, time: i64) -> SharedMessage {
    Arc::new(StoredMessage::new(
        ch(),
        Epoch::new("e"),
        seq,
        None,
        time,
        Bytes::from_static(b"{\"n\":1}"),
    ))
}

fn msg(seq: u64) -> SharedMessage {
    msg_at(seq, now_millis())
}

fn query(after: u64, limit: usize) -> TailQuery<'static> {
    TailQuery {
        after,
        limit,
        epoch: None,
        retention: Retention::default(),
        now_ms: now_millis(),
    }
}

fn head(seq: u64) -> Head {
    Head {
        epoch: Epoch::new("e"),
        last_seq: seq,
    }
}

fn slice(after: u64, to: u64, last_seq: u64) -> LogSlice {
    LogSlice {
        state: ChannelState {
            name: ch(),
            epoch: Epoch::new("e"),
            last_seq,
            first_seq: 1,
        },
        messages: (after + 1..=to).map(msg).collect(),
    }
}

/// A slot loaded with `after+1..=to` from a read that saw `last` as the head, and the head
/// learned as the subscribe path does.
fn loaded(budget: &Arc<TailBudget>, after: u64, to: u64, last: u64) -> HeadSlot {
    let mut slot = HeadSlot::default();
    assert!(matches!(
        slot.tail_lookup(&query(after, 10), budget, true),
        TailLookup::Load
    ));
    slot.tail_fill(after, &slice(after, to, last));
    slot.learn(head(last));
    assert!(slot.tail_finish_load().is_some());
    slot
}

fn hit(slot: &mut HeadSlot, budget: &Arc<TailBudget>, q: TailQuery<'_>) -> Option<(Vec<u64>, u64)> {
    match slot.tail_lookup(&q, budget, false) {
        TailLookup::Hit(hit) => Some((hit.messages.iter().map(|m| m.seq).collect(), hit.last_seq)),
        _ => None,
    }
}

#[test]
fn serves_exact_pages_inside_the_window_and_short_ones_only_at_the_head() {
    let budget = TailBudget::new(1 << 20);
    let mut slot = loaded(&budget, 10, 20, 20);
    assert_eq!(
        hit(&mut slot, &budget, query(10, 5)),
        Some(((11..=15).collect(), 20))
    );
    assert_eq!(
        hit(&mut slot, &budget, query(15, 100)),
        Some(((16..=20).collect(), 20))
    );
    assert_eq!(
        hit(&mut slot, &budget, query(20, 100)),
        Some((vec![], 20)),
        "empty at the head"
    );
    assert_eq!(
        hit(&mut slot, &budget, query(9, 5)),
        None,
        "before the window"
    );
    assert_eq!(
        hit(&mut slot, &budget, query(21, 5)),
        None,
        "after the window"
    );
    // A publish answered before the fan-out delivered it moves the head: a short page would
    // now claim a head older than that publish, so it misses; a full page still hits.
    slot.learn(head(21));
    assert_eq!(hit(&mut slot, &budget, query(15, 100)), None);
    assert_eq!(
        hit(&mut slot, &budget, query(10, 5)),
        Some(((11..=15).collect(), 21))
    );
    // The delivery catches the tail up.
    slot.delivered(head(21));
    slot.tail_delivered(&msg(21));
    assert_eq!(
        hit(&mut slot, &budget, query(15, 100)),
        Some(((16..=21).collect(), 21))
    );
}

#[test]
fn nothing_is_served_while_the_hub_does_not_know_the_head() {
    // A hit's state teaches the head, which must never learn one older than the store's: a
    // tail filled before the head is known (its head load still in flight) only serves after.
    let budget = TailBudget::new(1 << 20);
    let mut slot = HeadSlot::default();
    assert!(matches!(
        slot.tail_lookup(&query(10, 5), &budget, true),
        TailLookup::Load
    ));
    slot.tail_fill(10, &slice(10, 20, 30));
    assert!(slot.tail_finish_load().is_some());
    assert_eq!(hit(&mut slot, &budget, query(10, 5)), None, "full page");
    assert_eq!(hit(&mut slot, &budget, query(15, 100)), None, "short page");
    slot.learn(head(30));
    assert_eq!(
        hit(&mut slot, &budget, query(10, 5)),
        Some(((11..=15).collect(), 30))
    );
}

#[test]
fn a_delivery_that_skips_a_seq_restarts_the_run_and_repeats_are_ignored() {
    let budget = TailBudget::new(1 << 20);
    let mut slot = loaded(&budget, 0, 5, 5);
    slot.tail_delivered(&msg(5));
    slot.tail_delivered(&msg(3));
    assert_eq!(
        hit(&mut slot, &budget, query(0, 100)),
        Some(((1..=5).collect(), 5))
    );
    // 6 never reached this node's hub: never serve across the hole.
    slot.learn(head(7));
    slot.tail_delivered(&msg(7));
    assert_eq!(hit(&mut slot, &budget, query(0, 100)), None);
    assert_eq!(hit(&mut slot, &budget, query(5, 100)), None);
    assert_eq!(hit(&mut slot, &budget, query(6, 100)), Some((vec![7], 7)));
    // Another epoch starts over as well.
    let other = Arc::new(StoredMessage::new(
        ch(),
        Epoch::new("f"),
        8,
        None,
        now_millis(),
        Bytes::from_static(b"1"),
    ));
    slot.tail_delivered(&other);
    let mut q = query(7, 10);
    let e = Epoch::new("e");
    q.epoch = Some(&e);
    assert_eq!(
        hit(&mut slot, &budget, q),
        None,
        "a cursor of another epoch"
    );
}

#[test]
fn a_delivered_run_with_a_hole_keeps_only_what_follows_it_and_counts_bytes_exactly() {
    let budget = TailBudget::new(1 << 20);
    let mut slot = loaded(&budget, 0, 5, 5);
    let run: Vec<_> = [4, 5, 6, 7, 9, 10].into_iter().map(msg).collect();
    slot.learn(head(10));
    slot.tail_delivered_run(&run);
    assert_eq!(hit(&mut slot, &budget, query(0, 100)), None, "across 8");
    assert_eq!(
        hit(&mut slot, &budget, query(7, 100)),
        None,
        "8 never arrived"
    );
    assert_eq!(
        hit(&mut slot, &budget, query(8, 100)),
        Some((vec![9, 10], 10))
    );
    assert_eq!(
        budget.used(),
        2 * cached_cost(&msg(9)),
        "only 9 and 10 held"
    );
    drop(slot);
    assert_eq!(budget.used(), 0);
}

#[test]
fn fills_merge_only_where_they_join_the_run() {
    let budget = TailBudget::new(1 << 20);
    let mut slot = loaded(&budget, 10, 20, 20);
    // An older page that joins: prepended.
    assert!(matches!(
        slot.tail_lookup(&query(4, 6), &budget, true),
        TailLookup::Load
    ));
    slot.tail_fill(4, &slice(4, 10, 20));
    slot.tail_finish_load();
    assert_eq!(
        hit(&mut slot, &budget, query(4, 100)),
        Some(((5..=20).collect(), 20))
    );
    // An older page that does not join: not kept.
    slot.tail_fill(0, &slice(0, 3, 20));
    assert_eq!(hit(&mut slot, &budget, query(0, 100)), None);
    // A page with a hole (trimmed meanwhile) is not kept.
    let mut holed = slice(20, 25, 25);
    holed.messages.remove(2);
    slot.tail_fill(20, &holed);
    slot.learn(head(25));
    assert_eq!(hit(&mut slot, &budget, query(20, 2)), None);
}

#[test]
fn retention_sends_old_cursors_to_the_store() {
    let budget = TailBudget::new(1 << 20);
    let mut slot = loaded(&budget, 0, 100, 100);
    let mut q = query(40, 10);
    q.retention = Retention {
        max_messages: 100,
        max_age_ms: 0,
    };
    assert_eq!(
        hit(&mut slot, &budget, q.clone()),
        None,
        "60 behind, limit 100"
    );
    q.after = 50;
    assert!(hit(&mut slot, &budget, q).is_some(), "50 behind");
    // By age: messages older than half the age limit are not served.
    let mut old = HeadSlot::default();
    old.tail_lookup(&query(0, 10), &budget, true);
    let now = now_millis();
    let page = LogSlice {
        state: slice(0, 0, 2).state,
        messages: vec![msg_at(1, now - 40_000), msg_at(2, now - 10_000)],
    };
    old.tail_fill(0, &page);
    old.learn(head(2));
    old.tail_finish_load();
    let mut q = query(0, 10);
    q.retention = Retention {
        max_messages: 1000,
        max_age_ms: 60_000,
    };
    assert_eq!(hit(&mut old, &budget, q.clone()), None);
    q.after = 1;
    assert_eq!(hit(&mut old, &budget, q), Some((vec![2], 2)));
}

#[test]
fn bytes_stay_within_the_node_budget_and_a_quarter_of_it_per_channel() {
    let one = cached_cost(&msg(1));
    let budget = TailBudget::new(40 * one);
    let mut a = loaded(&budget, 0, 100, 100);
    assert_eq!(
        budget.used(),
        10 * one,
        "a quarter of the budget per channel"
    );
    assert_eq!(
        hit(&mut a, &budget, query(90, 100)),
        Some(((91..=100).collect(), 100))
    );
    assert_eq!(
        hit(&mut a, &budget, query(89, 100)),
        None,
        "the oldest went first"
    );
    let mut others: Vec<HeadSlot> = (0..5).map(|_| loaded(&budget, 0, 100, 100)).collect();
    assert!(
        budget.used() <= budget.limit(),
        "{} > {}",
        budget.used(),
        budget.limit()
    );
    for seq in 101..200 {
        a.tail_delivered(&msg(seq));
        assert!(budget.used() <= budget.limit());
    }
    others.clear();
    drop(a);
    assert_eq!(budget.used(), 0, "every byte given back");
    let off = TailBudget::new(0);
    let mut slot = HeadSlot::default();
    assert!(matches!(
        slot.tail_lookup(&query(0, 1), &off, true),
        TailLookup::Bypass
    ));
}

#[test]
fn one_loader_at_a_time_and_an_empty_load_leaves_nothing() {
    let budget = TailBudget::new(1 << 20);
    let mut slot = HeadSlot::default();
    assert!(matches!(
        slot.tail_lookup(&query(0, 1), &budget, true),
        TailLookup::Load
    ));
    assert!(matches!(
        slot.tail_lookup(&query(0, 1), &budget, true),
        TailLookup::Wait(_)
    ));
    assert!(matches!(
        slot.tail_lookup(&query(0, 1), &budget, false),
        TailLookup::Bypass
    ));
    slot.tail_fill(0, &slice(0, 0, 0));
    assert!(slot.tail_finish_load().is_some());
    assert!(slot.tail.is_none(), "an empty tail is not kept");
}

/// A log whose reads wait for a gate and are counted.
struct GatedLog {
    messages: Vec<SharedMessage>,
    reads: AtomicUsize,
    gate: tokio::sync::Semaphore,
}

#[async_trait]
impl ChannelLog for GatedLog {
    async fn append(
        &self,
        _: &ChannelName,
        _: Vec<NewMessage>,
        _: Retention,
    ) -> Result<Vec<Appended>, StoreError> {
        unreachable!("not appended to")
    }
    async fn read(
        &self,
        channel: &ChannelName,
        from: ReadFrom,
        limit: usize,
    ) -> Result<LogSlice, StoreError> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        let _pass = self.gate.acquire().await.expect("open");
        let ReadFrom::After(after) = from else {
            unreachable!("catch-up reads after a cursor")
        };
        Ok(LogSlice {
            state: ChannelState {
                name: channel.clone(),
                epoch: Epoch::new("e"),
                last_seq: self.messages.len() as u64,
                first_seq: 1,
            },
            messages: self
                .messages
                .iter()
                .filter(|m| m.seq > after)
                .take(limit)
                .cloned()
                .collect(),
        })
    }
    async fn state(&self, _: &ChannelName) -> Result<ChannelState, StoreError> {
        unreachable!("not asked")
    }
    async fn list(&self, _: Option<&str>, _: usize) -> Result<Vec<ChannelState>, StoreError> {
        unreachable!("not asked")
    }
    async fn close(&self) {}
}

#[tokio::test]
async fn concurrent_readers_of_one_channel_share_one_store_read() {
    let log = Arc::new(GatedLog {
        messages: (1..=100).map(msg).collect(),
        reads: AtomicUsize::new(0),
        gate: tokio::sync::Semaphore::new(0),
    });
    let hub = Hub::new();
    let reads = TailReads {
        log: log.clone(),
        hub: hub.clone(),
    };
    // Registered subscribers make the channel's entry, as the subscribe path does; the head is
    // what their own head load would learn.
    let _subs: Vec<_> = (0..20)
        .map(|_| hub.subscribe(&ch(), Outbox::new(1 << 20)))
        .collect();
    hub.learn_head(&ch(), head(100));
    let pages = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for _ in 0..20 {
        let (reads, pages) = (reads.clone(), pages.clone());
        tasks.push(tokio::spawn(async move {
            let slice = reads
                .read_after(&ch(), 40, 256, None, Retention::default())
                .await
                .unwrap();
            pages.lock().push(slice);
        }));
    }
    // Every reader has looked (one reads the gated store, the others wait for it).
    tokio::time::timeout(Duration::from_secs(10), async {
        while log.reads.load(Ordering::SeqCst) == 0 {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the loader reads");
    for _ in 0..50 {
        tokio::task::yield_now().await;
    }
    log.gate.add_permits(1000);
    for task in tasks {
        tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .expect("bounded")
            .unwrap();
    }
    assert_eq!(
        log.reads.load(Ordering::SeqCst),
        1,
        "one store read for all"
    );
    let pages = pages.lock();
    assert_eq!(pages.len(), 20);
    for page in pages.iter() {
        let seqs: Vec<u64> = page.messages.iter().map(|m| m.seq).collect();
        assert_eq!(seqs, (41..=100).collect::<Vec<_>>());
        assert_eq!(page.state.last_seq, 100);
        assert!(
            Arc::ptr_eq(&page.messages[0], &pages[0].messages[0]),
            "one shared copy"
        );
    }
}
