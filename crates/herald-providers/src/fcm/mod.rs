//! Firebase Cloud Messaging HTTP v1: the client that sends one message to one registration
//! token with a service account's OAuth2 access token, over HTTP/2.
//!
//! - `account`: the service-account JSON and the signed assertion.
//! - `token`: the cached access token (refresh at 80% of its life, after a 401, one at a time).
//! - `payload`: [`FcmOptions`] rendered into an [`FcmNotification`], FCM's rules and limit.
//! - `answer`: what each v1 answer means as an [`Outcome`].

mod account;
pub(crate) mod answer;
mod payload;
mod token;

use std::sync::Arc;

use bytes::Bytes;
use http::{header, HeaderValue, Method, Request, Uri};
use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Map, Value};

pub use account::{ServiceAccount, FCM_SCOPE};
pub use payload::{
    AndroidOptions, AndroidPriority, FcmNotification, FcmNotificationOverrides, FcmOptions,
    FCM_MAX_PAYLOAD,
};

use crate::h2pool::H2Pool;
use crate::origin::HttpsUrl;
use crate::outcome::{Outcome, RetryScope};
use crate::tls::{client_config, TlsError};
use token::TokenSource;

/// FCM's base URL.
pub const DEFAULT_FCM_ENDPOINT: &str = "https://fcm.googleapis.com";

/// An FCM client that cannot be made (bad service account, URL or CA). None is retryable: the
/// configuration must change.
#[derive(Debug, thiserror::Error)]
pub enum FcmError {
    /// The service account is not JSON.
    #[error("the FCM service account is not JSON: {0}")]
    NotJson(String),
    /// A field the service account must have is missing or empty.
    #[error("the FCM service account has no {0:?}")]
    MissingField(&'static str),
    /// The service account's `private_key` is not a usable RSA private key in PEM.
    #[error("the FCM service account's private_key is not an RSA private key in PEM: {0}")]
    BadKey(String),
    /// The FCM endpoint or token URI is not an https URL.
    #[error("the FCM {what} is not usable: {message}")]
    BadUrl {
        /// `endpoint` or `token_uri`.
        what: &'static str,
        /// Why.
        message: String,
    },
    /// The extra CA certificate is not usable.
    #[error(transparent)]
    Tls(#[from] TlsError),
}

/// What an [`FcmClient`] needs.
#[derive(Debug, Clone)]
pub struct FcmConfig {
    /// The service account whose project messages are sent for.
    pub account: ServiceAccount,
    /// FCM's base URL; `None`: [`DEFAULT_FCM_ENDPOINT`].
    pub endpoint: Option<String>,
    /// Where OAuth2 token requests are sent (a proxy, a mock); `None`: the account's
    /// `token_uri`. The assertion's `aud` is the account's `token_uri` either way.
    pub token_uri: Option<String>,
    /// An extra root certificate, PEM (a mock's, a proxy's).
    pub extra_ca_pem: Option<Vec<u8>>,
    /// HTTP/2 connections to FCM (each multiplexes many requests).
    pub connections: usize,
}

/// Sends FCM messages for one service account. Cheap to clone; clones share connections and
/// the access token.
#[derive(Clone)]
pub struct FcmClient {
    inner: Arc<Inner>,
}

struct Inner {
    /// `{endpoint}/v1/projects/{project}/messages:send`, parsed once.
    send_uri: Uri,
    pool: H2Pool,
    tokens: TokenSource,
}

impl std::fmt::Debug for FcmClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FcmClient")
            .field("send_uri", &self.inner.send_uri)
            .finish_non_exhaustive()
    }
}

impl FcmClient {
    /// A client for `config`; connects lazily, on the first send.
    pub fn new(config: FcmConfig) -> Result<Self, FcmError> {
        let endpoint = config.endpoint.as_deref().unwrap_or(DEFAULT_FCM_ENDPOINT);
        let endpoint = HttpsUrl::parse(endpoint).map_err(|message| FcmError::BadUrl {
            what: "endpoint",
            message,
        })?;
        let token_uri = config
            .token_uri
            .as_deref()
            .unwrap_or(&config.account.token_uri);
        let token_url = HttpsUrl::parse(token_uri).map_err(|message| FcmError::BadUrl {
            what: "token_uri",
            message,
        })?;
        let tls = client_config(config.extra_ca_pem.as_deref(), None)?;
        let pool = H2Pool::new(
            &endpoint.host,
            endpoint.port,
            tls.clone(),
            config.connections,
        );
        let token_pool = if (token_url.host.as_str(), token_url.port)
            == (endpoint.host.as_str(), endpoint.port)
        {
            pool.clone()
        } else {
            H2Pool::new(&token_url.host, token_url.port, tls, 1)
        };
        let base = endpoint.path.trim_end_matches('/');
        let send_url = endpoint.at(&format!(
            "{base}/v1/projects/{}/messages:send",
            config.account.project_id
        ));
        let send_uri = Uri::try_from(&send_url).map_err(|e| FcmError::BadUrl {
            what: "endpoint",
            message: format!("{send_url}: {e}"),
        })?;
        Ok(FcmClient {
            inner: Arc::new(Inner {
                send_uri,
                pool,
                tokens: TokenSource::new(config.account, token_url, token_pool),
            }),
        })
    }

    /// Sends `notification` to the registration `token`, answering what FCM said.
    pub async fn send(&self, token: &str, notification: &FcmNotification) -> Outcome {
        if token.is_empty() {
            return Outcome::Rejected {
                reason: "empty FCM registration token".into(),
            };
        }
        let Some(fields) = notification.message.as_object() else {
            return Outcome::Rejected {
                reason: "the FCM message is not a JSON object".into(),
            };
        };
        // Serialised from the shared message with the token added, not from a copy of it.
        let body = match serde_json::to_vec(&Envelope {
            message: WithToken { fields, token },
        }) {
            Ok(body) => body,
            Err(e) => {
                return Outcome::Rejected {
                    reason: format!("FCM message: {e}"),
                }
            }
        };

        let access = match self.inner.tokens.get().await {
            Ok(access) => access,
            Err(outcome) => return outcome,
        };
        let request = || {
            let mut request = Request::new(());
            *request.method_mut() = Method::POST;
            *request.uri_mut() = self.inner.send_uri.clone();
            let headers = request.headers_mut();
            headers.insert(header::AUTHORIZATION, access.authorization.clone());
            let json = HeaderValue::from_static("application/json");
            headers.insert(header::CONTENT_TYPE, json);
            request
        };
        let (head, body) = match self
            .inner
            .pool
            .send(request(), request, Bytes::from(body))
            .await
        {
            Ok(answer) => answer,
            Err(e) if e.not_processed() => return Outcome::unreachable(format!("FCM: {e}")),
            Err(e) => {
                return Outcome::Retry {
                    reason: format!("FCM: {e}"),
                    after: None,
                    scope: RetryScope::Notification,
                }
            }
        };
        let classified = answer::classify(head.status(), head.headers(), &body);
        if classified.unauthenticated {
            self.inner.tokens.invalidate(access.generation);
        }
        classified.outcome
    }
}

/// The body of a send: `{"message": {...the message's fields..., "token": TOKEN}}`.
#[derive(serde::Serialize)]
struct Envelope<'a> {
    message: WithToken<'a>,
}

/// A message's fields with `token` set (a `token` the message had is replaced).
struct WithToken<'a> {
    fields: &'a Map<String, Value>,
    token: &'a str,
}

impl Serialize for WithToken<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        for (key, value) in self.fields.iter().filter(|(k, _)| *k != "token") {
            map.serialize_entry(key, value)?;
        }
        map.serialize_entry("token", self.token)?;
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_body_is_the_message_with_the_token_set() {
        let message = json!({"data": {"n": "1"}, "token": "stale", "android": {"ttl": "60s"}});
        let fields = message.as_object().unwrap();
        let body = serde_json::to_vec(&Envelope {
            message: WithToken {
                fields,
                token: "dev-\"1\"",
            },
        })
        .unwrap();
        let text = String::from_utf8(body).unwrap();
        assert_eq!(text.matches("\"token\"").count(), 1, "{text}");
        let parsed: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            parsed,
            json!({"message": {"data": {"n": "1"}, "android": {"ttl": "60s"}, "token": "dev-\"1\""}})
        );
    }
}
