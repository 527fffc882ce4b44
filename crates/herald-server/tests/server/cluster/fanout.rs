//! Publish on one node, receive on another, in order with the same seq; and resume on a
//! different node after a reconnect, exact on WebSocket, SSE (`Last-Event-ID`) and long-poll.

use herald_client::poll::Poller;
use herald_client::sse::{SseOptions, SseStream};
use serde_json::json;

use super::{bounded, one_to, Cluster};
use crate::support::token;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_published_on_one_node_reaches_subscribers_on_the_others_with_its_seq() {
    let cluster = Cluster::start(3).await;
    let mut on_b = cluster.ws(1, &["news"]).await;
    let mut on_c = cluster.ws(2, &["news"]).await;
    assert_eq!(on_b.subscribe("news", None).await["seq"], 0);
    assert_eq!(on_c.subscribe("news", None).await["seq"], 0);

    let mut answers = Vec::new();
    for i in 1..=20 {
        answers.push(cluster.publish(0, "news", json!({ "n": i })).await);
    }
    let seqs: Vec<u64> = answers.iter().map(|a| a["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, one_to(20), "the seqs the publisher was told");
    for subscriber in [&mut on_b, &mut on_c] {
        let got = subscriber.messages(20).await;
        for (message, answer) in got.iter().zip(&answers) {
            assert_eq!(message["seq"], answer["seq"], "{message}");
            assert_eq!(message["id"], answer["id"], "{message}");
            assert_eq!(message["epoch"], answer["epoch"], "{message}");
        }
        let data: Vec<u64> = got
            .iter()
            .map(|m| m["data"]["n"].as_u64().unwrap())
            .collect();
        assert_eq!(data, one_to(20), "in publish order");
    }
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_publishers_on_two_nodes_make_one_gapless_sequence_every_node_sees_in_order() {
    let cluster = Cluster::start(3).await;
    let mut subscribers = Vec::new();
    for k in 0..3 {
        let mut ws = cluster.ws(k, &["room"]).await;
        ws.subscribe("room", None).await;
        subscribers.push(ws);
    }
    const EACH: u64 = 25;
    let publish_from = |k: usize| {
        let cluster = &cluster;
        async move {
            let mut seqs = Vec::new();
            for i in 0..EACH {
                let answer = cluster
                    .publish(k, "room", json!({ "from": k, "i": i }))
                    .await;
                seqs.push(answer["seq"].as_u64().unwrap());
            }
            seqs
        }
    };
    let (from_a, from_b) = bounded("two publishers", async {
        tokio::join!(publish_from(0), publish_from(1))
    })
    .await;
    let mut told: Vec<u64> = from_a.iter().chain(&from_b).copied().collect();
    told.sort_unstable();
    assert_eq!(told, one_to(2 * EACH), "gapless, no seq given twice");
    for (k, ws) in subscribers.iter_mut().enumerate() {
        let seqs = ws.message_seqs(2 * EACH as usize).await;
        assert_eq!(seqs, one_to(2 * EACH), "node {k} sees 1..N in order");
    }
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_websocket_resumes_exactly_on_another_node() {
    let cluster = Cluster::start(3).await;
    let mut ws = cluster.ws(0, &["chat/*"]).await;
    ws.subscribe("chat/1", None).await;
    for i in 1..=5 {
        cluster.publish(1, "chat/1", json!(i)).await;
    }
    let first = ws.messages(5).await;
    let epoch = first[0]["epoch"].clone();
    drop(ws);
    for i in 6..=10 {
        cluster.publish(1, "chat/1", json!(i)).await;
    }

    let mut ws = cluster.ws(2, &["chat/*"]).await;
    let reply = ws
        .subscribe("chat/1", Some(json!({ "seq": 5, "epoch": epoch })))
        .await;
    assert_eq!(reply["recovered"], true, "{reply}");
    assert_eq!(
        (reply["seq"].clone(), reply["epoch"].clone()),
        (json!(10), epoch)
    );
    cluster.publish(0, "chat/1", json!(11)).await;
    assert_eq!(
        ws.message_seqs(6).await,
        (6..=11).collect::<Vec<_>>(),
        "replayed from the log, then live from another node: no gap, no duplicate"
    );
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sse_resumes_exactly_on_another_node_with_last_event_id() {
    let cluster = Cluster::start(3).await;
    let token = token(&["feed"]);
    let channels = ["feed"];
    let mut stream = bounded(
        "sse open",
        SseStream::open(
            &cluster.base(0),
            &SseOptions {
                channels: &channels,
                token: Some(&token),
                ..SseOptions::default()
            },
        ),
    )
    .await
    .expect("sse opens");
    for i in 1..=4 {
        cluster.publish(1, "feed", json!(i)).await;
    }
    for expected in 1..=4 {
        let message = bounded("an sse message", stream.next_message())
            .await
            .unwrap()
            .expect("a message");
        assert_eq!(message.seq, expected);
    }
    let cursor = stream.last_event_id().expect("an event id").to_owned();
    drop(stream);
    for i in 5..=7 {
        cluster.publish(0, "feed", json!(i)).await;
    }

    let mut stream = bounded(
        "sse reopen",
        SseStream::open(
            &cluster.base(2),
            &SseOptions {
                channels: &channels,
                token: Some(&token),
                last_event_id: Some(&cursor),
                ..SseOptions::default()
            },
        ),
    )
    .await
    .expect("sse reopens");
    let mut seqs = Vec::new();
    while seqs.len() < 3 {
        let message = bounded("a replayed message", stream.next_message())
            .await
            .unwrap()
            .expect("a message");
        seqs.push(message.seq);
    }
    cluster.publish(1, "feed", json!(8)).await;
    let live = bounded("a live message", stream.next_message())
        .await
        .unwrap()
        .expect("a message");
    seqs.push(live.seq);
    assert_eq!(seqs, [5, 6, 7, 8], "no gap, no duplicate");
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_poll_resumes_exactly_on_another_node() {
    let cluster = Cluster::start(3).await;
    let token = token(&["ticks"]);
    let mut poller = Poller::new(&cluster.base(0), &["ticks"], Some(&token));
    poller.timeout = std::time::Duration::from_secs(5);
    let first = bounded("first poll", poller.poll()).await.expect("polled");
    assert!(first.messages.is_empty(), "the first poll replays nothing");
    for i in 1..=3 {
        cluster.publish(1, "ticks", json!(i)).await;
    }
    let mut seqs = Vec::new();
    while seqs.len() < 3 {
        let answer = bounded("a poll", poller.poll()).await.expect("polled");
        seqs.extend(answer.messages.iter().map(|m| m.seq));
    }
    assert_eq!(seqs, [1, 2, 3]);
    let cursor = poller.cursor.clone().expect("a cursor");
    for i in 4..=6 {
        cluster.publish(0, "ticks", json!(i)).await;
    }

    let mut elsewhere = Poller::new(&cluster.base(2), &["ticks"], Some(&token)).since(&cursor);
    elsewhere.timeout = std::time::Duration::from_secs(5);
    let mut seqs = Vec::new();
    while seqs.len() < 3 {
        let answer = bounded("a poll elsewhere", elsewhere.poll())
            .await
            .expect("polled");
        assert!(answer.channels.iter().all(|c| c.recovered), "{answer:?}");
        seqs.extend(answer.messages.iter().map(|m| m.seq));
    }
    assert_eq!(seqs, [4, 5, 6], "no gap, no duplicate");
    let waiting = tokio::spawn(async move {
        let mut seqs = Vec::new();
        while seqs.is_empty() {
            let answer = elsewhere.poll().await.expect("polled");
            seqs.extend(answer.messages.iter().map(|m| m.seq));
        }
        seqs
    });
    cluster.publish(1, "ticks", json!(7)).await;
    let live = bounded("a live poll", waiting).await.unwrap();
    assert_eq!(live, [7]);
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscribe_on_another_node_right_after_a_publish_misses_nothing_and_repeats_nothing() {
    let cluster = Cluster::start(2).await;
    let mut fresh = Vec::new();
    let mut resumed = Vec::new();
    for round in 1..=20u64 {
        let answer = cluster.publish(0, "hot", json!(round)).await;
        assert_eq!(answer["seq"], round);
        // At once on B: a subscriber without a cursor is told where the channel stands on B,
        // which may not count the answered publish yet (it is still on its way through Redis
        // when B already follows the channel): it then receives it live. Either way it gets
        // everything after its reply's seq, exactly once.
        let mut ws = cluster.ws(1, &["hot"]).await;
        let reply = ws.subscribe("hot", None).await;
        let told = reply["seq"].as_u64().unwrap();
        assert!(told <= round, "round {round}: {reply}");
        fresh.push((told, ws));
        // One resuming from the answered publish (read-your-writes) is exact.
        let mut ws = cluster.ws(1, &["hot"]).await;
        let since = json!({ "seq": round, "epoch": answer["epoch"] });
        let reply = ws.subscribe("hot", Some(since)).await;
        assert_eq!(
            (reply["seq"].clone(), reply["recovered"].clone()),
            (json!(round), json!(true)),
            "round {round}: {reply}"
        );
        resumed.push((round, ws));
    }
    cluster.publish(0, "hot", json!("last")).await;
    for (after, ws) in fresh.iter_mut().chain(resumed.iter_mut()) {
        let seqs = ws.message_seqs((21 - *after) as usize).await;
        assert_eq!(
            seqs,
            (*after + 1..=21).collect::<Vec<_>>(),
            "subscribed at {after}: the rest exactly once"
        );
    }
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_over_a_redis_cluster_fan_out_every_channel_and_hear_every_event() {
    let cluster = Cluster::start_over_redis_cluster(3).await;
    // Channels whose Redis channels land in different hash slots (and so masters).
    let channels = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot"];
    let mut subscribers = Vec::new();
    for k in [1, 2] {
        let mut ws = cluster.ws(k, &["*"]).await;
        for channel in channels {
            ws.subscribe(channel, None).await;
        }
        subscribers.push(ws);
    }
    for round in 1..=3 {
        for channel in channels {
            cluster.publish(0, channel, json!(round)).await;
        }
    }
    for ws in &mut subscribers {
        let got = ws.messages(3 * channels.len()).await;
        for channel in channels {
            let seqs: Vec<u64> = got
                .iter()
                .filter(|m| m["channel"] == channel)
                .map(|m| m["seq"].as_u64().unwrap())
                .collect();
            assert_eq!(seqs, one_to(3), "{channel}");
        }
    }
    // Cache events travel too: an app created on A publishes on C.
    let (status, created) = cluster
        .call(
            0,
            "POST",
            "/v1/apps",
            super::ADMIN,
            Some(json!({"id":"shop"})),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let key = created["key"].as_str().unwrap().to_owned();
    super::eventually("the new app's key works on node C", || async {
        let path = "/v1/channels/news/messages";
        let (status, _) = cluster
            .call(2, "POST", path, &key, Some(json!({ "data": 1 })))
            .await;
        (status == 200).then_some(())
    })
    .await;
    cluster.shutdown().await;
}
