//! Pusher's client protocol at `/app/{key}` against the real binary, with pusher-js (its Node
//! build, run by `tests/pusher/client.mjs`, installed by `scripts/install-pusher-clients.sh`):
//! public and private channels receive what Herald's HTTP API and Pusher's HTTP API publish,
//! exactly; a trigger's `socket_id` skips that connection; client events reach the channel's
//! other subscribers (pusher-js and Herald's own), not their sender, and are kept in the log; a
//! private channel signed with the wrong secret is refused with Pusher's error and the
//! connection's other channels go on. Raw WebSocket tests (tokio-tungstenite) check what
//! pusher-js does not show: the close codes of refused connections (4001 unknown key, 4008 no
//! protocol, 4007 unsupported protocol), ping and pong both ways and 4201 for a silent client,
//! client events' refusals and their rate limit.

use std::process::Stdio;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

use crate::pusher_api::{
    clients, create, history, next_data, run, subscriber, trigger, Credentials, Sdk,
};
use crate::support::{Server, Ws, API_KEY};

/// One pusher-js client run by `client.mjs`.
pub(crate) struct PusherJs {
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
    /// Every line printed so far, for a failure message.
    seen: Vec<String>,
    pub(crate) socket_id: String,
}

impl PusherJs {
    /// Connects pusher-js to `s` with `creds` and subscribes to `channels`; waits for the
    /// connection (its socket id).
    pub(crate) async fn start(
        s: &Server,
        creds: &Credentials,
        channels: &[&str],
        bad_secret: bool,
    ) -> Self {
        PusherJs::start_with(s, creds, channels, json!({ "badSecret": bad_secret })).await
    }

    /// Connects pusher-js as [`PusherJs::start`] does, with `extra` fields added to its order
    /// (`user`, the presence channels' member data).
    pub(crate) async fn start_with(
        s: &Server,
        creds: &Credentials,
        channels: &[&str],
        extra: Value,
    ) -> Self {
        let dir = clients();
        assert!(
            dir.join("node_modules/pusher-js").is_dir(),
            "tests/pusher/node_modules is missing: run scripts/install-pusher-clients.sh"
        );
        let mut order = json!({
            "host": s.addr.ip().to_string(),
            "port": s.addr.port(),
            "appId": creds.app_id,
            "key": creds.key,
            "secret": creds.secret,
            "channels": channels,
        });
        if let (Some(order), Some(extra)) = (order.as_object_mut(), extra.as_object()) {
            order.extend(extra.clone());
        }
        let mut child = tokio::process::Command::new("node")
            .arg(dir.join("client.mjs"))
            .arg(order.to_string())
            .current_dir(&dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("run node");
        let stdin = child.stdin.take().unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut client = PusherJs {
            child,
            stdin,
            lines,
            seen: Vec::new(),
            socket_id: String::new(),
        };
        let connected = client.until(|l| l["type"] == "connected").await;
        client.socket_id = connected["socket_id"].as_str().unwrap().to_owned();
        client
    }

    /// The next line the client prints; panics after 10 s with what it printed.
    pub(crate) async fn next(&mut self) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(10), self.lines.next_line()).await;
        match line {
            Ok(Ok(Some(line))) => {
                self.seen.push(line.clone());
                serde_json::from_str(&line).unwrap_or_else(|e| panic!("{line:?}: {e}"))
            }
            other => panic!(
                "pusher-js printed nothing more ({other:?}); it printed:\n{}",
                self.seen.join("\n")
            ),
        }
    }

    /// Lines until one `wanted` accepts.
    pub(crate) async fn until(&mut self, wanted: impl Fn(&Value) -> bool) -> Value {
        loop {
            let line = self.next().await;
            if wanted(&line) {
                return line;
            }
        }
    }

    /// The next channel event, skipping connection state lines.
    pub(crate) async fn next_event(&mut self) -> Value {
        let line = self
            .until(|l| l["type"] == "event" || l["type"] == "error")
            .await;
        assert_eq!(line["type"], "event", "{line}");
        line
    }

    /// Waits for `pusher:subscription_succeeded` on each of `channels`, in any order.
    pub(crate) async fn subscribed(&mut self, channels: &[&str]) {
        let mut left: Vec<&str> = channels.to_vec();
        while !left.is_empty() {
            let e = self.next_event().await;
            assert_eq!(e["event"], "pusher:subscription_succeeded", "{e}");
            left.retain(|c| e["channel"] != *c);
        }
    }

    pub(crate) async fn send(&mut self, command: Value) {
        let line = format!("{command}\n");
        self.stdin.write_all(line.as_bytes()).await.unwrap();
        self.stdin.flush().await.unwrap();
    }

    pub(crate) async fn exit(mut self) {
        self.send(json!({ "exit": true })).await;
        let _ = tokio::time::timeout(Duration::from_secs(5), self.child.wait()).await;
    }
}

/// A server with a `--admin-key`, and the default app's Pusher credentials.
pub(crate) async fn server_with_credentials(config: Option<&str>) -> (Server, Credentials) {
    let mut builder = Server::builder();
    if let Some(config) = config {
        builder = builder.config(config);
    }
    let s = builder.start().await;
    let creds = create(&s, "default", API_KEY, None).await;
    (s, creds)
}

/// An event line's `(channel, event, data)`.
pub(crate) fn event_of(line: &Value) -> (String, String, Value) {
    (
        line["channel"].as_str().unwrap_or_default().to_owned(),
        line["event"].as_str().unwrap_or_default().to_owned(),
        line["data"].clone(),
    )
}

pub(crate) fn event(channel: &str, event: &str, data: Value) -> (String, String, Value) {
    (channel.to_owned(), event.to_owned(), data)
}

#[tokio::test]
async fn pusher_js_receives_herald_and_pusher_publishes_on_public_and_private_channels() {
    let (s, creds) = server_with_credentials(None).await;
    let mut js = PusherJs::start(&s, &creds, &["news", "private-chat"], false).await;
    let (a, b) = js
        .socket_id
        .split_once('.')
        .expect("a socket id is two numbers");
    assert!(
        !a.is_empty() && !b.is_empty() && (a.to_owned() + b).bytes().all(|c| c.is_ascii_digit()),
        "{}",
        js.socket_id
    );
    js.subscribed(&["news", "private-chat"]).await;

    // Herald's own HTTP API: the event `message` with the JSON text as data (which pusher-js
    // parses).
    s.publish("news", json!({ "n": 1 })).await;
    s.publish("private-chat", json!("plain")).await;
    // Pusher's HTTP API, through the official Node SDK.
    let (status, body) = run(
        Sdk::Node,
        &s,
        &creds,
        trigger(&["private-chat", "news"], "order-placed", r#"{"id":7}"#),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = run(
        Sdk::Node,
        &s,
        &creds,
        trigger(&["news"], "note", "not json"),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let mut got = Vec::new();
    for _ in 0..5 {
        got.push(event_of(&js.next_event().await));
    }
    // One channel's events in their order; the two channels' interleaving is free.
    let on = |channel: &str| -> Vec<(String, String, Value)> {
        got.iter().filter(|e| e.0 == channel).cloned().collect()
    };
    assert_eq!(
        on("news"),
        vec![
            event("news", "message", json!({ "n": 1 })),
            event("news", "order-placed", json!({ "id": 7 })),
            event("news", "note", json!("not json")),
        ],
        "{got:?}"
    );
    assert_eq!(
        on("private-chat"),
        vec![
            event("private-chat", "message", json!("plain")),
            event("private-chat", "order-placed", json!({ "id": 7 })),
        ],
        "{got:?}"
    );
    // Nothing more: the next event is the next publish.
    s.publish("news", json!("last")).await;
    assert_eq!(
        event_of(&js.next_event().await),
        event("news", "message", json!("last"))
    );

    // Unsubscribed, a channel sends nothing more.
    js.send(json!({ "unsubscribe": "news" })).await;
    js.until(|l| l["type"] == "unsubscribed").await;
    // pusher-js sent its unsubscribe before printing; a ping-pong through the channel that
    // stays tells when the server has read it.
    s.publish("private-chat", json!("marker")).await;
    js.next_event().await;
    s.publish("news", json!("after")).await;
    s.publish("private-chat", json!("end")).await;
    assert_eq!(
        event_of(&js.next_event().await),
        event("private-chat", "message", json!("end"))
    );
    js.exit().await;
}

#[tokio::test]
async fn a_triggers_socket_id_skips_that_connection_only() {
    let (s, creds) = server_with_credentials(None).await;
    let mut excluded = PusherJs::start(&s, &creds, &["news"], false).await;
    let mut other = PusherJs::start(&s, &creds, &["news"], false).await;
    excluded.subscribed(&["news"]).await;
    other.subscribed(&["news"]).await;
    let mut order = trigger(&["news"], "edit", r#"{"v":1}"#);
    order["trigger"]["socket_id"] = json!(excluded.socket_id);
    let (status, body) = run(Sdk::Node, &s, &creds, order).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = run(
        Sdk::Node,
        &s,
        &creds,
        trigger(&["news"], "edit", r#"{"v":2}"#),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        event_of(&other.next_event().await),
        event("news", "edit", json!({ "v": 1 }))
    );
    assert_eq!(
        event_of(&other.next_event().await),
        event("news", "edit", json!({ "v": 2 }))
    );
    // The excluded connection's next event is the second trigger.
    assert_eq!(
        event_of(&excluded.next_event().await),
        event("news", "edit", json!({ "v": 2 }))
    );
    excluded.exit().await;
    other.exit().await;
}

#[tokio::test]
async fn client_events_reach_the_others_not_the_sender_and_are_kept() {
    let (s, creds) = server_with_credentials(None).await;
    let mut sender = PusherJs::start(&s, &creds, &["private-room"], false).await;
    let mut receiver = PusherJs::start(&s, &creds, &["private-room"], false).await;
    sender.subscribed(&["private-room"]).await;
    receiver.subscribed(&["private-room"]).await;
    let mut herald = subscriber(&s, "private-room").await;

    sender
        .send(json!({ "trigger": {
            "channel": "private-room", "event": "client-typing", "data": { "who": "a" }
        }}))
        .await;
    let triggered = sender.until(|l| l["type"] == "triggered").await;
    assert_eq!(triggered["ok"], true, "{triggered}");
    assert_eq!(
        event_of(&receiver.next_event().await),
        event("private-room", "client-typing", json!({ "who": "a" }))
    );
    // Herald's subscriber sees the envelope, naming the sender's socket.
    let stored = json!({ "$pusher": {
        "event": "client-typing",
        "data": r#"{"who":"a"}"#,
        "socket_id": sender.socket_id,
    }});
    assert_eq!(next_data(&mut herald).await, stored);
    assert_eq!(history(&s, "private-room", API_KEY).await, vec![stored]);
    // Not echoed: the sender's next event is the next publish.
    s.publish("private-room", json!("after")).await;
    assert_eq!(
        event_of(&sender.next_event().await),
        event("private-room", "message", json!("after"))
    );
    sender.exit().await;
    receiver.exit().await;
}

#[tokio::test]
async fn a_bad_signature_is_refused_and_the_other_channels_go_on() {
    let (s, creds) = server_with_credentials(None).await;
    let mut js = PusherJs::start(&s, &creds, &["private-secret", "news"], true).await;
    let mut refused = None;
    let mut news = false;
    while refused.is_none() || !news {
        let e = js.next_event().await;
        match (e["channel"].as_str(), e["event"].as_str()) {
            (Some("private-secret"), Some("pusher:subscription_error")) => refused = Some(e),
            (Some("news"), Some("pusher:subscription_succeeded")) => news = true,
            _ => panic!("unexpected {e}"),
        }
    }
    let data = &refused.unwrap()["data"];
    assert_eq!(data["type"], "AuthError", "{data}");
    assert_eq!(data["status"], 401, "{data}");
    let expected = format!(
        "Invalid signature: Expected HMAC SHA256 hex digest of {}:private-secret, but got {}:",
        js.socket_id, creds.key
    );
    assert!(
        data["error"].as_str().unwrap().starts_with(&expected),
        "{data}"
    );
    // Nothing of the private channel arrives; the public one works.
    s.publish("private-secret", json!("hidden")).await;
    s.publish("news", json!("seen")).await;
    assert_eq!(
        event_of(&js.next_event().await),
        event("news", "message", json!("seen"))
    );
    js.exit().await;
}

/// A raw WebSocket to `/app/{key}` with `query`.
pub(crate) async fn raw(s: &Server, key: &str, query: &str) -> Ws {
    Ws::connect(&format!("ws://{}/app/{key}{query}", s.addr)).await
}

/// The `pusher:error` a refused connection is sent, then the close code (checked in the
/// failure message's text, with the last frame).
async fn refused(ws: &mut Ws) -> (Value, String) {
    let error = ws.frame().await;
    assert_eq!(error["event"], "pusher:error", "{error}");
    assert!(ws.recv().await.is_none(), "the connection stays open");
    (error["data"].clone(), ws.why_closed())
}

#[tokio::test]
async fn refused_connections_get_pushers_error_and_close_code() {
    let (s, creds) = server_with_credentials(None).await;
    for (key, query, code) in [
        ("no-such-key", "?protocol=7&client=js&version=8.6.0", 4001),
        (creds.key.as_str(), "?client=js&version=8.6.0", 4008),
        (creds.key.as_str(), "?protocol=3&client=js", 4007),
        (creds.key.as_str(), "?protocol=seven", 4007),
    ] {
        let mut ws = raw(&s, key, query).await;
        let (data, closed) = refused(&mut ws).await;
        assert_eq!(data["code"], code, "{key}{query}: {data}; {closed}");
        assert!(
            closed.contains(&format!("close code {code}")),
            "{key}{query}: {closed}"
        );
    }
    // Protocol 7 with the right key is accepted.
    let mut ws = raw(&s, &creds.key, "?protocol=7").await;
    let established = ws.frame().await;
    assert_eq!(
        established["event"],
        "pusher:connection_established",
        "{}",
        ws.why_closed()
    );
    let data: Value = serde_json::from_str(established["data"].as_str().unwrap()).unwrap();
    assert_eq!(data["activity_timeout"], 120, "{data}");
    assert!(data["socket_id"].is_string(), "{data}");
}

/// A raw connection to `/app/{key}?protocol=7`: its socket id.
pub(crate) async fn established(s: &Server, creds: &Credentials) -> (Ws, String) {
    let mut ws = raw(s, &creds.key, "?protocol=7").await;
    let frame = ws.frame().await;
    let data: Value = serde_json::from_str(frame["data"].as_str().unwrap()).unwrap();
    (ws, data["socket_id"].as_str().unwrap().to_owned())
}

#[tokio::test]
async fn pings_both_ways_and_a_silent_client_is_closed_with_4201() {
    let config = "ping_interval = \"1s\"\n[pusher]\nactivity_timeout = 1\npong_timeout = 1\n";
    let (s, creds) = server_with_credentials(Some(config)).await;
    let (mut ws, _) = established(&s, &creds).await;
    ws.send(json!({ "event": "pusher:ping", "data": {} })).await;
    // Then silent: the server pings, then closes with 4201.
    let mut frames = Vec::new();
    while let Some(frame) = ws.recv().await {
        frames.push(frame["event"].as_str().unwrap_or_default().to_owned());
        if frame["event"] == "pusher:error" {
            assert_eq!(frame["data"]["code"], 4201, "{frame}");
        }
    }
    assert_eq!(
        frames,
        ["pusher:pong", "pusher:ping", "pusher:error"],
        "{}",
        ws.why_closed()
    );
    let closed = ws.why_closed();
    assert!(closed.contains("close code 4201"), "{closed}");

    // A client that answers stays.
    let (mut ws, _) = established(&s, &creds).await;
    for _ in 0..3 {
        let ping = ws.frame().await;
        assert_eq!(ping["event"], "pusher:ping", "{ping}; {}", ws.why_closed());
        ws.send(json!({ "event": "pusher:pong", "data": {} })).await;
    }
}

#[tokio::test]
async fn client_events_are_refused_as_pusher_refuses_them_and_rate_limited() {
    let config = "[pusher]\nclient_events_per_second = 3\n";
    let (s, creds) = server_with_credentials(Some(config)).await;
    let (mut ws, socket_id) = established(&s, &creds).await;
    let client_event =
        |channel: &str| json!({ "event": "client-x", "channel": channel, "data": { "n": 1 } });
    // Not subscribed.
    ws.send(client_event("private-a")).await;
    let e = ws.frame().await;
    assert_eq!(e["event"], "pusher:error", "{e}");
    assert!(
        e["data"]["message"].as_str().unwrap().starts_with(
            "Cannot broadcast client event (connection not subscribed to channel private-a)"
        ),
        "{e}"
    );
    // A public channel.
    ws.send(json!({ "event": "pusher:subscribe", "data": { "channel": "news" } }))
        .await;
    let ok = ws.frame().await;
    assert_eq!(
        ok["event"], "pusher_internal:subscription_succeeded",
        "{ok}"
    );
    ws.send(client_event("news")).await;
    let e = ws.frame().await;
    assert!(
        e["data"]["message"]
            .as_str()
            .unwrap()
            .contains("not a private channel"),
        "{e}"
    );
    // A private channel without auth is refused; with it, subscribed.
    ws.send(json!({ "event": "pusher:subscribe", "data": { "channel": "private-a" } }))
        .await;
    let e = ws.frame().await;
    assert_eq!(e["event"], "pusher:subscription_error", "{e}");
    assert_eq!(e["data"]["status"], 401, "{e}");
    let auth = herald_pusher::signature::key_signature(
        &creds.key,
        creds.secret.as_bytes(),
        &format!("{socket_id}:private-a"),
    );
    ws.send(
        json!({ "event": "pusher:subscribe", "data": { "channel": "private-a", "auth": auth } }),
    )
    .await;
    let ok = ws.frame().await;
    assert_eq!(
        ok["event"], "pusher_internal:subscription_succeeded",
        "{ok}"
    );
    assert_eq!(ok["channel"], "private-a", "{ok}");
    // At most three a second pass; the others are refused with 4301 and not stored.
    for _ in 0..20 {
        ws.send(client_event("private-a")).await;
    }
    ws.send(json!({ "event": "pusher:ping", "data": {} })).await;
    let mut refused = 0;
    loop {
        let frame = ws.frame().await;
        match frame["event"].as_str() {
            Some("pusher:pong") => break,
            Some("pusher:error") if frame["data"]["code"] == 4301 => refused += 1,
            _ => panic!("unexpected {frame}"),
        }
    }
    assert!(refused >= 14, "{refused} refused");
    // Answered in order: every event that passed is stored by now.
    let kept = history(&s, "private-a", API_KEY).await;
    assert_eq!(kept.len() + refused, 20, "{kept:?}");
    assert_eq!(kept[0]["$pusher"]["socket_id"], socket_id.as_str());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pusher_connection_is_a_client_named_pusher_in_webhooks() {
    use crate::hooks_e2e::{register, summary, Lang, Receiver, CONFIG};
    let receiver = Receiver::start(Lang::Node);
    let s = Server::builder()
        .config(CONFIG)
        .arg("--outbound-allow")
        .arg("127.0.0.0/8")
        .start()
        .await;
    register(&s, &receiver, 0).await;
    let creds = create(&s, "default", API_KEY, None).await;
    let (mut ws, _) = established(&s, &creds).await;
    ws.send(json!({ "event": "pusher:subscribe", "data": { "channel": "news" } }))
        .await;
    let ok = ws.frame().await;
    assert_eq!(
        ok["event"], "pusher_internal:subscription_succeeded",
        "{ok}"
    );
    let _ = ws.stream.close(None).await;
    while ws.recv().await.is_some() {}
    let pusher = |e: &Value, kind: &str| e["type"] == kind && e["data"]["transport"] == "pusher";
    let events = receiver
        .wait_for(
            "the Pusher connection's events",
            Duration::from_secs(60),
            |events| {
                events.iter().any(|e| pusher(e, "client.connected"))
                    && events.iter().any(|e| pusher(e, "client.disconnected"))
                    && events
                        .iter()
                        .any(|e| e["type"] == "client.subscribed" && e["data"]["channel"] == "news")
            },
        )
        .await;
    let connected = events
        .iter()
        .find(|e| pusher(e, "client.connected"))
        .unwrap();
    assert!(
        connected["data"]["user"].is_null(),
        "{}",
        summary(&events).join("\n")
    );
}
