//! The APNs provider token: a JWT (ES256, header `kid`, claims `iss` = team id and `iat`) made
//! once and reused by every request, refreshed when it is older than the configured age (20 to
//! 60 minutes; Apple refuses tokens older than an hour and answers
//! `TooManyProviderTokenUpdates` to tokens changed more often than every 20 minutes) and when
//! APNs rejects it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use parking_lot::RwLock;

use super::ApnsError;

/// The shortest refresh age: Apple answers `TooManyProviderTokenUpdates` below it.
pub const MIN_TOKEN_AGE: Duration = Duration::from_secs(20 * 60);
/// The longest refresh age: Apple answers `ExpiredProviderToken` beyond an hour.
pub const MAX_TOKEN_AGE: Duration = Duration::from_secs(60 * 60);
/// The default refresh age.
pub const DEFAULT_TOKEN_AGE: Duration = Duration::from_secs(50 * 60);

/// Makes and keeps the provider token for one key.
pub struct ProviderToken {
    key: EncodingKey,
    header: Header,
    team_id: String,
    max_age: Duration,
    current: RwLock<Option<Signed>>,
    made: AtomicU64,
}

#[derive(Clone)]
struct Signed {
    jwt: Arc<str>,
    /// `bearer <jwt>` as a header value, made once per token (cloning it shares its bytes).
    authorization: http::HeaderValue,
    made_at: Instant,
}

/// The current token and its `authorization` header value.
#[derive(Clone)]
pub struct Bearer {
    /// The JWT (to tell APNs' rejection of this token from one of a newer token).
    pub jwt: Arc<str>,
    /// `bearer <jwt>`.
    pub authorization: http::HeaderValue,
}

impl Signed {
    fn bearer(&self) -> Bearer {
        Bearer {
            jwt: self.jwt.clone(),
            authorization: self.authorization.clone(),
        }
    }
}

#[derive(serde::Serialize)]
struct Claims<'a> {
    iss: &'a str,
    iat: u64,
}

impl std::fmt::Debug for ProviderToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderToken")
            .field("team_id", &self.team_id)
            .field("max_age", &self.max_age)
            .finish_non_exhaustive()
    }
}

impl ProviderToken {
    /// A token maker for a P-256 PKCS#8 key (DER), refreshing after `max_age` (clamped to
    /// 20..=60 minutes).
    pub fn new(
        pkcs8_der: &[u8],
        key_id: &str,
        team_id: &str,
        max_age: Duration,
    ) -> Result<Self, ApnsError> {
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some(key_id.to_string());
        header.typ = None;
        Ok(ProviderToken {
            key: EncodingKey::from_ec_der(pkcs8_der),
            header,
            team_id: team_id.to_string(),
            max_age: max_age.clamp(MIN_TOKEN_AGE, MAX_TOKEN_AGE),
            current: RwLock::new(None),
            made: AtomicU64::new(0),
        })
    }

    /// The token to send: the current one, or a new one if there is none or it is too old.
    pub fn bearer(&self) -> Result<Bearer, ApnsError> {
        if let Some(signed) = self.current.read().as_ref() {
            if signed.made_at.elapsed() < self.max_age {
                return Ok(signed.bearer());
            }
        }
        let mut current = self.current.write();
        if let Some(signed) = current.as_ref() {
            if signed.made_at.elapsed() < self.max_age {
                return Ok(signed.bearer());
            }
        }
        let signed = self.sign()?;
        let bearer = signed.bearer();
        *current = Some(signed);
        Ok(bearer)
    }

    /// APNs rejected `jwt` as expired: the next [`bearer`](Self::bearer) makes a new one,
    /// unless another request already replaced it (many requests in flight share a token and
    /// are all rejected; only the first rejection counts).
    pub fn expired(&self, jwt: &str) {
        let mut current = self.current.write();
        if current.as_ref().is_some_and(|s| &*s.jwt == jwt) {
            *current = None;
        }
    }

    /// APNs called `jwt` invalid: replace it like [`expired`](Self::expired), but only if it is
    /// at least 20 minutes old, so a key APNs does not know does not make Herald change tokens
    /// faster than Apple allows.
    pub fn invalid(&self, jwt: &str) {
        let mut current = self.current.write();
        if current
            .as_ref()
            .is_some_and(|s| &*s.jwt == jwt && s.made_at.elapsed() >= MIN_TOKEN_AGE)
        {
            *current = None;
        }
    }

    /// How many tokens this maker has signed.
    pub fn made(&self) -> u64 {
        self.made.load(Ordering::Relaxed)
    }

    fn sign(&self) -> Result<Signed, ApnsError> {
        let iat = crate::common::unix_secs();
        let claims = Claims {
            iss: &self.team_id,
            iat,
        };
        let jwt = jsonwebtoken::encode(&self.header, &claims, &self.key)
            .map_err(|e| ApnsError::Token(e.to_string()))?;
        self.made.fetch_add(1, Ordering::Relaxed);
        let authorization =
            http::HeaderValue::from_maybe_shared(bytes::Bytes::from(format!("bearer {jwt}")))
                .map_err(|e| ApnsError::Token(e.to_string()))?;
        Ok(Signed {
            jwt: jwt.into(),
            authorization,
            made_at: Instant::now(),
        })
    }
}
