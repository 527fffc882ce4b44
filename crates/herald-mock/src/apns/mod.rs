//! A mock APNs: `POST /3/device/{token}` over TLS and HTTP/2, checking what APNs checks (the
//! request's shape in [`check`], ES256 provider tokens in [`keys`]), answering with Apple's
//! statuses and `{"reason": ...}` bodies, with scripted failures per device token, a stream
//! limit, GOAWAY after a number of requests, and counters a test or benchmark reads.

pub mod check;
pub mod keys;
mod state;

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderMap, Request, StatusCode};

pub use keys::test_key;
pub use state::{Received, Scripted};

use crate::server::{serve, Answer, Handler, Reply, RunningServer, ServerOptions};
use keys::TokenChecker;
use state::{InFlight, State};

/// How the mock behaves.
#[derive(Debug, Clone)]
pub struct ApnsMockOptions {
    /// Where to listen (default `127.0.0.1:0`).
    pub bind: SocketAddr,
    /// `SETTINGS_MAX_CONCURRENT_STREAMS` per connection (APNs announces 1000 once a token is
    /// accepted).
    pub max_concurrent_streams: u32,
    /// Send GOAWAY after this many requests on one connection.
    pub goaway_after: Option<u64>,
    /// `(key id, team id, public key PEM)`: provider tokens are checked against these. Empty:
    /// no token is required.
    pub keys: Vec<(String, String, String)>,
    /// Certificate auth: a PEM of CA certificates; a client must present a certificate that
    /// chains to one of them, or its TLS handshake fails (as Apple's does). `None`: no client
    /// certificate is asked for.
    pub client_ca_pem: Option<String>,
}

impl Default for ApnsMockOptions {
    fn default() -> Self {
        ApnsMockOptions {
            bind: SocketAddr::from(([127, 0, 0, 1], 0)),
            max_concurrent_streams: 1000,
            goaway_after: None,
            keys: Vec::new(),
            client_ca_pem: None,
        }
    }
}

/// A running mock APNs on 127.0.0.1.
pub struct ApnsMock {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Its self-signed certificate, PEM: the client's extra CA.
    pub cert_pem: String,
    state: Arc<State>,
    server: RunningServer,
}

impl std::fmt::Debug for ApnsMock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApnsMock")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl ApnsMock {
    /// Starts a mock on `options.bind` (a free port of 127.0.0.1 by default).
    pub async fn start(options: ApnsMockOptions) -> std::io::Result<ApnsMock> {
        let checker = TokenChecker::new(&options.keys)?;
        let tls = crate::tls::self_signed_with_client_ca(&[], options.client_ca_pem.as_deref())
            .map_err(std::io::Error::other)?;
        let listener = tokio::net::TcpListener::bind(options.bind).await?;
        let state = Arc::new(State::new(checker));
        let handler_state = state.clone();
        let handler: Handler = Arc::new(move |request, body| {
            let in_flight = handler_state.enter();
            if !handler_state.held() {
                return Reply::Now(handle(&handler_state, in_flight, request, body));
            }
            let state = handler_state.clone();
            Reply::Later(Box::pin(async move {
                let mut held = state.held.subscribe();
                let _ = held.wait_for(|held| !*held).await;
                handle(&state, in_flight, request, body)
            }))
        });
        let server = serve(
            listener,
            &tls,
            ServerOptions {
                max_concurrent_streams: options.max_concurrent_streams,
                goaway_after: options.goaway_after,
            },
            handler,
        )?;
        Ok(ApnsMock {
            addr: server.addr,
            cert_pem: tls.cert_pem,
            state,
            server,
        })
    }

    /// `https://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// Answers sends to `token` with `answer` (once or always) after the request checks pass.
    pub fn script(&self, token: &str, answer: Scripted) {
        self.state.script(token, answer);
    }

    /// Requests answered 200.
    pub fn accepted(&self) -> u64 {
        self.state.accepted()
    }

    /// Requests received, all of them counted.
    pub fn received_count(&self) -> u64 {
        self.state.received_count()
    }

    /// The last requests received (at most 1024), oldest first.
    pub fn received(&self) -> Vec<Received> {
        self.state.received()
    }

    /// Requests being handled now.
    pub fn in_flight(&self) -> usize {
        self.state.in_flight()
    }

    /// The most requests ever handled at once.
    pub fn max_in_flight(&self) -> usize {
        self.state.max_in_flight()
    }

    /// Waits until at least `n` requests are being handled at once.
    pub async fn wait_in_flight(&self, n: usize) {
        self.state.wait_in_flight(n).await;
    }

    /// Holds every request (received, not answered) until [`release`](Self::release).
    pub fn hold(&self) {
        self.state.hold(true);
    }

    /// Answers held requests and stops holding.
    pub fn release(&self) {
        self.state.hold(false);
    }

    /// Stops the server and closes its connections.
    pub fn stop(self) {
        self.server.stop();
    }
}

/// Answers one request (no longer held) and records it, whatever the answer; `_in_flight`
/// counts it in flight until the answer is made.
fn handle(state: &State, _in_flight: InFlight, request: Request<()>, body: Bytes) -> Answer {
    let answer = answer(state, &request, &body);
    state.record(request, body);
    answer
}

fn answer(state: &State, request: &Request<()>, body: &Bytes) -> Answer {
    let headers = check::ApnsHeaders::read(request.headers());
    if state.checker.enabled() {
        let auth = headers.authorization.and_then(|v| v.to_str().ok());
        if let Err(problem) = state.checker.check(auth) {
            return error(StatusCode::FORBIDDEN, problem.reason(), None, None);
        }
    }
    let token = match check::check_read(request, &headers, body) {
        Ok(token) => token,
        Err((status, reason)) => return error(status, reason, None, None),
    };
    if let Some(scripted) = state.scripted(token) {
        let Ok(status) = StatusCode::from_u16(scripted.status) else {
            return error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "InternalServerError",
                None,
                None,
            );
        };
        return error(
            status,
            &scripted.reason,
            scripted.timestamp,
            scripted.retry_after,
        );
    }
    let mut response = http::Response::new(());
    response
        .headers_mut()
        .insert(APNS_ID.clone(), state.accept());
    (response, Bytes::new())
}

/// `apns-id`, the header of every 200.
static APNS_ID: http::HeaderName = http::HeaderName::from_static("apns-id");

fn error(
    status: StatusCode,
    reason: &str,
    timestamp: Option<i64>,
    retry_after: Option<u64>,
) -> Answer {
    let mut body = serde_json::json!({ "reason": reason });
    if let Some(ms) = timestamp {
        body["timestamp"] = ms.into();
    }
    let mut headers = HeaderMap::new();
    headers.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    if let Some(secs) = retry_after {
        headers.insert(http::header::RETRY_AFTER, secs.into());
    }
    let mut response = http::Response::new(());
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    (response, Bytes::from(body.to_string()))
}
