//! The subscriber against a server that predates batches (a mock answering as Herald did before
//! 30 Nov 2026: a JSON array is one `bad_request` error without an id, `frame is not a JSON
//! object`, and nothing of it runs): the refused batches' commands are sent again one a message,
//! in order, each once, and the subscriber goes on as if nothing happened.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use herald_client::subscriber::{Event, Subscriber};
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio_tungstenite::tungstenite::Message;

/// What the mock saw: how many arrays, and each single command's name (with the channel of a
/// subscribe), in order.
#[derive(Default)]
struct Seen {
    arrays: usize,
    commands: Vec<String>,
}

/// Serves WebSocket connections as the old server did; answers `connect`, `subscribe`, `ping`.
async fn old_server() -> (String, Arc<Mutex<Seen>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Seen::default()));
    let record = seen.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let record = record.clone();
            tokio::spawn(async move {
                let Ok(mut ws) = tokio_tungstenite::accept_async(stream).await else {
                    return;
                };
                while let Some(Ok(Message::Text(text))) = ws.next().await {
                    let reply = answer(text.as_str(), &record);
                    if ws.send(Message::text(reply.to_string())).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (url, seen)
}

fn answer(text: &str, seen: &Mutex<Seen>) -> Value {
    let mut seen = seen.lock().unwrap();
    if text.starts_with('[') {
        seen.arrays += 1;
        let message =
            "frame is not a JSON object: invalid type: sequence, expected a map at line 1 column 0";
        return json!({"error": {"code": "bad_request", "message": message}});
    }
    let command: Value = serde_json::from_str(text).unwrap();
    let id = command["id"].clone();
    if command.get("connect").is_some() {
        seen.commands.push("connect".into());
        return json!({"id": id, "connect": {"sub": "old"}});
    }
    if let Some(channel) = command["subscribe"]["channel"].as_str() {
        seen.commands.push(format!("subscribe {channel}"));
        let reply = json!({"channel": channel, "seq": 0, "epoch": "", "recovered": false});
        return json!({"id": id, "subscribe": reply});
    }
    seen.commands.push(text.to_owned());
    json!({"id": id, "pong": {}})
}

#[tokio::test]
async fn refused_batches_are_sent_again_one_command_a_message() {
    let (url, seen) = old_server().await;
    let channels: Vec<String> = (0..150).map(|i| format!("old/c{i}")).collect();
    let mut builder = Subscriber::builder(url).token("t").reconnect(false);
    for channel in &channels {
        builder = builder.channel(channel);
    }
    let mut subscriber = builder.build().unwrap();
    let mut subscribed = Vec::new();
    while subscribed.len() < channels.len() {
        let event = tokio::time::timeout(Duration::from_secs(10), subscriber.next())
            .await
            .expect("timed out");
        match event {
            Ok(Event::Subscribed(s)) => subscribed.push(s.channel),
            Ok(Event::Connected(_)) => {}
            Ok(other) => panic!("unexpected {other:?}"),
            Err(stopped) => panic!("stopped: {stopped}"),
        }
    }
    assert_eq!(subscribed, channels);
    let seen = seen.lock().unwrap();
    assert_eq!(
        seen.arrays, 2,
        "the connect and 150 subscribes tried in two batches, each refused"
    );
    let expected: Vec<String> = std::iter::once("connect".to_owned())
        .chain(channels.iter().map(|c| format!("subscribe {c}")))
        .collect();
    assert_eq!(
        seen.commands, expected,
        "then each command once, alone, in order"
    );
}
