//! Idle Pusher connections parked (docs/design/idle-connections.md, herald-pusher `park.rs`)
//! against the real binary, with `park_idle_after` shortened: pusher-js and raw connections
//! that have nothing to do leave their task (`herald_connections_parked` counts them), get a
//! trigger at once, keep Pusher's keep-alive both ways without a task
//! (`herald_connections_revived_total` does not move), and after waking still do presence and
//! client events; `terminate_connections` and shutdown reach a parked connection with Pusher's
//! codes; a connection signed in with a watchlist and in a presence channel parks and is told
//! of its watched users, its room and its user's channel while parked. Tests wait for the gauge or a frame, never a time, but for the one that lets
//! pusher-js's own keep-alive run.

use std::time::Duration;

use serde_json::{json, Value};

use crate::pusher_api::{run, trigger, Credentials, Sdk};
use crate::pusher_client::{established, event, event_of, server_with_credentials, PusherJs};
use crate::pusher_presence::{data_of, subscribe_presence};
use crate::support::{Server, Ws};

/// Parks after 100 ms; pings after a second of silence, checked every second.
const CONFIG: &str = "park_idle_after = \"100ms\"\nping_interval = \"1s\"\n\
                      [pusher]\nactivity_timeout = 1\npong_timeout = 2\n";

/// A metric's value from `/metrics`, 0 when absent.
async fn metric(s: &Server, name: &str) -> u64 {
    let text = s.metrics().await;
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .map_or(0, |v| v.trim().parse::<f64>().unwrap_or(0.0) as u64)
}

async fn parked(s: &Server) -> u64 {
    metric(s, "herald_connections_parked").await
}

async fn revivals(s: &Server) -> u64 {
    metric(s, "herald_connections_revived_total").await
}

/// Waits (at most 20 s) until exactly `n` connections are parked.
async fn wait_parked(s: &Server, n: u64) {
    let wait = async {
        while parked(s).await != n {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(20), wait)
        .await
        .unwrap_or_else(|_| panic!("never saw {n} parked connections"));
}

fn member(id: &str, name: &str) -> Value {
    json!({ "user": { "user_id": id, "user_info": { "name": name } } })
}

#[tokio::test]
async fn an_idle_pusher_js_connection_parks_and_gets_a_trigger_at_once() {
    let (s, creds) = server_with_credentials(Some(CONFIG)).await;
    let mut js = PusherJs::start(&s, &creds, &["news"], false).await;
    js.subscribed(&["news"]).await;
    wait_parked(&s, 1).await;
    let before = revivals(&s).await;
    let (status, body) = run(
        Sdk::Node,
        &s,
        &creds,
        trigger(&["news"], "order-placed", r#"{"id":7}"#),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        event_of(&js.next_event().await),
        event("news", "order-placed", json!({ "id": 7 }))
    );
    assert!(revivals(&s).await > before, "the trigger woke it");
    // Idle again, it parks again.
    wait_parked(&s, 1).await;
    js.exit().await;
    wait_parked(&s, 0).await;
}

#[tokio::test]
async fn pusher_pings_both_ways_are_answered_while_parked() {
    let (s, creds) = server_with_credentials(Some(CONFIG)).await;
    let (mut ws, _) = established(&s, &creds).await;
    wait_parked(&s, 1).await;
    let before = revivals(&s).await;
    // The client's ping, answered by the parking.
    ws.send(json!({ "event": "pusher:ping", "data": {} })).await;
    assert_eq!(ws.frame().await["event"], "pusher:pong");
    // The server's ping after the activity timeout, sent by the parking.
    assert_eq!(ws.frame().await["event"], "pusher:ping");
    assert_eq!(revivals(&s).await, before, "the keep-alive needed a task");
    assert_eq!(parked(&s).await, 1);
    // Answered, the connection stays (a pong that comes back while the parking is still
    // putting the record back may revive it: the parking remembers any wake meanwhile), and
    // is pinged again, parked.
    ws.send(json!({ "event": "pusher:pong", "data": {} })).await;
    assert_eq!(ws.frame().await["event"], "pusher:ping");
    ws.send(json!({ "event": "pusher:pong", "data": {} })).await;
    wait_parked(&s, 1).await;
    // Silent after the next ping: woken and closed with 4201, as in a task.
    let mut frames = Vec::new();
    while let Some(frame) = ws.recv().await {
        frames.push(frame);
    }
    let events: Vec<_> = frames.iter().map(|f| f["event"].clone()).collect();
    assert_eq!(
        events,
        ["pusher:ping", "pusher:error"],
        "{}",
        ws.why_closed()
    );
    assert_eq!(frames[1]["data"]["code"], 4201, "{frames:?}");
    assert!(
        ws.why_closed().contains("close code 4201"),
        "{}",
        ws.why_closed()
    );
    wait_parked(&s, 0).await;
}

#[tokio::test]
async fn pusher_js_stays_parked_through_its_keepalive_then_presence_and_client_events_work() {
    let (s, creds) = server_with_credentials(Some(CONFIG)).await;
    let mut ann = PusherJs::start_with(&s, &creds, &["presence-room"], member("ann", "Ann")).await;
    ann.subscribed(&["presence-room"]).await;
    let mut bob = PusherJs::start_with(&s, &creds, &["presence-room"], member("bob", "Bob")).await;
    bob.subscribed(&["presence-room"]).await;
    assert_eq!(
        event_of(&ann.next_event().await),
        event(
            "presence-room",
            "pusher:member_added",
            json!({ "id": "bob", "info": { "name": "Bob" } })
        )
    );
    ann.send(json!({ "listen": { "channel": "presence-room", "event": "client-hi" } }))
        .await;
    ann.until(|l| l["type"] == "listening").await;
    wait_parked(&s, 2).await;

    // pusher-js pings after a second without a frame and wants its pong: three of its
    // activity timeouts pass with both connections parked, answered without a task.
    let before = revivals(&s).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        revivals(&s).await,
        before,
        "pusher-js's pings needed a task"
    );
    assert_eq!(parked(&s).await, 2);

    // A new member wakes both with member_added.
    let mut carl =
        PusherJs::start_with(&s, &creds, &["presence-room"], member("carl", "Carl")).await;
    carl.subscribed(&["presence-room"]).await;
    let added = json!({ "id": "carl", "info": { "name": "Carl" } });
    for js in [&mut ann, &mut bob] {
        assert_eq!(
            event_of(&js.next_event().await),
            event("presence-room", "pusher:member_added", added.clone())
        );
    }
    wait_parked(&s, 3).await;
    // A client event from a parked connection reaches another parked one, with its user id.
    bob.send(json!({ "trigger": {
        "channel": "presence-room", "event": "client-hi", "data": { "x": 1 }
    }}))
    .await;
    let triggered = bob.until(|l| l["type"] == "triggered").await;
    assert_eq!(triggered["ok"], true, "{triggered}");
    let heard = ann.until(|l| l["type"] == "listened").await;
    assert_eq!(heard["data"], json!({ "x": 1 }), "{heard}");
    assert_eq!(heard["user_id"], "bob", "{heard}");
    // A member leaving is told to the parked others.
    wait_parked(&s, 3).await;
    carl.exit().await;
    let removed = json!({ "id": "carl", "info": { "name": "Carl" } });
    for js in [&mut ann, &mut bob] {
        let line = js.next_event().await;
        assert_eq!(line["event"], "pusher:member_removed", "{line}");
        assert_eq!(line["data"]["id"], removed["id"], "{line}");
    }
    ann.exit().await;
    bob.exit().await;
}

/// A raw connection signed in as `id`.
async fn signed_in(s: &Server, creds: &Credentials, id: &str) -> Ws {
    signed_in_watching(s, creds, id, &[]).await.0
}

/// A raw connection signed in as `id` watching `watchlist` (none when empty), and its socket
/// id.
async fn signed_in_watching(
    s: &Server,
    creds: &Credentials,
    id: &str,
    watchlist: &[&str],
) -> (Ws, String) {
    let (mut ws, socket_id) = established(s, creds).await;
    let mut user_data = json!({ "id": id });
    if !watchlist.is_empty() {
        user_data["watchlist"] = json!(watchlist);
    }
    let user_data = user_data.to_string();
    let signed = herald_pusher::signature::signin_string(&socket_id, &user_data);
    let auth =
        herald_pusher::signature::key_signature(&creds.key, creds.secret.as_bytes(), &signed);
    ws.send(json!({ "event": "pusher:signin", "data": { "auth": auth, "user_data": user_data } }))
        .await;
    let answer = ws.frame().await;
    assert_eq!(answer["event"], "pusher:signin_success", "{answer}");
    (ws, socket_id)
}

/// The `pusher:error` code a connection ends with, and how it closed.
async fn ending(ws: &mut Ws) -> (Value, String) {
    let mut last = Value::Null;
    while let Some(frame) = ws.recv().await {
        last = frame;
    }
    assert_eq!(last["event"], "pusher:error", "{last}; {}", ws.why_closed());
    (last["data"]["code"].clone(), ws.why_closed())
}

#[tokio::test]
async fn terminate_connections_and_shutdown_reach_parked_connections() {
    let (mut s, creds) = server_with_credentials(Some(CONFIG)).await;
    let mut ann = signed_in(&s, &creds, "ann").await;
    let mut bob = signed_in(&s, &creds, "bob").await;
    wait_parked(&s, 2).await;
    let (status, body) = run(Sdk::Node, &s, &creds, json!({ "terminateUser": "ann" })).await;
    assert_eq!((status, body.trim()), (200, "{}"));
    let (code, closed) = ending(&mut ann).await;
    assert_eq!(code, 4009, "{closed}");
    assert!(closed.contains("close code 4009"), "{closed}");
    wait_parked(&s, 1).await;
    s.signal("TERM");
    let (code, closed) = ending(&mut bob).await;
    assert_eq!(code, 4200, "{closed}");
    assert!(closed.contains("close code 4200"), "{closed}");
    assert!(s.wait_exit(Duration::from_secs(15)).success());
}

/// Parks after 100 ms; no server pings (a raw client here answers none).
const QUIET: &str = "park_idle_after = \"100ms\"\n";

/// A raw connection's subscribe of presence channel `channel` as member `id`, answered.
async fn join(ws: &mut Ws, creds: &Credentials, socket_id: &str, channel: &str, id: &str) {
    let channel_data = json!({ "user_id": id }).to_string();
    subscribe_presence(ws, creds, socket_id, channel, &channel_data, &channel_data).await;
    let answer = ws.frame().await;
    assert_eq!(
        answer["event"], "pusher_internal:subscription_succeeded",
        "{answer}"
    );
}

#[tokio::test]
async fn a_parked_connection_wakes_with_its_sign_in_watchlist_and_presence_membership() {
    let (s, creds) = server_with_credentials(Some(QUIET)).await;
    // Ann: signed in watching bob (offline), a member of a presence channel.
    let (mut ann, ann_socket) = signed_in_watching(&s, &creds, "ann", &["bob"]).await;
    join(&mut ann, &creds, &ann_socket, "presence-room", "ann").await;
    wait_parked(&s, 1).await;

    // Woken by its own frame: its user's channel is its own (the sign-in was kept).
    ann.send(json!({ "event": "pusher:subscribe", "data": { "channel": "#server-to-user-ann" } }))
        .await;
    let answer = ann.frame().await;
    assert_eq!(
        (&answer["event"], &answer["channel"]),
        (
            &json!("pusher_internal:subscription_succeeded"),
            &json!("#server-to-user-ann")
        ),
        "{answer}"
    );
    wait_parked(&s, 1).await;

    // Bob signs in: ann, parked, is told by her watchlist that bob is online.
    let (mut bob, bob_socket) = signed_in_watching(&s, &creds, "bob", &[]).await;
    let told = ann.frame().await;
    assert_eq!(told["event"], "pusher_internal:watchlist_events", "{told}");
    assert_eq!(
        data_of(&told),
        json!({ "events": [{ "name": "online", "user_ids": ["bob"] }] })
    );
    // Bob joins the room: ann, parked again (and bob, idle since his sign-in), is told.
    wait_parked(&s, 2).await;
    join(&mut bob, &creds, &bob_socket, "presence-room", "bob").await;
    let added = ann.frame().await;
    assert_eq!(added["event"], "pusher_internal:member_added", "{added}");
    assert_eq!(data_of(&added)["user_id"], "bob", "{added}");
    wait_parked(&s, 2).await;

    // The server-to-user channel reaches ann parked.
    let order = json!({ "sendToUser": { "userId": "ann", "event": "note", "data": "{\"n\":1}" } });
    let (status, body) = run(Sdk::Node, &s, &creds, order).await;
    assert_eq!(status, 200, "{body}");
    let note = ann.frame().await;
    assert_eq!(
        (&note["event"], &note["channel"]),
        (&json!("note"), &json!("#server-to-user-ann")),
        "{note}"
    );
    wait_parked(&s, 2).await;

    // A client event from ann, woken by it, carries her member's user id to bob, parked.
    ann.send(json!({ "event": "client-hi", "channel": "presence-room", "data": "{\"x\":1}" }))
        .await;
    let heard = bob.frame().await;
    assert_eq!(
        (&heard["event"], &heard["channel"], &heard["user_id"]),
        (&json!("client-hi"), &json!("presence-room"), &json!("ann")),
        "{heard}"
    );
    // Nothing came back to ann (a client event is not echoed); she parks again, and bob going
    // is told to her watchlist and her room.
    wait_parked(&s, 2).await;
    drop(bob);
    let mut events = Vec::new();
    for _ in 0..2 {
        let frame = ann.frame().await;
        events.push((frame["event"].clone(), data_of(&frame)));
    }
    events.sort_by_key(|(event, _)| event.to_string());
    assert_eq!(
        events,
        [
            (
                json!("pusher_internal:member_removed"),
                json!({ "user_id": "bob" })
            ),
            (
                json!("pusher_internal:watchlist_events"),
                json!({ "events": [{ "name": "offline", "user_ids": ["bob"] }] })
            ),
        ]
    );
}
