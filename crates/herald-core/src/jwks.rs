//! An app's key set fetched from its JWKS URL, cached on this node ([`JwksCache`]): fetched
//! once when the app's keys are loaded, again when its `Cache-Control: max-age` runs out
//! (bounded to [`MIN_CACHE`]..[`MAX_CACHE`]), and when a token names a key id the cache does not
//! hold (at most once per [`JwksOptions::min_refetch`], so a flood of made-up key ids cannot
//! hammer the key server). A failed fetch keeps the cached keys and says so at WARN. Only RSA
//! (RS256) and P-256 (ES256) signing keys are kept; every other key is ignored. Fetching is the
//! server's ([`KeySetSource`]): core opens no socket.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::DecodingKey;
use parking_lot::RwLock;

use crate::tenant::AppId;
use crate::token_keys::KeyAlg;

/// Shortest time a fetched key set is kept before it is fetched again.
pub const MIN_CACHE: Duration = Duration::from_secs(5 * 60);
/// Longest time a fetched key set is kept before it is fetched again.
pub const MAX_CACHE: Duration = Duration::from_secs(24 * 3600);
/// How long a key set whose answer names no `max-age` is kept.
pub const DEFAULT_CACHE: Duration = Duration::from_secs(3600);
/// How long after a failed fetch the next scheduled one is tried.
pub const RETRY_AFTER_FAILURE: Duration = Duration::from_secs(30);

/// A key set as fetched: the body and the answer's `Cache-Control: max-age`.
pub struct FetchedKeySet {
    /// The JWKS document.
    pub body: Vec<u8>,
    /// `max-age` of the answer, if it had one.
    pub max_age: Option<Duration>,
}

/// Fetches key sets (the server's HTTP client).
#[async_trait]
pub trait KeySetSource: Send + Sync {
    /// GETs the key set at `url`; the error says why in words for a log line.
    async fn fetch(&self, url: &str) -> Result<FetchedKeySet, String>;
}

/// How key sets are refreshed.
#[derive(Debug, Clone, Copy)]
pub struct JwksOptions {
    /// Least time between two fetches caused by unknown key ids, per app.
    pub min_refetch: Duration,
    /// Longest a connect waits for an app's first key set (or a refetch for an unknown key id).
    pub fetch_timeout: Duration,
}

impl Default for JwksOptions {
    fn default() -> Self {
        JwksOptions {
            min_refetch: Duration::from_secs(10),
            fetch_timeout: Duration::from_secs(5),
        }
    }
}

/// A public key from a key set.
pub(crate) struct SetKey {
    /// Its `kid`.
    pub kid: Option<String>,
    /// What it verifies.
    pub alg: KeyAlg,
    /// The key.
    pub key: DecodingKey,
}

struct State {
    keys: Arc<Vec<SetKey>>,
    /// Whether a fetch ever succeeded.
    fetched: bool,
    /// When the keys should be fetched again.
    fresh_until: Option<Instant>,
    /// When the last fetch started.
    last_attempt: Option<Instant>,
    /// When the last fetch ended (either way).
    last_done: Option<Instant>,
}

/// One app's key set on this node.
pub struct JwksCache {
    app: AppId,
    url: String,
    /// The generation every key of this set verifies with ([`crate::auth::TokenStamp`]): a
    /// changed URL ends the connections the old set verified; keys leaving the set at the key
    /// server do not (their tokens expire).
    pub(crate) generation: u64,
    state: RwLock<State>,
    fetching: tokio::sync::Mutex<()>,
}

impl JwksCache {
    /// An empty cache of `app`'s key set at `url`.
    pub(crate) fn new(app: AppId, url: String, generation: u64) -> Self {
        JwksCache {
            app,
            url,
            generation,
            state: RwLock::new(State {
                keys: Arc::new(Vec::new()),
                fetched: false,
                fresh_until: None,
                last_attempt: None,
                last_done: None,
            }),
            fetching: tokio::sync::Mutex::new(()),
        }
    }

    /// The URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The keys held now.
    pub(crate) fn keys(&self) -> Arc<Vec<SetKey>> {
        self.state.read().keys.clone()
    }

    /// Whether a fetch ever succeeded.
    pub fn fetched(&self) -> bool {
        self.state.read().fetched
    }

    /// Whether the keys' time is up (or none were ever fetched).
    pub fn stale(&self, now: Instant) -> bool {
        self.state.read().fresh_until.is_none_or(|t| now >= t)
    }

    /// Whether an unknown key id may cause a fetch now.
    pub fn may_refetch(&self, now: Instant, min_refetch: Duration) -> bool {
        self.state
            .read()
            .last_attempt
            .is_none_or(|t| now.saturating_duration_since(t) >= min_refetch)
    }

    /// Whether a fetch is running now (a caller may wait for it with [`JwksCache::refresh`]).
    pub fn fetching(&self) -> bool {
        self.fetching.try_lock().is_err()
    }

    /// Whether the set holds a key named `kid`.
    pub fn has_kid(&self, kid: &str) -> bool {
        self.keys().iter().any(|k| k.kid.as_deref() == Some(kid))
    }

    /// Fetches the key set and replaces the cached keys with it; on failure keeps them and logs
    /// at WARN. Only one fetch runs at a time: a caller that waited for one that ended after it
    /// asked takes that one's outcome.
    pub async fn refresh(&self, source: &dyn KeySetSource) {
        let asked = Instant::now();
        let _one_at_a_time = self.fetching.lock().await;
        if self.state.read().last_done.is_some_and(|t| t >= asked) {
            return;
        }
        self.state.write().last_attempt = Some(Instant::now());
        let outcome = source
            .fetch(&self.url)
            .await
            .and_then(|set| parse_key_set(&set.body).map(|keys| (keys, set.max_age)));
        let mut state = self.state.write();
        state.last_done = Some(Instant::now());
        match outcome {
            Ok((keys, max_age)) => {
                let keep = max_age.unwrap_or(DEFAULT_CACHE).clamp(MIN_CACHE, MAX_CACHE);
                tracing::debug!(app = %self.app, url = %self.url, keys = keys.len(),
                    "fetched the app's token key set");
                state.keys = Arc::new(keys);
                state.fetched = true;
                state.fresh_until = Some(Instant::now() + keep);
            }
            Err(why) => {
                tracing::warn!(app = %self.app, url = %self.url, cached = state.keys.len(),
                    "cannot fetch the app's token key set ({why}); keeping the cached keys");
                state.fresh_until = Some(Instant::now() + RETRY_AFTER_FAILURE);
            }
        }
    }
}

/// The RS256 and ES256 signing keys of a JWKS document; other keys are skipped.
fn parse_key_set(body: &[u8]) -> Result<Vec<SetKey>, String> {
    let doc: serde_json::Value =
        serde_json::from_slice(body).map_err(|_| "the answer is not JSON".to_owned())?;
    let entries = doc
        .get("keys")
        .and_then(|k| k.as_array())
        .ok_or_else(|| "the answer has no \"keys\" array".to_owned())?;
    let mut keys = Vec::new();
    for entry in entries {
        let Ok(jwk) = serde_json::from_value::<Jwk>(entry.clone()) else {
            continue;
        };
        if matches!(jwk.common.public_key_use, Some(PublicKeyUse::Encryption)) {
            continue;
        }
        let alg = match (&jwk.algorithm, jwk.common.key_algorithm) {
            (AlgorithmParameters::RSA(_), None | Some(KeyAlgorithm::RS256)) => KeyAlg::RS256,
            (AlgorithmParameters::EllipticCurve(ec), None | Some(KeyAlgorithm::ES256))
                if ec.curve == EllipticCurve::P256 =>
            {
                KeyAlg::ES256
            }
            _ => continue,
        };
        let Ok(key) = DecodingKey::from_jwk(&jwk) else {
            continue;
        };
        keys.push(SetKey {
            kid: jwk.common.key_id.clone(),
            alg,
            key,
        });
    }
    Ok(keys)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    const EC: &str = r#"{"kty":"EC","crv":"P-256","kid":"ec1",
        "x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU",
        "y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}"#;

    struct Scripted {
        answers: parking_lot::Mutex<Vec<Result<FetchedKeySet, String>>>,
        calls: AtomicUsize,
    }

    #[async_trait]
    impl KeySetSource for Scripted {
        async fn fetch(&self, _url: &str) -> Result<FetchedKeySet, String> {
            self.calls.fetch_add(1, Ordering::Relaxed);
            self.answers.lock().remove(0)
        }
    }

    fn set(body: &str, max_age: Option<u64>) -> Result<FetchedKeySet, String> {
        Ok(FetchedKeySet {
            body: body.as_bytes().to_vec(),
            max_age: max_age.map(Duration::from_secs),
        })
    }

    #[test]
    fn only_signing_keys_of_the_two_algorithms_are_kept() {
        let doc = format!(
            r#"{{"keys":[{EC},
            {{"kty":"oct","k":"c2VjcmV0","kid":"hmac"}},
            {{"kty":"EC","crv":"P-384","kid":"p384","x":"AA","y":"AA"}},
            {{"kty":"EC","crv":"P-256","use":"enc","kid":"enc","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}},
            "junk"]}}"#
        );
        let keys = parse_key_set(doc.as_bytes()).unwrap();
        assert_eq!(keys.len(), 1);
        assert_eq!(keys[0].kid.as_deref(), Some("ec1"));
        assert_eq!(keys[0].alg, KeyAlg::ES256);
        assert!(parse_key_set(b"[]").is_err());
    }

    #[tokio::test]
    async fn a_failed_fetch_keeps_the_keys_and_refetches_are_rate_limited() {
        let cache = JwksCache::new(AppId::parse("shop").unwrap(), "http://x".into(), 7);
        let source = Scripted {
            answers: parking_lot::Mutex::new(vec![
                set(&format!(r#"{{"keys":[{EC}]}}"#), Some(1)),
                Err("connection refused".into()),
            ]),
            calls: AtomicUsize::new(0),
        };
        assert!(cache.stale(Instant::now()) && !cache.fetched());
        cache.refresh(&source).await;
        assert!(cache.fetched() && cache.has_kid("ec1"));
        // max-age 1 s is raised to the least cache time.
        assert!(!cache.stale(Instant::now() + MIN_CACHE - Duration::from_secs(1)));
        let min = Duration::from_secs(10);
        assert!(!cache.may_refetch(Instant::now(), min));
        assert!(cache.may_refetch(Instant::now() + min, min));
        cache.refresh(&source).await;
        assert!(cache.has_kid("ec1"), "an outage keeps the cached keys");
        assert_eq!(source.calls.load(Ordering::Relaxed), 2);
    }
}
