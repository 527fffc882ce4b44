//! One-message publishes served without hyper: a connection whose requests are whole
//! `POST /v1/channels/{name}/messages` is answered by `herald_edge::direct_publish`'s loop until
//! its first other request, which hyper answers with everything after it. Both paths must
//! answer alike and store alike. These tests speak HTTP over raw sockets, so which path
//! serves a request is under their control: a connection's first request decides.

use crate::support;

use std::time::Duration;

use serde_json::Value;
use support::raw::{Head, Raw};
use support::{Server, API_KEY};

/// A publish request to `channel` with `body` and extra header lines.
fn publish(channel: &str, body: &str, extra: &str) -> Vec<u8> {
    format!(
        "POST /v1/channels/{channel}/messages HTTP/1.1\r\nHost: herald\r\n\
         Authorization: Bearer {API_KEY}\r\nContent-Type: application/json\r\n{extra}\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// A connection whose requests all go through hyper: it first carried another request.
async fn through_hyper(server: &Server) -> Raw {
    let mut raw = Raw::connect(server).await;
    raw.send(b"GET /healthz HTTP/1.1\r\nHost: herald\r\n\r\n")
        .await;
    let head = raw.head().await;
    assert_eq!(head.status, 200);
    raw.body(&head).await;
    raw
}

/// Sends `request` and reads the answer: status, header names but `date` (in order), body.
async fn ask(raw: &mut Raw, request: &[u8]) -> (u16, Vec<String>, Value) {
    raw.send(request).await;
    answer(raw).await
}

async fn answer(raw: &mut Raw) -> (u16, Vec<String>, Value) {
    let head: Head = raw.head().await;
    let body = raw.body(&head).await;
    let names = head
        .headers
        .iter()
        .map(|(k, _)| k.clone())
        .filter(|k| k != "date")
        .collect();
    assert!(head.get("date").is_some(), "every answer has a date");
    (head.status, names, body)
}

/// The `data` of every message `channel` holds.
async fn stored_data(server: &Server, channel: &str) -> Vec<Value> {
    let (status, answer) = server
        .get(&format!("/v1/channels/{channel}/messages"))
        .await;
    assert_eq!(status, 200, "{answer}");
    answer["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["data"].clone())
        .collect()
}

/// `herald_http_direct_publishes_total` of `server`.
async fn direct_publishes(server: &Server) -> u64 {
    let text = server.metrics().await;
    text.lines()
        .find_map(|l| l.strip_prefix("herald_http_direct_publishes_total "))
        .map_or(0, |v| v.trim().parse().unwrap())
}

/// What must be equal between two answers to the same request on different channels: the
/// status, the headers' names, and the body with the parts that name the channel or the moment
/// (seq, time, id, epoch) reduced to their kind.
fn shape((status, names, body): &(u16, Vec<String>, Value)) -> (u16, Vec<String>, Value) {
    let mut body = body.clone();
    if let Some(object) = body.as_object_mut() {
        for (key, value) in object.iter_mut() {
            if ["channel", "id", "epoch"].contains(&key.as_str()) {
                *value = Value::String("<text>".into());
            } else if ["seq", "time"].contains(&key.as_str()) {
                *value = Value::String("<number>".into());
            }
        }
    }
    (*status, names.clone(), body)
}

#[tokio::test]
async fn a_publish_connection_answers_as_hyper_does_and_stores_the_same() {
    // Two servers, so both paths see the same channels in the same states.
    let start = || {
        Server::builder()
            .env("HERALD_MAX_FRAME_BYTES", "1024")
            .start()
    };
    let (one, two) = (start().await, start().await);
    let big = format!("{{\"data\":\"{}\"}}", "x".repeat(6000));
    let requests: Vec<(&str, String, &str)> = vec![
        ("ok", r#"{"data":{"n":1}}"#.into(), ""),
        ("ok", r#"{"data":2,"id":"same"}"#.into(), ""),
        ("ok", r#"{"data":2,"id":"same"}"#.into(), ""),
        ("ok", r#"{"data":3}"#.into(), "Idempotency-Key: k1\r\n"),
        (
            "ok",
            r#"{"data":3,"id":"k2"}"#.into(),
            "Idempotency-Key: k3\r\n",
        ),
        ("ok", r#"{"data":"#.into(), ""),
        ("ok", r#"{"data":1,"extra":2}"#.into(), ""),
        ("ok", "[1]".into(), ""),
        ("ok", "".into(), ""),
        ("ok", big, ""),
        ("bad*name", r#"{"data":1}"#.into(), ""),
        ("a//b", r#"{"data":1}"#.into(), ""),
        ("$reserved", r#"{"data":1}"#.into(), ""),
        (
            "ok",
            r#"{"data":1}"#.into(),
            "X-Herald-App: some-other-app\r\n",
        ),
    ];
    let mut direct = Raw::connect(&one).await;
    let mut hyper = through_hyper(&two).await;
    for (i, (channel, body, extra)) in requests.iter().enumerate() {
        let a = ask(&mut direct, &publish(channel, body, extra)).await;
        let b = ask(&mut hyper, &publish(channel, body, extra)).await;
        assert_eq!(
            shape(&a),
            shape(&b),
            "request {i}: {body:.60} with {extra:?}"
        );
    }
    // A wrong key, on fresh connections.
    let wrong = String::from_utf8(publish("ok", r#"{"data":1}"#, ""))
        .unwrap()
        .replace(API_KEY, "not-the-key");
    let a = ask(&mut Raw::connect(&one).await, wrong.as_bytes()).await;
    let b = ask(&mut through_hyper(&two).await, wrong.as_bytes()).await;
    assert_eq!(a.0, 401);
    assert_eq!(shape(&a), shape(&b));
    // Both channels hold the same messages.
    let stored = stored_data(&one, "ok").await;
    assert_eq!(stored, stored_data(&two, "ok").await);
    // And the paths were the ones meant: every request on `one` answered directly, none on `two`.
    assert_eq!(direct_publishes(&one).await, requests.len() as u64 + 1);
    assert_eq!(direct_publishes(&two).await, 0);
    assert_eq!(stored.len(), 3, "{stored:?}");
}

#[tokio::test]
async fn a_connection_moves_to_hyper_at_its_first_other_request() {
    let server = Server::start().await;
    let mut raw = Raw::connect(&server).await;
    for n in 1..=3 {
        let (status, _, body) = ask(
            &mut raw,
            &publish("moves", &format!(r#"{{"data":{n}}}"#), ""),
        )
        .await;
        assert_eq!((status, body["seq"].as_u64()), (200, Some(n)));
    }
    // Another route on the same connection: hyper answers it, and what follows.
    let get = format!(
        "GET /v1/channels/moves/messages HTTP/1.1\r\nHost: herald\r\nAuthorization: Bearer {API_KEY}\r\n\r\n"
    );
    assert_eq!(direct_publishes(&server).await, 3);
    let (status, _, body) = ask(&mut raw, get.as_bytes()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["messages"].as_array().unwrap().len(), 3);
    let (status, _, body) = ask(&mut raw, &publish("moves", r#"{"data":4}"#, "")).await;
    assert_eq!((status, body["seq"].as_u64()), (200, Some(4)));
    assert_eq!(
        direct_publishes(&server).await,
        3,
        "hyper answered the fourth"
    );
    // A publish to a route that is not one (no `/messages`) is hyper's too.
    let mut raw = Raw::connect(&server).await;
    let not_one = String::from_utf8(publish("moves", r#"{"data":1}"#, ""))
        .unwrap()
        .replace("/moves/messages", "/moves");
    let (status, _, body) = ask(&mut raw, not_one.as_bytes()).await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(body["error"]["code"], "not_found");
}

#[tokio::test]
async fn pipelined_publishes_are_answered_in_order() {
    let server = Server::start().await;
    let mut raw = Raw::connect(&server).await;
    let mut requests = Vec::new();
    for n in 1..=5 {
        requests.extend(publish("piped", &format!(r#"{{"data":{n}}}"#), ""));
    }
    raw.send(&requests).await;
    for n in 1..=5u64 {
        let (status, _, body) = answer(&mut raw).await;
        assert_eq!((status, body["seq"].as_u64()), (200, Some(n)), "{body}");
    }
}

#[tokio::test]
async fn a_publish_whose_body_comes_later_or_that_closes_is_still_answered() {
    let server = Server::start().await;
    // Head first, body later: hyper reads the rest.
    let mut raw = Raw::connect(&server).await;
    let request = publish("later", r#"{"data":"late"}"#, "");
    let split = request.len() - 5;
    raw.send(&request[..split]).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (status, _, body) = ask(&mut raw, &request[split..]).await;
    assert_eq!((status, body["seq"].as_u64()), (200, Some(1)), "{body}");
    // `Connection: close`: answered, then closed.
    let mut raw = Raw::connect(&server).await;
    let (status, _, body) = ask(
        &mut raw,
        &publish("later", r#"{"data":2}"#, "Connection: close\r\n"),
    )
    .await;
    assert_eq!((status, body["seq"].as_u64()), (200, Some(2)), "{body}");
    assert!(
        !raw.fill().await,
        "the connection stays open after Connection: close"
    );
    // A client that closes after its publish: the publish is stored.
    let mut raw = Raw::connect(&server).await;
    raw.send(&publish("later", r#"{"data":3}"#, "")).await;
    let (status, _, _) = answer(&mut raw).await;
    assert_eq!(status, 200);
    drop(raw);
    assert_eq!(server.publish("later", Value::from(4)).await["seq"], 4);
}

/// A chunked publish whose chunk-size line is `size_line`, on `channel`.
fn chunked_publish(channel: &str, size_line: &str) -> Vec<u8> {
    format!(
        "POST /v1/channels/{channel}/messages HTTP/1.1\r\nHost: herald\r\n\
         Authorization: Bearer {API_KEY}\r\nContent-Type: application/json\r\n\
         Transfer-Encoding: chunked\r\n\r\n{size_line}\r\n{{\"data\":1}}\r\n0\r\n\r\n"
    )
    .into_bytes()
}

#[tokio::test]
async fn a_malformed_chunk_size_is_a_bad_request_on_every_path() {
    let server = Server::start().await;
    for size_line in ["zz", "-1", "a b", "fffffffffffffffffffff"] {
        // Three ways in: a connection's first request (the direct loop hands a chunked body to
        // hyper at once), after direct publishes, and on a connection that is hyper's already.
        let mut fresh = Raw::connect(&server).await;
        let mut after_direct = Raw::connect(&server).await;
        let (status, _, body) =
            ask(&mut after_direct, &publish("chunks", r#"{"data":0}"#, "")).await;
        assert_eq!(status, 200, "{body}");
        let mut hyper = through_hyper(&server).await;
        for (path, raw) in [
            ("first request", &mut fresh),
            ("after a direct publish", &mut after_direct),
            ("through hyper", &mut hyper),
        ] {
            let (status, _, body) = ask(raw, &chunked_publish("chunks", size_line)).await;
            assert_eq!(
                (status, body["error"]["code"].as_str()),
                (400, Some("bad_request")),
                "{size_line:?}, {path}: {body}"
            );
            let message = body["error"]["message"].as_str().unwrap();
            assert!(
                message.contains("chunked"),
                "{size_line:?}, {path}: {message}"
            );
            assert!(
                !raw.fill().await,
                "{path}: the connection is closed, as the message says"
            );
        }
    }
    // Nothing of a malformed body was stored; the direct publishes were.
    assert_eq!(stored_data(&server, "chunks").await.len(), 4);
    // A well-formed chunked publish is still stored.
    let mut raw = Raw::connect(&server).await;
    let (status, _, body) = ask(&mut raw, &chunked_publish("chunks", "a")).await;
    assert_eq!((status, body["seq"].as_u64()), (200, Some(5)), "{body}");
}
