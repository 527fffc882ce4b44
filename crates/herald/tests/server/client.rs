//! `herald-client` end to end against the real binary: each transport (WebSocket, SSE,
//! long-poll), publisher routes (publish, batch, channels, history, devices, pushes, receipts,
//! tokens), errors carrying the server's code, the resuming subscriber (across a restart, with a
//! token refused, expired or renewed), and the CLI's `publish` and `subscribe` built on it.

use std::time::Duration;

use herald_client::api::{BatchMessage, Publisher};
use herald_client::poll::Poller;
use herald_client::proto::command::Since;
use herald_client::proto::reply::ServerBody;
use herald_client::proto::ErrorCode;
use herald_client::sse::{SseItem, SseOptions, SseStream};
use herald_client::subscriber::{Event, Lost, Position, Request, Stopped, Subscriber};
use herald_client::types::Message;
use herald_client::ws::WsClient;
use serde_json::json;

use crate::support::{Server, API_KEY};

fn base(s: &Server) -> String {
    s.url("")
}

async fn within<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(10), f)
        .await
        .expect("timed out")
}

#[tokio::test]
async fn websocket_commands_and_frames_are_typed() {
    let s = Server::start().await;
    let publisher = Publisher::new(&base(&s), Some(API_KEY));
    let token = s.token(&["news", "chat/*"], &["chat/*"]);
    let mut ws = WsClient::connect(&base(&s), Some(&token)).await.unwrap();

    let first = publisher
        .publish("news", &json!({"n": 1}), None)
        .await
        .unwrap();
    assert_eq!(first.seq, 1);
    let since = Since {
        seq: 0,
        epoch: Some(first.epoch.clone()),
    };
    let sub = ws.subscribe("news", Some(since)).await.unwrap();
    assert_eq!(
        (sub.channel.as_str(), sub.seq, sub.recovered),
        ("news", 1, true)
    );
    let replayed = within(ws.next_message()).await.unwrap().unwrap();
    assert_eq!((replayed.seq, replayed.json()), (1, json!({"n": 1})));

    publisher
        .publish("news", &json!({"n": 2}), Some("k2"))
        .await
        .unwrap();
    let live = within(ws.next_message()).await.unwrap().unwrap();
    assert_eq!((live.seq, live.id.as_str()), (2, "k2"));

    let published = ws.publish("chat/1", &json!("hi"), None).await.unwrap();
    assert_eq!((published.seq, published.duplicate), (1, false));
    let history = ws.history("news", Some(0), Some(10)).await.unwrap();
    assert_eq!(history.messages.len(), 2);
    assert_eq!(history.messages[1].data.get(), r#"{"n":2}"#);
    ws.ping().await.unwrap();
    ws.unsubscribe("news").await.unwrap();

    // Errors carry the server's code.
    let e = ws.subscribe("secret", None).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::Forbidden), "{e}");
    let e = ws.unsubscribe("news").await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::NotSubscribed), "{e}");
    let e = ws.publish("news", &json!(1), None).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::Forbidden), "{e}");

    // Raw frames parse as proto's types.
    ws.send_ping().await.unwrap();
    let frame = within(ws.next_frame()).await.unwrap().unwrap();
    assert!(matches!(frame.parse().unwrap().body, ServerBody::Pong(_)));
    ws.close().await;

    // A refused handshake is the server's error with its status.
    let e = WsClient::open_url(&s.ws_url("?token=nope"))
        .await
        .err()
        .unwrap();
    let server = e.server().expect("a server error");
    assert_eq!(
        (server.status, server.code()),
        (Some(401), Some(ErrorCode::Unauthorized))
    );
}

#[tokio::test]
async fn sse_opens_with_a_cursor_and_resumes_with_last_event_id() {
    let s = Server::start().await;
    let publisher = Publisher::new(&base(&s), Some(API_KEY));
    let token = s.token(&["news"], &[]);
    publisher
        .publish("news", &json!({"n": 1}), None)
        .await
        .unwrap();

    let opts = SseOptions {
        channels: &["news"],
        token: Some(&token),
        since: Some("0"),
        ..Default::default()
    };
    let mut sse = SseStream::open(&base(&s), &opts).await.unwrap();
    assert_eq!(sse.headers()["content-type"], "text/event-stream");
    match within(sse.next()).await.unwrap().unwrap() {
        SseItem::Subscribed(sub) => assert_eq!((sub.channel.as_str(), sub.seq), ("news", 1)),
        other => panic!("{other:?}"),
    }
    let first = within(sse.next_message()).await.unwrap().unwrap();
    assert_eq!(first.json(), json!({"n": 1}));
    let cursor = sse.last_event_id().unwrap().to_owned();
    drop(sse);

    publisher
        .publish("news", &json!({"n": 2}), None)
        .await
        .unwrap();
    let resumed = SseOptions {
        last_event_id: Some(&cursor),
        ..opts.clone()
    };
    let mut sse = SseStream::open(&base(&s), &resumed).await.unwrap();
    let next = within(sse.next_message()).await.unwrap().unwrap();
    assert_eq!(
        next.seq, 2,
        "resumed after the cursor, nothing replayed twice"
    );

    let bad = SseOptions {
        channels: &["secret"],
        token: Some(&token),
        ..Default::default()
    };
    let e = SseStream::open(&base(&s), &bad).await.err().unwrap();
    assert_eq!(e.code(), Some(ErrorCode::Forbidden), "{e}");
    assert_eq!(e.server().unwrap().status, Some(403));
}

#[tokio::test]
async fn long_poll_keeps_its_cursor() {
    let s = Server::start().await;
    let publisher = Publisher::new(&base(&s), Some(API_KEY));
    let token = s.token(&["news"], &[]);
    publisher
        .publish("news", &json!({"n": 1}), None)
        .await
        .unwrap();

    let mut poller = Poller::new(&base(&s), &["news"], Some(&token)).since("0");
    poller.timeout = Duration::from_secs(1);
    let answer = within(poller.poll()).await.unwrap();
    assert_eq!(answer.messages.len(), 1);
    assert!(answer.channels[0].recovered);
    publisher
        .publish("news", &json!({"n": 2}), None)
        .await
        .unwrap();
    let answer = within(poller.poll()).await.unwrap();
    assert_eq!(answer.messages.len(), 1);
    assert_eq!(answer.messages[0].seq, 2);
    assert_eq!(poller.cursor.as_deref(), Some(answer.cursor.as_str()));

    let mut bad = Poller::new(&base(&s), &["bad name!"], Some(&token));
    let e = bad.poll().await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::ChannelInvalid), "{e}");
}

#[tokio::test]
async fn publisher_routes_are_typed() {
    let s = Server::start().await;
    let publisher = Publisher::new(&base(&s), Some(API_KEY));
    let message = |channel: &str| BatchMessage {
        channel: channel.into(),
        data: json!(1),
        id: None,
    };
    let results = publisher.batch(&[message("news")]).await.unwrap();
    assert_eq!(results[0].as_ref().unwrap().seq, 1);
    let e = publisher
        .batch(&[message("news"), message("bad name!")])
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::ChannelInvalid), "{e}");

    let info = publisher.channel("news").await.unwrap();
    assert_eq!((info.seq, info.first_seq), (1, 1));
    let list = publisher.channels(None, None).await.unwrap();
    assert_eq!(list.channels[0].channel, "news");
    let history = publisher.history("news", 0, Some(5)).await.unwrap();
    assert_eq!((history.first_seq, history.messages.len()), (Some(1), 1));

    let device = publisher
        .register_device(&json!({"platform": "herald", "id": "phone-1", "tags": ["sports"]}))
        .await
        .unwrap();
    assert_eq!((device.id.as_str(), device.active), ("phone-1", true));
    assert_eq!(publisher.device("phone-1").await.unwrap().tags, ["sports"]);
    let token = publisher
        .mint_token(&json!({"sub": "alice", "device": "phone-1"}))
        .await
        .unwrap();
    let push = publisher
        .push(
            &json!({"target": {"device": "phone-1"}, "data": {"score": "2-0"}}),
            None,
        )
        .await
        .unwrap();
    assert_eq!(push.targeted, Some(1));
    let receipt = publisher.receipt(&push.id).await.unwrap();
    assert_eq!(receipt.id, push.id);

    // The device reads its inbox with the minted token.
    let mut ws = WsClient::connect(&base(&s), Some(&token.token))
        .await
        .unwrap();
    let message = within(ws.next_message()).await.unwrap().unwrap();
    assert_eq!(message.id, push.id);
    ws.ack(&message.channel, message.seq, Some(&message.epoch))
        .await
        .unwrap();

    // Errors carry the server's code and status.
    let e = publisher.channel("bad name!").await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::ChannelInvalid), "{e}");
    let e = publisher.receipt("no-such-push").await.unwrap_err();
    assert_eq!(e.server().unwrap().status, Some(404), "{e}");
    let e = publisher
        .with_key("wrong")
        .publish("news", &json!(1), None)
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::Unauthorized), "{e}");
    let e = publisher.device("nobody").await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::NotFound), "{e}");
}

/// The next message `subscriber` yields, keeping the other events it reports on the way.
async fn next_message(subscriber: &mut Subscriber, others: &mut Vec<Event>) -> Message {
    loop {
        match within(subscriber.next()).await {
            Ok(Event::Message(m)) => return m,
            Ok(event) => others.push(event),
            Err(stopped) => panic!("the subscriber stopped: {stopped} (after {others:?})"),
        }
    }
}

/// The events `subscriber` yields until it stops, and why it stopped.
async fn until_stopped(subscriber: &mut Subscriber) -> (Vec<Event>, Stopped) {
    let mut events = Vec::new();
    loop {
        match within(subscriber.next()).await {
            Ok(event) => events.push(event),
            Err(stopped) => return (events, stopped),
        }
    }
}

#[tokio::test]
async fn the_subscriber_resumes_across_a_restart_with_every_message_once_and_in_order() {
    let mut s = Server::start().await;
    let token = s.token(&["news"], &[]);
    let mut subscriber = Subscriber::builder(base(&s))
        .token(token)
        .channel("news")
        .build()
        .unwrap();
    let mut others = Vec::new();
    while !others.iter().any(|e| matches!(e, Event::Subscribed(_))) {
        others.push(within(subscriber.next()).await.unwrap());
    }
    assert!(
        matches!(&others[..], [Event::Connected(c), Event::Subscribed(sub)]
            if c.sub == "tester" && sub.channel == "news" && sub.seq == 0),
        "{others:?}"
    );
    s.publish("news", json!(1)).await;
    s.publish("news", json!(2)).await;
    let mut received = Vec::new();
    for _ in 0..2 {
        received.push(next_message(&mut subscriber, &mut others).await);
    }
    // Crash; messages 3 and 4 are published while the subscriber cannot reach the server (on
    // another port), then the server comes back at the address the subscriber knows.
    let known = s.addr;
    s.restart().await;
    s.publish("news", json!(3)).await;
    s.publish("news", json!(4)).await;
    s.restart_listening_on(known).await;
    for _ in 0..2 {
        received.push(next_message(&mut subscriber, &mut others).await);
    }
    // Nothing is yielded twice: the next message is the next one published.
    s.publish("news", json!(5)).await;
    received.push(next_message(&mut subscriber, &mut others).await);

    let data: Vec<serde_json::Value> = received.iter().map(Message::json).collect();
    assert_eq!(data, [json!(1), json!(2), json!(3), json!(4), json!(5)]);
    let seqs: Vec<u64> = received.iter().map(|m| m.seq).collect();
    assert_eq!(seqs, [1, 2, 3, 4, 5]);
    assert!(
        others
            .iter()
            .any(|e| matches!(e, Event::Reconnecting { .. })),
        "{others:?}"
    );
    assert!(
        !others
            .iter()
            .any(|e| matches!(e, Event::ResumeInexact { .. })),
        "{others:?}"
    );
    let resubscribed: Vec<bool> = others
        .iter()
        .filter_map(|e| match e {
            Event::Subscribed(sub) => Some(sub.recovered),
            _ => None,
        })
        .collect();
    assert_eq!(
        resubscribed.last(),
        Some(&true),
        "the resume after the restart was exact: {others:?}"
    );
    let last = &received[4];
    assert_eq!(
        subscriber.position("news"),
        Some(&Position::new(last.epoch.clone(), 5))
    );
}

#[tokio::test]
async fn the_subscriber_stops_when_its_token_or_a_subscription_is_refused() {
    let s = Server::start().await;
    let subscriber = |token: &str| {
        Subscriber::builder(base(&s))
            .token(token)
            .channel("news")
            .channel("secret")
            .build()
            .unwrap()
    };

    let mut rejected = subscriber("not-a-token");
    let (events, stopped) = until_stopped(&mut rejected).await;
    assert!(events.is_empty(), "{events:?}");
    assert!(
        matches!(
            &stopped,
            Stopped::Refused {
                request: Request::Connect,
                ..
            }
        ),
        "{stopped:?}"
    );
    assert_eq!(stopped.code(), Some(ErrorCode::Unauthorized), "{stopped}");
    assert!(matches!(within(rejected.next()).await, Err(Stopped::Ended)));

    let expired = herald_proto::token::mint(
        crate::support::SECRET.as_bytes(),
        &herald_proto::token::ClientClaims {
            exp: Some(1),
            channels: vec!["news".into()],
            ..Default::default()
        },
    );
    let (_, stopped) = until_stopped(&mut subscriber(&expired)).await;
    assert_eq!(stopped.code(), Some(ErrorCode::TokenExpired), "{stopped}");

    let (events, stopped) = until_stopped(&mut subscriber(&s.token(&["news"], &[]))).await;
    assert!(
        matches!(&events[..], [Event::Connected(_), Event::Subscribed(sub)] if sub.channel == "news"),
        "{events:?}"
    );
    assert!(
        matches!(&stopped, Stopped::Refused { request: Request::Subscribe(c), .. } if c == "secret"),
        "{stopped:?}"
    );
    assert_eq!(stopped.code(), Some(ErrorCode::Forbidden), "{stopped}");
}

#[tokio::test]
async fn an_expired_token_stops_the_subscriber_unless_a_supplier_gives_a_fresh_one() {
    let s = Server::start().await;
    let mut fixed = Subscriber::builder(base(&s))
        .token(s.token_expiring_in(2, &["news"]))
        .channel("news")
        .build()
        .unwrap();
    let (_, stopped) = until_stopped(&mut fixed).await;
    assert!(
        matches!(&stopped, Stopped::Disconnected(e) if e.code == "token_expired"),
        "{stopped:?}"
    );

    // The supplier's first token expires in 2 s; the next ones do not.
    let (short, long) = (s.token_expiring_in(2, &["news"]), s.token(&["news"], &[]));
    let calls = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = calls.clone();
    let mut renewed = Subscriber::builder(base(&s))
        .token_supplier(move || {
            let first = counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0;
            let token = if first { short.clone() } else { long.clone() };
            async move { Ok(token) }
        })
        .channel("news")
        .build()
        .unwrap();
    let mut others = Vec::new();
    while !others.iter().any(|e| matches!(e, Event::Subscribed(_))) {
        others.push(within(renewed.next()).await.unwrap());
    }
    s.publish("news", json!(1)).await;
    // Message 1 arrives before the token expires or, resumed, after the reconnect.
    let mut seqs = Vec::new();
    loop {
        match within(renewed.next()).await.unwrap() {
            Event::Message(m) => seqs.push(m.seq),
            Event::Reconnecting { why, .. } => {
                assert!(
                    matches!(&why, Lost::Disconnected(e) if e.code == "token_expired"),
                    "{why:?}"
                );
                break;
            }
            other => others.push(other),
        }
    }
    s.publish("news", json!(2)).await;
    while seqs.last() != Some(&2) {
        seqs.push(next_message(&mut renewed, &mut others).await.seq);
    }
    assert_eq!(seqs, [1, 2], "{others:?}");
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 2);
}

#[tokio::test]
async fn cli_subscribe_prints_what_cli_publish_sends() {
    let s = Server::start().await;
    let herald = || {
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_herald"));
        cmd.env("HERALD_URL", s.url(""))
            .env("HERALD_API_KEY", API_KEY)
            .env_remove("HERALD_TOKEN")
            .kill_on_drop(true);
        cmd
    };
    let token = s.token(&["news"], &[]);
    let subscriber = herald()
        .args([
            "subscribe",
            "news",
            "--count",
            "1",
            "--timeout",
            "20s",
            "--token",
            &token,
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Publish until the subscriber (which may not have subscribed yet) has printed one.
    let out = loop {
        let published = herald()
            .args(["publish", "news", r#"{"t":"hi"}"#])
            .output()
            .await
            .unwrap();
        assert!(published.status.success(), "{published:?}");
        let answer: serde_json::Value = serde_json::from_slice(&published.stdout).unwrap();
        assert_eq!(answer["channel"], "news");
        tokio::time::sleep(Duration::from_millis(200)).await;
        if answer["seq"].as_u64().unwrap() >= 3 {
            break within(subscriber.wait_with_output()).await.unwrap();
        }
    };
    assert_eq!(out.status.code(), Some(0));
    let line = String::from_utf8(out.stdout).unwrap();
    let message: serde_json::Value = serde_json::from_str(line.lines().next().unwrap()).unwrap();
    assert_eq!(
        (message["channel"].clone(), message["data"].clone()),
        (json!("news"), json!({"t": "hi"}))
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("subscribed: "));

    let rejected = herald()
        .args(["publish", "bad name!", "\"x\""])
        .output()
        .await
        .unwrap();
    assert_eq!(rejected.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&rejected.stderr).contains("(channel_invalid, HTTP 400)"),
        "{rejected:?}"
    );
}

/// `herald` as a client of `s`, with a clean environment.
fn cli(s: &Server) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_herald"));
    cmd.env("HERALD_URL", s.url(""))
        .env("HERALD_API_KEY", API_KEY)
        .env_remove("HERALD_TOKEN")
        .kill_on_drop(true);
    cmd
}

#[tokio::test]
async fn cli_subscribe_reconnects_and_resumes_where_it_left_off_after_a_crash() {
    use tokio::io::AsyncBufReadExt;
    let mut s = Server::start().await;
    let token = s.token(&["news"], &[]);
    // The URL without a scheme, as people type it.
    let mut subscriber = cli(&s)
        .args(["subscribe", "news", "--count", "4", "--timeout", "60s"])
        .args(["--token", &token, "--url", &s.addr.to_string()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = tokio::io::BufReader::new(subscriber.stdout.take().unwrap()).lines();
    let mut err = tokio::io::BufReader::new(subscriber.stderr.take().unwrap()).lines();
    let mut said = String::new();
    while !said.contains("subscribed: ") {
        let line = within(err.next_line())
            .await
            .unwrap()
            .expect("subscriber ended");
        said.push_str(&line);
        said.push('\n');
    }
    s.publish("news", json!(1)).await;
    s.publish("news", json!(2)).await;
    let mut printed = Vec::new();
    for _ in 0..2 {
        printed.push(within(out.next_line()).await.unwrap().expect("a message"));
    }
    // Crash; messages 3 and 4 are published while the subscriber cannot reach the server
    // (on another port), then the server comes back at the address the subscriber knows.
    let known = s.addr;
    s.restart().await;
    s.publish("news", json!(3)).await;
    s.publish("news", json!(4)).await;
    s.restart_listening_on(known).await;
    for _ in 0..2 {
        printed.push(within(out.next_line()).await.unwrap().expect("a message"));
    }
    let status = within(subscriber.wait()).await.unwrap();
    assert_eq!(status.code(), Some(0));
    let data: Vec<serde_json::Value> = printed
        .iter()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["data"].clone())
        .collect();
    assert_eq!(data, [json!(1), json!(2), json!(3), json!(4)]);
    assert_eq!(within(out.next_line()).await.unwrap(), None, "printed more");
    while let Some(line) = within(err.next_line()).await.unwrap() {
        said.push_str(&line);
        said.push('\n');
    }
    assert!(said.contains("reconnecting in"), "{said}");
    assert!(!said.contains("warning"), "{said}");
}

#[tokio::test]
async fn cli_subscribe_warns_when_it_cannot_resume_exactly() {
    let s = Server::start().await;
    s.publish("news", json!(1)).await;
    let token = s.token(&["news"], &[]);
    let out = within(
        cli(&s)
            .args(["subscribe", "news", "--since", "1", "--epoch", "0badc0de"])
            .args(["--count", "1", "--timeout", "2s", "--token", &token])
            .output(),
    )
    .await
    .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(124), "{err}");
    assert!(
        err.contains("warning: could not resume \"news\" exactly after seq 1 (epoch 0badc0de)"),
        "{err}"
    );
}

#[tokio::test]
async fn cli_data_is_json_unless_said_to_be_text_and_durations_take_units() {
    let s = Server::start().await;
    let mistyped = within(cli(&s).args(["publish", "news", "{title: hello}"]).output())
        .await
        .unwrap();
    let err = String::from_utf8_lossy(&mistyped.stderr);
    assert_eq!(mistyped.status.code(), Some(2), "{err}");
    assert!(
        err.contains("not valid JSON") && err.contains("--string"),
        "{err}"
    );
    let (_, history) = s.get("/v1/channels/news/messages").await;
    assert_eq!(
        history["messages"],
        json!([]),
        "a refused DATA was published"
    );

    let text = within(
        cli(&s)
            .args(["publish", "news", "--string", "{title: hello}"])
            .output(),
    )
    .await
    .unwrap();
    assert!(text.status.success(), "{text:?}");
    let (_, history) = s.get("/v1/channels/news/messages").await;
    assert_eq!(history["messages"][0]["data"], json!("{title: hello}"));

    let push = within(
        cli(&s)
            .args([
                "push",
                "--all",
                "--ttl",
                "1h",
                "--ack-window",
                "500ms",
                r#"{"a":1}"#,
            ])
            .output(),
    )
    .await
    .unwrap();
    assert!(push.status.success(), "{push:?}");
    let answer: serde_json::Value = serde_json::from_slice(&push.stdout).unwrap();
    let (_, receipt) = s
        .get(&format!("/v1/push/{}", answer["id"].as_str().unwrap()))
        .await;
    let ttl_ms = receipt["expires"].as_i64().unwrap() - receipt["created"].as_i64().unwrap();
    assert_eq!(ttl_ms, 3_600_000, "{receipt}");
    let bad = within(
        cli(&s)
            .args(["push", "--all", "--ttl", "soon", "1"])
            .output(),
    )
    .await
    .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("give seconds (3600) or a unit"),
        "{bad:?}"
    );
}
