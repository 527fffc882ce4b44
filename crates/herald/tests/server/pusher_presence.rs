//! Pusher presence channels against the real binary: pusher-js 8.6.0 clients (`client.mjs`,
//! authorised with the `pusher` Node SDK's `authorizeChannel` and their `channel_data`) see the
//! members list, one member per user id however many connections it holds (a second
//! connection of a user adds nobody, `member_removed` comes when its last one leaves), a
//! numeric `user_id` as Laravel sends it, client events carrying the sender's `user_id`, and
//! Herald's own presence API listing the same members. Raw WebSockets check what pusher-js
//! does not show: the member limit (`[pusher] presence_max_members`) answered with
//! `LimitReached`, a refused `channel_data`, and the `user_id` kept in the log's envelope.

use serde_json::{json, Value};

use crate::pusher_api::{history, Credentials};
use crate::pusher_client::{established, event, event_of, server_with_credentials, PusherJs};
use crate::support::{call, Server, Ws, API_KEY};

/// The member data `client.mjs` authorises its presence channels with.
fn user(id: Value, info: Value) -> Value {
    json!({ "user": { "user_id": id, "user_info": info } })
}

/// The users Herald's presence API lists for the default app's `channel`, with their data.
async fn herald_members(s: &Server, channel: &str) -> Vec<(String, Value)> {
    let path = format!("/v1/channels/{channel}/presence");
    let (status, body) = call(s, "GET", &path, API_KEY, None).await;
    assert_eq!(status, 200, "{body}");
    body["members"]
        .as_array()
        .unwrap_or_else(|| panic!("{body}"))
        .iter()
        .map(|m| (m["user"].as_str().unwrap().to_owned(), m["data"].clone()))
        .collect()
}

#[tokio::test]
async fn presence_members_are_one_per_user_for_pusher_js_and_herald() {
    let (s, creds) = server_with_credentials(None).await;
    let ann = user(json!("ann"), json!({ "name": "Ann" }));
    let mut ann1 = PusherJs::start_with(&s, &creds, &["presence-room"], ann.clone()).await;
    let first = ann1.next_event().await;
    assert_eq!(first["event"], "pusher:subscription_succeeded", "{first}");
    assert_eq!(first["data"]["count"], 1, "{first}");
    assert_eq!(
        first["data"]["members"],
        json!({ "ann": { "name": "Ann" } }),
        "{first}"
    );
    assert_eq!(
        first["data"]["me"],
        json!({ "id": "ann", "info": { "name": "Ann" } })
    );

    // A numeric user id, as Laravel sends it.
    let bob = user(json!(42), json!({ "name": "Bob" }));
    let mut bob = PusherJs::start_with(&s, &creds, &["presence-room"], bob).await;
    let joined = bob.next_event().await;
    assert_eq!(joined["event"], "pusher:subscription_succeeded", "{joined}");
    assert_eq!(joined["data"]["count"], 2, "{joined}");
    assert_eq!(
        joined["data"]["members"],
        json!({ "ann": { "name": "Ann" }, "42": { "name": "Bob" } }),
        "{joined}"
    );
    assert_eq!(joined["data"]["me"]["info"], json!({ "name": "Bob" }));
    assert_eq!(
        event_of(&ann1.next_event().await),
        event(
            "presence-room",
            "pusher:member_added",
            json!({ "id": "42", "info": { "name": "Bob" } })
        )
    );

    // Ann's second connection is no new member: nobody is told, the count stays 2.
    let mut ann2 = PusherJs::start_with(&s, &creds, &["presence-room"], ann).await;
    let again = ann2.next_event().await;
    assert_eq!(again["event"], "pusher:subscription_succeeded", "{again}");
    assert_eq!(again["data"]["count"], 2, "{again}");
    s.publish("presence-room", json!("marker-1")).await;
    for js in [&mut ann1, &mut bob] {
        assert_eq!(
            event_of(&js.next_event().await),
            event("presence-room", "message", json!("marker-1"))
        );
    }
    // Herald's presence API lists the same members, in the order they joined.
    assert_eq!(
        herald_members(&s, "presence-room").await,
        vec![
            ("ann".to_owned(), json!({ "name": "Ann" })),
            ("42".to_owned(), json!({ "name": "Bob" })),
        ]
    );

    // A client event carries its sender's user id, which pusher-js hands its listeners.
    ann1.send(json!({ "listen": { "channel": "presence-room", "event": "client-hi" } }))
        .await;
    ann1.until(|l| l["type"] == "listening").await;
    bob.send(json!({ "trigger": {
        "channel": "presence-room", "event": "client-hi", "data": { "x": 1 }
    }}))
    .await;
    let triggered = bob.until(|l| l["type"] == "triggered").await;
    assert_eq!(triggered["ok"], true, "{triggered}");
    let heard = ann1.until(|l| l["type"] == "listened").await;
    assert_eq!(heard["data"], json!({ "x": 1 }), "{heard}");
    assert_eq!(heard["user_id"], "42", "{heard}");

    // Ann's first connection leaves: she is still a member through the second.
    ann1.exit().await;
    s.publish("presence-room", json!("marker-2")).await;
    assert_eq!(
        event_of(&bob.next_event().await),
        event("presence-room", "message", json!("marker-2"))
    );
    // Her last connection leaves: Bob is told once.
    ann2.exit().await;
    assert_eq!(
        event_of(&bob.next_event().await),
        event(
            "presence-room",
            "pusher:member_removed",
            json!({ "id": "ann", "info": { "name": "Ann" } })
        )
    );
    s.publish("presence-room", json!("marker-3")).await;
    assert_eq!(
        event_of(&bob.next_event().await),
        event("presence-room", "message", json!("marker-3"))
    );
    assert_eq!(
        herald_members(&s, "presence-room").await,
        vec![("42".to_owned(), json!({ "name": "Bob" }))]
    );
    bob.exit().await;
}

/// Sends a presence subscribe of `channel` with `channel_data`, signed over `signed_data`.
pub(crate) async fn subscribe_presence(
    ws: &mut Ws,
    creds: &Credentials,
    socket_id: &str,
    channel: &str,
    channel_data: &str,
    signed_data: &str,
) {
    let auth = herald_pusher::signature::key_signature(
        &creds.key,
        creds.secret.as_bytes(),
        &format!("{socket_id}:{channel}:{signed_data}"),
    );
    ws.send(json!({ "event": "pusher:subscribe", "data": {
        "channel": channel, "auth": auth, "channel_data": channel_data,
    }}))
    .await;
}

/// A frame's `data` string, parsed.
pub(crate) fn data_of(frame: &Value) -> Value {
    serde_json::from_str(frame["data"].as_str().unwrap_or_else(|| panic!("{frame}"))).unwrap()
}

#[tokio::test]
async fn the_member_limit_and_channel_data_are_checked_and_client_events_name_the_user() {
    let (s, creds) = server_with_credentials(Some("[pusher]\npresence_max_members = 1\n")).await;
    let room = "presence-full";
    let (mut one, one_socket) = established(&s, &creds).await;
    let data = r#"{"user_id":1}"#;
    subscribe_presence(&mut one, &creds, &one_socket, room, data, data).await;
    let ok = one.frame().await;
    assert_eq!(
        ok["event"], "pusher_internal:subscription_succeeded",
        "{ok}"
    );
    assert_eq!(ok["channel"], room, "{ok}");
    assert_eq!(
        data_of(&ok),
        json!({ "presence": { "ids": ["1"], "hash": { "1": {} }, "count": 1 } })
    );

    // A second user: the channel is full.
    let (mut two, two_socket) = established(&s, &creds).await;
    let data = r#"{"user_id":"2","user_info":{"n":2}}"#;
    subscribe_presence(&mut two, &creds, &two_socket, room, data, data).await;
    let refused = two.frame().await;
    assert_eq!(refused["event"], "pusher:subscription_error", "{refused}");
    assert_eq!(refused["data"]["type"], "LimitReached", "{refused}");
    assert_eq!(refused["data"]["status"], 4100, "{refused}");

    // The same user as a string is the same member: room for it.
    let (mut three, three_socket) = established(&s, &creds).await;
    let data = r#"{"user_id":"1","user_info":{"again":true}}"#;
    subscribe_presence(&mut three, &creds, &three_socket, room, data, data).await;
    let ok = three.frame().await;
    assert_eq!(
        ok["event"], "pusher_internal:subscription_succeeded",
        "{ok}"
    );
    assert_eq!(data_of(&ok)["presence"]["count"], 1, "{ok}");

    // Refused channel data: none, signed over other data, no user id.
    for (given, signed, kind) in [
        (None, r#"{"user_id":"3"}"#, "AuthError"),
        (
            Some(r#"{"user_id":"3"}"#),
            r#"{"user_id":"4"}"#,
            "AuthError",
        ),
        (
            Some(r#"{"user_info":{}}"#),
            r#"{"user_info":{}}"#,
            "InvalidChannelData",
        ),
    ] {
        match given {
            Some(given) => {
                subscribe_presence(&mut two, &creds, &two_socket, "presence-b", given, signed).await
            }
            None => {
                two.send(json!({ "event": "pusher:subscribe", "data": {
                    "channel": "presence-b", "auth": format!("{}:00", creds.key),
                }}))
                .await
            }
        }
        let e = two.frame().await;
        assert_eq!(e["event"], "pusher:subscription_error", "{given:?}: {e}");
        assert_eq!(e["data"]["type"], kind, "{given:?}: {e}");
    }

    // A client event on a presence channel names its sender's user id, for Pusher
    // subscribers and in the log's envelope.
    one.send(json!({ "event": "client-wave", "channel": room, "data": { "w": 1 } }))
        .await;
    let heard = three.frame().await;
    assert_eq!(
        heard,
        json!({ "event": "client-wave", "channel": room, "data": r#"{"w":1}"#, "user_id": "1" })
    );
    assert_eq!(
        history(&s, room, API_KEY).await,
        vec![json!({ "$pusher": {
            "event": "client-wave", "data": r#"{"w":1}"#, "socket_id": one_socket, "user_id": "1",
        }})]
    );
}
