//! One webhook request: a batch `POST`ed to an endpoint, signed, and what came of it
//! ([`Sender::send`], answering a [`SendOutcome`]).
//!
//! The request is `POST url` with `content-type: application/json`, the body
//! `{"events":[...]}` ([`batch_body`], the stored event JSON as it is, not parsed again), the
//! three Standard Webhooks headers (`webhook-id`, [`webhook_id`]; `webhook-timestamp`, now;
//! `webhook-signature`, one signature per secret given) and `user-agent: herald/<version>`.
//!
//! A Pusher endpoint's request ([`Sender::send_pusher`]) has Pusher's body and headers instead
//! (`X-Pusher-Key`, `X-Pusher-Signature`: [`crate::pusher`]).
//!
//! An endpoint's URL is a tenant's: the request reaches only the addresses the operator's
//! [`Destinations`] allow (an IP literal is checked before the request, a name's addresses by
//! the client's resolver at every connection, so a name that now resolves to a private address
//! is refused too) and follows no redirect (a 3xx is a failure). Of the answer's body at most
//! [`EXCERPT_BYTES`] are read and kept, as the failure's excerpt; the rest is never read.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use herald_providers::destination::{literal_ip, DestinationError, Destinations};

use crate::endpoint::StoredEndpoint;
use crate::signing::{Signed, SigningSecret};
use crate::store::QueuedEvent;

/// Most bytes of an answer's body read (and kept as a failure's excerpt).
pub const EXCERPT_BYTES: usize = 256;

/// Longest failure reason, in characters.
pub const REASON_CHARS: usize = 256;

/// Longest part of a redirect's `Location` kept in its reason, in characters.
const LOCATION_CHARS: usize = 128;

/// The `user-agent` of every request.
pub const USER_AGENT: &str = concat!("herald/", env!("CARGO_PKG_VERSION"));

/// Sends webhook requests (see the [module documentation](self)). Cheap to clone: its clones
/// share one HTTP client (a connection pool) for every endpoint.
#[derive(Clone)]
pub struct Sender {
    client: reqwest::Client,
    destinations: Destinations,
}

/// What one request came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendResult {
    /// The endpoint answered 2xx: delivered.
    Ok {
        /// The status.
        status: u16,
    },
    /// The endpoint answered with an error status (4xx, 5xx).
    Http {
        /// The status.
        status: u16,
        /// Its `Retry-After` (seconds or an HTTP date), as given.
        retry_after: Option<Duration>,
        /// The start of its body (at most [`EXCERPT_BYTES`], control characters as spaces).
        excerpt: String,
    },
    /// No answer within the request timeout.
    Timeout,
    /// The connection could not be made (or broke before an answer).
    Connect(String),
    /// The URL may not be reached: its address is refused by the destination rule (or it is
    /// not an `http`/`https` URL). Nothing was sent.
    Refused(String),
    /// The endpoint answered a redirect, which is not followed.
    Redirect {
        /// The status.
        status: u16,
        /// The start of its `Location`, without query.
        location: String,
    },
}

/// A request's result and how long it took.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendOutcome {
    /// What came of it.
    pub result: SendResult,
    /// From the start of the request to the end of what was read of the answer.
    pub latency: Duration,
}

impl SendResult {
    /// Whether the batch was delivered (2xx).
    pub fn delivered(&self) -> bool {
        matches!(self, SendResult::Ok { .. })
    }

    /// The result as the metrics name it: `ok`, `http_4xx`, `http_5xx`, `timeout`, `connect`,
    /// `refused` or `redirect`.
    pub fn label(&self) -> &'static str {
        match self {
            SendResult::Ok { .. } => "ok",
            SendResult::Http { status, .. } if *status >= 500 => "http_5xx",
            SendResult::Http { .. } => "http_4xx",
            SendResult::Timeout => "timeout",
            SendResult::Connect(_) => "connect",
            SendResult::Refused(_) => "refused",
            SendResult::Redirect { .. } => "redirect",
        }
    }

    /// The endpoint's `Retry-After`, when it gave one.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            SendResult::Http { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// Why it failed (or that it did not), at most [`REASON_CHARS`] characters: what the
    /// endpoint's last error and a dead letter's reason say.
    pub fn reason(&self) -> String {
        let text = match self {
            SendResult::Ok { status } => format!("HTTP {status}"),
            SendResult::Http {
                status, excerpt, ..
            } if excerpt.trim().is_empty() => format!("HTTP {status}"),
            SendResult::Http {
                status, excerpt, ..
            } => format!("HTTP {status}: {}", excerpt.trim()),
            SendResult::Timeout => "no answer within the request timeout".to_string(),
            SendResult::Connect(why) => format!("connection failed: {why}"),
            SendResult::Refused(why) => format!("refused: {why}"),
            SendResult::Redirect { status, location } if location.is_empty() => {
                format!("HTTP {status}: redirect not followed")
            }
            SendResult::Redirect { status, location } => {
                format!("HTTP {status}: redirect not followed (location {location})")
            }
        };
        cut_chars(text, REASON_CHARS)
    }
}

impl Sender {
    /// A sender whose every request ends within `timeout` (connecting included) and reaches
    /// only `destinations`.
    pub fn new(destinations: Destinations, timeout: Duration) -> Result<Sender, String> {
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout)
            .redirect(reqwest::redirect::Policy::none())
            .dns_resolver(Arc::new(AllowedOnly(destinations.clone())))
            .user_agent(USER_AGENT)
            .build()
            .map_err(|e| e.to_string())?;
        Ok(Sender {
            client,
            destinations,
        })
    }

    /// `POST`s `body` to `endpoint` as request `webhook_id`, signed now with each of `secrets`
    /// (the current one first), and answers what came of it.
    pub async fn send(
        &self,
        endpoint: &StoredEndpoint,
        secrets: &[&SigningSecret],
        webhook_id: &str,
        body: Vec<u8>,
    ) -> SendOutcome {
        let started = Instant::now();
        let signed = Signed::sign(webhook_id, unix_seconds(), &body, secrets);
        let headers = [
            ("webhook-id", signed.id),
            ("webhook-timestamp", signed.timestamp.to_string()),
            ("webhook-signature", signed.signature),
        ];
        let result = self.request(&endpoint.endpoint.url, headers, body).await;
        SendOutcome {
            result,
            latency: started.elapsed(),
        }
    }

    /// `POST`s a Pusher batch's `body` ([`crate::pusher::batch_body`]) to `endpoint`, signed
    /// with `key` (`X-Pusher-Key`, `X-Pusher-Signature`), and answers what came of it.
    pub async fn send_pusher(
        &self,
        endpoint: &StoredEndpoint,
        key: &crate::pusher::PusherKey,
        body: Vec<u8>,
    ) -> SendOutcome {
        let started = Instant::now();
        let headers = [
            ("x-pusher-key", key.key.clone()),
            (
                "x-pusher-signature",
                crate::pusher::signature(&key.secret, &body),
            ),
        ];
        let result = self.request(&endpoint.endpoint.url, headers, body).await;
        SendOutcome {
            result,
            latency: started.elapsed(),
        }
    }

    async fn request<const N: usize>(
        &self,
        url: &str,
        headers: [(&'static str, String); N],
        body: Vec<u8>,
    ) -> SendResult {
        let url = match self.check_url(url) {
            Ok(url) => url,
            Err(why) => return SendResult::Refused(why),
        };
        let mut request = self
            .client
            .post(url)
            .header("content-type", "application/json");
        for (name, value) in headers {
            request = request.header(name, value);
        }
        let sent = request.body(body).send().await;
        let mut response = match sent {
            Ok(response) => response,
            Err(e) => return failed(e),
        };
        let status = response.status();
        if status.is_redirection() {
            let location = response
                .headers()
                .get("location")
                .map(|v| location_excerpt(&String::from_utf8_lossy(v.as_bytes())))
                .unwrap_or_default();
            return SendResult::Redirect {
                status: status.as_u16(),
                location,
            };
        }
        let retry_after = response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| parse_retry_after(v, SystemTime::now()));
        // A small answer is read to its end (its connection is then kept for the next
        // request); a large one only up to the excerpt, and the rest dropped with it.
        let excerpt = read_excerpt(&mut response).await;
        drop(response);
        if status.is_success() {
            return SendResult::Ok {
                status: status.as_u16(),
            };
        }
        SendResult::Http {
            status: status.as_u16(),
            retry_after,
            excerpt,
        }
    }

    /// The URL, when it may be requested: `http` or `https`, and a host that is not an IP
    /// literal the rule refuses (the resolver is not asked for those).
    fn check_url(&self, url: &str) -> Result<reqwest::Url, String> {
        let parsed = reqwest::Url::parse(url).map_err(|e| format!("not a URL: {e}"))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(format!("not an http(s) URL ({}:)", parsed.scheme()));
        }
        let host = parsed.host_str().unwrap_or_default();
        if let Some(ip) = literal_ip(host) {
            self.destinations
                .check_ip(host, ip)
                .map_err(|e| e.to_string())?;
        }
        Ok(parsed)
    }
}

/// reqwest's resolver, answering only the addresses the rule allows.
struct AllowedOnly(Destinations);

impl reqwest::dns::Resolve for AllowedOnly {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let destinations = self.0.clone();
        Box::pin(async move {
            let addrs: Vec<SocketAddr> = destinations.resolve(name.as_str(), 0).await?;
            let addrs: reqwest::dns::Addrs = Box::new(addrs.into_iter());
            Ok(addrs)
        })
    }
}

/// What a request that got no answer came to: a timeout, a refusal by the resolver (the
/// name's addresses are all refused), or a connection failure, said without the URL.
fn failed(e: reqwest::Error) -> SendResult {
    if e.is_timeout() {
        return SendResult::Timeout;
    }
    let mut source = std::error::Error::source(&e);
    while let Some(cause) = source {
        if let Some(refusal @ DestinationError::Refused { .. }) =
            cause.downcast_ref::<DestinationError>()
        {
            return SendResult::Refused(refusal.to_string());
        }
        source = cause.source();
    }
    SendResult::Connect(cut_chars(chain(&e.without_url()), REASON_CHARS))
}

/// An error and its causes, `: ` between them, each said once.
fn chain(e: &dyn std::error::Error) -> String {
    let mut parts: Vec<String> = vec![e.to_string()];
    let mut source = e.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        source = cause.source();
    }
    parts.join(": ")
}

/// The start of an answer's body: reads until [`EXCERPT_BYTES`] are in hand or the body ends
/// (or fails: what was read is kept), keeps at most [`EXCERPT_BYTES`] of it, as text with
/// control characters as spaces.
async fn read_excerpt(response: &mut reqwest::Response) -> String {
    let mut kept = Vec::with_capacity(EXCERPT_BYTES);
    while kept.len() < EXCERPT_BYTES {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                let room = EXCERPT_BYTES - kept.len();
                kept.extend_from_slice(&chunk[..chunk.len().min(room)]);
            }
            Ok(None) | Err(_) => break,
        }
    }
    printable(&kept)
}

/// `bytes` as text (a sequence cut at the end dropped, others replaced), control characters
/// as spaces.
fn printable(bytes: &[u8]) -> String {
    let text = match std::str::from_utf8(bytes) {
        Ok(text) => text.to_string(),
        // Cut in the middle of a character by the excerpt's bound: keep what is whole.
        Err(e) if e.error_len().is_none() => {
            String::from_utf8_lossy(&bytes[..e.valid_up_to()]).into_owned()
        }
        Err(_) => String::from_utf8_lossy(bytes).into_owned(),
    };
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// A redirect's `Location` as its reason says it: without query or fragment, at most
/// [`LOCATION_CHARS`] characters.
fn location_excerpt(location: &str) -> String {
    let bare = location.split(['?', '#']).next().unwrap_or_default();
    cut_chars(printable(bare.as_bytes()), LOCATION_CHARS)
}

/// `text` cut to at most `most` characters.
fn cut_chars(text: String, most: usize) -> String {
    match text.char_indices().nth(most) {
        Some((at, _)) => text[..at].to_string(),
        None => text,
    }
}

/// A `Retry-After` value: seconds, or an HTTP date (the wait from `now` until then, zero when
/// it is past).
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// Now, in seconds since the Unix epoch.
fn unix_seconds() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// A batch's body, `{"events":[...]}`, from its events' stored JSON as it is.
pub fn batch_body(events: &[QueuedEvent]) -> Vec<u8> {
    let size = events.iter().map(|e| e.payload.len() + 1).sum::<usize>() + 13;
    let mut body = Vec::with_capacity(size);
    body.extend_from_slice(b"{\"events\":[");
    for (i, event) in events.iter().enumerate() {
        if i > 0 {
            body.push(b',');
        }
        body.extend_from_slice(event.payload.as_bytes());
    }
    body.extend_from_slice(b"]}");
    body
}

/// A batch's `webhook-id`: `msg_`, the first event's id without its `evt_`, `_` and the
/// number of events. The same batch sent again has the same id.
pub fn webhook_id(first_event_id: &str, count: usize) -> String {
    let digits = first_event_id
        .strip_prefix("evt_")
        .unwrap_or(first_event_id);
    format!("msg_{digits}_{count}")
}

#[cfg(test)]
pub(crate) mod tests;
