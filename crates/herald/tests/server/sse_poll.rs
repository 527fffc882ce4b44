//! SSE and long-poll against the real server: delivery, Last-Event-ID / cursor resume across
//! several channels, timeouts, auth and bad parameters.

use crate::support;

use serde_json::{json, Value};
use support::{Server, Sse};

#[tokio::test]
async fn sse_delivers_and_resumes_with_last_event_id() {
    let server = Server::start().await;
    let token = server.token(&["a", "b"], &[]);
    server.publish("a", json!("a1")).await;
    let mut sse = Sse::open(
        &server,
        &format!("?channel=a&channel=b&token={token}&since=0,0"),
        None,
    )
    .await
    .unwrap();
    let s1 = sse.next().await.unwrap();
    assert_eq!(s1.event, "subscribed");
    assert_eq!(s1.json()["channel"], "a");
    assert_eq!(s1.json()["recovered"], true);
    let m = sse.next().await.unwrap();
    assert_eq!(m.event, "message");
    assert_eq!(
        m.json()["data"],
        "a1",
        "a's replay follows a's confirmation"
    );
    let s2 = sse.next().await.unwrap();
    assert_eq!(
        (s2.event.as_str(), s2.json()["channel"].clone()),
        ("subscribed", json!("b"))
    );
    server.publish("b", json!("b1")).await;
    let m = sse.next().await.unwrap();
    assert_eq!(m.json()["data"], "b1");
    let last_id = m.id.clone().unwrap();
    drop(sse);

    server.publish("a", json!("a2")).await;
    server.publish("b", json!("b2")).await;
    let mut sse = Sse::open(
        &server,
        &format!("?channel=a&channel=b&token={token}"),
        Some(&last_id),
    )
    .await
    .unwrap();
    let mut data = Vec::new();
    while data.len() < 2 {
        let e = sse.next().await.unwrap();
        if e.event == "subscribed" {
            assert_eq!(e.json()["recovered"], true, "{e:?}");
        } else {
            data.push(e.json()["data"].clone());
        }
    }
    assert_eq!(data, vec![json!("a2"), json!("b2")]);
}

#[tokio::test]
async fn sse_multiline_payload_roundtrips() {
    let server = Server::builder().arg("--allow-anonymous").start().await;
    let mut sse = Sse::open(&server, "?channel=x", None).await.unwrap();
    assert_eq!(sse.next().await.unwrap().event, "subscribed");
    let body = "{\"data\": {\n  \"text\": \"line1\\nline2\"\n}}";
    let r = server
        .http
        .post(server.url("/v1/channels/x/messages"))
        .bearer_auth(support::API_KEY)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let m = sse.next().await.unwrap();
    assert_eq!(m.json()["data"]["text"], "line1\nline2");
}

#[tokio::test]
async fn sse_rejects_bad_requests_clearly() {
    let server = Server::start().await;
    let (status, body) = Sse::open(&server, "?channel=news", None)
        .await
        .err()
        .unwrap();
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (401, json!("unauthorized"))
    );
    let token = server.token(&["news"], &[]);
    let (status, body) = Sse::open(&server, &format!("?channel=other&token={token}"), None)
        .await
        .err()
        .unwrap();
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (403, json!("forbidden"))
    );
    let (status, body) = Sse::open(&server, &format!("?token={token}"), None)
        .await
        .err()
        .unwrap();
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (400, json!("bad_request"))
    );
    let (status, body) = Sse::open(&server, &format!("?channel=a//b&token={token}"), None)
        .await
        .err()
        .unwrap();
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (400, json!("channel_invalid"))
    );
    let (status, _) = Sse::open(
        &server,
        &format!("?channel=news&token={token}"),
        Some("garbage:x"),
    )
    .await
    .err()
    .unwrap();
    assert_eq!(status, 400);
    // header auth works too
    let r = server
        .http
        .get(server.url("/v1/sse?channel=news"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    // an empty ?token= wins over the header: the request has no token (and anonymous
    // clients are not allowed here)
    for path in [
        "/v1/sse?channel=news&token=",
        "/v1/poll?channel=news&token=&timeout=1",
    ] {
        let r = server
            .http
            .get(server.url(path))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 401, "{path}");
    }
}

async fn poll(server: &Server, query: &str) -> (u16, Value) {
    let r = server
        .http
        .get(server.url(&format!("/v1/poll{query}")))
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap())
}

#[tokio::test]
async fn long_poll_returns_waiting_then_live_then_times_out() {
    let server = Server::start().await;
    let token = server.token(&["p/*"], &[]);
    for i in 1..=3 {
        server.publish("p/1", json!(i)).await;
    }
    let (status, r) = poll(&server, &format!("?channel=p/1&since=0&token={token}")).await;
    assert_eq!(status, 200, "{r}");
    let got: Vec<_> = r["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["data"].clone())
        .collect();
    assert_eq!(got, vec![json!(1), json!(2), json!(3)]);
    let cursor = r["cursor"].as_str().unwrap().to_string();

    // waits for the next message
    let waiting = {
        let http = server.http.clone();
        let url = server.url(&format!(
            "/v1/poll?channel=p/1&since={cursor}&timeout=20&token={token}"
        ));
        tokio::spawn(async move {
            http.get(url)
                .send()
                .await
                .unwrap()
                .json::<Value>()
                .await
                .unwrap()
        })
    };
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    server.publish("p/1", json!(4)).await;
    let r = waiting.await.unwrap();
    assert_eq!(r["messages"][0]["data"], 4);
    assert_eq!(r["messages"].as_array().unwrap().len(), 1);
    let cursor = r["cursor"].as_str().unwrap().to_string();

    // nothing new: empty answer after the timeout, same position
    let (_, r) = poll(
        &server,
        &format!("?channel=p/1&since={cursor}&timeout=1&token={token}"),
    )
    .await;
    assert_eq!(r["messages"], json!([]));
    assert_eq!(r["cursor"], cursor);

    // bad parameters
    let (status, r) = poll(&server, &format!("?channel=p/1&timeout=abc&token={token}")).await;
    assert_eq!(
        (status, r["error"]["code"].clone()),
        (400, json!("bad_request"))
    );
    let (status, _) = poll(&server, "?channel=p/1").await;
    assert_eq!(status, 401);
}

/// `field` of every entry of the answer's array `list`.
fn pluck(answer: &Value, list: &str, field: &str) -> Vec<Value> {
    answer[list]
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| entry[field].clone())
        .collect()
}

#[tokio::test]
async fn a_channel_named_twice_in_one_request_is_subscribed_once() {
    let server = Server::start().await;
    let token = server.token(&["**"], &[]);
    server.publish("twice/a", json!("a1")).await;
    server.publish("twice/b", json!("b1")).await;
    let (status, r) = poll(
        &server,
        &format!("?channel=twice/a&channel=twice/b&channel=twice/a&since=0,0&token={token}"),
    )
    .await;
    assert_eq!(status, 200, "{r}");
    let channels = pluck(&r, "channels", "channel");
    assert_eq!(channels, vec![json!("twice/a"), json!("twice/b")], "{r}");
    let mut got = pluck(&r, "messages", "data");
    got.sort_by_key(|d| d.to_string());
    assert_eq!(
        got,
        vec![json!("a1"), json!("b1")],
        "each message once: {r}"
    );
    assert_eq!(r["cursor"].as_str().unwrap().split(',').count(), 2, "{r}");
}

#[tokio::test]
async fn a_long_poll_leaves_no_subscription_behind_once_answered() {
    let server = Server::start().await;
    let token = server.token(&["**"], &[]);
    server.publish("left/a", json!(1)).await;
    server.publish("left/b", json!(2)).await;
    // Answered at once (a message is waiting), and after waiting (the timeout passes).
    for query in ["since=0,0&timeout=5", "timeout=1"] {
        let (status, r) = poll(
            &server,
            &format!("?channel=left/a&channel=left/b&{query}&token={token}"),
        )
        .await;
        assert_eq!(status, 200, "{r}");
        // The subscriptions go once the answer is written, which may be just after the client
        // has read it: wait (bounded) for the count to fall.
        for channel in ["left/a", "left/b"] {
            let mut subscribers = None;
            for _ in 0..100 {
                let (_, info) = server.get(&format!("/v1/channels/{channel}")).await;
                subscribers = info["subscribers"].as_u64();
                if subscribers == Some(0) {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            assert_eq!(subscribers, Some(0), "{channel} after {query}");
        }
    }
}

#[tokio::test]
async fn long_poll_loop_sees_every_message_once_across_channels() {
    let server = Server::start().await;
    let token = server.token(&["**"], &[]);
    const N: u64 = 150;
    let publisher = {
        let http = server.http.clone();
        let base = server.url("");
        tokio::spawn(async move {
            for i in 1..=N {
                let ch = if i % 2 == 0 { "even" } else { "odd" };
                let r = http
                    .post(format!("{base}/v1/channels/{ch}/messages"))
                    .bearer_auth(support::API_KEY)
                    .json(&json!({ "data": i }))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(r.status(), 200);
            }
        })
    };
    let mut cursor = "0,0".to_string();
    let mut got = Vec::new();
    while got.len() < N as usize {
        let (status, r) = poll(
            &server,
            &format!("?channel=odd&channel=even&since={cursor}&timeout=5&token={token}"),
        )
        .await;
        assert_eq!(status, 200, "{r}");
        for ch in r["channels"].as_array().unwrap() {
            assert_eq!(ch["recovered"], true);
        }
        for m in r["messages"].as_array().unwrap() {
            let d = m["data"].as_u64().unwrap();
            if got.contains(&d) {
                eprintln!("DUP {d}: since={cursor} answer={r}");
            }
            got.push(d);
        }
        cursor = r["cursor"].as_str().unwrap().to_string();
    }
    publisher.await.unwrap();
    got.sort();
    assert_eq!(got, (1..=N).collect::<Vec<_>>(), "each exactly once");
}

#[tokio::test]
async fn sse_and_poll_allow_cross_origin_browsers() {
    let server = Server::builder().arg("--allow-anonymous").start().await;
    let r = server
        .http
        .request(reqwest::Method::OPTIONS, server.url("/v1/sse?channel=x"))
        .header("Origin", "http://app.example")
        .header("Access-Control-Request-Method", "GET")
        .header("Access-Control-Request-Headers", "last-event-id")
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    assert_eq!(r.headers()["access-control-allow-origin"], "*");
    let allowed = r.headers()["access-control-allow-headers"]
        .to_str()
        .unwrap()
        .to_lowercase();
    assert!(allowed.contains("last-event-id"), "{allowed}");
    let r = server
        .http
        .get(server.url("/v1/poll?channel=x&timeout=0"))
        .header("Origin", "http://app.example")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["access-control-allow-origin"], "*");
}

#[tokio::test]
async fn long_poll_limit_pages_through_a_backlog() {
    let server = Server::builder().arg("--allow-anonymous").start().await;
    for i in 1..=5 {
        server.publish("backlog", json!(i)).await;
    }
    let mut cursor = "0".to_string();
    let mut pages = Vec::new();
    loop {
        let (status, r) = poll(
            &server,
            &format!("?channel=backlog&since={cursor}&limit=2&timeout=0"),
        )
        .await;
        assert_eq!(status, 200, "{r}");
        let page: Vec<_> = r["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["data"].as_u64().unwrap())
            .collect();
        cursor = r["cursor"].as_str().unwrap().to_string();
        if page.is_empty() {
            break;
        }
        pages.push(page);
    }
    assert_eq!(pages, vec![vec![1, 2], vec![3, 4], vec![5]]);
    let (_, r) = poll(&server, "?channel=backlog&last=true&timeout=0").await;
    assert_eq!(r["messages"][0]["data"], 5, "{r}");
    let (status, _) = poll(&server, "?channel=backlog&limit=0").await;
    assert_eq!(status, 400);
}

#[tokio::test]
async fn sse_stream_ends_when_the_token_expires() {
    let server = Server::start().await;
    let token = server.token_expiring_in(2, &["news"]);
    let mut sse = Sse::open(&server, &format!("?channel=news&token={token}"), None)
        .await
        .unwrap();
    let mut last = None;
    while let Some(e) = sse.next().await {
        last = Some(e);
    }
    let last = last.unwrap();
    assert_eq!(last.event, "disconnect");
    assert_eq!(last.json()["code"], "token_expired");
}

#[tokio::test]
async fn long_poll_limit_never_skips_a_last_message_it_could_not_fit() {
    let server = Server::builder().arg("--allow-anonymous").start().await;
    server.publish("first", json!("f")).await;
    server.publish("second", json!("s")).await;
    let (_, r) = poll(
        &server,
        "?channel=first&channel=second&last=true&limit=1&timeout=0",
    )
    .await;
    let mut got: Vec<_> = r["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["data"].clone())
        .collect();
    assert_eq!(got.len(), 1, "{r}");
    let cursor = r["cursor"].as_str().unwrap().to_string();
    let (_, r) = poll(
        &server,
        &format!("?channel=first&channel=second&since={cursor}&timeout=0"),
    )
    .await;
    got.extend(
        r["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["data"].clone()),
    );
    got.sort_by_key(|v| v.to_string());
    assert_eq!(
        got,
        vec![json!("f"), json!("s")],
        "the cut-off last message comes next time"
    );
}

/// A stream of many channels (more than it scans; it keeps an index) writes each message with
/// the cursor string after it, however positions grow (a seq gaining a digit, a channel's first
/// epoch), and resumes from any of those ids exactly.
#[tokio::test]
async fn sse_ids_on_a_stream_of_many_channels_are_the_cursor_after_each_message() {
    let server = Server::start().await;
    let token = server.token(&["**"], &[]);
    const N: usize = 40;
    let names: Vec<String> = (0..N).map(|i| format!("wide/{i}")).collect();
    for i in 1..=9 {
        server.publish("wide/5", json!(i)).await;
    }
    let query: String = names.iter().map(|n| format!("channel={n}&")).collect();
    let query = format!("?{query}token={token}");
    let mut sse = Sse::open(&server, &query, None).await.unwrap();
    // The model: each channel's position, as the stream reports it.
    let mut positions = Vec::new();
    for name in &names {
        let e = sse.next().await.unwrap();
        assert_eq!(
            (e.event.as_str(), &e.json()["channel"]),
            ("subscribed", &json!(name))
        );
        let (epoch, seq) = (e.json()["epoch"].clone(), e.json()["seq"].as_u64().unwrap());
        positions.push(format!("{}:{seq}", epoch.as_str().unwrap()));
    }
    assert_eq!(positions[5].split(':').nth(1), Some("9"));
    assert_eq!(positions[0], ":0");
    // One request, so the messages are likely to reach the stream as one batch.
    let order = [5, 39, 0, 5, 17, 0, 5];
    let messages: Vec<Value> = order
        .iter()
        .enumerate()
        .map(|(k, i)| json!({ "channel": names[*i], "data": k }))
        .collect();
    let (status, body) = server
        .post("/v1/batch", json!({ "messages": messages }))
        .await;
    assert_eq!(status, 200, "{body}");
    // Channels are stored independently, so the stream may see them in another order than the
    // request's; each channel's messages keep theirs.
    let (mut ids, mut seen) = (Vec::new(), Vec::new());
    for _ in order {
        let e = sse.next().await.unwrap();
        let m = e.json();
        let k = m["data"].as_u64().unwrap() as usize;
        let i = order[k];
        assert_eq!(m["channel"], json!(names[i]));
        positions[i] = format!("{}:{}", m["epoch"].as_str().unwrap(), m["seq"]);
        assert_eq!(
            e.id.as_deref(),
            Some(positions.join(",").as_str()),
            "after message {k}"
        );
        ids.push(e.id.unwrap());
        seen.push(k as u64);
    }
    let mut of_five: Vec<u64> = seen
        .iter()
        .copied()
        .filter(|k| order[*k as usize] == 5)
        .collect();
    assert!(of_five.is_sorted(), "{seen:?}");
    of_five.sort();
    assert_eq!(of_five, vec![0, 3, 6]);
    drop(sse);
    // Resuming from the third id replays exactly the four messages the stream wrote after it.
    let mut sse = Sse::open(&server, &query, Some(&ids[2])).await.unwrap();
    let mut replayed = Vec::new();
    while replayed.len() < 4 {
        let e = sse.next().await.unwrap();
        if e.event == "subscribed" {
            assert_eq!(e.json()["recovered"], true, "{e:?}");
        } else {
            replayed.push(e.json()["data"].as_u64().unwrap());
        }
    }
    replayed.sort();
    let mut after = seen[3..].to_vec();
    after.sort();
    assert_eq!(replayed, after);
    // and nothing more (a duplicate would come right after them)
    let more = tokio::time::timeout(std::time::Duration::from_millis(300), sse.next()).await;
    assert!(more.is_err(), "{more:?}");
}
