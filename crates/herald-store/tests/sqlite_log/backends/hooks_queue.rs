//! Leases, batches and settlements of webhook queues (`HookStore`) on both backends: the
//! queue's order (due time, then row) and a lease's batch (its size, the batch delay, a full
//! batch ready at once, the oldest endpoint first, paused endpoints and the limit); one lease
//! per endpoint (a lapsed one in doubt, a stale settlement ignored); settlements (delivered,
//! retried after the next attempt time, dead) and dead letters listed, replayed and dropped; a
//! user's presence alternating in the queue (a held offline withdrawn unless its own batch is
//! in flight, whatever else the endpoint has leased; an online that withdrew nothing queued
//! after the user's pending offline, before and after a retry); a mixed call's rows in its
//! order.

use herald_hooks::endpoint::EndpointId;
use herald_hooks::event::EventType;
use herald_hooks::store::{Batching, Enqueue, LeasedBatch, Settlement};

use super::hooks::{
    app, batches, counts, delivered, endpoint, event, lease, offline, online, queued_and_dead,
    strings, withdrawal,
};
use super::Backend;

crate::on_both!(
    batches_follow_queue_order_size_and_delay,
    a_ready_endpoint_with_a_backlog_gets_a_grown_batch,
    one_lease_per_endpoint_and_stale_settlements_ignored,
    settlements_and_dead_letters,
    a_held_offline_outside_the_leased_batch_is_withdrawn,
    an_online_that_withdrew_nothing_follows_the_pending_offline,
    a_mixed_call_queues_its_rows_in_order,
);

/// A failed attempt of `l`, to try again at `next_attempt_ms`.
fn retry(l: &LeasedBatch, next_attempt_ms: i64) -> (EndpointId, i64, Settlement) {
    let settlement = Settlement::Retry {
        next_attempt_ms,
        reason: "HTTP 503".into(),
    };
    (l.endpoint.endpoint.id, l.lease_until_ms, settlement)
}

/// Under churn the endpoint is almost always leased: a held offline that is not in the leased
/// batch is still withdrawn by the user's return (by an online or a withdrawal), even when it
/// is due before the lease ends.
async fn a_held_offline_outside_the_leased_batch_is_withdrawn(b: Backend) {
    let s = b.hooks();
    let one = endpoint(s, "shop").await;
    let queue = vec![
        event(one, "a", 10),
        offline(one, "alice", 4_000),
        offline(one, "bob", 4_000),
    ];
    s.enqueue(queue, 100).await.unwrap();
    // Leased at 10 for 25 s: the batch is `a`; the offlines (due at 4,000) wait.
    let leased = s.lease(10, 10, 25_000, 10, 0, &[]).await.unwrap();
    assert_eq!(batches(&leased), [(one, strings(&["a"]))]);
    let back = vec![online(one, "alice", 2_000), withdrawal(one, "bob", 2_500)];
    assert_eq!(
        s.enqueue(back, 100).await.unwrap(),
        counts(0, 2, 0),
        "neither offline is in flight: both withdrawn, nothing queued"
    );
    assert_eq!(queued_and_dead(s, one).await, (1, 0));
    s.settle(20, vec![delivered(&leased[0])]).await.unwrap();
    assert_eq!(queued_and_dead(s, one).await, (0, 0));

    // The batch that holds the offline is in flight: not withdrawn; once it failed (a retry
    // frees its rows) the user's next return withdraws it.
    s.enqueue(vec![offline(one, "carol", 5_000)], 100)
        .await
        .unwrap();
    let leased = s.lease(5_000, 10, 25_000, 10, 0, &[]).await.unwrap();
    assert_eq!(batches(&leased), [(one, strings(&["offline:carol@5000"]))]);
    let slow = vec![withdrawal(one, "carol", 4_500)];
    assert_eq!(s.enqueue(slow, 100).await.unwrap(), counts(0, 0, 0));
    s.settle(5_100, vec![retry(&leased[0], 6_000)])
        .await
        .unwrap();
    let slower = vec![withdrawal(one, "carol", 4_600)];
    assert_eq!(s.enqueue(slower, 100).await.unwrap(), counts(0, 1, 0));
    assert_eq!(queued_and_dead(s, one).await, (0, 0));
}

/// An online that withdrew nothing is queued due no earlier than the user's latest pending
/// offline: the receiver hears offline, then online, also when the batch holding the offline
/// failed and is sent again with the online.
async fn an_online_that_withdrew_nothing_follows_the_pending_offline(b: Backend) {
    let s = b.hooks();
    let one = endpoint(s, "shop").await;
    s.enqueue(vec![offline(one, "alice", 4_000)], 100)
        .await
        .unwrap();
    let leased = s.lease(4_000, 10, 25_000, 10, 0, &[]).await.unwrap();
    assert_eq!(batches(&leased), [(one, strings(&["offline:alice@4000"]))]);
    // Written late (its time before the offline's due time): in flight, so not withdrawn.
    let late = vec![online(one, "alice", 3_500), event(one, "b", 3_600)];
    assert_eq!(s.enqueue(late, 100).await.unwrap(), counts(2, 0, 0));
    s.settle(4_100, vec![retry(&leased[0], 6_000)])
        .await
        .unwrap();
    let again = s.lease(6_000, 10, 25_000, 10, 0, &[]).await.unwrap();
    assert_eq!(
        batches(&again),
        [(
            one,
            strings(&["b", "offline:alice@4000", "online:alice@3500"])
        )],
        "the online after the offline it follows"
    );
    s.settle(6_000, vec![delivered(&again[0])]).await.unwrap();

    // A dead offline is not pending: an online after it keeps its own time.
    s.enqueue(vec![offline(one, "bob", 7_000)], 100)
        .await
        .unwrap();
    let leased = s.lease(7_000, 10, 25_000, 10, 0, &[]).await.unwrap();
    let rows = leased[0].events.iter().map(|e| e.row).collect();
    let dead = Settlement::Dead {
        rows,
        reason: "gone".into(),
    };
    s.settle(7_000, vec![(one, leased[0].lease_until_ms, dead)])
        .await
        .unwrap();
    let back = vec![event(one, "c", 6_900), online(one, "bob", 6_800)];
    assert_eq!(s.enqueue(back, 100).await.unwrap(), counts(2, 0, 0));
    let sent = lease(s, 10_000, 10).await;
    assert_eq!(batches(&sent), [(one, strings(&["online:bob@6800", "c"]))]);
}

/// One call mixing plain events, offlines, onlines and withdrawals queues its rows in its
/// order (equal due times: the queue's order is the call's), withdrawing as it goes.
async fn a_mixed_call_queues_its_rows_in_order(b: Backend) {
    let s = b.hooks();
    let (one, two) = (endpoint(s, "shop").await, endpoint(s, "shop").await);
    s.enqueue(vec![offline(one, "erin", 3_000)], 100)
        .await
        .unwrap();
    let mut call = Vec::new();
    for i in 0..40 {
        let at = 1_000;
        call.push(event(one, &format!("e{i}"), at));
        match i % 8 {
            1 => call.push(offline(one, &format!("u{i}"), at)),
            2 => call.push(online(one, &format!("u{}", i - 1), at)),
            3 => call.push(event(two, &format!("x{i}"), at)),
            5 => call.push(online(one, &format!("v{i}"), at)),
            6 => call.push(withdrawal(one, &format!("w{i}"), at)),
            _ => {}
        }
    }
    // Withdrawn within the call: an offline queued by it, and one queued before it.
    call.push(offline(one, "frank", 3_000));
    call.push(online(one, "frank", 2_000));
    call.push(withdrawal(one, "erin", 2_000));
    call.push(event(one, "last", 1_000));
    let added = s.enqueue(call.clone(), 1_000).await.unwrap();
    // 41 plain events of one, 5 of two, 5 offlines and 10 onlines, and frank's offline.
    assert_eq!(added, counts(41 + 5 + 5 + 10 + 1, 2, 0));
    let sent = lease(s, 10_000, 1_000).await;
    let expected = |endpoint: EndpointId| -> Vec<String> {
        call.iter()
            .filter(|e| e.endpoint == endpoint)
            .filter(|e| !e.payload.starts_with("withdrawal"))
            .filter(|e| !e.payload.contains("frank"))
            .map(|e| e.payload.clone())
            .collect()
    };
    assert_eq!(batches(&sent), [(one, expected(one)), (two, expected(two))]);
}

async fn batches_follow_queue_order_size_and_delay(b: Backend) {
    let s = b.hooks();
    let (one, two) = (endpoint(s, "shop").await, endpoint(s, "shop").await);
    let added = s
        .enqueue(
            vec![
                event(one, "a", 30),
                event(one, "b", 10),
                event(one, "c", 10),
                event(one, "d", 20),
                event(two, "x", 5),
                event(one, "later", 1_000_000),
            ],
            100,
        )
        .await
        .unwrap();
    assert_eq!(added, counts(6, 0, 0));
    // Oldest due endpoint first; each batch by due time, then by the order queued.
    let paused = s.lease(100, 10, 1_000, 3, 0, &[two]).await.unwrap();
    assert_eq!(batches(&paused), [(one, strings(&["b", "c", "d"]))]);
    s.settle(100, vec![delivered(&paused[0])]).await.unwrap();
    let leased = s.lease(100, 1, 1_000, 3, 0, &[]).await.unwrap();
    assert_eq!(
        batches(&leased),
        [(two, strings(&["x"]))],
        "limit 1: the oldest"
    );
    let rest = lease(s, 100, 3).await;
    assert_eq!(
        batches(&rest),
        [(one, strings(&["a"]))],
        "`later` is not due"
    );
    assert!(!rest[0].in_doubt && leased[0].failures == 0);
    s.settle(100, vec![delivered(&leased[0]), delivered(&rest[0])])
        .await
        .unwrap();

    // A batch waits for the batch delay unless it is full.
    let three = endpoint(s, "shop").await;
    let queue = vec![event(three, "p", 2_000), event(three, "q", 2_001)];
    s.enqueue(queue, 100).await.unwrap();
    let wait = |now| async move { s.lease(now, 10, 1_000, 3, 500, &[]).await.unwrap() };
    assert!(wait(2_001).await.is_empty());
    assert!(wait(2_499).await.is_empty(), "oldest waited 499 ms of 500");
    let ready = wait(2_500).await;
    assert_eq!(batches(&ready), [(three, strings(&["p", "q"]))]);
    s.settle(2_500, vec![delivered(&ready[0])]).await.unwrap();
    let full: Vec<Enqueue> = ["r", "s", "t", "u"]
        .iter()
        .zip(3_000..)
        .map(|(name, due)| event(three, name, due))
        .collect();
    s.enqueue(full, 100).await.unwrap();
    assert!(wait(3_001).await.is_empty(), "two due, three make a batch");
    let ready = wait(3_002).await;
    assert_eq!(batches(&ready), [(three, strings(&["r", "s", "t"]))]);
}

/// Ready with the normal size due (or the oldest waited the delay), a batch takes up to the
/// most: a backlog goes out in fewer, larger batches.
async fn a_ready_endpoint_with_a_backlog_gets_a_grown_batch(b: Backend) {
    let s = b.hooks();
    let one = endpoint(s, "shop").await;
    let names: Vec<String> = (0..7).map(|i| format!("e{i}")).collect();
    let queue = names.iter().zip(10..).map(|(n, due)| event(one, n, due));
    s.enqueue(queue.collect(), 100).await.unwrap();
    let batching = Batching {
        size: 2,
        most: 5,
        delay_ms: 1_000,
    };
    let grown = s.lease_batches(100, 10, 50, batching, &[]).await.unwrap();
    assert_eq!(
        batches(&grown),
        [(one, names[..5].to_vec())],
        "ready: 2 due"
    );
    s.settle(100, vec![delivered(&grown[0])]).await.unwrap();
    let rest = s.lease_batches(101, 10, 50, batching, &[]).await.unwrap();
    assert_eq!(batches(&rest), [(one, names[5..].to_vec())]);
    s.settle(101, vec![delivered(&rest[0])]).await.unwrap();
    // One due, younger than the delay: not ready, however large the batch may grow.
    s.enqueue(vec![event(one, "late", 200)], 100).await.unwrap();
    assert!(s
        .lease_batches(300, 10, 50, batching, &[])
        .await
        .unwrap()
        .is_empty());
}

async fn one_lease_per_endpoint_and_stale_settlements_ignored(b: Backend) {
    let s = b.hooks();
    let one = endpoint(s, "shop").await;
    s.enqueue(vec![event(one, "a", 10), event(one, "b", 20)], 100)
        .await
        .unwrap();
    let first = s.lease(100, 10, 50, 1, 0, &[]).await.unwrap();
    assert_eq!(batches(&first), [(one, strings(&["a"]))]);
    assert_eq!((first[0].lease_until_ms, first[0].in_doubt), (150, false));
    assert!(lease(s, 149, 1).await.is_empty(), "leased: `b` waits");

    // The lease ran out unsettled: the batch is leased again, in doubt.
    let again = s.lease(150, 10, 50, 1, 0, &[]).await.unwrap();
    assert_eq!(batches(&again), [(one, strings(&["a"]))]);
    assert_eq!((again[0].lease_until_ms, again[0].in_doubt), (200, true));
    s.settle(160, vec![delivered(&first[0])]).await.unwrap();
    assert_eq!(
        queued_and_dead(s, one).await,
        (2, 0),
        "stale settlement ignored"
    );
    assert!(
        lease(s, 199, 1).await.is_empty(),
        "the new lease still holds"
    );

    s.settle(160, vec![delivered(&again[0])]).await.unwrap();
    assert_eq!(queued_and_dead(s, one).await, (1, 0));
    let next = lease(s, 160, 1).await;
    assert_eq!(batches(&next), [(one, strings(&["b"]))]);
    assert!(!next[0].in_doubt, "a settled lease leaves no doubt");
}

async fn settlements_and_dead_letters(b: Backend) {
    let s = b.hooks();
    let (shop, other) = (app("shop"), app("other"));
    let (one, two, theirs) = (
        endpoint(s, "shop").await,
        endpoint(s, "shop").await,
        endpoint(s, "other").await,
    );
    let queue = vec![
        event(one, "a", 10),
        event(one, "b", 20),
        event(one, "c", 30),
        event(two, "x", 10),
        event(theirs, "o", 10),
    ];
    s.enqueue(queue, 100).await.unwrap();
    let leased = lease(s, 100, 2).await;
    assert_eq!(batches(&leased).len(), 3);
    let batch = |id| {
        leased
            .iter()
            .find(|l| l.endpoint.endpoint.id == id)
            .unwrap()
    };
    let (row_a, row_b) = (batch(one).events[0].row, batch(one).events[1].row);
    let long = format!("HTTP 503 {}", "z".repeat(300));
    let dead = |l: &LeasedBatch, reason: &str| {
        let rows = l.events.iter().map(|e| e.row).collect();
        let reason = reason.to_string();
        (
            l.endpoint.endpoint.id,
            l.lease_until_ms,
            Settlement::Dead { rows, reason },
        )
    };
    let retry = |l: &LeasedBatch, next_attempt_ms, reason: &str| {
        let reason = reason.to_string();
        let settlement = Settlement::Retry {
            next_attempt_ms,
            reason,
        };
        (l.endpoint.endpoint.id, l.lease_until_ms, settlement)
    };
    s.settle(
        100,
        vec![
            retry(batch(one), 500, &long),
            dead(batch(two), "gone"),
            dead(batch(theirs), "gone"),
        ],
    )
    .await
    .unwrap();
    let depth = s.depth(Some(&shop)).await.unwrap();
    assert_eq!(
        depth.iter().map(|d| d.endpoint).collect::<Vec<_>>(),
        [one, two]
    );
    let d = &depth[0];
    assert_eq!(
        (
            d.queued,
            d.dead,
            d.failures,
            d.failing_since_ms,
            d.next_attempt_ms
        ),
        (3, 0, 1, Some(100), 500)
    );
    assert_eq!(d.last_error.as_deref(), Some(&long[..256]));
    let d = &depth[1];
    assert_eq!(
        (
            d.queued,
            d.dead,
            d.failures,
            d.failing_since_ms,
            d.next_attempt_ms
        ),
        (0, 1, 1, Some(100), 0)
    );
    assert_eq!(d.last_error.as_deref(), Some("gone"));

    assert!(
        lease(s, 499, 2).await.is_empty(),
        "waits for its next attempt"
    );
    let retried = lease(s, 500, 2).await;
    assert_eq!(batches(&retried), [(one, strings(&["a", "b"]))]);
    assert_eq!(
        (retried[0].failures, retried[0].failing_since_ms),
        (1, Some(100))
    );
    s.settle(500, vec![retry(&retried[0], 600, "again")])
        .await
        .unwrap();
    let retried = lease(s, 600, 2).await;
    assert_eq!(
        (retried[0].failures, retried[0].failing_since_ms),
        (2, Some(100))
    );

    // Dead past the horizon: a failed attempt too, but the next batch is tried at once.
    s.settle(600, vec![dead(&retried[0], "horizon")])
        .await
        .unwrap();
    let d = s.depth(Some(&shop)).await.unwrap()[0].clone();
    assert_eq!(
        (
            d.queued,
            d.dead,
            d.failures,
            d.failing_since_ms,
            d.next_attempt_ms
        ),
        (1, 2, 3, Some(100), 0)
    );
    assert_eq!(d.last_error.as_deref(), Some("horizon"));
    let next = lease(s, 600, 2).await;
    assert_eq!(batches(&next), [(one, strings(&["c"]))]);
    assert_eq!((next[0].failures, next[0].failing_since_ms), (3, Some(100)));
    s.settle(600, vec![delivered(&next[0])]).await.unwrap();
    let d = s.depth(Some(&shop)).await.unwrap()[0].clone();
    assert_eq!(
        (
            d.queued,
            d.delivered,
            d.failures,
            d.failing_since_ms,
            d.last_error
        ),
        (0, 1, 0, None, None)
    );

    let letters = s.dead_letters(&shop, None, None, 10).await.unwrap();
    let listed: Vec<(&str, &str, i64, EndpointId)> = letters
        .iter()
        .map(|l| (l.payload.as_str(), l.reason.as_str(), l.died_ms, l.endpoint))
        .collect();
    assert_eq!(
        listed,
        [
            ("a", "horizon", 600, one),
            ("b", "horizon", 600, one),
            ("x", "gone", 100, two)
        ]
    );
    assert_eq!(
        (letters[0].event_id.as_str(), letters[0].kind),
        ("evt_a", EventType::ClientConnected)
    );
    let only_two = s.dead_letters(&shop, Some(two), None, 10).await.unwrap();
    assert_eq!(
        only_two
            .iter()
            .map(|l| l.payload.as_str())
            .collect::<Vec<_>>(),
        ["x"]
    );
    let page = s.dead_letters(&shop, None, Some(row_a), 1).await.unwrap();
    assert_eq!(page.iter().map(|l| l.row).collect::<Vec<_>>(), [row_b]);
    let theirs_dead = s.dead_letters(&other, None, None, 10).await.unwrap();
    assert_eq!(
        theirs_dead
            .iter()
            .map(|l| l.payload.as_str())
            .collect::<Vec<_>>(),
        ["o"]
    );

    assert!(!s.replay(&other, row_a, 700).await.unwrap());
    assert!(!s.drop_dead(&other, row_a).await.unwrap());
    assert!(s.replay(&shop, row_a, 700).await.unwrap());
    assert!(
        !s.replay(&shop, row_a, 700).await.unwrap(),
        "no longer dead"
    );
    assert_eq!(queued_and_dead(s, one).await, (1, 1));
    let replayed = lease(s, 700, 2).await;
    assert_eq!(batches(&replayed), [(one, strings(&["a"]))]);
    s.settle(700, vec![delivered(&replayed[0])]).await.unwrap();
    assert!(s.drop_dead(&shop, row_b).await.unwrap());
    assert!(!s.drop_dead(&shop, row_b).await.unwrap());
    assert_eq!(queued_and_dead(s, one).await, (0, 0));
    let left = s.dead_letters(&shop, None, None, 10).await.unwrap();
    assert_eq!(
        left.iter().map(|l| l.payload.as_str()).collect::<Vec<_>>(),
        ["x"]
    );
}
