//! Topic aliases from the server to a v5 client (herald-mqtt's `topic_aliases.rs`), read with
//! Eclipse Paho, which shows the packets' topic and properties as sent (it does not resolve a
//! server's aliases itself): a client that says a Topic Alias Maximum gets the first message of
//! a topic with its name and an alias, the next ones with the alias and an empty name; aliases
//! are per connection, so a new connection starts over; a client without a maximum gets none.

use serde_json::{json, Value};

use crate::support::mqtt::PahoRun;
use crate::support::Server;

/// Each message of a Paho run as (topic as sent, Topic Alias, payload).
fn received(events: &[Value]) -> Vec<(String, Value, String)> {
    events
        .iter()
        .filter(|e| e["event"] == "message")
        .map(|e| {
            (
                e["topic"].as_str().unwrap_or_default().to_owned(),
                e["properties"]["TopicAlias"].clone(),
                e["payload"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// A Paho run subscribed to `al/{run}/a` and `al/{run}/b` (fresh topics: no retained
/// message), sent two messages on each; its events.
async fn run(server: &Server, token: &str, run: u8, alias_maximum: Option<u16>) -> Vec<Value> {
    let (a, b) = (format!("al/{run}/a"), format!("al/{run}/b"));
    let mut spec = json!({
        "version": "5", "username": "default", "password": token,
        "subscribe": [{ "topic": a, "qos": 1 }, { "topic": b, "qos": 0 }],
        "expect": 4, "timeout": 15
    });
    if let Some(max) = alias_maximum {
        spec["topic_alias_maximum"] = max.into();
    }
    let mut client = PahoRun::start(server.mqtt_addr(), spec);
    client.until("subscribed").await;
    for (topic, n) in [(&a, 1), (&a, 2), (&b, 3), (&b, 4)] {
        server.publish(topic, json!(n)).await;
    }
    let (code, events) = client.finish().await;
    assert_eq!(code, Some(0), "{events:?}");
    events
}

#[tokio::test]
async fn the_second_message_of_a_topic_goes_with_its_alias_and_no_name() {
    let server = Server::builder().mqtt().start().await;
    let token = server.token(&["al/**"], &[]);
    let expected = |run: u8| {
        [
            (format!("al/{run}/a"), json!(1), "1".to_owned()),
            (String::new(), json!(1), "2".to_owned()),
            (format!("al/{run}/b"), json!(2), "3".to_owned()),
            (String::new(), json!(2), "4".to_owned()),
        ]
    };
    let events = run(&server, &token, 1, Some(5)).await;
    assert_eq!(received(&events), expected(1), "{events:?}");
    // A new connection has no aliases yet: it is sent the names again.
    let events = run(&server, &token, 2, Some(5)).await;
    assert_eq!(received(&events), expected(2), "{events:?}");
    // Within the client's maximum: one alias, the first topic's.
    let events = run(&server, &token, 3, Some(1)).await;
    assert_eq!(
        received(&events),
        [
            ("al/3/a".to_owned(), json!(1), "1".to_owned()),
            (String::new(), json!(1), "2".to_owned()),
            ("al/3/b".to_owned(), Value::Null, "3".to_owned()),
            ("al/3/b".to_owned(), Value::Null, "4".to_owned()),
        ],
        "{events:?}"
    );
    // A client that takes no aliases is sent none.
    let events = run(&server, &token, 4, None).await;
    assert!(
        received(&events)
            .iter()
            .all(|(topic, alias, _)| !topic.is_empty() && alias.is_null()),
        "{events:?}"
    );
}

#[tokio::test]
async fn max_topic_aliases_out_0_sets_none() {
    let server = Server::builder()
        .mqtt()
        .env("HERALD_MQTT_MAX_TOPIC_ALIASES_OUT", "0")
        .start()
        .await;
    let token = server.token(&["al/**"], &[]);
    let events = run(&server, &token, 1, Some(5)).await;
    assert!(
        received(&events)
            .iter()
            .all(|(topic, alias, _)| !topic.is_empty() && alias.is_null()),
        "{events:?}"
    );
}
