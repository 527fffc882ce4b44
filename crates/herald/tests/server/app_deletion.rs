//! Deleting an app through the API (`DELETE /v1/apps/{id}`) deletes its channels, their
//! messages and its retained messages: the store's writer purges them by itself once the app
//! is deleted, in steps, while another app's and the default app's stay.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::{call, Server, API_KEY};

const ADMIN: &str = "app-deletion-admin-key-0123456789";

/// Creates app `id` with the admin key; its publisher key.
async fn create_app(s: &Server, id: &str) -> String {
    let (status, body) = call(s, "POST", "/v1/apps", ADMIN, Some(json!({ "id": id }))).await;
    assert_eq!(status, 201, "{body}");
    body["key"].as_str().unwrap().to_owned()
}

/// Publishes `data` to the channel with `key`'s app.
async fn publish(s: &Server, key: &str, channel: &str, data: Value) {
    let path = format!("/v1/channels/{channel}/messages");
    let (status, body) = call(s, "POST", &path, key, Some(json!({ "data": data }))).await;
    assert_eq!(status, 200, "{body}");
}

/// The rows the database holds of the channels whose full names start with `prefix`:
/// channels, messages, retained messages.
fn rows(s: &Server, prefix: &str) -> (i64, i64, i64) {
    let db = rusqlite::Connection::open_with_flags(
        s.data.join("herald.db"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    let count = |sql: &str| -> i64 { db.query_row(sql, [prefix], |r| r.get(0)).unwrap() };
    (
        count("SELECT count(*) FROM channels WHERE substr(name, 1, length(?1)) = ?1"),
        count(
            "SELECT count(*) FROM messages m JOIN channels c ON c.id = m.channel_id \
             WHERE substr(c.name, 1, length(?1)) = ?1",
        ),
        count("SELECT count(*) FROM retained WHERE substr(channel, 1, length(?1)) = ?1"),
    )
}

#[tokio::test]
async fn deleting_an_app_deletes_its_channels_messages_and_retained_messages() {
    let s = Server::builder()
        .arg("--admin-key")
        .arg(ADMIN)
        .start()
        .await;
    let shop = create_app(&s, "shop").await;
    let other = create_app(&s, "other").await;
    let retained = |text: &str| json!({ "$mqtt": { "text": text, "retain": true } });
    for key in [&shop, &other, &API_KEY.to_string()] {
        for i in 0..5 {
            publish(&s, key, "news", json!({ "n": i })).await;
        }
        publish(&s, key, "home/light", retained("on")).await;
        publish(&s, key, "home/door", retained("shut")).await;
    }
    let (channels, messages, kept) = rows(&s, "shop~");
    assert_eq!((channels, messages, kept), (3, 7, 2), "the app's rows");
    let others = rows(&s, "other~");
    assert_eq!(others, (3, 7, 2));
    let everything = |s: &Server| rows(s, "");

    let before = everything(&s);
    let (status, body) = call(&s, "DELETE", "/v1/apps/shop", ADMIN, None).await;
    assert_eq!(status, 204, "{body}");
    // The writer starts the purge at once (a step every 250 ms while it finds something); the
    // deadline only bounds a test that would otherwise wait for ever.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let left = rows(&s, "shop~");
        if left == (0, 0, 0) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the deleted app's channels, messages and retained messages are still there: {left:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(rows(&s, "other~"), others, "another app's rows stay");
    let after = everything(&s);
    assert_eq!(
        (after.0, after.1, after.2),
        (before.0 - 3, before.1 - 7, before.2 - 2),
        "the default app's rows stay"
    );
    // The default app's channels, through the API: its history and retained message.
    let (status, body) = call(&s, "GET", "/v1/channels/news/messages", API_KEY, None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["messages"].as_array().map(Vec::len), Some(5), "{body}");
}
