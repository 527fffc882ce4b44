//! One node: WebSocket and SSE clients' events reach a Python and a Node receiver, each
//! request verified by the `standardwebhooks` library; a reconnect within the offline delay
//! is not reported; an endpoint down, then up, gets every event, in order; events queued when
//! the server is killed with SIGKILL are delivered after it restarts; loopback, private and
//! metadata endpoints are refused without `outbound_allow`; a rotated secret verifies with
//! either secret during its overlap, in both libraries, and a stale one no longer does.

use std::time::Duration;

use serde_json::{json, Value};

use super::{
    assert_stated_order, close, connect, count, endpoint, of, register, summary, token, Lang,
    Receiver, CONFIG,
};
use crate::support::{Server, Sse};

/// Long enough for any wait here on a loaded machine (each wait polls and stops as soon as
/// what it waits for arrived).
const WAIT: Duration = Duration::from_secs(60);

/// A node reaching loopback receivers, with a small batch delay.
async fn node() -> Server {
    Server::builder()
        .config(CONFIG)
        .arg("--outbound-allow")
        .arg("127.0.0.0/8")
        .start()
        .await
}

/// Whether `events` hold one `kind` about `about`.
fn has(events: &[Value], kind: &str, about: &str) -> bool {
    count(events, kind, about) > 0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn websocket_and_sse_clients_reach_python_and_node_receivers_verified() {
    let receivers = [Receiver::start(Lang::Python), Receiver::start(Lang::Node)];
    let s = node().await;
    // bob comes back within the offline delay: long enough that no pause of a loaded machine
    // between his close and his reconnect outlasts it.
    for r in &receivers {
        register(&s, r, 5_000).await;
    }

    // alice: a WebSocket and an SSE stream on one channel.
    let ws = connect(&s, "alice", &["rooms/1"]).await;
    let sse = Sse::open(
        &s,
        &format!("?channel=rooms/1&token={}", token("alice")),
        None,
    )
    .await
    .expect("the SSE stream opens");
    for r in &receivers {
        r.wait_for("alice's SSE connection", WAIT, |e| {
            of(e, "client.connected", "alice")
                .iter()
                .any(|c| c["data"]["transport"] == "sse")
                && count(e, "client.subscribed", "rooms/1") == 2
        })
        .await;
    }
    close(ws).await;
    for r in &receivers {
        r.wait_for("alice's WebSocket departure", WAIT, |e| {
            has(e, "client.disconnected", "alice")
        })
        .await;
    }
    drop(sse);
    for r in &receivers {
        r.wait_for("alice offline", WAIT, |e| has(e, "user.offline", "alice"))
            .await;
    }

    // bob: leaves and comes back within the offline delay, then leaves for good.
    close(connect(&s, "bob", &[]).await).await;
    let again = connect(&s, "bob", &[]).await;
    for r in &receivers {
        r.wait_for("bob's second connection", WAIT, |e| {
            count(e, "client.connected", "bob") == 2
        })
        .await;
    }
    close(again).await;
    for r in &receivers {
        r.wait_for("bob offline", WAIT, |e| has(e, "user.offline", "bob"))
            .await;
    }

    for r in &receivers {
        let events = r.events();
        let all = summary(&events).join("\n");
        let lang = r.lang;
        let connected = of(&events, "client.connected", "alice");
        let mut transports: Vec<&str> = connected
            .iter()
            .map(|e| e["data"]["transport"].as_str().unwrap_or("?"))
            .collect();
        transports.sort_unstable();
        assert_eq!(transports, ["sse", "websocket"], "{lang:?}:\n{all}");
        let reasons: Vec<&str> = of(&events, "client.disconnected", "alice")
            .iter()
            .map(|e| e["data"]["reason"].as_str().unwrap_or("?"))
            .collect();
        assert_eq!(reasons, ["closed", "closed"], "{lang:?}:\n{all}");
        for (kind, about, n) in [
            ("user.online", "alice", 1),
            ("user.offline", "alice", 1),
            ("channel.occupied", "rooms/1", 1),
            ("channel.vacated", "rooms/1", 1),
            ("client.subscribed", "rooms/1", 2),
            ("client.unsubscribed", "rooms/1", 2),
            // A reconnect within the delay: neither an offline nor a second online.
            ("client.connected", "bob", 2),
            ("client.disconnected", "bob", 2),
            ("user.online", "bob", 1),
            ("user.offline", "bob", 1),
        ] {
            assert_eq!(
                count(&events, kind, about),
                n,
                "{lang:?}: {kind} {about}:\n{all}"
            );
        }
        for e in &events {
            assert_eq!(e["app"], "default", "{e}");
            assert!(
                e["id"].as_str().is_some_and(|id| id.starts_with("evt_")),
                "{e}"
            );
        }
        assert_stated_order(&events);
        r.assert_every_request_verified();
        // webhook-id: msg_ and the first event's 26 digits, then the number of events.
        for request in r.requests().iter().filter(|q| q["verified"] == true) {
            let id = request["webhook_id"].as_str().unwrap_or("");
            let n = request["events"].as_u64().unwrap();
            assert!(
                id.starts_with("msg_") && id.len() > 31 && id.ends_with(&format!("_{n}")),
                "{request}"
            );
        }
    }
}

/// `n` users (`u0`...), each connected, subscribed to its own channel (`rooms/c{i}`), and gone.
async fn come_and_go(s: &Server, n: usize) {
    let mut clients = Vec::new();
    for i in 0..n {
        clients.push(connect(s, &format!("u{i}"), &[&format!("rooms/c{i}")]).await);
    }
    for ws in clients {
        close(ws).await;
    }
}

/// Whether `events` hold everything [`come_and_go`] makes for `n` users.
fn complete(events: &[Value], n: usize) -> bool {
    (0..n).all(|i| {
        let (user, channel) = (format!("u{i}"), format!("rooms/c{i}"));
        has(events, "user.offline", &user)
            && has(events, "client.disconnected", &user)
            && has(events, "channel.vacated", &channel)
    })
}

/// Every event [`come_and_go`] makes for `n` users, each once, in the stated order.
fn assert_complete(r: &Receiver, n: usize) {
    let events = r.events();
    let all = summary(&events).join("\n");
    for i in 0..n {
        let (user, channel) = (format!("u{i}"), format!("rooms/c{i}"));
        for (kind, about) in [
            ("client.connected", &user),
            ("user.online", &user),
            ("client.disconnected", &user),
            ("user.offline", &user),
            ("client.subscribed", &channel),
            ("client.unsubscribed", &channel),
            ("channel.occupied", &channel),
            ("channel.vacated", &channel),
        ] {
            assert_eq!(count(&events, kind, about), 1, "{kind} {about}:\n{all}");
        }
    }
    assert_eq!(events.len(), n * 8, "nothing else:\n{all}");
    assert_stated_order(&events);
    r.assert_every_request_verified();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoint_down_then_up_gets_every_event_once_or_more_in_order() {
    let r = Receiver::start(Lang::Node);
    r.set_status(503);
    let s = node().await;
    let id = register(&s, &r, 200).await;
    const USERS: usize = 12;
    come_and_go(&s, USERS).await;
    // Down long enough to be retried (the backoff starts at 1 s).
    let deadline = tokio::time::Instant::now() + WAIT;
    while r.requests().iter().filter(|q| q["status"] == 503).count() < 3 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no three refused attempts within {WAIT:?}: {:?}",
            r.requests()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let view = endpoint(&s, id).await;
    let view = view.get("hook").unwrap_or(&view);
    assert!(
        view["failures"].as_u64().unwrap_or(0) >= 1 && view["last_error"].is_string(),
        "the endpoint shows its failures: {view}"
    );
    assert!(r.events().is_empty(), "nothing accepted while down");

    r.set_status(204);
    r.wait_for("every event after the outage", WAIT, |e| complete(e, USERS))
        .await;
    assert_complete(&r, USERS);
    // The failed attempts carried the same events that were then accepted.
    let refused: u64 = r
        .requests()
        .iter()
        .filter(|q| q["status"] == 503 && q["verified"] == true)
        .map(|q| q["events"].as_u64().unwrap())
        .max()
        .unwrap();
    assert!(refused > 0);
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let view = endpoint(&s, id).await;
        let view = view.get("hook").unwrap_or(&view).clone();
        if view["queued"] == 0 && view["failures"] == 0 && view["state"] == "ok" {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the endpoint did not recover: {view}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_queued_when_the_server_is_killed_are_delivered_after_it_restarts() {
    let r = Receiver::start(Lang::Python);
    r.set_status(503);
    let mut s = node().await;
    let id = register(&s, &r, 200).await;
    const USERS: usize = 5;
    come_and_go(&s, USERS).await;
    // Every event is in the store before the kill.
    let expected = (USERS * 8) as u64;
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let view = endpoint(&s, id).await;
        let view = view.get("hook").unwrap_or(&view).clone();
        if view["queued"].as_u64() == Some(expected) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "not every event queued within {WAIT:?} (expected {expected}): {view}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    s.restart().await;
    r.set_status(204);
    r.wait_for("the events queued before the kill", WAIT, |e| {
        complete(e, USERS)
    })
    .await;
    assert_complete(&r, USERS);

    // Restarted with an endpoint in the store, the node tells of its first connection.
    close(connect(&s, "after", &[]).await).await;
    r.wait_for("a connection after the restart", WAIT, |e| {
        has(e, "client.connected", "after") && has(e, "client.disconnected", "after")
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loopback_private_and_metadata_endpoints_are_refused_without_outbound_allow() {
    let r = Receiver::start(Lang::Python);
    let s = Server::builder().config(CONFIG).start().await;
    for url in [
        r.url(),
        format!("http://localhost:{}/hooks", r.port),
        "http://169.254.169.254/latest/meta-data/".to_owned(),
        "http://10.0.0.1/hooks".to_owned(),
        "http://[::ffff:127.0.0.1]/hooks".to_owned(),
    ] {
        let (status, answer) = s
            .post(
                "/v1/apps/default/hooks",
                json!({ "url": url, "events": ["*"] }),
            )
            .await;
        assert_eq!(status, 400, "{url}: {answer}");
        let message = answer["error"]["message"].as_str().unwrap_or("");
        assert!(
            message.starts_with("url") && message.contains("outbound_allow"),
            "{url}: {answer}"
        );
    }
    let (status, list) = s.get("/v1/apps/default/hooks").await;
    assert_eq!(status, 200, "{list}");
    assert_eq!(list["hooks"], json!([]), "nothing stored: {list}");
    // Refused before any connection: the receiver was never called.
    assert!(r.requests().is_empty(), "{:?}", r.requests());
}

/// `POST .../hooks/{id}/test` on `s`: the answer (`delivered`, `status`, `error`).
async fn send_test(s: &Server, id: i64) -> Value {
    let (status, answer) = s
        .post(&format!("/v1/apps/default/hooks/{id}/test"), json!({}))
        .await;
    assert_eq!(status, 200, "{answer}");
    answer
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_secret_verifies_with_either_secret_during_its_overlap_in_both_libraries() {
    let receivers = [Receiver::start(Lang::Python), Receiver::start(Lang::Node)];
    let s = node().await;
    for r in &receivers {
        let id = register(&s, r, 3_000).await;
        let answer = send_test(&s, id).await;
        assert_eq!(answer["delivered"], true, "{:?}: {answer}", r.lang);

        // Rotated with an overlap: the receiver still holding the old secret verifies, and
        // so does one given the new secret.
        let (status, rotated) = s
            .post(
                &format!("/v1/apps/default/hooks/{id}/rotate-secret"),
                json!({ "overlap_seconds": 3600 }),
            )
            .await;
        assert_eq!(status, 200, "{rotated}");
        let answer = send_test(&s, id).await;
        assert_eq!(
            answer["delivered"], true,
            "{:?} old secret: {answer}",
            r.lang
        );
        r.set_secret(rotated["secret"].as_str().unwrap());
        let answer = send_test(&s, id).await;
        assert_eq!(
            answer["delivered"], true,
            "{:?} new secret: {answer}",
            r.lang
        );

        // Rotated again without an overlap: a receiver left with the previous secret refuses.
        let (status, again) = s
            .post(
                &format!("/v1/apps/default/hooks/{id}/rotate-secret"),
                json!({ "overlap_seconds": 0 }),
            )
            .await;
        assert_eq!(status, 200, "{again}");
        let answer = send_test(&s, id).await;
        assert_eq!(
            (answer["delivered"].clone(), answer["status"].clone()),
            (json!(false), json!(400)),
            "{:?}: a stale secret no longer verifies: {answer}",
            r.lang
        );
        r.set_secret(again["secret"].as_str().unwrap());
        assert_eq!(send_test(&s, id).await["delivered"], true);

        let tests: Vec<Value> = r
            .events()
            .into_iter()
            .filter(|e| e["type"] == "hook.test")
            .collect();
        assert_eq!(
            tests.len(),
            4,
            "{:?}: {}",
            r.lang,
            summary(&tests).join("\n")
        );
        let refused: Vec<Value> = r
            .requests()
            .into_iter()
            .filter(|q| q["verified"] != true)
            .collect();
        assert_eq!(
            refused.len(),
            1,
            "{:?}: only the stale secret's: {refused:?}",
            r.lang
        );
        assert!(
            refused[0]["error"]
                .as_str()
                .is_some_and(|e| e.contains("signature")),
            "{refused:?}"
        );
    }
}
