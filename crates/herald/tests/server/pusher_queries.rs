//! Pusher's HTTP API queries against the real binary, through the official Node SDK
//! (`pusher.get`) and Python SDK (`channels_info`, `channel_info`, `users_info`): the occupied
//! channels with `filter_by_prefix`, `info=user_count` (presence channels only, refused
//! otherwise as Pusher refuses it) and `info=subscription_count`; one channel's `occupied`,
//! `user_count` and `subscription_count`; a presence channel's users (one per user id however
//! many connections), 400 for any other channel; `info=user_count` on a trigger; the counts
//! following a user who leaves.

use serde_json::{json, Value};

use crate::pusher_api::{run, trigger, Credentials, Sdk};
use crate::pusher_client::{established, server_with_credentials};
use crate::pusher_presence::{data_of, subscribe_presence};
use crate::support::{Server, Ws};

/// A raw Pusher connection subscribed to the presence channel `channel` as `user_id`.
async fn member(s: &Server, creds: &Credentials, channel: &str, user_id: Value) -> Ws {
    let (mut ws, socket) = established(s, creds).await;
    let data = json!({ "user_id": user_id }).to_string();
    subscribe_presence(&mut ws, creds, &socket, channel, &data, &data).await;
    let ok = ws.frame().await;
    assert_eq!(
        ok["event"], "pusher_internal:subscription_succeeded",
        "{ok}"
    );
    assert!(data_of(&ok)["presence"]["count"].is_u64(), "{ok}");
    ws
}

/// A raw Pusher connection subscribed to the public channel `channel`.
async fn subscriber(s: &Server, creds: &Credentials, channel: &str) -> Ws {
    let (mut ws, _) = established(s, creds).await;
    ws.send(json!({ "event": "pusher:subscribe", "data": { "channel": channel } }))
        .await;
    let ok = ws.frame().await;
    assert_eq!(
        ok["event"], "pusher_internal:subscription_succeeded",
        "{ok}"
    );
    ws
}

/// `GET /apps/{id}{path}` with `params` through the Node SDK: the status and the body (JSON,
/// or the refusal's text as a string).
async fn get(s: &Server, creds: &Credentials, path: &str, params: Value) -> (u16, Value) {
    let order = json!({ "get": { "path": path, "params": params } });
    let (status, body) = run(Sdk::Node, s, creds, order).await;
    (
        status,
        serde_json::from_str(&body).unwrap_or(Value::String(body)),
    )
}

/// One query through the Python SDK: the status and the body.
async fn python(s: &Server, creds: &Credentials, order: Value) -> (u16, Value) {
    let (status, body) = run(Sdk::Python, s, creds, order).await;
    (
        status,
        serde_json::from_str(&body).unwrap_or(Value::String(body)),
    )
}

#[tokio::test]
async fn channel_queries_count_users_and_subscriptions_through_both_sdks() {
    let (s, creds) = server_with_credentials(None).await;
    // User 1 twice, user "2" once, on presence-room; one subscription of news.
    let _one = member(&s, &creds, "presence-room", json!(1)).await;
    let _one_again = member(&s, &creds, "presence-room", json!("1")).await;
    let mut two = member(&s, &creds, "presence-room", json!("2")).await;
    let _news = subscriber(&s, &creds, "news").await;

    let ok = |answer: (u16, Value)| {
        assert_eq!(answer.0, 200, "{}", answer.1);
        answer.1
    };
    let refused = |answer: (u16, Value), says: &str| {
        assert_eq!(answer.0, 400, "{}", answer.1);
        assert!(answer.1.to_string().contains(says), "{}", answer.1);
    };
    assert_eq!(
        ok(get(&s, &creds, "/channels", json!({})).await),
        json!({ "channels": { "news": {}, "presence-room": {} } })
    );
    assert_eq!(
        ok(get(
            &s,
            &creds,
            "/channels",
            json!({ "filter_by_prefix": "presence-", "info": "user_count" })
        )
        .await),
        json!({ "channels": { "presence-room": { "user_count": 2 } } })
    );
    assert_eq!(
        ok(get(
            &s,
            &creds,
            "/channels",
            json!({ "info": "subscription_count" })
        )
        .await),
        json!({ "channels": {
            "news": { "subscription_count": 1 },
            "presence-room": { "subscription_count": 3 },
        }})
    );
    refused(
        get(&s, &creds, "/channels", json!({ "info": "user_count" })).await,
        "Invalid info attribute user_count",
    );
    assert_eq!(
        ok(get(
            &s,
            &creds,
            "/channels/presence-room",
            json!({ "info": "user_count,subscription_count" })
        )
        .await),
        json!({ "occupied": true, "user_count": 2, "subscription_count": 3 })
    );
    assert_eq!(
        ok(get(&s, &creds, "/channels/news", json!({})).await),
        json!({ "occupied": true })
    );
    assert_eq!(
        ok(get(
            &s,
            &creds,
            "/channels/empty",
            json!({ "info": "subscription_count" })
        )
        .await),
        json!({ "occupied": false, "subscription_count": 0 })
    );
    refused(
        get(
            &s,
            &creds,
            "/channels/news",
            json!({ "info": "user_count" }),
        )
        .await,
        "not a presence channel",
    );
    assert_eq!(
        ok(get(&s, &creds, "/channels/presence-room/users", json!({})).await),
        json!({ "users": [{ "id": "1" }, { "id": "2" }] })
    );
    refused(
        get(&s, &creds, "/channels/news/users", json!({})).await,
        "not a presence channel",
    );
    // A trigger's info.
    let mut order = trigger(&["presence-room"], "e", "d");
    order["trigger"]["info"] = json!("user_count,subscription_count");
    let (status, body) = run(Sdk::Node, &s, &creds, order).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap(),
        json!({ "channels": { "presence-room": { "user_count": 2, "subscription_count": 3 } } })
    );

    // The Python SDK's queries.
    assert_eq!(
        ok(python(
            &s,
            &creds,
            json!({ "channels_info": { "prefix": "presence-", "attributes": ["user_count"] } })
        )
        .await),
        json!({ "channels": { "presence-room": { "user_count": 2 } } })
    );
    assert_eq!(
        ok(python(
            &s,
            &creds,
            json!({ "channel_info": { "channel": "presence-room", "attributes": ["user_count"] } })
        )
        .await),
        json!({ "occupied": true, "user_count": 2 })
    );
    assert_eq!(
        ok(python(
            &s,
            &creds,
            json!({ "users_info": { "channel": "presence-room" } })
        )
        .await),
        json!({ "users": [{ "id": "1" }, { "id": "2" }] })
    );

    // User "2" leaves (its unsubscribe is read before the pong that follows it).
    two.send(json!({ "event": "pusher:unsubscribe", "data": { "channel": "presence-room" } }))
        .await;
    two.send(json!({ "event": "pusher:ping", "data": {} }))
        .await;
    loop {
        if two.frame().await["event"] == "pusher:pong" {
            break;
        }
    }
    assert_eq!(
        ok(get(&s, &creds, "/channels/presence-room/users", json!({})).await),
        json!({ "users": [{ "id": "1" }] })
    );
    assert_eq!(
        ok(get(
            &s,
            &creds,
            "/channels/presence-room",
            json!({ "info": "user_count,subscription_count" })
        )
        .await),
        json!({ "occupied": true, "user_count": 1, "subscription_count": 2 })
    );
}
