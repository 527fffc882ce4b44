//! [`ApnsClient`]: sends rendered notifications to APNs over a pool of HTTP/2 connections
//! (`POST /3/device/{token}`), with the provider token in `authorization` for token auth or a
//! TLS client certificate for certificate auth, and answers each send with an [`Outcome`].
//!
//! Until APNs has answered one send with anything but 403, only one request is in flight at a
//! time (Apple asks providers not to open many streams with a token it has not accepted yet);
//! after that, sends multiplex as far as the connections' stream limits allow.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::uri::{Authority, PathAndQuery, Scheme};
use http::{HeaderName, HeaderValue, Method, Request, Uri};
use tokio::sync::{Semaphore, SemaphorePermit};

use super::auth::{signing_key_der, ApnsAuth};
use super::notification::ApnsNotification;
use super::response::{interpret, TokenVerdict};
use super::token::{ProviderToken, DEFAULT_TOKEN_AGE};
use super::{ApnsConfig, ApnsError};
use crate::h2pool::{H2Error, H2Pool};
use crate::outcome::{Outcome, RetryScope};

/// The longest device token accepted (APNs' are 64 hex digits today; Apple says they may grow).
const MAX_DEVICE_TOKEN: usize = 200;

/// An APNs client for one app and topic; cheap to clone (shared state behind an `Arc`).
#[derive(Clone)]
pub struct ApnsClient {
    inner: Arc<Inner>,
}

struct Inner {
    pool: H2Pool,
    /// `https://host:port`, what every request's URI starts with.
    origin: String,
    /// `host:port` of `origin`, parsed once.
    authority: Authority,
    topic: String,
    /// `topic` as a header value, made once (push types without a topic suffix send it as is).
    topic_header: HeaderValue,
    token: Option<ProviderToken>,
    gate: FirstTokenGate,
}

impl std::fmt::Debug for ApnsClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApnsClient")
            .field("origin", &self.inner.origin)
            .field("topic", &self.inner.topic)
            .field("token_auth", &self.inner.token.is_some())
            .finish_non_exhaustive()
    }
}

impl ApnsClient {
    /// A client for `config`, refreshing its provider token every 50 minutes. Checks the
    /// credentials, topic and endpoint; connects on the first send.
    pub fn new(config: ApnsConfig) -> Result<Self, ApnsError> {
        Self::with_token_age(config, DEFAULT_TOKEN_AGE)
    }

    /// Like [`new`](Self::new), refreshing the provider token after `token_age` (clamped to
    /// 20..=60 minutes).
    pub fn with_token_age(config: ApnsConfig, token_age: Duration) -> Result<Self, ApnsError> {
        config.auth.validate()?;
        if config.topic.is_empty()
            || config.topic.contains(char::is_whitespace)
            || HeaderValue::from_str(&config.topic).is_err()
        {
            return Err(ApnsError::Topic);
        }
        let (host, port) = config.endpoint.host_port()?;
        let token = match &config.auth {
            ApnsAuth::Token {
                key_pem,
                key_id,
                team_id,
            } => Some(ProviderToken::new(
                &signing_key_der(key_pem)?,
                key_id,
                team_id,
                token_age,
            )?),
            ApnsAuth::Certificate { .. } => None,
        };
        let identity = config.auth.client_identity();
        let tls = crate::tls::client_config(config.extra_ca_pem.as_deref(), identity.as_ref())?;
        let authority = if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        Ok(ApnsClient {
            inner: Arc::new(Inner {
                pool: H2Pool::new(&host, port, tls, config.connections),
                origin: format!("https://{authority}"),
                authority: Authority::from_maybe_shared(Bytes::from(authority.clone()))
                    .map_err(|e| ApnsError::Endpoint(format!("{authority}: {e}")))?,
                topic_header: HeaderValue::from_maybe_shared(Bytes::from(config.topic.clone()))
                    .map_err(|_| ApnsError::Topic)?,
                topic: config.topic,
                token,
                gate: FirstTokenGate::new(),
            }),
        })
    }

    /// Sends `notification` to the device with `device_token` (hex) and says what came of it.
    pub async fn send(&self, device_token: &str, notification: &ApnsNotification) -> Outcome {
        if device_token.is_empty()
            || device_token.len() > MAX_DEVICE_TOKEN
            || !device_token.bytes().all(|b| b.is_ascii_hexdigit())
        {
            return Outcome::Rejected {
                reason: "BadDeviceToken".into(),
            };
        }
        let _permit = self.inner.gate.enter().await;
        let bearer = match &self.inner.token {
            Some(token) => match token.bearer() {
                Ok(jwt) => Some(jwt),
                Err(e) => {
                    return Outcome::Rejected {
                        reason: e.to_string(),
                    }
                }
            },
            None => None,
        };
        let authorization = bearer.as_ref().map(|b| &b.authorization);
        let request = match self.request(device_token, notification, authorization) {
            Ok(request) => request,
            Err(reason) => return Outcome::Rejected { reason },
        };
        let body = notification.payload.clone();
        // A resend (the server refused the stream) builds the request again; the first send
        // takes it as built, uncopied.
        let again = || {
            self.request(device_token, notification, authorization)
                .expect("a request that was built once builds again")
        };
        match self.inner.pool.send(request, again, body).await {
            Ok((response, body)) => {
                let (outcome, verdict) = interpret(response.status(), response.headers(), &body);
                match (verdict, &self.inner.token, &bearer) {
                    (TokenVerdict::Accepted, _, _) => self.inner.gate.open(),
                    (TokenVerdict::Expired, Some(token), Some(b)) => token.expired(&b.jwt),
                    (TokenVerdict::Invalid, Some(token), Some(b)) => token.invalid(&b.jwt),
                    _ => {}
                }
                outcome
            }
            Err(error) => failed(error),
        }
    }

    /// How many provider tokens this client has signed (0 for certificate auth).
    pub fn provider_tokens_made(&self) -> u64 {
        self.inner.token.as_ref().map_or(0, ProviderToken::made)
    }

    /// How many sends are waiting for APNs to accept the first token.
    pub fn waiting_for_first_answer(&self) -> usize {
        self.inner.gate.waiting.load(Ordering::Relaxed)
    }

    fn request(
        &self,
        device_token: &str,
        notification: &ApnsNotification,
        authorization: Option<&HeaderValue>,
    ) -> Result<Request<()>, String> {
        let push_type = notification.push_type;
        let topic = match push_type.topic_suffix() {
            "" => self.inner.topic_header.clone(),
            suffix => HeaderValue::from_str(&format!("{}{suffix}", self.inner.topic))
                .map_err(|_| "BadTopic")?,
        };
        let mut request = Request::new(());
        *request.method_mut() = Method::POST;
        *request.uri_mut() = self.uri(device_token)?;
        let headers = request.headers_mut();
        headers.insert(APNS_TOPIC.clone(), topic);
        headers.insert(
            APNS_PUSH_TYPE.clone(),
            HeaderValue::from_static(push_type.as_str()),
        );
        if let Some(priority) = notification.priority {
            headers.insert(
                APNS_PRIORITY.clone(),
                HeaderValue::from(u16::from(priority)),
            );
        }
        if let Some(expiration) = notification.expiration {
            headers.insert(APNS_EXPIRATION.clone(), HeaderValue::from(expiration));
        }
        if let Some(collapse_id) = &notification.collapse_id {
            let value = HeaderValue::from_str(collapse_id).map_err(|_| "BadCollapseId")?;
            headers.insert(APNS_COLLAPSE_ID.clone(), value);
        }
        if let Some(authorization) = authorization {
            headers.insert(http::header::AUTHORIZATION, authorization.clone());
        }
        Ok(request)
    }

    /// `https://host:port/3/device/{device_token}`, from the parts made once per client.
    fn uri(&self, device_token: &str) -> Result<Uri, String> {
        let bad = |_| "BadDeviceToken".to_string();
        let mut path = String::with_capacity(DEVICE_PATH.len() + device_token.len());
        path.push_str(DEVICE_PATH);
        path.push_str(device_token);
        let mut parts = http::uri::Parts::default();
        parts.scheme = Some(Scheme::HTTPS);
        parts.authority = Some(self.inner.authority.clone());
        parts.path_and_query =
            Some(PathAndQuery::from_maybe_shared(Bytes::from(path)).map_err(bad)?);
        Uri::from_parts(parts).map_err(|_| "BadDeviceToken".to_string())
    }
}

/// What every request's path starts with, before the device token.
const DEVICE_PATH: &str = "/3/device/";

// The request headers' names, made once (a name given as a string is parsed, and a custom one
// copied, per request).
static APNS_TOPIC: HeaderName = HeaderName::from_static("apns-topic");
static APNS_PUSH_TYPE: HeaderName = HeaderName::from_static("apns-push-type");
static APNS_PRIORITY: HeaderName = HeaderName::from_static("apns-priority");
static APNS_EXPIRATION: HeaderName = HeaderName::from_static("apns-expiration");
static APNS_COLLAPSE_ID: HeaderName = HeaderName::from_static("apns-collapse-id");

/// The outcome of a send that got no answer.
fn failed(error: H2Error) -> Outcome {
    match &error {
        H2Error::Stream(e) if e.is_reset() && e.is_remote() => Outcome::Retry {
            reason: error.to_string(),
            after: None,
            scope: RetryScope::Notification,
        },
        _ => Outcome::unreachable(error.to_string()),
    }
}

/// One request at a time until the first answer that is not a 403, then no limit.
struct FirstTokenGate {
    open: AtomicBool,
    single: Semaphore,
    waiting: AtomicUsize,
}

impl FirstTokenGate {
    fn new() -> Self {
        FirstTokenGate {
            open: AtomicBool::new(false),
            single: Semaphore::new(1),
            waiting: AtomicUsize::new(0),
        }
    }

    /// Waits for the one permit while the gate is shut; `None` once it is open.
    async fn enter(&self) -> Option<SemaphorePermit<'_>> {
        if self.open.load(Ordering::Acquire) {
            return None;
        }
        self.waiting.fetch_add(1, Ordering::Relaxed);
        let permit = self.single.acquire().await.ok();
        self.waiting.fetch_sub(1, Ordering::Relaxed);
        permit
    }

    /// Lets every waiting and later send through.
    fn open(&self) {
        if !self.open.swap(true, Ordering::AcqRel) {
            self.single.close();
        }
    }
}
