//! Web Push (RFC 8030): the client that delivers one encrypted message to one browser
//! subscription through its push service, identified with VAPID.
//!
//! - `ece`: RFC 8291 `aes128gcm` encryption of the payload for the subscription's keys.
//! - `vapid`: the VAPID key pair and the ES256 token, cached per push-service origin.
//! - `payload`: [`WebPushOptions`] rendered into a [`WebPushNotification`], the size limit.
//!
//! A subscription's endpoint names its push service (FCM, Mozilla, Apple, Microsoft...): the
//! client keeps one [`H2Pool`] and one VAPID token per origin, in a small map.
//!
//! Endpoints are URLs that tenants give, so every connection goes only where the operator's
//! [`Destinations`] allow (public addresses unless told otherwise), no redirect is followed, and
//! a failure to reach a service is reported as "the push service could not be reached", never
//! as what the network answered (which would tell an open port from a closed one). A service
//! that fails as a whole (an outage, a rate limit, no connection) pauses that origin only: its
//! sends wait, with the pause's end as their retry hint, while other push services go on.

mod ece;
mod payload;
mod vapid;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{header, HeaderValue, Method, Request};
use rustls::ClientConfig;

pub use ece::{encrypt, ENCRYPTION_OVERHEAD};
pub use payload::{
    Urgency, WebNotificationOverrides, WebPushNotification, WebPushOptions, WEBPUSH_MAX_ENCRYPTED,
    WEBPUSH_MAX_PLAINTEXT,
};
pub use vapid::{VapidKeys, VAPID_LIFETIME_SECS};

use crate::common::unix_secs;
use crate::destination::Destinations;
use crate::h2pool::{H2Error, H2Pool};
use crate::origin::HttpsUrl;
use crate::outcome::{retry_after, Outcome, RetryScope};
use crate::tls::{client_config, TlsError};
use vapid::CachedAuthorization;

/// Push-service origins kept at once; past it the map starts again (origins are few in
/// practice: one per browser vendor).
const MAX_ORIGINS: usize = 256;

/// What a receipt says when a push service could not be reached, whatever the network answered.
pub const UNREACHABLE: &str = "the push service could not be reached";

/// Longest pause of one push-service origin without a `Retry-After` that says longer.
const MAX_ORIGIN_PAUSE: Duration = Duration::from_secs(300);

/// A Web Push key, subscription or client that cannot be used. None is retryable.
#[derive(Debug, thiserror::Error)]
pub enum WebPushError {
    /// The VAPID private key is not a P-256 key (the message never quotes the key).
    #[error("the VAPID private key is not usable: {0}")]
    BadVapidKey(String),
    /// The VAPID subject is not a `mailto:` or `https:` URL.
    #[error("the VAPID subject must be a mailto: or https: URL, not {0:?}")]
    BadSubject(String),
    /// The subscription's keys are not what a browser gives.
    #[error("the Web Push subscription is not usable: {0}")]
    BadSubscription(String),
    /// The payload cannot be encrypted (too large for one record).
    #[error("Web Push encryption: {0}")]
    Encryption(String),
    /// The extra CA certificate is not usable.
    #[error(transparent)]
    Tls(#[from] TlsError),
}

/// A browser's push subscription, as `PushSubscription.toJSON()` gives it.
#[derive(Debug, Clone, Copy)]
pub struct Subscription<'a> {
    /// The push service URL messages are posted to.
    pub endpoint: &'a str,
    /// The browser's P-256 public key, base64url.
    pub p256dh: &'a str,
    /// The 16-byte authentication secret, base64url.
    pub auth: &'a str,
}

/// What a [`WebPushClient`] needs.
#[derive(Debug, Clone)]
pub struct WebPushConfig {
    /// The application server's VAPID key pair.
    pub vapid: VapidKeys,
    /// The VAPID `sub`: a `mailto:` or `https:` contact.
    pub subject: String,
    /// An extra root certificate, PEM (a mock's, a proxy's).
    pub extra_ca_pem: Option<Vec<u8>>,
    /// HTTP/2 connections per push-service origin.
    pub connections_per_origin: usize,
    /// Which addresses endpoints may reach.
    pub destinations: Destinations,
}

/// Sends Web Push messages for one VAPID key pair. Cheap to clone; clones share connections
/// and tokens.
#[derive(Clone)]
pub struct WebPushClient {
    inner: Arc<Inner>,
}

struct Inner {
    vapid: VapidKeys,
    subject: String,
    tls: Arc<ClientConfig>,
    connections: usize,
    destinations: Destinations,
    origins: parking_lot::Mutex<HashMap<String, Arc<PushService>>>,
}

/// One push-service origin: its connections, the VAPID token for it, and its pause.
struct PushService {
    pool: H2Pool,
    authorization: parking_lot::Mutex<Option<CachedAuthorization>>,
    pause: parking_lot::Mutex<OriginPause>,
}

/// How long one origin's sends wait after it failed as a whole.
#[derive(Default)]
struct OriginPause {
    /// Sends wait until then.
    until: Option<Instant>,
    /// Whole-service failures in a row, for the backoff.
    consecutive: u32,
}

impl std::fmt::Debug for WebPushClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebPushClient")
            .field("vapid", &self.inner.vapid)
            .field("subject", &self.inner.subject)
            .finish_non_exhaustive()
    }
}

impl WebPushClient {
    /// A client for `config`; connects lazily, per origin, on the first send there.
    pub fn new(config: WebPushConfig) -> Result<Self, WebPushError> {
        let subject = config.subject.trim();
        let valid_subject = subject
            .strip_prefix("mailto:")
            .is_some_and(|rest| rest.contains('@'))
            || HttpsUrl::parse(subject).is_ok();
        if !valid_subject {
            return Err(WebPushError::BadSubject(config.subject));
        }
        Ok(WebPushClient {
            inner: Arc::new(Inner {
                vapid: config.vapid,
                subject: subject.to_string(),
                tls: client_config(config.extra_ca_pem.as_deref(), None)?,
                connections: config.connections_per_origin,
                destinations: config.destinations,
                origins: parking_lot::Mutex::new(HashMap::new()),
            }),
        })
    }

    /// The VAPID public key (base64url) pages subscribe with.
    pub fn public_key(&self) -> String {
        self.inner.vapid.public_b64url()
    }

    /// Encrypts and sends `notification` to `subscription`, answering what the push service
    /// said.
    pub async fn send(
        &self,
        subscription: &Subscription<'_>,
        notification: &WebPushNotification,
    ) -> Outcome {
        let rejected = |reason: String| Outcome::Rejected { reason };
        let url = match HttpsUrl::parse(subscription.endpoint) {
            Ok(url) => url,
            Err(e) => return rejected(format!("subscription endpoint: {e}")),
        };
        let body = match encrypt(subscription, notification.payload.as_bytes()) {
            Ok(body) => body,
            Err(e) => return rejected(e.to_string()),
        };
        let service = self.service(&url);
        let authorization = match self.authorization(&service, &url.origin) {
            Ok(value) => value,
            Err(e) => return rejected(e.to_string()),
        };
        let mut request = Request::builder()
            .method(Method::POST)
            .uri(url.at(&url.path))
            .header(header::AUTHORIZATION, authorization)
            .header(header::CONTENT_ENCODING, "aes128gcm")
            .header(header::CONTENT_TYPE, "application/octet-stream")
            .header("ttl", notification.ttl_secs);
        for (name, value) in [
            ("urgency", &notification.urgency),
            ("topic", &notification.topic),
        ] {
            if let Some(value) = value {
                match HeaderValue::from_str(value) {
                    Ok(value) => request = request.header(name, value),
                    Err(_) => return rejected(format!("{name} is not a header value: {value:?}")),
                }
            }
        }
        let request = match request.body(()) {
            Ok(request) => request,
            Err(e) => return rejected(format!("Web Push request: {e}")),
        };
        if let Some(waiting) = service.paused() {
            return waiting;
        }
        let outcome = match service
            .pool
            .send(request.clone(), || request.clone(), Bytes::from(body))
            .await
        {
            Ok((head, body)) => classify(head.status(), head.headers(), &body),
            Err(e) => unreached(&url.origin, e),
        };
        service.settle(outcome)
    }

    fn service(&self, url: &HttpsUrl) -> Arc<PushService> {
        let mut origins = self.inner.origins.lock();
        if let Some(service) = origins.get(&url.origin) {
            return service.clone();
        }
        if origins.len() >= MAX_ORIGINS {
            origins.clear();
        }
        let service = Arc::new(PushService {
            pool: H2Pool::guarded(
                &url.host,
                url.port,
                self.inner.tls.clone(),
                self.inner.connections,
                self.inner.destinations.clone(),
            ),
            authorization: parking_lot::Mutex::new(None),
            pause: parking_lot::Mutex::new(OriginPause::default()),
        });
        origins.insert(url.origin.clone(), service.clone());
        service
    }

    fn authorization(&self, service: &PushService, origin: &str) -> Result<String, WebPushError> {
        let now = unix_secs();
        let mut cached = service.authorization.lock();
        if let Some(auth) = cached.as_ref().filter(|a| a.usable_at(now)) {
            return Ok(auth.value.clone());
        }
        let auth = CachedAuthorization::sign(&self.inner.vapid, origin, &self.inner.subject, now)?;
        let value = auth.value.clone();
        *cached = Some(auth);
        Ok(value)
    }
}

impl PushService {
    /// A retry to wait for when this origin is paused.
    fn paused(&self) -> Option<Outcome> {
        let pause = self.pause.lock();
        let left = pause.until?.checked_duration_since(Instant::now())?;
        Some(Outcome::Retry {
            reason: format!(
                "the push service is paused after failing; sends to it resume in {} s",
                left.as_secs().max(1)
            ),
            after: Some(left),
            scope: RetryScope::Notification,
        })
    }

    /// Keeps `outcome` but turns a failure of the whole push service into a pause of this
    /// origin: the send waits for the pause's end, and the app's other push services go on.
    fn settle(&self, outcome: Outcome) -> Outcome {
        let mut pause = self.pause.lock();
        match outcome {
            Outcome::Retry {
                reason,
                after,
                scope: RetryScope::Provider,
            } => {
                pause.consecutive = pause.consecutive.saturating_add(1);
                let wait = after.unwrap_or_else(|| {
                    Duration::from_secs(1 << pause.consecutive.min(9)).min(MAX_ORIGIN_PAUSE)
                });
                let until = Instant::now() + wait;
                pause.until = Some(pause.until.map_or(until, |u| u.max(until)));
                Outcome::Retry {
                    reason,
                    after: Some(wait),
                    scope: RetryScope::Notification,
                }
            }
            Outcome::Retry { .. } => outcome,
            answered => {
                pause.consecutive = 0;
                answered
            }
        }
    }
}

/// What a send that got no answer means, in words that do not tell what the network answered
/// (the detail goes to the server's log).
fn unreached(origin: &str, e: H2Error) -> Outcome {
    tracing::debug!(origin, error = %e, "Web Push: no answer from the push service");
    match e {
        // Refused by the operator's rule: sending again will not change that.
        H2Error::Refused(_) => Outcome::Rejected {
            reason: format!("{UNREACHABLE}: its address is not one Herald may connect to"),
        },
        e if e.not_processed() => Outcome::unreachable(UNREACHABLE),
        _ => Outcome::Retry {
            reason: UNREACHABLE.to_string(),
            after: None,
            scope: RetryScope::Notification,
        },
    }
}

/// What a push service's answer means (RFC 8030 and the services' documented statuses).
pub(crate) fn classify(
    status: http::StatusCode,
    headers: &http::HeaderMap,
    body: &[u8],
) -> Outcome {
    let code = status.as_u16();
    let text: String = String::from_utf8_lossy(body).chars().take(200).collect();
    let reason = format!(
        "{code} {}{}{}",
        status.canonical_reason().unwrap_or(""),
        if text.trim().is_empty() { "" } else { ": " },
        text.trim()
    );
    match code {
        200..=299 => Outcome::Accepted {
            id: headers
                .get(header::LOCATION)
                .and_then(|l| l.to_str().ok())
                .map(str::to_string),
        },
        // Redirects are not followed: an endpoint is posted to where it says or not at all.
        300..=399 => Outcome::Rejected {
            reason: format!("{reason} (redirects are not followed)"),
        },
        404 | 410 => Outcome::Unregistered {
            reason,
            since_ms: None,
        },
        429 => Outcome::Retry {
            reason,
            after: retry_after(headers.get(header::RETRY_AFTER)),
            scope: RetryScope::Provider,
        },
        400..=499 => Outcome::Rejected { reason },
        500..=599 => Outcome::Retry {
            reason,
            after: retry_after(headers.get(header::RETRY_AFTER)),
            scope: RetryScope::Provider,
        },
        _ => Outcome::Retry {
            reason,
            after: None,
            scope: RetryScope::Notification,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_push_service_statuses() {
        let mut headers = http::HeaderMap::new();
        headers.insert(header::LOCATION, "https://p/m/1".parse().unwrap());
        headers.insert(header::RETRY_AFTER, "9".parse().unwrap());
        let at = |code: u16| classify(http::StatusCode::from_u16(code).unwrap(), &headers, b"");
        assert_eq!(
            at(201),
            Outcome::Accepted {
                id: Some("https://p/m/1".into())
            }
        );
        assert!(matches!(at(202), Outcome::Accepted { .. }));
        assert!(matches!(at(404), Outcome::Unregistered { .. }));
        assert!(
            matches!(at(410), Outcome::Unregistered { ref reason, .. } if reason.starts_with("410 Gone"))
        );
        for code in [400, 403, 413] {
            assert!(matches!(at(code), Outcome::Rejected { .. }), "{code}");
        }
        // A redirect is not followed, nor retried.
        for code in [301, 307, 308] {
            assert!(
                matches!(at(code), Outcome::Rejected { ref reason } if reason.contains("redirects are not followed")),
                "{code}"
            );
        }
        assert!(
            matches!(at(429), Outcome::Retry { scope: RetryScope::Provider, after: Some(a), .. } if a.as_secs() == 9)
        );
        assert!(matches!(
            at(503),
            Outcome::Retry {
                scope: RetryScope::Provider,
                ..
            }
        ));
    }

    #[test]
    fn subject_must_be_mailto_or_https() {
        for bad in ["", "me@example.com", "http://example.com", "mailto:"] {
            let config = WebPushConfig {
                vapid: VapidKeys::generate(),
                subject: bad.into(),
                extra_ca_pem: None,
                connections_per_origin: 1,
                destinations: Destinations::public_only(),
            };
            assert!(
                matches!(WebPushClient::new(config), Err(WebPushError::BadSubject(_))),
                "{bad}"
            );
        }
    }
}
