//! WebSocket transport against the real server: live delivery, exact resume, permissions and
//! bad input.

use crate::support;

use serde_json::{json, Value};
use support::{Server, Ws};

fn seqs(frames: &[Value]) -> Vec<u64> {
    frames
        .iter()
        .map(|f| f["message"]["seq"].as_u64().unwrap())
        .collect()
}

async fn recv_messages(ws: &mut Ws, n: usize) -> Vec<Value> {
    let mut out = Vec::new();
    while out.len() < n {
        let v = ws.frame().await;
        if v.get("message").is_some() {
            out.push(v);
        }
    }
    out
}

#[tokio::test]
async fn publish_reaches_subscriber_with_documented_shapes() {
    let server = Server::start().await;
    let token = server.token(&["news"], &[]);
    let mut ws = Ws::connect(&server.ws_url("")).await;
    let r = ws.request("connect", json!({ "token": token })).await;
    assert_eq!(r["connect"]["sub"], "tester", "{r}");
    let r = ws.request("subscribe", json!({ "channel": "news" })).await;
    assert_eq!(r["subscribe"]["channel"], "news");
    assert_eq!(r["subscribe"]["seq"], 0);
    assert_eq!(r["subscribe"]["recovered"], false);

    let p = server.publish("news", json!({ "t": "hello" })).await;
    assert_eq!(p["seq"], 1);
    let m = recv_messages(&mut ws, 1).await.remove(0);
    assert_eq!(m["message"]["channel"], "news");
    assert_eq!(m["message"]["seq"], 1);
    assert_eq!(m["message"]["data"], json!({ "t": "hello" }));
    assert_eq!(m["message"]["id"], p["id"]);
    assert!(m["message"]["time"].as_i64().unwrap() > 0);

    let r = ws.request("ping", json!({})).await;
    assert!(r.get("pong").is_some(), "{r}");
    let r = ws
        .request("unsubscribe", json!({ "channel": "news" }))
        .await;
    assert_eq!(r["unsubscribe"]["channel"], "news");
    server.publish("news", json!(2)).await;
    let r = ws.request("ping", json!({})).await;
    assert!(r.get("pong").is_some(), "no message after unsubscribe: {r}");
}

#[tokio::test]
async fn resume_replays_exactly_what_was_missed() {
    let server = Server::start().await;
    let url = server.ws_url(&format!("?token={}", server.token(&["chat/*"], &[])));
    for i in 1..=5 {
        server.publish("chat/1", json!(i)).await;
    }
    let mut ws = Ws::connect(&url).await;
    let r = ws
        .request(
            "subscribe",
            json!({ "channel": "chat/1", "since": { "seq": 2 } }),
        )
        .await;
    assert_eq!(r["subscribe"]["recovered"], true);
    assert_eq!(r["subscribe"]["seq"], 5);
    let epoch = r["subscribe"]["epoch"].as_str().unwrap().to_string();
    assert_eq!(seqs(&recv_messages(&mut ws, 3).await), vec![3, 4, 5]);
    drop(ws);

    for i in 6..=8 {
        server.publish("chat/1", json!(i)).await;
    }
    let mut ws = Ws::connect(&url).await;
    let r = ws
        .request(
            "subscribe",
            json!({ "channel": "chat/1", "since": { "seq": 5, "epoch": epoch } }),
        )
        .await;
    assert_eq!(r["subscribe"]["recovered"], true);
    server.publish("chat/1", json!(9)).await;
    assert_eq!(seqs(&recv_messages(&mut ws, 4).await), vec![6, 7, 8, 9]);

    // A cursor from another epoch cannot be resumed.
    let mut ws2 = Ws::connect(&url).await;
    let r = ws2
        .request(
            "subscribe",
            json!({ "channel": "chat/1", "since": { "seq": 5, "epoch": "ffffffff" } }),
        )
        .await;
    assert_eq!(r["subscribe"]["recovered"], false);
    // last:true sends the newest message
    let mut ws3 = Ws::connect(&url).await;
    let r = ws3
        .request("subscribe", json!({ "channel": "chat/1", "last": true }))
        .await;
    assert_eq!(r["subscribe"]["seq"], 9);
    assert_eq!(seqs(&recv_messages(&mut ws3, 1).await), vec![9]);
}

#[tokio::test]
async fn random_disconnects_never_gap_or_duplicate() {
    let server = Server::start().await;
    let url = server.ws_url(&format!("?token={}", server.token(&["feed"], &[])));
    const N: u64 = 400;
    let publisher = {
        let http = server.http.clone();
        let url = server.url("/v1/channels/feed/messages");
        tokio::spawn(async move {
            for i in 1..=N {
                let r = http
                    .post(&url)
                    .bearer_auth(support::API_KEY)
                    .json(&json!({ "data": { "i": i } }))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(r.status(), 200);
                if i % 50 == 0 {
                    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                }
            }
        })
    };
    let mut got: Vec<u64> = Vec::new();
    let mut cursor: Option<(u64, String)> = None;
    let mut rounds = 0;
    while got.last().copied() != Some(N) {
        rounds += 1;
        assert!(rounds < 500, "too many rounds");
        let mut ws = Ws::connect(&url).await;
        let mut sub = json!({ "channel": "feed" });
        if let Some((seq, epoch)) = &cursor {
            sub["since"] = json!({ "seq": seq, "epoch": epoch });
        } else {
            sub["since"] = json!({ "seq": 0 });
        }
        let r = ws.request("subscribe", sub).await;
        assert_eq!(r["subscribe"]["recovered"], true, "{r}");
        let epoch = r["subscribe"]["epoch"].as_str().unwrap().to_string();
        // read a random number of messages, then drop the connection
        let take = 1 + (rand::random::<u64>() % 40);
        for _ in 0..take {
            let Some(v) = ws.recv().await else { break };
            let seq = v["message"]["seq"].as_u64().unwrap();
            assert_eq!(v["message"]["data"]["i"], seq, "payload matches seq");
            got.push(seq);
            cursor = Some((seq, epoch.clone()));
            if seq == N {
                break;
            }
        }
    }
    publisher.await.unwrap();
    let expected: Vec<u64> = (1..=N).collect();
    assert_eq!(got, expected, "every message exactly once, in order");
}

#[tokio::test]
async fn permissions_are_enforced() {
    let server = Server::start().await;
    // no token, anonymous not allowed
    let mut ws = Ws::connect(&server.ws_url("")).await;
    let r = ws.request("subscribe", json!({ "channel": "news" })).await;
    assert_eq!(r["error"]["code"], "unauthorized", "{r}");
    // forged token refused at upgrade
    let forged = herald_proto::token::mint(b"wrong-secret-wrong-secret", &Default::default());
    assert_eq!(
        Ws::try_connect(&server.ws_url(&format!("?token={forged}")))
            .await
            .err(),
        Some(401)
    );
    // expired token
    let expired = herald_proto::token::mint(
        support::SECRET.as_bytes(),
        &herald_proto::token::ClientClaims {
            exp: Some(1),
            ..Default::default()
        },
    );
    assert_eq!(
        Ws::try_connect(&server.ws_url(&format!("?token={expired}")))
            .await
            .err(),
        Some(401)
    );
    let r = ws.request("connect", json!({ "token": expired })).await;
    assert_eq!(r["error"]["code"], "token_expired");

    let token = server.token(&["news"], &["chat/*"]);
    let mut ws = Ws::connect(&server.ws_url(&format!("?token={token}"))).await;
    let r = ws
        .request("subscribe", json!({ "channel": "secret" }))
        .await;
    assert_eq!(r["error"]["code"], "forbidden");
    let r = ws
        .request("publish", json!({ "channel": "news", "data": 1 }))
        .await;
    assert_eq!(r["error"]["code"], "forbidden");
    let r = ws
        .request(
            "publish",
            json!({ "channel": "chat/1", "data": { "x": 1 }, "id": "k1" }),
        )
        .await;
    assert_eq!(r["publish"]["seq"], 1, "{r}");
    let again = ws
        .request(
            "publish",
            json!({ "channel": "chat/1", "data": { "x": 1 }, "id": "k1" }),
        )
        .await;
    assert_eq!(again["publish"]["seq"], 1);
    assert_eq!(again["publish"]["duplicate"], true);
    let (_, h) = server.get("/v1/channels/chat/1/messages").await;
    assert_eq!(h["messages"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn anonymous_subscribe_when_allowed() {
    let server = Server::builder().arg("--allow-anonymous").start().await;
    let mut ws = Ws::connect(&server.ws_url("")).await;
    let r = ws.request("subscribe", json!({ "channel": "news" })).await;
    assert_eq!(r["subscribe"]["channel"], "news", "{r}");
    let r = ws
        .request("publish", json!({ "channel": "news", "data": 1 }))
        .await;
    assert_eq!(r["error"]["code"], "forbidden");
}

#[tokio::test]
async fn bad_input_gets_errors_and_keeps_the_connection() {
    let server = Server::start().await;
    let token = server.token(&["**"], &[]);
    let mut ws = Ws::connect(&server.ws_url(&format!("?token={token}"))).await;
    ws.send_raw("{not json").await;
    assert_eq!(ws.recv().await.unwrap()["error"]["code"], "bad_request");
    ws.send_raw(r#"{"id":5,"teleport":{}}"#).await;
    let r = ws.recv().await.unwrap();
    assert_eq!(
        (r["id"].clone(), r["error"]["code"].clone()),
        (json!(5), json!("unknown_command"))
    );
    let r = ws
        .request("subscribe", json!({ "channel": "bad name" }))
        .await;
    assert_eq!(r["error"]["code"], "channel_invalid");
    let r = ws.request("subscribe", json!({ "chanel": "typo" })).await;
    assert_eq!(r["error"]["code"], "bad_request");
    let r = ws.request("subscribe", json!({ "channel": "ok" })).await;
    assert!(r.get("subscribe").is_some());
    let r = ws.request("subscribe", json!({ "channel": "ok" })).await;
    assert_eq!(r["error"]["code"], "already_subscribed");
    let r = ws
        .request("unsubscribe", json!({ "channel": "other" }))
        .await;
    assert_eq!(r["error"]["code"], "not_subscribed");
    ws.stream
        .send(tokio_tungstenite::tungstenite::Message::binary(vec![
            1, 2, 3,
        ]))
        .await
        .unwrap();
    assert_eq!(ws.recv().await.unwrap()["error"]["code"], "bad_request");
    let r = ws.request("ping", json!({})).await;
    assert!(r.get("pong").is_some(), "connection still usable");

    // A frame over the limit (default 64 KiB) closes the connection, as RFC 6455 requires.
    let big = format!(r#"{{"id":9,"ping":{{"pad":"{}"}}}}"#, "x".repeat(70 * 1024));
    let _ = ws
        .stream
        .send(tokio_tungstenite::tungstenite::Message::text(big))
        .await;
    let mut saw_close = false;
    while let Some(v) = ws.recv().await {
        assert_ne!(v["id"], 9, "oversized frame must not be answered");
        if v["disconnect"]["code"] == "too_large" {
            saw_close = true;
        }
    }
    assert!(saw_close, "told why before closing");
    // the server is still fine
    let (status, _) = server.get("/healthz").await;
    assert_eq!(status, 200);
}

use futures_util::{SinkExt, StreamExt};

#[tokio::test]
async fn slow_consumer_is_disconnected_and_resumes() {
    let server = Server::builder()
        .env("HERALD_OUTBOX_BYTES", "65536")
        .config("[history]\nsize = 5000\n")
        .start()
        .await;
    let token = server.token(&["firehose"], &[]);
    let url = server.ws_url(&format!("?token={token}"));
    let mut ws = Ws::connect(&url).await;
    let r = ws
        .request("subscribe", json!({ "channel": "firehose" }))
        .await;
    let epoch_known = r["subscribe"]["seq"] == 0;
    assert!(epoch_known);
    // Stop reading while ~20 MB is published.
    server.flood("firehose").await;
    let mut last_seq = 0;
    let mut reason = None;
    while let Some(v) = ws.recv().await {
        if let Some(seq) = v["message"]["seq"].as_u64() {
            assert_eq!(seq, last_seq + 1, "in order, no gap before the disconnect");
            last_seq = seq;
        }
        if v.get("disconnect").is_some() {
            reason = Some(v["disconnect"]["code"].clone());
        }
    }
    assert_eq!(reason, Some(json!("slow_consumer")));
    assert!(
        last_seq < 1200,
        "the slow reader did not get everything live"
    );
    let mut ws = Ws::connect(&url).await;
    let r = ws
        .request(
            "subscribe",
            json!({ "channel": "firehose", "since": { "seq": last_seq } }),
        )
        .await;
    assert_eq!(r["subscribe"]["recovered"], true);
    let rest = recv_messages(&mut ws, (1200 - last_seq) as usize).await;
    assert_eq!(seqs(&rest).last().copied(), Some(1200));
}

#[tokio::test]
async fn connect_refresh_and_edge_cases() {
    let server = Server::builder().arg("--allow-anonymous").start().await;
    // anonymous: publishing is forbidden from the first frame on; an empty token is no token
    let mut ws = Ws::connect(&server.ws_url("?token=")).await;
    let r = ws
        .request("publish", json!({ "channel": "news", "data": 1 }))
        .await;
    assert_eq!(r["error"]["code"], "forbidden", "{r}");

    let wide = server.token(&["a", "b"], &["a"]);
    let mut ws = Ws::connect(&server.ws_url(&format!("?token={wide}"))).await;
    ws.request("subscribe", json!({ "channel": "a" })).await;
    ws.request("subscribe", json!({ "channel": "b" })).await;
    // a refresh with a narrower token drops what it no longer allows
    let narrow = server.token(&["a"], &["a"]);
    let r = ws.request("connect", json!({ "token": narrow })).await;
    assert_eq!(r["connect"]["unsubscribed"], json!(["b"]), "{r}");
    let (_, info) = server.get("/v1/channels/b").await;
    assert_eq!(info["subscribers"], 0);
    // another user's token cannot take over the connection
    let other = herald_proto::token::mint(
        support::SECRET.as_bytes(),
        &herald_proto::token::ClientClaims {
            sub: "mallory".into(),
            channels: vec!["**".into()],
            ..Default::default()
        },
    );
    let r = ws.request("connect", json!({ "token": other })).await;
    assert_eq!(r["error"]["code"], "forbidden");
    // publish with a bad idempotency key, history with a bad limit
    let r = ws
        .request("publish", json!({ "channel": "a", "data": 1, "id": "" }))
        .await;
    assert_eq!(r["error"]["code"], "bad_request", "{r}");
    let r = ws
        .request("publish", json!({ "channel": "a", "data": 1 }))
        .await;
    assert!(r["publish"]["time"].as_i64().unwrap() > 0, "{r}");
    let r = ws
        .request("history", json!({ "channel": "a", "limit": 0 }))
        .await;
    assert_eq!(r["error"]["code"], "bad_request");
    let r = ws.request("history", json!({ "channel": "a" })).await;
    assert_eq!(r["history"]["messages"][0]["data"], 1, "{r}");

    // a plain GET of /v1/ws and a wrong method get JSON errors
    let r = server.http.get(server.url("/v1/ws")).send().await.unwrap();
    assert_eq!(r.status(), 400);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], "bad_request");
    let r = server
        .http
        .delete(server.url("/v1/batch"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 405);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], "method_not_allowed");
}

#[tokio::test]
async fn expired_token_disconnects_live_connection() {
    let server = Server::start().await;
    let token = server.token_expiring_in(2, &["news"]);
    let mut ws = Ws::connect(&server.ws_url(&format!("?token={token}"))).await;
    ws.request("subscribe", json!({ "channel": "news" })).await;
    let mut reason = None;
    while let Some(v) = ws.recv().await {
        if v.get("disconnect").is_some() {
            reason = Some(v["disconnect"]["code"].clone());
        }
    }
    assert_eq!(reason, Some(json!("token_expired")));
}

#[tokio::test]
async fn namespace_options_apply_by_prefix() {
    let server = Server::builder()
        .config(
            "[[namespaces]]\nprefix = \"prices/\"\nlast_on_subscribe = true\n\n\
             [[namespaces]]\nprefix = \"tiny/\"\nhistory_size = 5\n",
        )
        .start()
        .await;
    let token = server.token(&["**"], &[]);
    let url = server.ws_url(&format!("?token={token}"));
    for i in 1..=3 {
        server.publish("prices/EURUSD", json!(i)).await;
        server.publish("news", json!(i)).await;
    }
    let mut ws = Ws::connect(&url).await;
    let r = ws
        .request("subscribe", json!({ "channel": "prices/EURUSD" }))
        .await;
    assert_eq!(r["subscribe"]["seq"], 3);
    assert_eq!(
        seqs(&recv_messages(&mut ws, 1).await),
        vec![3],
        "last message by namespace default"
    );
    let r = ws.request("subscribe", json!({ "channel": "news" })).await;
    assert_eq!(r["subscribe"]["seq"], 3);
    let r = ws.request("ping", json!({})).await;
    assert!(
        r.get("pong").is_some(),
        "no replay outside the namespace: {r}"
    );

    // tiny/ keeps only a few messages: an old cursor cannot be resumed exactly
    for i in 1..=40 {
        server.publish("tiny/x", json!(i)).await;
    }
    let r = ws
        .request(
            "subscribe",
            json!({ "channel": "tiny/x", "since": { "seq": 1 } }),
        )
        .await;
    assert_eq!(r["subscribe"]["recovered"], false, "{r}");
    let (_, h) = server
        .get("/v1/channels/tiny/x/messages?since=0&limit=100")
        .await;
    let kept = h["messages"].as_array().unwrap().len();
    assert!(
        (5..40).contains(&kept),
        "history trimmed to about 5, kept {kept}"
    );
    let r = ws.request("ping", json!({})).await;
    assert!(
        r.get("pong").is_some(),
        "nothing replayed when not recovered: {r}"
    );
}

#[tokio::test]
async fn keepalive_pings_and_drops_silent_peers() {
    let server = Server::builder()
        .arg("--allow-anonymous")
        .env("HERALD_PING_INTERVAL", "1s")
        .start()
        .await;
    let mut silent = Ws::connect(&server.ws_url("")).await;
    let mut lively = Ws::connect(&server.ws_url("")).await;
    // The lively client keeps reading (tungstenite answers pings while it reads); the silent
    // one reads nothing for three intervals.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_millis(3500);
    while tokio::time::Instant::now() < deadline {
        let _ =
            tokio::time::timeout(std::time::Duration::from_millis(200), lively.stream.next()).await;
    }
    let r = lively.request("ping", json!({})).await;
    assert!(
        r.get("pong").is_some(),
        "a peer that answers pings stays connected: {r}"
    );
    let mut saw_ping = false;
    let mut close_code = None;
    while let Ok(Some(frame)) =
        tokio::time::timeout(std::time::Duration::from_secs(5), silent.stream.next()).await
    {
        match frame {
            Ok(tokio_tungstenite::tungstenite::Message::Ping(_)) => saw_ping = true,
            Ok(tokio_tungstenite::tungstenite::Message::Close(Some(f))) => {
                close_code = Some(u16::from(f.code));
            }
            Ok(_) => {}
            Err(_) => break,
        }
    }
    assert!(saw_ping, "the server pings");
    assert_eq!(
        close_code,
        Some(4002),
        "a peer silent for a whole interval is dropped"
    );
}

/// Commits that queue up are fanned out together, a channel's run of messages to each
/// subscriber at once: every subscriber still gets each of its channels' messages exactly once
/// and in order, with runs of one channel next to runs of another in the same commits.
#[tokio::test]
async fn gathered_commits_reach_every_subscriber_complete_and_in_order() {
    let server = Server::start().await;
    let token = server.token(&["run/**"], &[]);
    let mut both = Ws::connect(&server.ws_url(&format!("?token={token}"))).await;
    let mut only_a = Ws::connect(&server.ws_url(&format!("?token={token}"))).await;
    for ch in ["run/a", "run/b"] {
        let r = both.request("subscribe", json!({ "channel": ch })).await;
        assert_eq!(r["subscribe"]["seq"], 0, "{r}");
    }
    only_a
        .request("subscribe", json!({ "channel": "run/a" }))
        .await;
    // Eight batch requests at once, each a run of "run/a" then an interleaved stretch.
    let batches = (0..8).map(|i| {
        let messages: Vec<Value> = (0..100)
            .map(|j| {
                let ch = if j < 60 || j % 2 == 0 {
                    "run/a"
                } else {
                    "run/b"
                };
                json!({ "channel": ch, "data": { "batch": i, "j": j } })
            })
            .collect();
        let server = &server;
        async move {
            let (status, r) = server
                .post("/v1/batch", json!({ "messages": messages }))
                .await;
            assert_eq!(status, 200, "{r}");
        }
    });
    futures_util::future::join_all(batches).await;
    let (a_total, b_total) = (8 * 80, 8 * 20);
    let got = recv_messages(&mut both, a_total + b_total).await;
    let of = |ch: &str| -> Vec<Value> {
        got.iter()
            .filter(|m| m["message"]["channel"] == ch)
            .cloned()
            .collect()
    };
    let want = |n: u64| (1..=n).collect::<Vec<u64>>();
    assert_eq!(seqs(&of("run/a")), want(a_total as u64));
    assert_eq!(seqs(&of("run/b")), want(b_total as u64));
    let got_a = recv_messages(&mut only_a, a_total).await;
    assert_eq!(seqs(&got_a), want(a_total as u64));
    let r = only_a.request("ping", json!({})).await;
    assert!(r.get("pong").is_some(), "nothing of run/b: {r}");
}
