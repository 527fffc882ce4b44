//! Fetching apps' JWKS key sets ([`HttpKeySets`], core's `KeySetSource`): one GET with the
//! server's HTTP client (reqwest, rustls with the web's root certificates), bounded in time and
//! size, with the answer's `Cache-Control: max-age`. Each node fetches its own copy.

use std::time::Duration;

use async_trait::async_trait;
use herald_core::jwks::{FetchedKeySet, KeySetSource};

/// Largest key set read, in bytes.
const MAX_KEY_SET_BYTES: usize = 256 * 1024;

/// Fetches key sets over HTTP(S).
pub(crate) struct HttpKeySets {
    client: reqwest::Client,
}

impl HttpKeySets {
    /// A fetcher whose every request ends within `timeout`.
    pub fn new(timeout: Duration) -> Result<Self, String> {
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout)
            .redirect(reqwest::redirect::Policy::limited(3))
            .user_agent(concat!("herald/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| e.to_string())?;
        Ok(HttpKeySets { client })
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
        let mut response = self
            .client
            .get(url)
            .header("accept", "application/json")
            .send()
            .await
            .map_err(|e| format!("request failed: {e}"))?;
        let status = response.status();
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
