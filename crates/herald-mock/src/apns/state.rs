//! What the mock APNs remembers: scripted answers per device token, counters, the last
//! requests received, how many are in flight (watched, so a test can await a number), and
//! whether requests are being held.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use bytes::Bytes;
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

pub(super) struct State {
    pub checker: TokenChecker,
    pub scripts: Mutex<HashMap<String, Scripted>>,
    pub in_flight: watch::Sender<usize>,
    pub held: watch::Sender<bool>,
    max_in_flight: AtomicUsize,
    accepted: AtomicU64,
    received_count: AtomicU64,
    received: Mutex<VecDeque<Received>>,
}

/// Counts a request out of flight when dropped.
pub(super) struct InFlight<'a>(&'a State);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.send_modify(|n| *n = n.saturating_sub(1));
    }
}

impl State {
    pub fn new(checker: TokenChecker) -> Self {
        State {
            checker,
            scripts: Mutex::new(HashMap::new()),
            in_flight: watch::channel(0).0,
            held: watch::channel(false).0,
            max_in_flight: AtomicUsize::new(0),
            accepted: AtomicU64::new(0),
            received_count: AtomicU64::new(0),
            received: Mutex::new(VecDeque::new()),
        }
    }

    pub fn enter(&self) -> InFlight<'_> {
        self.in_flight.send_modify(|n| {
            *n += 1;
            self.max_in_flight.fetch_max(*n, Ordering::Relaxed);
        });
        InFlight(self)
    }

    pub fn max_in_flight(&self) -> usize {
        self.max_in_flight.load(Ordering::Relaxed)
    }

    pub fn accepted(&self) -> u64 {
        self.accepted.load(Ordering::Relaxed)
    }

    pub fn received_count(&self) -> u64 {
        self.received_count.load(Ordering::Relaxed)
    }

    pub fn received(&self) -> Vec<Received> {
        self.received.lock().iter().cloned().collect()
    }

    /// Counts an accepted request and gives its `apns-id`.
    pub fn accept(&self) -> String {
        let n = self.accepted.fetch_add(1, Ordering::Relaxed) + 1;
        format!("00000000-0000-4000-8000-{n:012x}")
    }

    /// The scripted answer for `token`, used up if it was for once.
    pub fn scripted(&self, token: &str) -> Option<Scripted> {
        let mut scripts = self.scripts.lock();
        let answer = scripts.get(token)?.clone();
        if answer.once {
            scripts.remove(token);
        }
        Some(answer)
    }

    pub fn record(&self, request: &http::Request<()>, payload: &Bytes) {
        self.received_count.fetch_add(1, Ordering::Relaxed);
        let header = |name: &str| {
            request
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        let received = Received {
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
        };
        let mut kept = self.received.lock();
        if kept.len() == KEPT {
            kept.pop_front();
        }
        kept.push_back(received);
    }
}
