//! The webhook receiver of `herald bench hooks`: an HTTP/1.1 server on 127.0.0.1 (port chosen by
//! the system) that checks every request's Standard Webhooks signature (HMAC-SHA256 under the
//! secret the API answered, recomputed here, independent of Herald's own signing code), answers
//! `204` (or `401` to a request it cannot verify), and counts requests and events, each event
//! once by its `id` (a repeat is a duplicate), per bench client and event type.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use base64::Engine;
use hmac::{Hmac, Mac};
use serde::Deserialize;
use sha2::Sha256;

use crate::wire::now_ns;

/// The event types one churn cycle (connect, subscribe, disconnect) causes, in the order of
/// [`Received::cycle`].
pub const CYCLE_TYPES: [&str; 6] = [
    "client.connected",
    "client.subscribed",
    "channel.occupied",
    "client.unsubscribed",
    "channel.vacated",
    "client.disconnected",
];

/// Width of the arrival buckets (events received over time, for the chart).
pub const BUCKET_MS: u64 = 100;

/// What arrived about one bench client (its user and its channel).
#[derive(Debug, Clone, Default)]
pub struct Received {
    /// Distinct events of each of [`CYCLE_TYPES`].
    pub cycle: [u64; 6],
    /// Distinct `user.online` events.
    pub online: u64,
    /// Distinct `user.offline` events.
    pub offline: u64,
    /// Presence that broke the alternation `user.online`, `user.offline`, `user.online`, ...
    /// (starting with an online): an offline first or after an offline, or two onlines in a
    /// row.
    pub out_of_order: bool,
    /// Whether the last presence event received was a `user.online` (the user is online, as
    /// the receiver hears it).
    pub online_now: bool,
}

/// Everything the receiver saw.
#[derive(Debug, Default)]
pub struct Tally {
    /// Requests received.
    pub requests: u64,
    /// Requests whose signature did not verify (answered 401, their events not counted).
    pub bad_signatures: u64,
    /// Verified requests whose body was not `{"events":[...]}` (answered 400).
    pub bad_bodies: u64,
    /// Events received, duplicates included.
    pub events: u64,
    /// Events received again (an id seen before), per [`type_index`] (the last slot: other
    /// types).
    pub duplicates: [u64; 9],
    /// Distinct events of types or clients this run did not cause (another app's clients on a
    /// `--target`, another run), per type name.
    pub foreign: u64,
    /// Distinct events of a type the run does not expect at all.
    pub unexpected_types: u64,
    /// Per bench client.
    pub clients: Vec<Received>,
    /// When the last distinct event arrived (unix nanos; 0 when none).
    pub last_new_ns: u64,
    /// Distinct events per [`BUCKET_MS`] since `start_ns`.
    pub buckets: Vec<u64>,
    /// When the buckets start.
    pub start_ns: u64,
    /// The first problem seen, for the report.
    pub sample: Option<String>,
    pub(super) seen: HashSet<String>,
}

impl Tally {
    fn problem(&mut self, what: String) {
        if self.sample.is_none() {
            self.sample = Some(what);
        }
    }
}

/// Index of an event type in [`Tally::duplicates`]: the cycle types, then `user.online` (6) and
/// `user.offline` (7); 8 for any other.
pub fn type_index(kind: &str) -> usize {
    match kind {
        "user.online" => 6,
        "user.offline" => 7,
        _ => CYCLE_TYPES.iter().position(|t| *t == kind).unwrap_or(8),
    }
}

/// Names of the run's users and channels, to map an event back to its bench client.
#[derive(Debug, Clone)]
pub struct Names {
    /// Client `i`'s token `sub` is `{user_prefix}{i}`.
    pub user_prefix: String,
    /// Client `i`'s channel is `{channel_prefix}{i}`.
    pub channel_prefix: String,
    /// Number of clients.
    pub clients: u64,
}

impl Names {
    /// The client number of `name` under `prefix`, when it is one of this run's.
    fn client(&self, name: Option<&str>, prefix: &str) -> Option<usize> {
        let i: u64 = name?.strip_prefix(prefix)?.parse().ok()?;
        (i < self.clients).then_some(i as usize)
    }
}

/// The running receiver.
pub struct Receiver {
    /// Its address.
    pub addr: SocketAddr,
    tally: Arc<Mutex<Tally>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

struct Shared {
    /// The secret's key bytes (the base64 after `whsec_`), set once the API answered it.
    key: Mutex<Option<Vec<u8>>>,
    names: Names,
    tally: Arc<Mutex<Tally>>,
}

/// The receiver's handle for the secret, set after the endpoint is created (the receiver must
/// listen first: its URL is part of the endpoint).
#[derive(Clone)]
pub struct SecretSlot(Arc<Shared>);

impl SecretSlot {
    /// Sets the signing secret (`whsec_...`).
    pub fn set(&self, secret: &str) -> anyhow::Result<()> {
        let b64 = secret
            .strip_prefix("whsec_")
            .ok_or_else(|| anyhow::anyhow!("the API answered a secret without whsec_"))?;
        let key = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .map_err(|e| anyhow::anyhow!("the secret's key is not base64: {e}"))?;
        *self.0.key.lock().unwrap_or_else(|p| p.into_inner()) = Some(key);
        Ok(())
    }
}

impl Receiver {
    /// Starts a receiver on 127.0.0.1 for the clients named by `names`.
    pub async fn start(names: Names) -> anyhow::Result<(Receiver, SecretSlot)> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let tally = Arc::new(Mutex::new(Tally {
            clients: vec![Received::default(); names.clients as usize],
            start_ns: now_ns(),
            ..Default::default()
        }));
        let shared = Arc::new(Shared {
            key: Mutex::new(None),
            names,
            tally: tally.clone(),
        });
        let app = axum::Router::new()
            .route("/hooks", axum::routing::post(receive))
            .with_state(shared.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok((Receiver { addr, tally, task }, SecretSlot(shared)))
    }

    /// The endpoint URL to register.
    pub fn url(&self) -> String {
        format!("http://{}/hooks", self.addr)
    }

    /// Runs `f` over the tally under its lock.
    pub fn with<T>(&self, f: impl FnOnce(&mut Tally) -> T) -> T {
        f(&mut self.tally.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

/// Whether `headers` carry a Standard Webhooks signature of `body` under `key`: `webhook-id`,
/// `webhook-timestamp`, and among the space-separated `v1,<base64>` of `webhook-signature` one
/// equal to the base64 HMAC-SHA256 of `{id}.{timestamp}.{body}`.
pub fn verify(key: &[u8], headers: &HeaderMap, body: &[u8]) -> Result<(), String> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| format!("no {name} header"))
    };
    let (id, timestamp, signatures) = (
        header("webhook-id")?,
        header("webhook-timestamp")?,
        header("webhook-signature")?,
    );
    let mut mac = Hmac::<Sha256>::new_from_slice(key).map_err(|e| e.to_string())?;
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.as_bytes());
    mac.update(b".");
    mac.update(body);
    let expected = base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes());
    let ok = signatures
        .split(' ')
        .filter_map(|s| s.strip_prefix("v1,"))
        .any(|s| s == expected);
    if ok {
        Ok(())
    } else {
        Err(format!("webhook-signature {signatures:?} does not verify"))
    }
}

#[derive(Deserialize)]
struct Batch {
    events: Vec<Event>,
}

#[derive(Deserialize)]
struct Event {
    id: String,
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    data: EventData,
}

#[derive(Deserialize, Default)]
struct EventData {
    user: Option<String>,
    channel: Option<String>,
}

async fn receive(State(sh): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> StatusCode {
    let now = now_ns();
    let key = sh.key.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let mut t = sh.tally.lock().unwrap_or_else(|p| p.into_inner());
    t.requests += 1;
    let verified = match &key {
        Some(key) => verify(key, &headers, &body),
        None => Err("a request before the API answered the secret".into()),
    };
    if let Err(e) = verified {
        t.bad_signatures += 1;
        t.problem(e);
        return StatusCode::UNAUTHORIZED;
    }
    let batch: Batch = match serde_json::from_slice(&body) {
        Ok(b) => b,
        Err(e) => {
            t.bad_bodies += 1;
            t.problem(format!("a body that is not {{\"events\":[...]}}: {e}"));
            return StatusCode::BAD_REQUEST;
        }
    };
    for ev in batch.events {
        t.events += 1;
        let kind = type_index(&ev.kind);
        if !t.seen.insert(ev.id) {
            t.duplicates[kind] += 1;
            continue;
        }
        t.last_new_ns = now;
        let bucket = (now.saturating_sub(t.start_ns) / (BUCKET_MS * 1_000_000)) as usize;
        if bucket < 36_000 {
            if t.buckets.len() <= bucket {
                t.buckets.resize(bucket + 1, 0);
            }
            t.buckets[bucket] += 1;
        }
        count(&mut t, &sh.names, kind, &ev.data);
    }
    StatusCode::NO_CONTENT
}

/// Counts one distinct event of type `kind` ([`type_index`]) for the client it is about.
fn count(t: &mut Tally, names: &Names, kind: usize, data: &EventData) {
    if kind == 8 {
        t.unexpected_types += 1;
        return;
    }
    let by_user = names.client(data.user.as_deref(), &names.user_prefix);
    let client = match kind {
        2 | 4 => names.client(data.channel.as_deref(), &names.channel_prefix),
        _ => by_user,
    };
    let Some(i) = client else {
        t.foreign += 1;
        return;
    };
    let r = &mut t.clients[i];
    match kind {
        6 => {
            r.online += 1;
            r.out_of_order |= r.online_now;
            r.online_now = true;
        }
        7 => {
            r.offline += 1;
            r.out_of_order |= !r.online_now;
            r.online_now = false;
        }
        k => r.cycle[k] += 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Standard Webhooks specification's example (the same one herald-hooks' signing unit
    /// test checks), verified by this independent implementation.
    #[test]
    fn hooks_receiver_verifies_the_specifications_example() {
        let key = base64::engine::general_purpose::STANDARD
            .decode("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
            .unwrap();
        let mut headers = HeaderMap::new();
        headers.insert(
            "webhook-id",
            "msg_p5jXN8AQM9LWM0D4loKWxJek".parse().unwrap(),
        );
        headers.insert("webhook-timestamp", "1614265330".parse().unwrap());
        headers.insert(
            "webhook-signature",
            "v1,bm9ldHZhbGlk v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
                .parse()
                .unwrap(),
        );
        let body = br#"{"test": 2432232314}"#;
        assert_eq!(verify(&key, &headers, body), Ok(()));
        assert!(verify(&key, &headers, b"{\"test\": 2432232315}").is_err());
        headers.insert("webhook-signature", "v1,bm9ldHZhbGlk".parse().unwrap());
        assert!(verify(&key, &headers, body).is_err());
    }

    #[test]
    fn hooks_receiver_counts_presence_order_per_client() {
        let names = Names {
            user_prefix: "u-".into(),
            channel_prefix: "c/".into(),
            clients: 2,
        };
        let mut t = Tally {
            clients: vec![Received::default(); 2],
            ..Default::default()
        };
        let user = |u: &str| EventData {
            user: Some(u.into()),
            channel: None,
        };
        for kind in [6, 7, 6, 7, 6] {
            count(&mut t, &names, kind, &user("u-0"));
        }
        count(&mut t, &names, 6, &user("u-1"));
        count(&mut t, &names, 6, &user("u-1"));
        count(&mut t, &names, 7, &user("u-1"));
        count(&mut t, &names, 6, &user("u-7"));
        let vacated = EventData {
            user: None,
            channel: Some("c/1".into()),
        };
        count(&mut t, &names, 4, &vacated);
        let alternating = &t.clients[0];
        assert!(!alternating.out_of_order && alternating.online_now);
        assert_eq!((alternating.online, alternating.offline), (3, 2));
        assert!(t.clients[1].out_of_order, "two onlines in a row");
        assert!(!t.clients[1].online_now);
        assert_eq!(t.clients[1].cycle[4], 1);
        let mut first = Tally {
            clients: vec![Received::default(); 2],
            ..Default::default()
        };
        count(&mut first, &names, 7, &user("u-0"));
        count(&mut first, &names, 6, &user("u-0"));
        assert!(
            first.clients[0].out_of_order,
            "an offline before any online"
        );
        assert_eq!(t.foreign, 1, "u-7 is not one of the 2 clients");
    }
}
