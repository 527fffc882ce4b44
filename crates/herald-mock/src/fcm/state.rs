//! What the FCM mock remembers: the access tokens it issued, scripted answers per registration
//! token, counters, and a bounded list of the messages it accepted.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde_json::Value;

/// An answer the mock gives instead of accepting, for one registration token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scripted {
    /// HTTP status.
    pub status: u16,
    /// The FCM `errorCode` (`UNREGISTERED`, `QUOTA_EXCEEDED`...), in the `FcmError` detail.
    pub error_code: Option<String>,
    /// A `google.rpc.BadRequest` field violation: field and description.
    pub field_violation: Option<(String, String)>,
    /// A `Retry-After` header, seconds.
    pub retry_after: Option<u64>,
    /// How many sends get this answer (`None`: every one).
    pub times: Option<u32>,
}

impl Scripted {
    /// Answers the next send to the token with `status` and FCM `error_code`, once.
    pub fn once(status: u16, error_code: &str) -> Self {
        Scripted {
            status,
            error_code: (!error_code.is_empty()).then(|| error_code.to_string()),
            field_violation: None,
            retry_after: None,
            times: Some(1),
        }
    }

    /// The same answer for every send to the token.
    pub fn always(status: u16, error_code: &str) -> Self {
        Scripted {
            times: None,
            ..Scripted::once(status, error_code)
        }
    }

    /// With a `Retry-After` of `secs`.
    pub fn with_retry_after(mut self, secs: u64) -> Self {
        self.retry_after = Some(secs);
        self
    }

    /// With a field violation naming `field`.
    pub fn with_field_violation(mut self, field: &str, description: &str) -> Self {
        self.field_violation = Some((field.to_string(), description.to_string()));
        self
    }
}

/// One message the mock accepted.
#[derive(Debug, Clone)]
pub struct ReceivedMessage {
    /// The registration token it was sent to.
    pub token: String,
    /// The whole v1 `message` object, `token` included.
    pub message: Value,
}

pub(crate) struct State {
    pub project_id: String,
    /// `{url}/token`: the `token_uri` of the account [`super::test_account`] makes for this
    /// mock, and so the `aud` an assertion must name, whichever URL the request came in by.
    pub token_url: String,
    pub expires_in: u64,
    pub token_lifetime: Duration,
    keep_received: usize,
    issued: Mutex<HashMap<String, Instant>>,
    scripts: Mutex<HashMap<String, Scripted>>,
    received: Mutex<VecDeque<ReceivedMessage>>,
    pub token_requests: AtomicU64,
    pub accepted: AtomicU64,
    pub unauthenticated: AtomicU64,
}

impl State {
    pub fn new(
        project_id: String,
        token_url: String,
        expires_in: u64,
        token_lifetime: Duration,
        keep_received: usize,
    ) -> Self {
        State {
            project_id,
            token_url,
            expires_in,
            token_lifetime,
            keep_received,
            issued: Mutex::new(HashMap::new()),
            scripts: Mutex::new(HashMap::new()),
            received: Mutex::new(VecDeque::new()),
            token_requests: AtomicU64::new(0),
            accepted: AtomicU64::new(0),
            unauthenticated: AtomicU64::new(0),
        }
    }

    /// A new access token, remembered with when it was issued.
    pub fn issue(&self) -> String {
        let n = self.token_requests.load(Ordering::Relaxed);
        let token = format!("mock-access-{n}-{:016x}", rand::random::<u64>());
        let mut issued = self.issued.lock();
        let lifetime = self.token_lifetime;
        issued.retain(|_, at| at.elapsed() < lifetime);
        issued.insert(token.clone(), Instant::now());
        token
    }

    /// Whether `token` was issued here and has not expired or been revoked.
    pub fn valid(&self, token: &str) -> bool {
        self.issued
            .lock()
            .get(token)
            .is_some_and(|at| at.elapsed() < self.token_lifetime)
    }

    pub fn revoke_all(&self) {
        self.issued.lock().clear();
    }

    pub fn script(&self, token: &str, answer: Scripted) {
        self.scripts.lock().insert(token.to_string(), answer);
    }

    /// The scripted answer for `token`, used up when it was for a number of sends.
    pub fn scripted(&self, token: &str) -> Option<Scripted> {
        let mut scripts = self.scripts.lock();
        let answer = scripts.get_mut(token)?;
        let out = answer.clone();
        if let Some(times) = answer.times.as_mut() {
            *times = times.saturating_sub(1);
            if *times == 0 {
                scripts.remove(token);
            }
        }
        Some(out)
    }

    pub fn record(&self, token: String, message: Value) -> u64 {
        let n = self.accepted.fetch_add(1, Ordering::Relaxed) + 1;
        let mut received = self.received.lock();
        if received.len() >= self.keep_received {
            received.pop_front();
        }
        received.push_back(ReceivedMessage { token, message });
        n
    }

    pub fn received(&self) -> Vec<ReceivedMessage> {
        self.received.lock().iter().cloned().collect()
    }
}
