//! Webhooks end to end: the real binary sends lifecycle events to real receivers that verify
//! every request with Standard Webhooks' own libraries (`tests/hooks/receiver.py`, PyPI's
//! `standardwebhooks`, and `tests/hooks/receiver.mjs`, npm's; installed by
//! `scripts/install-hook-receivers.sh`, which `scripts/test.sh` runs). One node (`one_node`):
//! the events of WebSocket and SSE clients, debounced offline, an outage and its recovery,
//! kill -9 with events queued, refused destinations. A cluster (`cluster`): users and channels
//! across nodes, a node killed with SIGKILL and one stopped with SIGTERM. `subscription_count`
//! (`subscription_count`): one event per interval with the final count, opt-in.
//!
//! Here: the receivers ([`Receiver`]), the endpoint's creation, and what the tests read of the
//! events received. Every wait has a deadline and, when it runs out, says what was received.

mod cluster;
mod one_node;
mod subscription_count;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use herald_proto::token::{mint, ClientClaims};
use serde_json::{json, Value};

use crate::support::{Server, Ws, SECRET};

/// Which library verifies a receiver's requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    /// `receiver.py`, with `standardwebhooks` from PyPI.
    Python,
    /// `receiver.mjs`, with `standardwebhooks` from npm.
    Node,
}

/// Where the receivers and their installed libraries are.
fn receivers_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/hooks")
}

/// A webhook receiver process on loopback with its own directory (see `tests/hooks`): the
/// secret and the status to answer are files the test writes; what it verified and accepted
/// are JSON lines it writes.
pub struct Receiver {
    pub lang: Lang,
    child: Option<Child>,
    pub port: u16,
    dir: tempfile::TempDir,
}

impl Receiver {
    /// Starts a receiver answering 204 once it has a secret.
    pub fn start(lang: Lang) -> Receiver {
        let dir = tempfile::tempdir().unwrap();
        let here = receivers_dir();
        let mut command = match lang {
            Lang::Python => {
                let python = here.join(".venv/bin/python");
                assert!(
                    python.exists(),
                    "{} is missing: run scripts/install-hook-receivers.sh (scripts/test.sh does)",
                    python.display()
                );
                let mut c = Command::new(python);
                c.arg(here.join("receiver.py"));
                c
            }
            Lang::Node => {
                assert!(
                    here.join("node_modules/standardwebhooks").exists(),
                    "tests/hooks/node_modules is missing: run scripts/install-hook-receivers.sh \
                     (scripts/test.sh does)"
                );
                let mut c = Command::new("node");
                c.arg(here.join("receiver.mjs"));
                c
            }
        };
        command
            .arg("--dir")
            .arg(dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let mut child = command.spawn().expect("the receiver starts");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(port) = line.strip_prefix("listening on ") {
                    let _ = tx.send(port.trim().parse::<u16>().unwrap());
                }
            }
        });
        let port = match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(port) => port,
            Err(_) => {
                let _ = child.kill();
                panic!("the {lang:?} receiver did not say where it listens within 30 s");
            }
        };
        Receiver {
            lang,
            child: Some(child),
            port,
            dir,
        }
    }

    /// The URL to register.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/hooks", self.port)
    }

    fn write(&self, name: &str, text: &str) {
        // Written whole, then renamed: the receiver never reads half a file.
        let tmp = self.dir.path().join(format!(".{name}.tmp"));
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, self.dir.path().join(name)).unwrap();
    }

    /// The endpoint's signing secret, as Herald answered it.
    pub fn set_secret(&self, secret: &str) {
        self.write("secret", secret);
    }

    /// The status the receiver answers from now on (e.g. 503: down, 204: up).
    pub fn set_status(&self, status: u16) {
        self.write("status", &status.to_string());
    }

    fn lines(&self, name: &str) -> Vec<Value> {
        let text = std::fs::read_to_string(self.dir.path().join(name)).unwrap_or_default();
        // The last line may be half written.
        text.lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// Every request, in arrival order: `{"webhook_id","status","events","verified","error"}`.
    pub fn requests(&self) -> Vec<Value> {
        self.lines("requests.jsonl")
    }

    /// Every event accepted (verified and answered 2xx), in arrival order, repeats included.
    pub fn accepted(&self) -> Vec<Value> {
        self.lines("events.jsonl")
            .into_iter()
            .map(|l| l["event"].clone())
            .collect()
    }

    /// The events accepted, each once (its first arrival), in arrival order.
    pub fn events(&self) -> Vec<Value> {
        let mut seen = std::collections::HashSet::new();
        self.accepted()
            .into_iter()
            .filter(|e| seen.insert(e["id"].as_str().unwrap_or("").to_owned()))
            .collect()
    }

    /// Panics if a request did not verify (other than those before the secret was written).
    pub fn assert_every_request_verified(&self) {
        let bad: Vec<Value> = self
            .requests()
            .into_iter()
            .filter(|r| {
                r["verified"] != true
                    && !r["error"]
                        .as_str()
                        .is_some_and(|e| e.starts_with("unready"))
            })
            .collect();
        assert!(
            bad.is_empty(),
            "{:?} receiver: requests that did not verify: {bad:?}",
            self.lang
        );
        for r in self.requests() {
            assert_eq!(r["content_type"], "application/json", "{r}");
            let agent = r["user_agent"].as_str().unwrap_or("");
            assert!(agent.starts_with("herald/"), "{r}");
        }
    }

    /// Waits until `done` holds of the events accepted (each once), at most `within`, and
    /// answers them.
    /// On time-out, panics with `what` and what was received so far.
    pub async fn wait_for(
        &self,
        what: &str,
        within: Duration,
        done: impl Fn(&[Value]) -> bool,
    ) -> Vec<Value> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let events = self.events();
            if done(&events) {
                return events;
            }
            if tokio::time::Instant::now() > deadline {
                panic!(
                    "{:?} receiver: no {what} within {within:?}; received so far:\n{}\nrequests: {}",
                    self.lang,
                    summary(&events).join("\n"),
                    self.requests().len(),
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Stops the receiver process (its port refuses connections).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.kill();
    }
}

/// One line per event, for failure messages: `type user/channel [transport reason]`.
pub fn summary(events: &[Value]) -> Vec<String> {
    events.iter().map(brief).collect()
}

/// An event in a few words.
pub fn brief(e: &Value) -> String {
    let d = &e["data"];
    let mut s = format!(
        "{} {}",
        e["timestamp"].as_str().unwrap_or("?"),
        e["type"].as_str().unwrap_or("?")
    );
    for key in ["user", "channel", "transport", "reason", "connection"] {
        if let Some(v) = d[key].as_str() {
            s.push_str(&format!(" {key}={v}"));
        }
    }
    s
}

/// The events of `kind` (`user.online`...) about `user` (or a channel named so).
pub fn of<'a>(events: &'a [Value], kind: &str, about: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| e["type"] == kind)
        .filter(|e| e["data"]["user"] == about || e["data"]["channel"] == about)
        .collect()
}

/// How many events of `kind` about `about`.
pub fn count(events: &[Value], kind: &str, about: &str) -> usize {
    of(events, kind, about).len()
}

/// A client token for user `sub`, allowed every `rooms/*` channel.
pub fn token(sub: &str) -> String {
    mint(
        SECRET.as_bytes(),
        &ClientClaims {
            sub: sub.into(),
            channels: vec!["rooms/*".into()],
            ..Default::default()
        },
    )
}

/// A WebSocket client of user `sub` on `s` ([`token`]), subscribed to `channels`.
pub async fn connect(s: &Server, sub: &str, channels: &[&str]) -> Ws {
    let mut ws = Ws::connect(&s.ws_url(&format!("?token={}", token(sub)))).await;
    for channel in channels {
        let reply = ws.request("subscribe", json!({ "channel": channel })).await;
        assert!(
            reply.get("subscribe").is_some(),
            "{sub} subscribing to {channel}: {reply}; {}",
            ws.why_closed()
        );
    }
    ws
}

/// Closes `ws` as a client does and reads until the server's close.
pub async fn close(mut ws: Ws) {
    let _ = ws.stream.close(None).await;
    while ws.recv().await.is_some() {}
}

/// The config of a node for these tests: small batch delay, quick retries.
pub const CONFIG: &str = "[hooks]\nbatch_delay = \"100ms\"\nrequest_timeout = \"5s\"\n";

/// Registers an endpoint of the default app for `receiver` (every event type, the offline
/// delay given) on `server`, and gives the receiver its secret. Answers the endpoint's id.
pub async fn register(server: &Server, receiver: &Receiver, offline_delay_ms: u64) -> i64 {
    let (status, created) = server
        .post(
            "/v1/apps/default/hooks",
            json!({
                "url": receiver.url(),
                "events": ["*"],
                "offline_delay_ms": offline_delay_ms,
                "description": format!("{:?} receiver", receiver.lang),
            }),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    receiver.set_secret(created["secret"].as_str().expect("the secret"));
    created["hook"]["id"].as_i64().expect("the endpoint's id")
}

/// The endpoint `id` as the API shows it.
pub async fn endpoint(server: &Server, id: i64) -> Value {
    let (status, body) = server.get(&format!("/v1/apps/default/hooks/{id}")).await;
    assert_eq!(status, 200, "{body}");
    body
}

/// Checks the order docs/hooks.md states on what a receiver got (each event once, in arrival
/// order): per user, online and offline alternate starting with online; per channel, occupied
/// and vacated alternate starting with occupied; per connection, connected first and
/// disconnected last; and each user's and each channel's events other than the held
/// `user.offline` arrive in the order they happened (their timestamps never go back).
pub fn assert_stated_order(events: &[Value]) {
    use std::collections::HashMap;
    let all = summary(events).join("\n");
    let mut users: HashMap<String, bool> = HashMap::new();
    let mut channels: HashMap<String, bool> = HashMap::new();
    let mut connections: HashMap<String, &str> = HashMap::new();
    let mut last_time: HashMap<String, String> = HashMap::new();
    for e in events {
        let kind = e["type"].as_str().unwrap_or("");
        let d = &e["data"];
        let user = d["user"].as_str().unwrap_or("").to_owned();
        let channel = d["channel"].as_str().unwrap_or("").to_owned();
        match kind {
            "user.online" | "user.offline" => {
                let online = users.entry(user.clone()).or_insert(false);
                assert_eq!(
                    *online,
                    kind == "user.offline",
                    "{kind} for {user} out of turn in:\n{all}"
                );
                *online = kind == "user.online";
            }
            "channel.occupied" | "channel.vacated" => {
                let occupied = channels.entry(channel.clone()).or_insert(false);
                assert_eq!(
                    *occupied,
                    kind == "channel.vacated",
                    "{kind} for {channel} out of turn in:\n{all}"
                );
                *occupied = kind == "channel.occupied";
            }
            _ => {}
        }
        if let Some(connection) = d["connection"].as_str() {
            let state = connections.entry(connection.to_owned()).or_insert("new");
            match kind {
                "client.connected" => {
                    assert_eq!(*state, "new", "{connection} connected twice in:\n{all}");
                    *state = "open";
                }
                "client.disconnected" => {
                    assert_ne!(*state, "gone", "{connection} left twice in:\n{all}");
                    *state = "gone";
                }
                _ => assert_ne!(*state, "gone", "{kind} after {connection} left in:\n{all}"),
            }
        }
        if kind == "user.offline" {
            continue;
        }
        let time = e["timestamp"].as_str().unwrap_or("").to_owned();
        for key in [format!("user {user}"), format!("channel {channel}")] {
            if key.ends_with(' ') {
                continue;
            }
            let last = last_time.entry(key.clone()).or_default();
            assert!(
                time >= *last,
                "{} arrived after an event of {key} that happened later, in:\n{all}",
                brief(e)
            );
            *last = time.clone();
        }
    }
}
