//! Herald's exact resume for Pusher clients (docs/pusher.md, "Exact resume after a
//! reconnect"; herald-pusher's `resume` module): a raw client that does not ask gets Pusher's
//! frames byte for byte, one that asks gets each event's position after it (alone for an
//! event not sent to it); pusher-js with `tests/pusher/herald-resume.mjs` has its connection
//! killed by a crash of the server, misses what is published meanwhile, and after the
//! server's restart on the same data directory gets exactly the missed events in order, then
//! the live ones; a cursor older than the retained history is told as `herald:resume_failed`.

use std::time::Duration;

use futures_util::StreamExt;
use serde_json::json;
use tokio_tungstenite::tungstenite::Message;

use crate::pusher_api::{run, trigger, Sdk};
use crate::pusher_client::{established, server_with_credentials, PusherJs};
use crate::support::{Server, Ws};

/// The next text frame of `ws`, as the server wrote it.
async fn text(ws: &mut Ws) -> String {
    loop {
        let next = tokio::time::timeout(Duration::from_secs(10), ws.stream.next())
            .await
            .expect("timed out waiting for a frame");
        match next {
            Some(Ok(Message::Text(t))) => return t.to_string(),
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
            other => panic!("the connection ended: {other:?}"),
        }
    }
}

/// A position frame's text as the server writes it.
fn position(channel: &str, epoch: &str, seq: u64) -> String {
    let data = json!({ "epoch": epoch, "seq": seq }).to_string();
    json!({ "event": "pusher_internal:herald_position", "channel": channel, "data": data })
        .to_string()
}

#[tokio::test]
async fn a_client_that_does_not_ask_gets_pushers_frames_and_one_that_asks_gets_positions() {
    let (s, creds) = server_with_credentials(None).await;
    let (mut plain, _) = established(&s, &creds).await;
    let (mut asking, asking_id) = established(&s, &creds).await;
    plain
        .send(json!({ "event": "pusher:subscribe", "data": { "channel": "news" } }))
        .await;
    asking
        .send(json!({
            "event": "pusher:subscribe",
            "data": { "channel": "news", "herald_positions": true },
        }))
        .await;
    let succeeded =
        r#"{"channel":"news","data":"{}","event":"pusher_internal:subscription_succeeded"}"#;
    assert_eq!(text(&mut plain).await, succeeded);
    assert_eq!(text(&mut asking).await, succeeded);
    // Where the channel stands (no message yet).
    assert_eq!(text(&mut asking).await, position("news", "", 0));

    let published = s.publish("news", json!({ "n": 1 })).await;
    let epoch = published["epoch"].as_str().unwrap().to_owned();
    // A Pusher trigger that skips the asking socket: its position comes alone.
    let mut skipping = trigger(&["news"], "order", r#"{"id":2}"#);
    skipping["trigger"]["socket_id"] = json!(asking_id);
    let (status, body) = run(Sdk::Node, &s, &creds, skipping).await;
    assert_eq!(status, 200, "{body}");
    s.publish("news", json!({ "n": 3 })).await;

    // The unchanged client: Pusher's event frames, nothing between them.
    let first = r#"{"event":"message","channel":"news","data":"{\"n\":1}"}"#;
    let third = r#"{"event":"message","channel":"news","data":"{\"n\":3}"}"#;
    assert_eq!(text(&mut plain).await, first);
    assert_eq!(
        text(&mut plain).await,
        r#"{"event":"order","channel":"news","data":"{\"id\":2}"}"#
    );
    assert_eq!(text(&mut plain).await, third);
    // The asking client: the same event frames, each followed by its position.
    assert_eq!(text(&mut asking).await, first);
    assert_eq!(text(&mut asking).await, position("news", &epoch, 1));
    assert_eq!(text(&mut asking).await, position("news", &epoch, 2));
    assert_eq!(text(&mut asking).await, third);
    assert_eq!(text(&mut asking).await, position("news", &epoch, 3));

    // Unsubscribed and subscribed again without asking: no positions any more.
    asking
        .send(json!({ "event": "pusher:unsubscribe", "data": { "channel": "news" } }))
        .await;
    asking
        .send(json!({ "event": "pusher:subscribe", "data": { "channel": "news" } }))
        .await;
    assert_eq!(text(&mut asking).await, succeeded);
    s.publish("news", json!({ "n": 4 })).await;
    let fourth = r#"{"event":"message","channel":"news","data":"{\"n\":4}"}"#;
    assert_eq!(text(&mut asking).await, fourth);
    asking
        .send(json!({ "event": "pusher:ping", "data": {} }))
        .await;
    assert_eq!(
        text(&mut asking).await,
        r#"{"event":"pusher:pong","data":"{}"}"#
    );
}

/// pusher-js with herald-resume.mjs on `channel`, subscribed, with the channel's position.
async fn resuming_client(
    s: &Server,
    creds: &crate::pusher_api::Credentials,
    channel: &str,
) -> PusherJs {
    let mut js = PusherJs::start_with(s, creds, &[channel], json!({ "heraldResume": true })).await;
    js.subscribed(&[channel]).await;
    js.until(|l| l["type"] == "position" && l["channel"] == channel)
        .await;
    js
}

/// The `n` of each event on `channel` the client prints until (and with) `last`; panics on
/// an event of another kind.
async fn events_until(js: &mut PusherJs, channel: &str, last: u64) -> Vec<u64> {
    let mut seen = Vec::new();
    loop {
        let e = js.next_event().await;
        assert_eq!(e["channel"], channel, "{e}");
        if e["event"] == "pusher:subscription_succeeded" {
            continue;
        }
        assert_eq!(e["event"], "message", "{e}");
        let n = e["data"]["n"].as_u64().unwrap();
        seen.push(n);
        if n == last {
            return seen;
        }
    }
}

/// Kills the server (its connections with it), publishes `ns` on `channel` while no client can
/// reach it (the server started again on the same data directory on another port), then
/// starts it on its own port again for the clients to reconnect to.
async fn crash_and_publish_while_away(
    s: &mut Server,
    channel: &str,
    ns: std::ops::RangeInclusive<u64>,
) {
    let addr = s.addr;
    s.restart().await;
    for n in ns {
        s.publish(channel, json!({ "n": n })).await;
    }
    s.restart_listening_on(addr).await;
}

#[tokio::test]
async fn pusher_js_resumes_exactly_after_the_server_crashes_and_restarts() {
    let (mut s, creds) = server_with_credentials(None).await;
    let mut js = resuming_client(&s, &creds, "news").await;
    for n in 1..=2 {
        s.publish("news", json!({ "n": n })).await;
    }
    assert_eq!(events_until(&mut js, "news", 2).await, [1, 2]);
    js.until(|l| l["type"] == "position" && l["seq"] == 2).await;

    crash_and_publish_while_away(&mut s, "news", 3..=5).await;
    // pusher-js reconnects and subscribes again with its position: the missed events, in
    // order, then the live one, each once.
    let resumed = js
        .until(|l| l["type"] == "event" && l["event"] == "pusher:subscription_succeeded")
        .await;
    assert_eq!(resumed["channel"], "news", "{resumed}");
    assert_eq!(events_until(&mut js, "news", 5).await, [3, 4, 5]);
    s.publish("news", json!({ "n": 6 })).await;
    assert_eq!(events_until(&mut js, "news", 6).await, [6]);
    js.until(|l| l["type"] == "position" && l["seq"] == 6).await;
    js.exit().await;
}

#[tokio::test]
async fn a_position_older_than_the_history_is_told_and_live_events_follow() {
    let config = "[[namespaces]]\nprefix = \"short-\"\nhistory_size = 1\n";
    let (mut s, creds) = server_with_credentials(Some(config)).await;
    let mut js = resuming_client(&s, &creds, "short-news").await;
    let first = s.publish("short-news", json!({ "n": 1 })).await;
    assert_eq!(events_until(&mut js, "short-news", 1).await, [1]);
    js.until(|l| l["type"] == "position" && l["seq"] == 1).await;

    // Far more than the channel keeps: the first ones are trimmed.
    crash_and_publish_while_away(&mut s, "short-news", 2..=30).await;
    let failed = js
        .until(|l| l["type"] == "event" && l["event"] == "herald:resume_failed")
        .await;
    let epoch = first["epoch"].clone();
    assert_eq!(failed["channel"], "short-news", "{failed}");
    assert_eq!(
        failed["data"],
        json!({ "since": { "epoch": epoch, "seq": 1 }, "epoch": epoch, "seq": 30 }),
        "{failed}"
    );
    // Its listeners were told before any event; the position moves to where the channel
    // stands, and live events follow from there, none of the missed ones replayed.
    js.until(|l| l["type"] == "position" && l["seq"] == 30)
        .await;
    s.publish("short-news", json!({ "n": 31 })).await;
    assert_eq!(events_until(&mut js, "short-news", 31).await, [31]);
    js.exit().await;
}
