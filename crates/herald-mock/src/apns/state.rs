//! What the mock APNs remembers: scripted answers per device token, counters (atomics), the
//! last requests received (kept as they came and read only when asked for), how many are in
//! flight (published to a watch only while a test awaits a number), and whether requests are
//! being held.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderValue, Request};
use parking_lot::Mutex;
use tokio::sync::watch;

use super::keys::TokenChecker;

/// Requests kept for [`received`](super::ApnsMock::received); older ones are only counted.
pub const KEPT: usize = 1024;

/// A scripted answer for one device token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scripted {
    /// HTTP status.
    pub status: u16,
    /// Apple's reason.
    pub reason: String,
    /// `timestamp` (ms since the epoch), as with `Unregistered`.
    pub timestamp: Option<i64>,
    /// `Retry-After`, seconds.
    pub retry_after: Option<u64>,
    /// Answer only the next send this way, then accept again.
    pub once: bool,
}

impl Scripted {
    /// The next send to the token gets `status` and `reason`.
    pub fn once(status: u16, reason: &str) -> Self {
        Scripted {
            status,
            reason: reason.to_string(),
            timestamp: None,
            retry_after: None,
            once: true,
        }
    }

    /// Every send to the token gets `status` and `reason`.
    pub fn always(status: u16, reason: &str) -> Self {
        Scripted {
            once: false,
            ..Scripted::once(status, reason)
        }
    }

    /// With a `timestamp` in the body.
    pub fn with_timestamp(mut self, ms: i64) -> Self {
        self.timestamp = Some(ms);
        self
    }

    /// With a `Retry-After` header.
    pub fn with_retry_after(mut self, secs: u64) -> Self {
        self.retry_after = Some(secs);
        self
    }
}

/// One request as received.
#[derive(Debug, Clone)]
pub struct Received {
    /// The device token from the path.
    pub token: String,
    /// `apns-topic`.
    pub topic: Option<String>,
    /// `apns-push-type`.
    pub push_type: Option<String>,
    /// `apns-priority`.
    pub priority: Option<String>,
    /// `apns-expiration`.
    pub expiration: Option<String>,
    /// `apns-collapse-id`.
    pub collapse_id: Option<String>,
    /// `authorization`.
    pub authorization: Option<String>,
    /// The body.
    pub payload: Bytes,
}

impl Received {
    /// What a kept request says, read when a test asks for it rather than copied per request.
    fn from_kept(request: &Request<()>, payload: &Bytes) -> Received {
        let header = |name: &str| {
            request
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        Received {
            token: request
                .uri()
                .path()
                .strip_prefix("/3/device/")
                .unwrap_or_default()
                .to_string(),
            topic: header("apns-topic"),
            push_type: header("apns-push-type"),
            priority: header("apns-priority"),
            expiration: header("apns-expiration"),
            collapse_id: header("apns-collapse-id"),
            authorization: header("authorization"),
            payload: payload.clone(),
        }
    }
}

/// A request kept as it came (moved in, not copied): its head and body.
type Kept = (Request<()>, Bytes);

pub(super) struct State {
    pub checker: TokenChecker,
    scripts: Mutex<HashMap<String, Scripted>>,
    /// Whether any answer was ever scripted: until then a send looks nothing up.
    any_scripts: AtomicBool,
    /// Requests being handled now.
    in_flight: AtomicUsize,
    /// Tasks waiting in [`wait_in_flight`](State::wait_in_flight): only while there are any
    /// does a request publish its count to `in_flight_watch`.
    in_flight_watchers: AtomicUsize,
    in_flight_watch: watch::Sender<usize>,
    /// Whether requests are held (read per request), and the watch held requests wait on.
    held_now: AtomicBool,
    pub held: watch::Sender<bool>,
    max_in_flight: AtomicUsize,
    accepted: AtomicU64,
    received_count: AtomicU64,
    received: Mutex<VecDeque<Kept>>,
}

/// Counts a request out of flight when dropped.
pub(super) struct InFlight(Arc<State>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
        self.0.publish_in_flight();
    }
}

impl State {
    pub fn new(checker: TokenChecker) -> Self {
        State {
            checker,
            scripts: Mutex::new(HashMap::new()),
            any_scripts: AtomicBool::new(false),
            in_flight: AtomicUsize::new(0),
            in_flight_watchers: AtomicUsize::new(0),
            in_flight_watch: watch::channel(0).0,
            held_now: AtomicBool::new(false),
            held: watch::channel(false).0,
            max_in_flight: AtomicUsize::new(0),
            accepted: AtomicU64::new(0),
            received_count: AtomicU64::new(0),
            received: Mutex::new(VecDeque::new()),
        }
    }

    /// Counts a request in flight until the guard drops.
    pub fn enter(self: &Arc<Self>) -> InFlight {
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_in_flight.fetch_max(now, Ordering::Relaxed);
        self.publish_in_flight();
        InFlight(self.clone())
    }

    /// Tells waiting tasks the count in flight, if there are any. The count and the number of
    /// watchers are both sequentially consistent, so either a request sees a new watcher here
    /// or the watcher reads that request's count when it starts waiting.
    fn publish_in_flight(&self) {
        if self.in_flight_watchers.load(Ordering::SeqCst) > 0 {
            self.in_flight_watch
                .send_modify(|n| *n = self.in_flight.load(Ordering::SeqCst));
        }
    }

    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst)
    }

    /// Waits until at least `n` requests are in flight at once.
    pub async fn wait_in_flight(&self, n: usize) {
        self.in_flight_watchers.fetch_add(1, Ordering::SeqCst);
        let mut watch = self.in_flight_watch.subscribe();
        self.in_flight_watch
            .send_modify(|now| *now = self.in_flight.load(Ordering::SeqCst));
        let _ = watch.wait_for(|now| *now >= n).await;
        self.in_flight_watchers.fetch_sub(1, Ordering::SeqCst);
    }

    pub fn max_in_flight(&self) -> usize {
        self.max_in_flight.load(Ordering::Relaxed)
    }

    /// Holds requests (`true`) or answers the held ones and stops holding (`false`).
    pub fn hold(&self, held: bool) {
        self.held_now.store(held, Ordering::SeqCst);
        self.held.send_replace(held);
    }

    /// Whether a request arriving now is held.
    pub fn held(&self) -> bool {
        self.held_now.load(Ordering::SeqCst)
    }

    pub fn accepted(&self) -> u64 {
        self.accepted.load(Ordering::Relaxed)
    }

    pub fn received_count(&self) -> u64 {
        self.received_count.load(Ordering::Relaxed)
    }

    pub fn received(&self) -> Vec<Received> {
        self.received
            .lock()
            .iter()
            .map(|(request, payload)| Received::from_kept(request, payload))
            .collect()
    }

    /// Counts an accepted request and gives its `apns-id`, a UUID made of the count.
    pub fn accept(&self) -> HeaderValue {
        let n = self.accepted.fetch_add(1, Ordering::Relaxed) + 1;
        let mut id = *b"00000000-0000-4000-8000-000000000000";
        let digits = b"0123456789abcdef";
        for (i, byte) in id[24..].iter_mut().rev().enumerate() {
            *byte = digits[((n >> (4 * i)) & 0xf) as usize];
        }
        let mut value = HeaderValue::from_bytes(&id).unwrap_or(HeaderValue::from_static("0"));
        // A different value per answer: never worth a place in the HPACK table.
        value.set_sensitive(true);
        value
    }

    pub fn script(&self, token: &str, answer: Scripted) {
        self.scripts.lock().insert(token.to_string(), answer);
        self.any_scripts.store(true, Ordering::SeqCst);
    }

    /// The scripted answer for `token`, used up if it was for once.
    pub fn scripted(&self, token: &str) -> Option<Scripted> {
        if !self.any_scripts.load(Ordering::SeqCst) {
            return None;
        }
        let mut scripts = self.scripts.lock();
        let answer = scripts.get(token)?.clone();
        if answer.once {
            scripts.remove(token);
        }
        Some(answer)
    }

    /// Counts a request and keeps it (moved, not copied) among the last [`KEPT`].
    pub fn record(&self, request: Request<()>, payload: Bytes) {
        self.received_count.fetch_add(1, Ordering::Relaxed);
        let evicted = {
            let mut kept = self.received.lock();
            let evicted = if kept.len() == KEPT {
                kept.pop_front()
            } else {
                None
            };
            kept.push_back((request, payload));
            evicted
        };
        // Freed outside the lock.
        drop(evicted);
    }
}
