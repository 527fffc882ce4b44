//! APNs: Apple Push Notification service over HTTP/2.
//!
//! - [`auth`]: the credentials ([`ApnsAuth`]: a `.p8` signing key or a client certificate) and
//!   their validation.
//! - [`token`]: the ES256 provider token, made once and reused, refreshed on age or rejection.
//! - [`notification`]: a rendered notification ([`ApnsNotification`]) and its [`PushType`].
//! - [`payload`]: Herald push → notification ([`ApnsOptions::render`]) and the payload rules.
//! - [`response`]: what each APNs answer means as an [`Outcome`](crate::Outcome).
//! - [`client`]: [`ApnsClient`], sending over a pool of HTTP/2 connections.

pub mod auth;
pub mod client;
pub mod notification;
pub mod payload;
pub mod pkcs12;
pub mod response;
pub mod token;

pub use auth::ApnsAuth;
pub use client::ApnsClient;
pub use notification::{ApnsNotification, PushType};
pub use payload::{ApnsOptions, LiveActivityEvent};

/// Which APNs servers a client talks to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApnsEndpoint {
    /// `api.push.apple.com:443`, for apps from the App Store, TestFlight and ad hoc builds.
    Production,
    /// `api.sandbox.push.apple.com:443`, for development builds.
    Sandbox,
    /// Any other server, as `https://host:port` (a mock, a proxy).
    Custom(String),
}

impl ApnsEndpoint {
    /// The endpoint's host and port.
    pub fn host_port(&self) -> Result<(String, u16), ApnsError> {
        match self {
            ApnsEndpoint::Production => Ok(("api.push.apple.com".into(), 443)),
            ApnsEndpoint::Sandbox => Ok(("api.sandbox.push.apple.com".into(), 443)),
            ApnsEndpoint::Custom(url) => {
                let bad = |why: &str| ApnsError::Endpoint(format!("{url:?}: {why}"));
                let uri: http::Uri = url.parse().map_err(|_| bad("not a URL"))?;
                if uri.scheme_str() != Some("https") {
                    return Err(bad("the scheme must be https"));
                }
                if !matches!(uri.path(), "" | "/") || uri.query().is_some() {
                    return Err(bad("give only https://host:port, without a path"));
                }
                let host = uri
                    .host()
                    .filter(|h| !h.is_empty())
                    .ok_or_else(|| bad("no host"))?;
                let host = host.trim_start_matches('[').trim_end_matches(']');
                Ok((host.to_string(), uri.port_u16().unwrap_or(443)))
            }
        }
    }
}

/// Everything an [`ApnsClient`] needs.
#[derive(Debug, Clone)]
pub struct ApnsConfig {
    /// Token or certificate credentials.
    pub auth: ApnsAuth,
    /// The app's bundle id; a push type's suffix (`.voip`, ...) is added per notification.
    pub topic: String,
    /// Production, sandbox or a custom server.
    pub endpoint: ApnsEndpoint,
    /// Extra root certificates to trust, PEM (a mock's self-signed certificate).
    pub extra_ca_pem: Option<Vec<u8>>,
    /// HTTP/2 connections to keep (at least 1).
    pub connections: usize,
}

/// APNs configuration that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ApnsError {
    /// The `.p8` signing key is not a PKCS#8 PEM P-256 key.
    #[error("APNs signing key: {0}")]
    SigningKey(String),
    /// The key id is not 10 characters A-Z, 0-9.
    #[error("APNs key id must be 10 characters A-Z and 0-9 (got {0} characters)")]
    KeyId(usize),
    /// The team id is not 10 characters A-Z, 0-9.
    #[error("APNs team id must be 10 characters A-Z and 0-9 (got {0} characters)")]
    TeamId(usize),
    /// The client certificate or its key cannot be used.
    #[error("APNs certificate: {0}")]
    Certificate(String),
    /// The topic (bundle id) is empty or not a header value.
    #[error("APNs topic (bundle id) must be a non-empty bundle id")]
    Topic,
    /// The endpoint is not `https://host:port`.
    #[error("APNs endpoint {0}")]
    Endpoint(String),
    /// The TLS configuration cannot be built.
    #[error(transparent)]
    Tls(#[from] crate::tls::TlsError),
    /// A provider token could not be signed.
    #[error("APNs provider token: {0}")]
    Token(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_give_host_and_port() {
        assert_eq!(
            ApnsEndpoint::Sandbox.host_port().unwrap(),
            ("api.sandbox.push.apple.com".to_string(), 443)
        );
        let custom = ApnsEndpoint::Custom("https://127.0.0.1:8443".into());
        assert_eq!(custom.host_port().unwrap(), ("127.0.0.1".to_string(), 8443));
        for bad in ["http://x:1", "https://x:1/path", "not a url", ""] {
            assert!(
                ApnsEndpoint::Custom(bad.into()).host_port().is_err(),
                "{bad}"
            );
        }
    }
}
