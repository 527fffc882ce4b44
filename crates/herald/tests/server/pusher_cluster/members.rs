//! Presence, client events, queries and cache channels (public, private and presence) with
//! pusher-js clients on two nodes.

use serde_json::{json, Value};

use super::{eventually, Nodes};
use crate::pusher_client::{event, event_of, PusherJs};
use crate::support::Server;

/// The member data `client.mjs` authorises its presence channels with.
fn user(id: &str, name: &str) -> Value {
    json!({ "user": { "user_id": id, "user_info": { "name": name } } })
}

/// A presence member pusher-js hands `member_added`/`member_removed` listeners.
fn member(id: &str, name: &str) -> Value {
    json!({ "id": id, "info": { "name": name } })
}

/// The user ids `GET /apps/{id}/channels/{channel}/users` answers through `s`, sorted.
async fn users(nodes: &Nodes, s: &Server, channel: &str) -> Vec<String> {
    let (status, body) = nodes
        .get(s, &format!("/channels/{channel}/users"), json!({}))
        .await;
    assert_eq!(status, 200, "{body}");
    let mut ids: Vec<String> = body["users"]
        .as_array()
        .unwrap_or_else(|| panic!("{body}"))
        .iter()
        .map(|u| u["id"].as_str().unwrap().to_owned())
        .collect();
    ids.sort();
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn presence_members_and_client_events_span_both_nodes() {
    let nodes = Nodes::start().await;
    let (a, b, creds) = (&nodes.a, &nodes.b, &nodes.creds);
    let room = "presence-room";

    // Ann on node A, then Bob on node B: Bob's members list holds both, Ann is told of Bob.
    let mut ann_a = PusherJs::start_with(a, creds, &[room], user("ann", "Ann")).await;
    let first = ann_a.next_event().await;
    assert_eq!(first["event"], "pusher:subscription_succeeded", "{first}");
    assert_eq!(
        first["data"]["members"],
        json!({ "ann": { "name": "Ann" } })
    );
    let mut bob_b = PusherJs::start_with(b, creds, &[room], user("bob", "Bob")).await;
    let joined = bob_b.next_event().await;
    assert_eq!(joined["event"], "pusher:subscription_succeeded", "{joined}");
    assert_eq!(
        joined["data"]["members"],
        json!({ "ann": { "name": "Ann" }, "bob": { "name": "Bob" } }),
        "{joined}"
    );
    assert_eq!(joined["data"]["count"], 2, "{joined}");
    assert_eq!(
        event_of(&ann_a.next_event().await),
        event(room, "pusher:member_added", member("bob", "Bob"))
    );

    // Ann's second connection, on node B, is no new member: its list counts two, nobody is
    // told (the next event either member gets is the marker triggered through node B).
    let mut ann_b = PusherJs::start_with(b, creds, &[room], user("ann", "Ann")).await;
    let again = ann_b.next_event().await;
    assert_eq!(again["event"], "pusher:subscription_succeeded", "{again}");
    assert_eq!(again["data"]["count"], 2, "{again}");
    nodes.trigger(b, room, "marker", r#"{"m":1}"#).await;
    for js in [&mut ann_a, &mut bob_b, &mut ann_b] {
        assert_eq!(
            event_of(&js.next_event().await),
            event(room, "marker", json!({ "m": 1 }))
        );
    }

    // Either node's HTTP API answers the cluster's users and counts: two users, three
    // subscriptions (the other node's as it last reported them, hence the wait).
    for s in [a, b] {
        assert_eq!(users(&nodes, s, room).await, ["ann", "bob"]);
        let path = format!("/channels/{room}");
        let info = json!({ "info": "user_count,subscription_count" });
        eventually("the cluster's counts of presence-room", || async {
            let (status, body) = nodes.get(s, &path, info.clone()).await;
            let wanted = json!({ "occupied": true, "user_count": 2, "subscription_count": 3 });
            if status == 200 && body == wanted {
                Ok(body)
            } else {
                Err(body)
            }
        })
        .await;
    }

    // A client event from Ann on A reaches Bob and Ann's other connection on B, naming Ann,
    // and is not echoed to its sender; one from Bob on B reaches both of Ann's.
    for js in [&mut bob_b, &mut ann_b] {
        js.send(json!({ "listen": { "channel": room, "event": "client-hi" } }))
            .await;
        js.until(|l| l["type"] == "listening").await;
    }
    ann_a
        .send(json!({ "trigger": { "channel": room, "event": "client-hi", "data": { "x": 1 } } }))
        .await;
    let triggered = ann_a.until(|l| l["type"] == "triggered").await;
    assert_eq!(triggered["ok"], true, "{triggered}");
    for js in [&mut bob_b, &mut ann_b] {
        let heard = js.until(|l| l["type"] == "listened").await;
        assert_eq!(heard["data"], json!({ "x": 1 }), "{heard}");
        assert_eq!(heard["user_id"], "ann", "{heard}");
    }
    bob_b
        .send(json!({ "trigger": { "channel": room, "event": "client-bye", "data": "b" } }))
        .await;
    for js in [&mut ann_a, &mut ann_b] {
        assert_eq!(
            event_of(&js.next_event().await),
            event(room, "client-bye", json!("b"))
        );
    }
    nodes.trigger(a, room, "marker", r#"{"m":2}"#).await;
    for js in [&mut ann_a, &mut bob_b] {
        // Ann's own client-hi never came back to her, Bob's client-bye never to him.
        assert_eq!(
            event_of(&js.next_event().await),
            event(room, "marker", json!({ "m": 2 }))
        );
    }

    // Ann leaves node A: still a member through node B, Bob is told nothing; her last
    // connection leaves: Bob is told once.
    ann_a.exit().await;
    nodes.trigger(a, room, "marker", r#"{"m":3}"#).await;
    assert_eq!(
        event_of(&bob_b.next_event().await),
        event(room, "marker", json!({ "m": 3 }))
    );
    ann_b.exit().await;
    assert_eq!(
        event_of(&bob_b.next_event().await),
        event(room, "pusher:member_removed", member("ann", "Ann"))
    );
    nodes.trigger(a, room, "marker", r#"{"m":4}"#).await;
    assert_eq!(
        event_of(&bob_b.next_event().await),
        event(room, "marker", json!({ "m": 4 }))
    );
    for s in [a, b] {
        assert_eq!(users(&nodes, s, room).await, ["bob"]);
    }

    // Bob leaves; Dan, a member on A, is told of Carl joining on B and leaving.
    bob_b.exit().await;
    let mut dan_a = PusherJs::start_with(a, creds, &[room], user("dan", "Dan")).await;
    let list = dan_a.next_event().await;
    assert_eq!(
        list["data"]["members"],
        json!({ "dan": { "name": "Dan" } }),
        "{list}"
    );
    let carl_b = PusherJs::start_with(b, creds, &[room], user("carl", "Carl")).await;
    assert_eq!(
        event_of(&dan_a.next_event().await),
        event(room, "pusher:member_added", member("carl", "Carl"))
    );
    carl_b.exit().await;
    assert_eq!(
        event_of(&dan_a.next_event().await),
        event(room, "pusher:member_removed", member("carl", "Carl"))
    );
    dan_a.exit().await;
    nodes.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_channels_on_one_node_answer_what_the_other_was_sent() {
    let nodes = Nodes::start().await;
    let (a, b, creds) = (&nodes.a, &nodes.b, &nodes.creds);

    // Nothing was ever sent to cache-empty: a miss on B.
    let mut empty = PusherJs::start(b, creds, &["cache-empty"], false).await;
    empty.subscribed(&["cache-empty"]).await;
    assert_eq!(event_of(&empty.next_event().await).1, "pusher:cache_miss");

    // A trigger through A to a channel nobody subscribes to: B's first subscriber gets it
    // right after subscribing.
    nodes.trigger(a, "cache-prices", "tick", r#"{"p":1}"#).await;
    let mut first = PusherJs::start(b, creds, &["cache-prices"], false).await;
    first.subscribed(&["cache-prices"]).await;
    assert_eq!(
        event_of(&first.next_event().await),
        event("cache-prices", "tick", json!({ "p": 1 }))
    );

    // The next trigger through A reaches it live, and is what a later subscriber on B (and
    // one on A) is sent.
    nodes.trigger(a, "cache-prices", "tick", r#"{"p":2}"#).await;
    assert_eq!(
        event_of(&first.next_event().await),
        event("cache-prices", "tick", json!({ "p": 2 }))
    );
    for s in [b, a] {
        let mut later = PusherJs::start(s, creds, &["cache-prices"], false).await;
        later.subscribed(&["cache-prices"]).await;
        assert_eq!(
            event_of(&later.next_event().await),
            event("cache-prices", "tick", json!({ "p": 2 }))
        );
        later.exit().await;
    }

    // Private and presence cache channels too: a presence one's members list, then the event.
    for channel in ["private-cache-orders", "presence-cache-room"] {
        nodes.trigger(a, channel, "order", r#"{"o":7}"#).await;
        let mut js = PusherJs::start_with(b, creds, &[channel], user("eve", "Eve")).await;
        let succeeded = js.next_event().await;
        assert_eq!(
            succeeded["event"], "pusher:subscription_succeeded",
            "{succeeded}"
        );
        assert_eq!(
            event_of(&js.next_event().await),
            event(channel, "order", json!({ "o": 7 }))
        );
        js.exit().await;
    }
    empty.exit().await;
    first.exit().await;
    nodes.shutdown().await;
}

/// Asks `GET /apps/{id}/channels` with `params` through `s` until it answers `wanted` (within
/// the module's deadline): the other node's figures reach `s` within a presence period.
async fn listed_on(nodes: &Nodes, s: &Server, params: Value, wanted: Value) {
    eventually(&format!("channels {params} listing {wanted}"), || async {
        let (status, body) = nodes.get(s, "/channels", params.clone()).await;
        if status == 200 && body == wanted {
            Ok(body)
        } else {
            Err(body)
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn either_node_lists_the_channels_occupied_only_on_the_other() {
    let nodes = Nodes::start().await;
    let (a, b, creds) = (&nodes.a, &nodes.b, &nodes.creds);
    let lounge = "presence-lounge";

    // Every subscriber is on node B: Ann and Bob in the lounge, a public channel besides.
    let mut ann = PusherJs::start_with(b, creds, &[lounge], user("ann", "Ann")).await;
    let mut bob = PusherJs::start_with(b, creds, &[lounge], user("bob", "Bob")).await;
    for js in [&mut ann, &mut bob] {
        let e = js.next_event().await;
        assert_eq!(e["event"], "pusher:subscription_succeeded", "{e}");
    }
    let mut news = PusherJs::start(b, creds, &["news-b"], false).await;
    news.subscribed(&["news-b"]).await;

    // Node A, which holds none of them, lists them all, by prefix and with their counts.
    listed_on(
        &nodes,
        a,
        json!({}),
        json!({ "channels": { "news-b": {}, lounge: {} } }),
    )
    .await;
    listed_on(
        &nodes,
        a,
        json!({ "info": "subscription_count" }),
        json!({ "channels": {
            "news-b": { "subscription_count": 1 },
            lounge: { "subscription_count": 2 },
        }}),
    )
    .await;
    listed_on(
        &nodes,
        a,
        json!({ "filter_by_prefix": "presence-", "info": "user_count,subscription_count" }),
        json!({ "channels": { lounge: { "user_count": 2, "subscription_count": 2 } } }),
    )
    .await;
    listed_on(
        &nodes,
        a,
        json!({ "filter_by_prefix": "news" }),
        json!({ "channels": { "news-b": {} } }),
    )
    .await;

    // Vacated everywhere: neither node lists them once B's figures reach A.
    ann.exit().await;
    bob.exit().await;
    news.exit().await;
    for s in [a, b] {
        listed_on(&nodes, s, json!({}), json!({ "channels": {} })).await;
        listed_on(
            &nodes,
            s,
            json!({ "filter_by_prefix": "presence-" }),
            json!({ "channels": {} }),
        )
        .await;
    }
    nodes.shutdown().await;
}
