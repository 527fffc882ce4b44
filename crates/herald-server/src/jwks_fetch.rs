//! Fetching apps' JWKS key sets ([`HttpKeySets`], core's `KeySetSource`): one GET with the
//! server's HTTP client (reqwest, rustls with the web's root certificates), bounded in time and
//! size, with the answer's `Cache-Control: max-age`. Each node fetches its own copy.
//!
//! A JWKS URL is one a tenant gives: the request reaches only the addresses the operator's
//! [`Destinations`] allow (an IP literal is checked before the request, a name's addresses by
//! the client's resolver at every connection) and follows no redirect.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use herald_core::jwks::{FetchedKeySet, KeySetSource};
use herald_providers::destination::{literal_ip, Destinations};

/// Largest key set read, in bytes.
const MAX_KEY_SET_BYTES: usize = 256 * 1024;

/// Fetches key sets over HTTP(S).
pub(crate) struct HttpKeySets {
    client: reqwest::Client,
    destinations: Destinations,
}

impl HttpKeySets {
    /// A fetcher whose every request ends within `timeout` and reaches only `destinations`.
    pub fn new(timeout: Duration, destinations: Destinations) -> Result<Self, String> {
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout)
            .redirect(reqwest::redirect::Policy::none())
            .dns_resolver(Arc::new(AllowedOnly(destinations.clone())))
            .user_agent(concat!("herald/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| e.to_string())?;
        Ok(HttpKeySets {
            client,
            destinations,
        })
    }

    /// Refuses a URL whose host is an IP literal the rule does not allow (the resolver is not
    /// asked for those).
    fn check_literal(&self, url: &str) -> Result<(), String> {
        let parsed = reqwest::Url::parse(url).map_err(|e| format!("not a URL: {e}"))?;
        let host = parsed.host_str().unwrap_or_default();
        match literal_ip(host) {
            Some(ip) => self
                .destinations
                .check_ip(host, ip)
                .map_err(|e| e.to_string()),
            None => Ok(()),
        }
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

/// The `max-age` of a `Cache-Control` header value.
fn max_age(cache_control: &str) -> Option<Duration> {
    cache_control.split(',').find_map(|directive| {
        let (name, value) = directive.trim().split_once('=')?;
        name.trim()
            .eq_ignore_ascii_case("max-age")
            .then(|| value.trim().trim_matches('"').parse().ok())
            .flatten()
            .map(Duration::from_secs)
    })
}

#[async_trait]
impl KeySetSource for HttpKeySets {
    async fn fetch(&self, url: &str) -> Result<FetchedKeySet, String> {
        self.check_literal(url)?;
        let mut response = self
            .client
            .get(url)
            .header("accept", "application/json")
            .send()
            .await
            .map_err(|e| format!("request failed: {e}"))?;
        let status = response.status();
        if status.is_redirection() {
            return Err(format!(
                "the key server answered {status}; redirects are not followed"
            ));
        }
        if !status.is_success() {
            return Err(format!("the key server answered {status}"));
        }
        let max_age = response
            .headers()
            .get("cache-control")
            .and_then(|v| v.to_str().ok())
            .and_then(max_age);
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| format!("reading the answer failed: {e}"))?
        {
            if body.len() + chunk.len() > MAX_KEY_SET_BYTES {
                return Err(format!("the key set is over {MAX_KEY_SET_BYTES} bytes"));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(FetchedKeySet { body, max_age })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_age_is_read_from_cache_control() {
        assert_eq!(
            max_age("public, max-age=600, must-revalidate"),
            Some(Duration::from_secs(600))
        );
        assert_eq!(max_age("no-cache"), None);
        assert_eq!(max_age("max-age=x"), None);
    }
}
