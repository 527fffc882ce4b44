//! The OAuth2 access token FCM requests carry: fetched from the token endpoint with a signed
//! assertion, cached, refreshed when 80% of its lifetime has passed or after FCM answers 401,
//! one fetch at a time (sends that need a token meanwhile wait for that fetch and share its
//! result, a failure included, rather than each trying again).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::{header, HeaderValue, Method, Request, StatusCode};
use serde::Deserialize;
use tokio::time::Instant;

use super::account::ServiceAccount;
use crate::common::unix_secs;
use crate::h2pool::H2Pool;
use crate::origin::HttpsUrl;
use crate::outcome::{retry_after, Outcome, RetryScope};

const JWT_BEARER_GRANT: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";

/// An access token and when to stop using it.
#[derive(Clone)]
pub(crate) struct AccessToken {
    /// `Bearer <token>`, made once per token (marked sensitive).
    pub authorization: HeaderValue,
    /// Which fetch made it: a 401 invalidates only the token it was answered for.
    pub generation: u64,
    refresh_at: Instant,
}

/// Where tokens come from, and the one cached.
pub(crate) struct TokenSource {
    account: ServiceAccount,
    url: HttpsUrl,
    pool: H2Pool,
    current: parking_lot::RwLock<Option<AccessToken>>,
    /// Held while fetching; remembers the last failed fetch for the sends that waited on it.
    fetching: tokio::sync::Mutex<Option<Outcome>>,
    /// Fetches finished (success or failure), read without the lock.
    fetches: AtomicU64,
}

#[derive(Deserialize)]
struct TokenAnswer {
    access_token: String,
    #[serde(default)]
    expires_in: Option<u64>,
}

#[derive(Deserialize)]
struct TokenRefusal {
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    error_description: Option<String>,
}

impl TokenSource {
    pub(crate) fn new(account: ServiceAccount, url: HttpsUrl, pool: H2Pool) -> Self {
        TokenSource {
            account,
            url,
            pool,
            current: parking_lot::RwLock::new(None),
            fetching: tokio::sync::Mutex::new(None),
            fetches: AtomicU64::new(0),
        }
    }

    /// The cached token while it is fresh, else a new one; the `Err` is what the send should
    /// answer (the token endpoint refused the account, or could not be reached).
    pub(crate) async fn get(&self) -> Result<AccessToken, Outcome> {
        if let Some(token) = self.fresh() {
            return Ok(token);
        }
        let seen = self.fetches.load(Ordering::Acquire);
        let mut last_failure = self.fetching.lock().await;
        if let Some(token) = self.fresh() {
            return Ok(token);
        }
        if self.fetches.load(Ordering::Acquire) != seen {
            // A fetch finished while this send waited and left no token: share its failure.
            if let Some(failure) = last_failure.clone() {
                return Err(failure);
            }
        }
        let generation = self.fetches.load(Ordering::Acquire) + 1;
        let result = self.fetch(generation).await;
        self.fetches.fetch_add(1, Ordering::Release);
        match result {
            Ok(token) => {
                *last_failure = None;
                *self.current.write() = Some(token.clone());
                Ok(token)
            }
            Err(failure) => {
                *last_failure = Some(failure.clone());
                Err(failure)
            }
        }
    }

    /// Forgets the token of `generation` (FCM answered 401 to it); a newer one stays.
    pub(crate) fn invalidate(&self, generation: u64) {
        let mut current = self.current.write();
        if current.as_ref().is_some_and(|t| t.generation == generation) {
            *current = None;
        }
    }

    fn fresh(&self) -> Option<AccessToken> {
        let current = self.current.read();
        current
            .as_ref()
            .filter(|t| Instant::now() < t.refresh_at)
            .cloned()
    }

    async fn fetch(&self, generation: u64) -> Result<AccessToken, Outcome> {
        let started = Instant::now();
        // The assertion's audience is the account's own `token_uri` (Google's OAuth2 flow for
        // service accounts), wherever the request goes: a forwarding proxy configured with
        // `fcm_token_url` passes the assertion on to that `token_uri`, which checks `aud`.
        let assertion = self
            .account
            .assertion(&self.account.token_uri, unix_secs())
            .map_err(|e| Outcome::Rejected {
                reason: e.to_string(),
            })?;
        let form = form_urlencoded::Serializer::new(String::new())
            .append_pair("grant_type", JWT_BEARER_GRANT)
            .append_pair("assertion", &assertion)
            .finish();
        let request = Request::builder()
            .method(Method::POST)
            .uri(self.url.at(&self.url.path))
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(())
            .map_err(|e| Outcome::Rejected {
                reason: format!("token request: {e}"),
            })?;
        let (head, body) = match self
            .pool
            .send(request.clone(), || request.clone(), Bytes::from(form))
            .await
        {
            Ok(answer) => answer,
            Err(e) => return Err(Outcome::unreachable(format!("oauth token endpoint: {e}"))),
        };
        let status = head.status();
        if status == StatusCode::OK {
            let answer: TokenAnswer = serde_json::from_slice(&body).map_err(|e| {
                Outcome::unreachable(format!("oauth token endpoint: unreadable answer: {e}"))
            })?;
            let lifetime = Duration::from_secs(answer.expires_in.unwrap_or(3600));
            let bearer = format!("Bearer {}", answer.access_token);
            let Ok(mut authorization) = HeaderValue::from_str(&bearer) else {
                return Err(Outcome::unreachable(
                    "oauth token endpoint: the access token is not a header value".to_string(),
                ));
            };
            authorization.set_sensitive(true);
            return Ok(AccessToken {
                authorization,
                generation,
                refresh_at: started + lifetime.mul_f64(0.8),
            });
        }
        let refusal: TokenRefusal = serde_json::from_slice(&body).unwrap_or(TokenRefusal {
            error: None,
            error_description: None,
        });
        let mut reason = format!(
            "oauth token endpoint: {} {}",
            status.as_u16(),
            refusal.error.as_deref().unwrap_or("")
        );
        if let Some(description) = refusal.error_description {
            reason.push_str(": ");
            reason.extend(description.chars().take(200));
        }
        let reason = reason.trim_end().to_string();
        Err(
            if status.is_client_error() && status != StatusCode::TOO_MANY_REQUESTS {
                // The account itself is refused (revoked key, wrong audience): retrying cannot help.
                Outcome::Rejected { reason }
            } else {
                Outcome::Retry {
                    reason,
                    after: retry_after(head.headers().get(header::RETRY_AFTER)),
                    scope: RetryScope::Provider,
                }
            },
        )
    }
}
