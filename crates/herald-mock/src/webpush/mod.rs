//! A mock Web Push service over TLS and HTTP/2: it hands out subscriptions (a static P-256 key
//! and auth secret each, endpoint `https://127.0.0.1:PORT/push/{id}`), and for every
//! `POST /push/{id}` checks VAPID and the headers RFC 8030 requires, **decrypts** the
//! `aes128gcm` body as the browser would and keeps the plaintext, answering 201 with a
//! `Location`. Failures can be scripted per subscription.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use herald_mock::webpush::{Scripted, WebPushMock, WebPushMockOptions};
//! let mock = WebPushMock::start(WebPushMockOptions::default()).await?;
//! let sub = mock.subscription(); // register sub.endpoint, sub.p256dh, sub.auth with Herald
//! mock.script(&sub.id, Scripted::once(410));
//! # Ok(()) }
//! ```

mod decrypt;
mod vapid;

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use http::{header, Method, Request, Response, StatusCode};
use parking_lot::Mutex;

use crate::server::{serve, Answer, Handler, Reply, RunningServer, ServerOptions};
use decrypt::UserAgentKeys;

/// What a push service must accept, bytes of encrypted body (RFC 8030 section 7.2).
const MAX_BODY: usize = 4096;

/// How the Web Push mock behaves.
#[derive(Debug, Clone)]
pub struct WebPushMockOptions {
    /// Where to listen (default `127.0.0.1:0`).
    pub bind: SocketAddr,
    /// How many plaintexts [`WebPushMock::received`] keeps per subscription.
    pub keep_received: usize,
    /// Accept-loop settings.
    pub server: ServerOptions,
}

impl Default for WebPushMockOptions {
    fn default() -> Self {
        WebPushMockOptions {
            bind: SocketAddr::from(([127, 0, 0, 1], 0)),
            keep_received: 100,
            server: ServerOptions::default(),
        }
    }
}

/// A subscription made by the mock, as `PushSubscription.toJSON()` would give it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MockSubscription {
    /// Its id (the last segment of the endpoint).
    pub id: String,
    /// `https://127.0.0.1:PORT/push/{id}`.
    pub endpoint: String,
    /// The browser's public key, base64url.
    pub p256dh: String,
    /// The auth secret, base64url.
    pub auth: String,
}

/// An answer the mock gives instead of accepting, for one subscription.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scripted {
    /// HTTP status.
    pub status: u16,
    /// A `Retry-After` header, seconds.
    pub retry_after: Option<u64>,
    /// How many pushes get this answer (`None`: every one).
    pub times: Option<u32>,
}

impl Scripted {
    /// Answers the next push with `status`, once.
    pub fn once(status: u16) -> Self {
        Scripted {
            status,
            retry_after: None,
            times: Some(1),
        }
    }

    /// The same answer for every push.
    pub fn always(status: u16) -> Self {
        Scripted {
            times: None,
            ..Scripted::once(status)
        }
    }

    /// With a `Retry-After` of `secs`.
    pub fn with_retry_after(mut self, secs: u64) -> Self {
        self.retry_after = Some(secs);
        self
    }
}

struct Subscriber {
    keys: UserAgentKeys,
    application_server_key: Option<String>,
    received: VecDeque<Vec<u8>>,
    script: Option<Scripted>,
}

struct State {
    origin: String,
    keep_received: usize,
    subscribers: Mutex<HashMap<String, Subscriber>>,
    next_id: AtomicU64,
    messages: AtomicU64,
    accepted: AtomicU64,
    refused: AtomicU64,
}

/// A running Web Push mock.
pub struct WebPushMock {
    server: RunningServer,
    /// The mock's self-signed certificate, PEM: the client's extra CA.
    pub cert_pem: String,
    state: Arc<State>,
}

impl std::fmt::Debug for WebPushMock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "WebPushMock({})", self.state.origin)
    }
}

impl WebPushMock {
    /// Starts the mock.
    pub async fn start(options: WebPushMockOptions) -> std::io::Result<WebPushMock> {
        let tls = crate::tls::self_signed(&[])
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_string()))?;
        let listener = tokio::net::TcpListener::bind(options.bind).await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(State {
            origin: format!("https://{addr}"),
            keep_received: options.keep_received.max(1),
            subscribers: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            messages: AtomicU64::new(0),
            accepted: AtomicU64::new(0),
            refused: AtomicU64::new(0),
        });
        let handler_state = state.clone();
        // Decrypting takes hundreds of microseconds: each request on a task of its own, so
        // one connection's requests are decrypted on every core.
        let handler: Handler = Arc::new(move |request, body| {
            let state = handler_state.clone();
            Reply::Later(Box::pin(async move { handle(&state, &request, &body) }))
        });
        let server = serve(listener, &tls, options.server, handler)?;
        Ok(WebPushMock {
            server,
            cert_pem: tls.cert_pem,
            state,
        })
    }

    /// `https://127.0.0.1:PORT`, the origin VAPID tokens must name.
    pub fn url(&self) -> String {
        self.state.origin.clone()
    }

    /// A new subscription that takes pushes from any VAPID key.
    pub fn subscription(&self) -> MockSubscription {
        self.subscribe(None)
    }

    /// A new subscription made with `application_server_key` (base64url): pushes signed with
    /// another VAPID key are refused with 403, as browsers' push services do.
    pub fn subscription_for(&self, application_server_key: &str) -> MockSubscription {
        self.subscribe(Some(application_server_key.to_string()))
    }

    fn subscribe(&self, application_server_key: Option<String>) -> MockSubscription {
        let n = self.state.next_id.fetch_add(1, Ordering::Relaxed);
        let id = format!("s{n}-{:08x}", rand::random::<u32>());
        let keys = UserAgentKeys::generate();
        let subscription = MockSubscription {
            endpoint: format!("{}/push/{id}", self.state.origin),
            p256dh: keys.p256dh_b64url(),
            auth: keys.auth_b64url(),
            id: id.clone(),
        };
        self.state.subscribers.lock().insert(
            id,
            Subscriber {
                keys,
                application_server_key,
                received: VecDeque::new(),
                script: None,
            },
        );
        subscription
    }

    /// Answers pushes to the subscription `id` (or its endpoint path `/push/{id}`) with
    /// `answer` instead of accepting them.
    pub fn script(&self, id_or_path: &str, answer: Scripted) {
        let id = id_or_path.rsplit('/').next().unwrap_or(id_or_path);
        if let Some(subscriber) = self.state.subscribers.lock().get_mut(id) {
            subscriber.script = Some(answer);
        }
    }

    /// Drops the subscription: pushes to it get 410 Gone.
    pub fn unsubscribe(&self, id: &str) {
        self.state.subscribers.lock().remove(id);
    }

    /// The decrypted plaintexts the subscription received, oldest first.
    pub fn received(&self, id: &str) -> Vec<Vec<u8>> {
        self.state
            .subscribers
            .lock()
            .get(id)
            .map(|s| s.received.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Pushes accepted (decrypted and kept).
    pub fn accepted(&self) -> u64 {
        self.state.accepted.load(Ordering::Relaxed)
    }

    /// Pushes refused (VAPID, headers, decryption, scripted, unknown subscription).
    pub fn refused(&self) -> u64 {
        self.state.refused.load(Ordering::Relaxed)
    }

    /// Stops the mock.
    pub fn stop(self) {
        self.server.stop();
    }
}

fn handle(state: &State, request: &Request<()>, body: &[u8]) -> Answer {
    let answer = push(state, request, body);
    if answer.0.status() == StatusCode::CREATED {
        state.accepted.fetch_add(1, Ordering::Relaxed);
    } else {
        state.refused.fetch_add(1, Ordering::Relaxed);
    }
    answer
}

fn push(state: &State, request: &Request<()>, body: &[u8]) -> Answer {
    let Some(id) = request.uri().path().strip_prefix("/push/") else {
        return text(404, "no such resource", None);
    };
    if request.method() != Method::POST {
        return text(405, "push with POST", None);
    }
    let header_str = |name: &str| request.headers().get(name).and_then(|v| v.to_str().ok());
    let mut subscribers = state.subscribers.lock();
    let Some(subscriber) = subscribers.get_mut(id) else {
        return text(410, "the subscription is gone", None);
    };
    if let Some(mut script) = subscriber.script.take() {
        let answer = text(script.status, "scripted", script.retry_after);
        match script.times {
            Some(n) if n <= 1 => {}
            Some(n) => {
                script.times = Some(n - 1);
                subscriber.script = Some(script);
            }
            None => subscriber.script = Some(script),
        }
        return answer;
    }
    if let Err(refusal) = vapid::check(
        header_str("authorization"),
        &state.origin,
        subscriber.application_server_key.as_deref(),
    ) {
        return text(refusal.status, &refusal.message, None);
    }
    if header_str("content-encoding") != Some("aes128gcm") {
        return text(415, "Content-Encoding must be aes128gcm", None);
    }
    if header_str("ttl").is_none_or(|t| t.parse::<u64>().is_err()) {
        return text(400, "a TTL header (seconds) is required", None);
    }
    if let Some(urgency) = header_str("urgency") {
        if !["very-low", "low", "normal", "high"].contains(&urgency) {
            return text(400, "bad Urgency", None);
        }
    }
    if let Some(topic) = header_str("topic") {
        let ok = !topic.is_empty()
            && topic.len() <= 32
            && topic
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !ok {
            return text(400, "bad Topic", None);
        }
    }
    if body.len() > MAX_BODY {
        return text(413, "payload too large", None);
    }
    let plaintext = match subscriber.keys.decrypt(body) {
        Ok(plaintext) => plaintext,
        Err(why) => return text(400, &format!("cannot decrypt: {why}"), None),
    };
    if subscriber.received.len() >= state.keep_received {
        subscriber.received.pop_front();
    }
    subscriber.received.push_back(plaintext);
    let n = state.messages.fetch_add(1, Ordering::Relaxed) + 1;
    let response = Response::builder()
        .status(StatusCode::CREATED)
        .header(
            header::LOCATION,
            format!("{}/message/{id}-{n}", state.origin),
        )
        .body(())
        .unwrap_or_default();
    (response, Bytes::new())
}

fn text(status: u16, message: &str, retry_after: Option<u64>) -> Answer {
    let mut response = Response::builder()
        .status(StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
        .header(header::CONTENT_TYPE, "text/plain");
    if let Some(secs) = retry_after {
        response = response.header(header::RETRY_AFTER, secs);
    }
    (
        response.body(()).unwrap_or_default(),
        Bytes::from(message.to_string()),
    )
}
