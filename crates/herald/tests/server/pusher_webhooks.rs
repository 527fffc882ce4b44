//! Webhooks in Pusher's format against the real binary: an endpoint created with `"format":
//! "pusher"` is sent Pusher's webhooks, and the official Pusher server SDKs accept them:
//! `tests/pusher/webhook_receiver.mjs` checks each request with the `pusher` Node SDK's
//! `webhook(request).isValid()` and reads it with `getEvents()`, `webhook_receiver.py` with the
//! Python SDK's `validate_webhook`. pusher-js clients (`client.mjs`) subscribing and leaving
//! produce `channel_occupied`, `subscription_count`, `member_added`, `member_removed` and
//! `channel_vacated`, with Pusher's channel names and fields; their client events produce
//! `client_event` (with the sender's `user_id` on a presence channel) and a subscription to an
//! empty cache channel `cache_miss`; a receiver holding the wrong
//! secret refuses every request (so the signature is checked), and the refused batch is sent
//! again once it holds the right one; a batch answered 500 is sent again.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

use crate::pusher_api::{clients, create, Credentials};
use crate::pusher_client::PusherJs;
use crate::support::{Server, API_KEY};

/// How long a wait for webhooks may take (retries back off 1 s, 2 s, 4 s...).
const WAIT: Duration = Duration::from_secs(60);

/// Which SDK checks a receiver's requests.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Lang {
    Node,
    Python,
}

/// A receiver process (see the module documentation) with its own directory.
pub(crate) struct Receiver {
    lang: Lang,
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl Receiver {
    pub(crate) fn start(lang: Lang) -> Receiver {
        let dir = tempfile::tempdir().unwrap();
        let here = clients();
        let mut command = match lang {
            Lang::Node => {
                let mut c = Command::new("node");
                c.arg(here.join("webhook_receiver.mjs"));
                c
            }
            Lang::Python => {
                let python = here.join(".venv/bin/python");
                assert!(
                    Path::new(&python).exists(),
                    "tests/pusher/.venv is missing: run scripts/install-pusher-clients.sh"
                );
                let mut c = Command::new(python);
                c.arg(here.join("webhook_receiver.py"));
                c
            }
        };
        let mut child = command
            .arg("--dir")
            .arg(dir.path())
            .current_dir(&here)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the receiver starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("{lang:?} receiver said {line:?}"))
            .parse()
            .unwrap();
        Receiver {
            lang,
            child,
            port,
            dir,
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/pusher/webhooks", self.port)
    }

    fn write(&self, name: &str, text: &str) {
        let tmp = self.dir.path().join(format!(".{name}.tmp"));
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, self.dir.path().join(name)).unwrap();
    }

    /// The credentials the SDK checks requests with.
    pub(crate) fn set_credentials(&self, creds: &Credentials, secret: &str) {
        let text = json!({ "app_id": creds.app_id, "key": creds.key, "secret": secret });
        self.write("credentials", &text.to_string());
    }

    /// The status a valid request is answered with.
    fn set_status(&self, status: u16) {
        self.write("status", &status.to_string());
    }

    fn lines(&self, name: &str) -> Vec<Value> {
        let text = std::fs::read_to_string(self.dir.path().join(name)).unwrap_or_default();
        text.lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// Every request: `{"status","valid","events","error","time_ms"}`.
    pub(crate) fn requests(&self) -> Vec<Value> {
        self.lines("requests.jsonl")
    }

    /// Every event accepted, as the SDK read it, in arrival order.
    pub(crate) fn events(&self) -> Vec<Value> {
        self.lines("events.jsonl")
            .into_iter()
            .map(|l| l["event"].clone())
            .collect()
    }

    /// Waits until `done` holds of the events accepted; panics after [`WAIT`].
    pub(crate) async fn wait_for(&self, what: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let events = self.events();
            if done(&events) {
                return events;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{:?} receiver: no {what} within {WAIT:?}; events {events:?}; requests {:?}",
                self.lang,
                self.requests()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until `done` holds of the requests received; panics after [`WAIT`].
    async fn wait_for_requests(&self, what: &str, done: impl Fn(&[Value]) -> bool) {
        let deadline = tokio::time::Instant::now() + WAIT;
        while !done(&self.requests()) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "{:?} receiver: no {what} within {WAIT:?}; requests {:?}",
                self.lang,
                self.requests()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A node reaching loopback receivers, quick batches and `subscription_count` intervals, with
/// the default app's Pusher credentials.
async fn node() -> (Server, Credentials) {
    let s = Server::builder()
        .config(
            "[hooks]\nbatch_delay = \"100ms\"\nrequest_timeout = \"5s\"\n\
             subscription_count_interval = \"300ms\"\n",
        )
        .arg("--outbound-allow")
        .arg("127.0.0.0/8")
        .start()
        .await;
    let creds = create(&s, "default", API_KEY, None).await;
    (s, creds)
}

/// Registers a Pusher endpoint of the default app for `receiver`, told `events`.
pub(crate) async fn register(s: &Server, receiver: &Receiver, events: Value) -> Value {
    let (status, created) = s
        .post(
            "/v1/apps/default/hooks",
            json!({ "url": receiver.url(), "events": events, "format": "pusher" }),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["hook"]["format"], "pusher", "{created}");
    created["hook"].clone()
}

/// Whether `events` hold one named `name` about `channel` with the fields of `more`.
pub(crate) fn has(events: &[Value], name: &str, channel: &str, more: Value) -> bool {
    events.iter().any(|e| {
        e["name"] == name
            && e["channel"] == channel
            && more
                .as_object()
                .unwrap()
                .iter()
                .all(|(k, v)| &e[k.as_str()] == v)
    })
}

#[tokio::test]
async fn pusher_sdks_accept_channel_presence_and_count_webhooks() {
    let (s, creds) = node().await;
    let receivers = [Receiver::start(Lang::Node), Receiver::start(Lang::Python)];
    for receiver in &receivers {
        receiver.set_credentials(&creds, &creds.secret);
        register(&s, receiver, json!(["*", "subscription_count"])).await;
    }

    // A public channel occupied, and its count.
    let mut orders = PusherJs::start(&s, &creds, &["orders"], false).await;
    orders.subscribed(&["orders"]).await;
    for receiver in &receivers {
        receiver
            .wait_for("channel_occupied and subscription_count of orders", |e| {
                has(e, "channel_occupied", "orders", json!({}))
                    && has(
                        e,
                        "subscription_count",
                        "orders",
                        json!({ "subscription_count": 1 }),
                    )
            })
            .await;
    }

    // A presence channel: its member joins, then leaves with its connection.
    let ann = json!({ "user": { "user_id": "ann", "user_info": { "name": "Ann" } } });
    let room = PusherJs::start_with(&s, &creds, &["presence-room"], ann).await;
    for receiver in &receivers {
        receiver
            .wait_for("channel_occupied and member_added of presence-room", |e| {
                has(e, "channel_occupied", "presence-room", json!({}))
                    && has(
                        e,
                        "member_added",
                        "presence-room",
                        json!({ "user_id": "ann" }),
                    )
            })
            .await;
    }
    room.exit().await;
    orders.send(json!({ "unsubscribe": "orders" })).await;
    for receiver in &receivers {
        let events = receiver
            .wait_for("member_removed and both channels vacated", |e| {
                has(
                    e,
                    "member_removed",
                    "presence-room",
                    json!({ "user_id": "ann" }),
                ) && has(e, "channel_vacated", "presence-room", json!({}))
                    && has(e, "channel_vacated", "orders", json!({}))
            })
            .await;
        // Pusher's fields only, in the order they happened per channel.
        for e in &events {
            let keys: Vec<&str> = e.as_object().unwrap().keys().map(|k| k.as_str()).collect();
            let fields: &[&str] = match e["name"].as_str().unwrap() {
                "channel_occupied" | "channel_vacated" => &["channel", "name"],
                "member_added" | "member_removed" => &["channel", "name", "user_id"],
                "subscription_count" => &["channel", "name", "subscription_count"],
                other => panic!("{other}: {events:?}"),
            };
            let mut keys = keys;
            keys.sort_unstable();
            assert_eq!(keys, fields, "{e}");
        }
        for channel in ["orders", "presence-room"] {
            let existence: Vec<&str> = events
                .iter()
                .filter(|e| e["channel"] == channel)
                .filter_map(|e| e["name"].as_str())
                .filter(|n| n.starts_with("channel_"))
                .collect();
            assert_eq!(
                existence,
                ["channel_occupied", "channel_vacated"],
                "{events:?}"
            );
        }
        let requests = receiver.requests();
        assert!(
            requests
                .iter()
                .all(|r| r["valid"] == true && r["status"] == 200),
            "{:?}: {requests:?}",
            receiver.lang
        );
    }
    orders.exit().await;
}

#[tokio::test]
async fn a_wrong_secret_is_refused_and_refused_or_failed_batches_are_sent_again() {
    let (s, creds) = node().await;
    let receivers = [Receiver::start(Lang::Node), Receiver::start(Lang::Python)];
    for receiver in &receivers {
        // The SDK holds another secret: Herald's signature must not pass.
        receiver.set_credentials(&creds, &format!("{}-wrong", creds.secret));
        register(&s, receiver, json!(["channel.occupied", "channel.vacated"])).await;
    }
    let mut first = PusherJs::start(&s, &creds, &["news"], false).await;
    first.subscribed(&["news"]).await;
    for receiver in &receivers {
        receiver
            .wait_for_requests("a refused request", |r| {
                r.iter().any(|r| r["valid"] == false && r["status"] == 401)
            })
            .await;
        assert!(receiver.events().is_empty(), "{:?}", receiver.events());
    }
    // With the right secret, the refused batch is sent again and accepted.
    for receiver in &receivers {
        receiver.set_credentials(&creds, &creds.secret);
    }
    for receiver in &receivers {
        receiver
            .wait_for("channel_occupied of news, sent again", |e| {
                has(e, "channel_occupied", "news", json!({}))
            })
            .await;
    }

    // A batch answered 500 is sent again.
    let node = &receivers[0];
    node.set_status(500);
    first.send(json!({ "unsubscribe": "news" })).await;
    node.wait_for_requests("a request answered 500", |r| {
        r.iter().any(|r| r["valid"] == true && r["status"] == 500)
    })
    .await;
    assert!(!has(&node.events(), "channel_vacated", "news", json!({})));
    node.set_status(200);
    node.wait_for("channel_vacated of news, sent again", |e| {
        has(e, "channel_vacated", "news", json!({}))
    })
    .await;
    let vacated = node
        .events()
        .iter()
        .filter(|e| e["name"] == "channel_vacated")
        .count();
    assert_eq!(vacated, 1, "{:?}", node.events());
    first.exit().await;
}

#[tokio::test]
async fn client_events_and_cache_misses_are_told_to_the_pusher_sdks() {
    let (s, creds) = node().await;
    let receivers = [Receiver::start(Lang::Node), Receiver::start(Lang::Python)];
    for receiver in &receivers {
        receiver.set_credentials(&creds, &creds.secret);
        register(
            &s,
            receiver,
            json!(["pusher.client_event", "pusher.cache_miss"]),
        )
        .await;
    }
    let ann = json!({ "user": { "user_id": "ann", "user_info": {} } });
    let channels = ["presence-room", "private-chat", "cache-prices"];
    let mut js = PusherJs::start_with(&s, &creds, &channels, ann).await;
    js.subscribed(&channels).await;
    for (channel, data) in [
        ("presence-room", json!({ "typing": true })),
        ("private-chat", json!("plain")),
    ] {
        js.send(json!({ "trigger": { "channel": channel, "event": "client-hi", "data": data } }))
            .await;
    }
    let socket_id = js.socket_id.clone();
    for receiver in &receivers {
        let events = receiver
            .wait_for("two client events and a cache miss", |e| {
                e.iter().filter(|e| e["name"] == "client_event").count() == 2
                    && has(e, "cache_miss", "cache-prices", json!({}))
            })
            .await;
        let presence = events
            .iter()
            .find(|e| e["name"] == "client_event" && e["channel"] == "presence-room")
            .unwrap();
        assert_eq!(
            presence,
            &json!({
                "name": "client_event", "channel": "presence-room", "event": "client-hi",
                "data": "{\"typing\":true}", "socket_id": socket_id, "user_id": "ann",
            })
        );
        let private = events
            .iter()
            .find(|e| e["name"] == "client_event" && e["channel"] == "private-chat")
            .unwrap();
        assert_eq!(
            private,
            &json!({
                "name": "client_event", "channel": "private-chat", "event": "client-hi",
                "data": "plain", "socket_id": socket_id,
            })
        );
        // Nothing the endpoint did not ask for (the channels' existence, the members).
        assert!(
            events
                .iter()
                .all(|e| e["name"] == "client_event" || e["name"] == "cache_miss"),
            "{events:?}"
        );
    }
    js.exit().await;
}
