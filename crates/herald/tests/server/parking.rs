//! Parked connections (docs/design/idle-connections.md) against the real binary: with
//! `park_idle_after` shortened, WebSocket connections and directly served SSE streams that
//! have nothing to do leave their task (`herald_connections_parked` counts them), and still
//! get every message in order, keep-alive pings, answers to their commands, and the usual
//! goodbye on revocation, token expiry and shutdown. Tests wait for the gauge, never a time.

use std::time::Duration;

use futures_util::StreamExt;
use herald_proto::token::{mint, ClientClaims};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;

use crate::support::{call, Server, Ws, SECRET};

const ADMIN: &str = "admin-key-0123456789abcdef";

async fn server(extra_env: &[(&str, &str)]) -> Server {
    let mut b = Server::builder()
        .arg("--admin-key")
        .arg(ADMIN)
        .env("HERALD_PARK_IDLE_AFTER", "100ms");
    for (k, v) in extra_env {
        b = b.env(k, v);
    }
    b.start().await
}

/// How many connections are parked, from `/metrics`.
async fn parked(s: &Server) -> u64 {
    let text = s.metrics().await;
    text.lines()
        .find_map(|l| l.strip_prefix("herald_connections_parked "))
        .map_or(0, |v| v.trim().parse::<f64>().unwrap_or(0.0) as u64)
}

/// How many times parked connections were given a task again, from `/metrics`.
async fn revivals(s: &Server) -> u64 {
    let text = s.metrics().await;
    text.lines()
        .find_map(|l| l.strip_prefix("herald_connections_revived_total "))
        .map_or(0, |v| v.trim().parse::<u64>().unwrap_or(0))
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

/// A default-app token for `sub` reading `news`, expiring at `exp` if given.
fn token(sub: &str, exp: Option<u64>) -> String {
    mint(
        SECRET.as_bytes(),
        &ClientClaims {
            sub: sub.into(),
            exp,
            channels: vec!["news".into()],
            ..Default::default()
        },
    )
}

/// A WebSocket subscribed to `news`, parked.
async fn parked_ws(s: &Server, token: &str, parked_before: u64) -> Ws {
    let mut ws = Ws::connect(&s.ws_url(&format!("?token={token}"))).await;
    let reply = ws.request("subscribe", json!({ "channel": "news" })).await;
    assert!(reply.get("subscribe").is_some(), "{reply}");
    wait_parked(s, parked_before + 1).await;
    ws
}

/// An SSE stream served without hyper (a fresh connection whose first request is the stream).
struct RawSse {
    tcp: TcpStream,
    buf: Vec<u8>,
}

impl RawSse {
    async fn open(s: &Server, query: &str) -> RawSse {
        let mut tcp = TcpStream::connect(s.addr).await.unwrap();
        let request = format!("GET /v1/sse{query} HTTP/1.1\r\nhost: herald\r\n\r\n");
        tcp.write_all(request.as_bytes()).await.unwrap();
        let mut sse = RawSse {
            tcp,
            buf: Vec::new(),
        };
        let head = sse.block().await.expect("a response head");
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        sse
    }

    /// The next block up to a blank line (the head, an event or a comment); None at the end.
    async fn block(&mut self) -> Option<String> {
        loop {
            let text = String::from_utf8_lossy(&self.buf).into_owned();
            let end = text.find("\r\n\r\n").map(|i| i + 4).or_else(|| {
                let i = text.find("\n\n")?;
                Some(i + 2)
            });
            if let Some(end) = end {
                self.buf.drain(..end);
                return Some(text[..end].trim().to_owned());
            }
            let mut chunk = [0u8; 4096];
            let read = tokio::time::timeout(Duration::from_secs(10), self.tcp.read(&mut chunk))
                .await
                .expect("timed out waiting for SSE data");
            match read {
                Ok(0) | Err(_) => return None,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
            }
        }
    }

    /// The next event named `name` (skipping others and comments): its data as JSON.
    async fn until(&mut self, name: &str) -> Value {
        loop {
            let block = self
                .block()
                .await
                .unwrap_or_else(|| panic!("no {name} event"));
            let named = block.lines().find_map(|l| l.strip_prefix("event: "));
            let has_data = block.lines().any(|l| l.starts_with("data: "));
            let this = match named {
                Some(n) => n,
                None if has_data => "message",
                None => "",
            };
            if this == name {
                let data = block
                    .lines()
                    .find_map(|l| l.strip_prefix("data: "))
                    .expect("data");
                return serde_json::from_str(data).unwrap();
            }
        }
    }
}

/// A parked WebSocket's `disconnect` frame, then its close code.
async fn goodbye(ws: &mut Ws) -> (Value, Option<u16>) {
    let mut disconnect = Value::Null;
    loop {
        let next = tokio::time::timeout(Duration::from_secs(10), ws.stream.next())
            .await
            .expect("timed out waiting for the goodbye");
        match next {
            Some(Ok(Message::Text(t))) => {
                let v: Value = serde_json::from_str(&t).unwrap();
                if v.get("disconnect").is_some() {
                    disconnect = v;
                }
            }
            Some(Ok(Message::Close(frame))) => {
                return (disconnect, frame.map(|f| u16::from(f.code)));
            }
            Some(Ok(_)) => {}
            None | Some(Err(_)) => return (disconnect, None),
        }
    }
}

#[tokio::test]
async fn a_parked_websocket_gets_every_message_in_order_and_is_answered() {
    let s = server(&[]).await;
    let mut ws = parked_ws(&s, &token("alice", None), 0).await;
    // Deliveries wake it: 50 messages, every one, in order.
    for i in 0..50 {
        s.publish("news", json!({ "n": i })).await;
    }
    for i in 0..50 {
        let v = ws.recv().await.expect("a message");
        assert_eq!(v["message"]["data"]["n"], i, "{v}");
    }
    // Parked again, a command wakes it and is answered.
    wait_parked(&s, 1).await;
    let pong = ws.request("ping", json!({})).await;
    assert!(pong.get("pong").is_some(), "{pong}");
    wait_parked(&s, 1).await;
    let reply = ws
        .request("unsubscribe", json!({ "channel": "news" }))
        .await;
    assert!(reply.get("unsubscribe").is_some(), "{reply}");
    wait_parked(&s, 1).await;
    // The client leaving wakes it too, and it is gone.
    ws.stream.close(None).await.unwrap();
    wait_parked(&s, 0).await;
}

/// The channels of the next `n` messages `ws` receives, sorted (messages of different
/// channels may arrive in any order).
async fn received(ws: &mut Ws, n: usize) -> Vec<String> {
    let mut channels = Vec::new();
    for _ in 0..n {
        let v = ws.recv().await.expect("a message");
        channels.push(
            v["message"]["data"]["on"]
                .as_str()
                .expect("a channel")
                .to_owned(),
        );
    }
    channels.sort();
    channels
}

#[tokio::test]
async fn a_parked_websocket_keeps_all_its_subscriptions() {
    let s = server(&[]).await;
    let claims = ClientClaims {
        sub: "carol".into(),
        channels: vec!["news".into(), "sport".into(), "weather".into()],
        ..Default::default()
    };
    let mut ws =
        Ws::connect(&s.ws_url(&format!("?token={}", mint(SECRET.as_bytes(), &claims)))).await;
    let channels = ["weather", "news", "sport"];
    for channel in channels {
        let reply = ws.request("subscribe", json!({ "channel": channel })).await;
        assert!(reply.get("subscribe").is_some(), "{reply}");
    }
    wait_parked(&s, 1).await;
    for channel in channels {
        s.publish(channel, json!({ "on": channel })).await;
    }
    assert_eq!(received(&mut ws, 3).await, ["news", "sport", "weather"]);
    // Parked again with the three, it drops one on request and keeps the other two.
    wait_parked(&s, 1).await;
    let reply = ws
        .request("unsubscribe", json!({ "channel": "news" }))
        .await;
    assert!(reply.get("unsubscribe").is_some(), "{reply}");
    wait_parked(&s, 1).await;
    for channel in channels {
        s.publish(channel, json!({ "on": channel })).await;
    }
    assert_eq!(received(&mut ws, 2).await, ["sport", "weather"]);
    let again = ws.request("subscribe", json!({ "channel": "sport" })).await;
    assert_eq!(again["error"]["code"], "already_subscribed", "{again}");
}

#[tokio::test]
async fn a_parked_websocket_keeps_its_grants() {
    // The parked client keeps its pattern sets out of line when they are not both `**`: after
    // each revival the token's sets still decide, subscribe and publish apart.
    let s = server(&[]).await;
    let token = s.token(&["news"], &["chat/*"]);
    let mut ws = parked_ws(&s, &token, 0).await;
    let r = ws
        .request("subscribe", json!({ "channel": "secret" }))
        .await;
    assert_eq!(r["error"]["code"], "forbidden", "{r}");
    wait_parked(&s, 1).await;
    let r = ws
        .request("publish", json!({ "channel": "news", "data": 1 }))
        .await;
    assert_eq!(r["error"]["code"], "forbidden", "{r}");
    wait_parked(&s, 1).await;
    let r = ws
        .request("publish", json!({ "channel": "chat/1", "data": 2 }))
        .await;
    assert_eq!(r["publish"]["seq"], 1, "{r}");
    // A token granting `**` for both (no sets kept out of line) may still subscribe and
    // publish anywhere once revived.
    let every = s.token(&["**"], &["**"]);
    let mut ws = Ws::connect(&s.ws_url(&format!("?token={every}"))).await;
    wait_parked(&s, 2).await;
    let r = ws
        .request("subscribe", json!({ "channel": "secret" }))
        .await;
    assert!(r.get("subscribe").is_some(), "{r}");
    wait_parked(&s, 2).await;
    let r = ws
        .request("publish", json!({ "channel": "secret", "data": 3 }))
        .await;
    assert_eq!(r["publish"]["seq"], 1, "{r}");
}

#[tokio::test]
async fn a_websocket_parks_only_with_its_whole_command_budget() {
    // Three commands an hour: one spent keeps the connection in its task (its parked form
    // holds no budget), so the budget is not refilled by parking and coming back.
    let s = server(&[("HERALD_LIMITS_COMMAND", "1/h burst 3")]).await;
    let mut ws = Ws::connect(&s.ws_url(&format!("?token={}", token("alice", None)))).await;
    wait_parked(&s, 1).await;
    let pong = ws.request("ping", json!({})).await;
    assert!(pong.get("pong").is_some(), "{pong}");
    // Ten parking delays: a connection that could park would have.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(parked(&s).await, 0, "parked with a command spent");
    for _ in 0..2 {
        let pong = ws.request("ping", json!({})).await;
        assert!(pong.get("pong").is_some(), "{pong}");
    }
    let refused = ws.request("ping", json!({})).await;
    assert_eq!(refused["error"]["code"], "rate_limited", "{refused}");
}

#[tokio::test]
async fn a_parked_websocket_is_pinged_and_stays_while_it_answers() {
    let s = server(&[("HERALD_PING_INTERVAL", "1s")]).await;
    let mut ws = parked_ws(&s, &token("alice", None), 0).await;
    let revived = revivals(&s).await;
    let mut pings = 0u64;
    while pings < 4 {
        let next = tokio::time::timeout(Duration::from_secs(10), ws.stream.next())
            .await
            .expect("a ping within 10 s");
        match next {
            // tungstenite answers the ping itself.
            Some(Ok(Message::Ping(_))) => pings += 1,
            Some(Ok(other)) => panic!("unexpected {other:?}"),
            None | Some(Err(_)) => panic!("closed after {pings} pings"),
        }
    }
    // The pings were written, and the pongs read, with the connection parked. A pong the
    // parking has not read by the next tick (a test process starved of CPU for a second)
    // revives the connection, as it must; so this asserts that most pings revived nothing,
    // which fails if pings or pongs revive parked connections.
    let during = revivals(&s).await - revived;
    assert!(
        during * 2 <= pings,
        "{during} of {pings} pings revived the connection"
    );
    wait_parked(&s, 1).await;
    s.publish("news", json!({ "still": "here" })).await;
    let v = ws.recv().await.expect("the message after the pings");
    assert_eq!(v["message"]["data"]["still"], "here");
}

#[tokio::test]
async fn a_parked_websocket_that_stops_answering_pings_is_closed_with_4002() {
    let s = server(&[("HERALD_PING_INTERVAL", "1s")]).await;
    // The client reads nothing from here on, so it answers no ping: the parking writes the
    // first, and the tick after revives the connection, which closes it.
    let mut ws = parked_ws(&s, &token("alice", None), 0).await;
    wait_parked(&s, 0).await;
    let (_, code) = goodbye(&mut ws).await;
    assert_eq!(code, Some(4002));
}

#[tokio::test]
async fn parked_connections_are_closed_on_revoke_with_the_usual_frames() {
    let s = server(&[]).await;
    let mut ws = parked_ws(&s, &token("alice", None), 0).await;
    let mut sse = RawSse::open(&s, &format!("?channel=news&token={}", token("alice", None))).await;
    sse.until("subscribed").await;
    wait_parked(&s, 2).await;
    let (status, body) = call(
        &s,
        "POST",
        "/v1/apps/default/revoke",
        ADMIN,
        Some(json!({ "sub": "alice" })),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["closed"], 2, "{body}");
    let (disconnect, code) = goodbye(&mut ws).await;
    assert_eq!(disconnect["disconnect"]["code"], "revoked", "{disconnect}");
    assert_eq!(code, Some(4003));
    assert_eq!(sse.until("disconnect").await["code"], "revoked");
    assert_eq!(sse.block().await, None, "the stream ends");
    wait_parked(&s, 0).await;
}

#[tokio::test]
async fn parked_connections_are_closed_when_their_token_expires() {
    let s = server(&[]).await;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let expiring = token("alice", Some(now + 3));
    let mut ws = parked_ws(&s, &expiring, 0).await;
    let mut sse = RawSse::open(&s, &format!("?channel=news&token={expiring}")).await;
    sse.until("subscribed").await;
    wait_parked(&s, 2).await;
    let (disconnect, code) = goodbye(&mut ws).await;
    assert_eq!(
        disconnect["disconnect"]["code"], "token_expired",
        "{disconnect}"
    );
    assert_eq!(code, Some(4001));
    assert_eq!(sse.until("disconnect").await["code"], "token_expired");
}

#[tokio::test]
async fn a_parked_sse_stream_gets_every_message_in_order_and_pings() {
    let s = server(&[("HERALD_PING_INTERVAL", "1s")]).await;
    let mut sse = RawSse::open(&s, &format!("?channel=news&token={}", token("bob", None))).await;
    sse.until("subscribed").await;
    wait_parked(&s, 1).await;
    for i in 0..50 {
        s.publish("news", json!({ "n": i })).await;
    }
    for i in 0..50 {
        let v = sse.until("message").await;
        assert_eq!(v["data"]["n"], i, "{v}");
    }
    wait_parked(&s, 1).await;
    let revived = revivals(&s).await;
    let mut pings = 0;
    while pings < 2 {
        match sse.block().await.as_deref() {
            Some(": ping") => pings += 1,
            other => panic!("unexpected {other:?}"),
        }
    }
    // The pings were written with the stream parked.
    assert_eq!(revivals(&s).await, revived);
    // The client going away wakes it, and it is gone.
    drop(sse);
    wait_parked(&s, 0).await;
}

#[tokio::test]
async fn shutdown_closes_parked_connections_with_the_usual_frames() {
    let mut s = server(&[]).await;
    let mut ws = parked_ws(&s, &token("alice", None), 0).await;
    let mut sse = RawSse::open(&s, &format!("?channel=news&token={}", token("bob", None))).await;
    sse.until("subscribed").await;
    wait_parked(&s, 2).await;
    s.signal("TERM");
    let (disconnect, code) = goodbye(&mut ws).await;
    assert_eq!(disconnect["disconnect"]["code"], "shutdown", "{disconnect}");
    assert_eq!(code, Some(1001));
    assert_eq!(sse.until("disconnect").await["code"], "shutdown");
    assert!(s.wait_exit(Duration::from_secs(15)).success());
}
