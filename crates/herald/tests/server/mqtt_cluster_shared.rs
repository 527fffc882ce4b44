//! MQTT shared subscriptions across the nodes of a cluster (core's `shared/holders.rs`,
//! bus-redis's `shares.rs`): two real `herald serve` processes over one PostgreSQL and one
//! Redis (`mqtt_cluster.rs`'s [`Cluster`]), a Paho member of `$share/g/jobs/+` on each.
//! Messages published through either node reach exactly one member in the cluster, both
//! members getting some; once the member on node two is gone (killed, with the messages it
//! never acknowledged), node one's member gets those and every later message.
//!
//! No test waits for something not to happen. That nothing was received twice is read up to
//! a sentinel: once every message was received somewhere, sentinel messages are published
//! (to the group too) until each member got one; each node hears the group's messages on the
//! app's feed in one order, so anything a member would get twice comes before its sentinel.

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::mqtt_cluster::Cluster;
use crate::support::mqtt::PahoRun;
use crate::support::Server;

/// The first sentinel's number (the messages proper are below).
const SENTINEL: u64 = 1000;

/// A Paho v5 member of `$share/g/jobs/+` at QoS 1 on `server`, read by a task that sends each
/// message's number (payload `{"n":N}`) tagged with `who`; `manual_ack`: it never PUBACKs.
async fn member(
    server: &Server,
    token: &str,
    who: usize,
    manual_ack: bool,
    tx: mpsc::UnboundedSender<(usize, u64)>,
) -> JoinHandle<()> {
    let mut run = PahoRun::start(
        server.mqtt_addr(),
        json!({
            "version": "5", "username": "default", "password": token,
            "subscribe": [{ "topic": "$share/g/jobs/+", "qos": 1 }],
            "manual_ack": manual_ack, "expect": 100_000, "timeout": 110
        }),
    );
    let suback = run.until("suback").await;
    assert_eq!(suback["reason_codes"], json!([1]), "granted QoS 1");
    run.until("subscribed").await;
    tokio::spawn(async move {
        loop {
            let event = run.until("message").await;
            let data: Value = serde_json::from_str(event["payload"].as_str().unwrap()).unwrap();
            if tx.send((who, data["n"].as_u64().unwrap())).is_err() {
                return;
            }
        }
    })
}

/// Publishes `{"n": n}` to `jobs/{n % 5}` through node one for even `n`, node two for odd.
async fn publish(one: &Server, two: &Server, n: u64) {
    let through = if n.is_multiple_of(2) { one } else { two };
    through
        .publish(&format!("jobs/{}", n % 5), json!({ "n": n }))
        .await;
}

/// What each member received, in order.
#[derive(Default, Debug)]
struct Received {
    by: [Vec<u64>; 2],
}

impl Received {
    /// Every message number received, by anyone.
    fn distinct(&self) -> BTreeSet<u64> {
        self.by.iter().flatten().copied().collect()
    }

    /// Reads until `until` holds.
    async fn read(
        &mut self,
        rx: &mut mpsc::UnboundedReceiver<(usize, u64)>,
        until: impl Fn(&Received) -> bool,
    ) {
        while !until(self) {
            let (who, n) = tokio::time::timeout(Duration::from_secs(30), rx.recv())
                .await
                .unwrap_or_else(|_| panic!("no message within 30 s; received {self:?}"))
                .expect("the members' readers are running");
            self.by[who].push(n);
        }
    }

    /// Publishes sentinels from `next` on until each of `members` received one; the next
    /// sentinel's number.
    async fn until_sentinels(
        &mut self,
        rx: &mut mpsc::UnboundedReceiver<(usize, u64)>,
        (one, two): (&Server, &Server),
        members: &[usize],
        mut next: u64,
    ) -> u64 {
        let has_sentinel = |r: &Received, who: usize, from: u64| {
            r.by[who].iter().any(|n| *n >= from && *n >= SENTINEL)
        };
        let from = next;
        while !members.iter().all(|who| has_sentinel(self, *who, from)) {
            publish(one, two, next).await;
            next += 1;
            let sent = next;
            self.read(rx, |r| r.distinct().iter().any(|n| *n + 1 == sent))
                .await;
        }
        next
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_group_on_two_nodes_gets_each_message_once_and_a_leaving_member_hands_over() {
    tokio::time::timeout(Duration::from_secs(120), async {
        let cluster = Cluster::start().await;
        let (one, two) = (&cluster.one, &cluster.two);
        let token = one.token(&["jobs/*", "=jobs/*"], &[]);
        let (tx, mut rx) = mpsc::unbounded_channel();
        // Member 0 on node one; member 1 on node two, which never acknowledges.
        let first = member(one, &token, 0, false, tx.clone()).await;
        let second = member(two, &token, 1, true, tx).await;
        const N: u64 = 40;
        for n in 1..=N {
            publish(one, two, n).await;
        }
        let mut got = Received::default();
        got.read(&mut rx, |r| r.distinct().len() as u64 >= N).await;
        let next = got
            .until_sentinels(&mut rx, (one, two), &[0, 1], SENTINEL)
            .await;
        let shares: Vec<Vec<u64>> = got
            .by
            .iter()
            .map(|ns| ns.iter().copied().filter(|n| *n <= N).collect())
            .collect();
        let mut all: Vec<u64> = shares.iter().flatten().copied().collect();
        all.sort_unstable();
        assert_eq!(
            all,
            (1..=N).collect::<Vec<_>>(),
            "each message exactly once in the cluster: {got:?}"
        );
        assert!(
            !shares[0].is_empty() && !shares[1].is_empty(),
            "both members get some: {got:?}"
        );
        // Member 1 goes (its process killed, its socket closed) with its share never
        // acknowledged: node two hands those to node one's member, and every message from
        // now on goes there.
        second.abort();
        let _ = second.await;
        const M: u64 = 20;
        for n in N + 1..=N + M {
            publish(one, two, n).await;
        }
        let before = got.by[0].len();
        let wanted: BTreeSet<u64> = shares[1].iter().copied().chain(N + 1..=N + M).collect();
        got.read(&mut rx, |r| {
            let seen: BTreeSet<u64> = r.by[0][before..].iter().copied().collect();
            wanted.is_subset(&seen)
        })
        .await;
        got.until_sentinels(&mut rx, (one, two), &[0], next).await;
        // (Member 1's own sentinel, never acknowledged, is handed over too: not counted.)
        let mut after: Vec<u64> = got.by[0][before..]
            .iter()
            .copied()
            .filter(|n| *n < SENTINEL)
            .collect();
        after.sort_unstable();
        assert_eq!(
            after,
            wanted.into_iter().collect::<Vec<_>>(),
            "node one's member gets what node two's never acknowledged and every later \
             message, each once: {got:?}"
        );
        first.abort();
    })
    .await
    .expect("the test finishes within two minutes");
}
