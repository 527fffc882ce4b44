//! Provider tokens as the mock checks them: ES256 JWTs whose `kid` names a configured key,
//! whose `iss` is that key's team and whose `iat` is less than an hour old. Verified tokens
//! are remembered (APNs does not verify a signature per request either), and a fresh P-256
//! key pair for tests comes from [`test_key`].

use std::collections::HashMap;
use std::time::{SystemTime, UNIX_EPOCH};

use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use parking_lot::Mutex;

/// APNs refuses provider tokens older than this, seconds.
const TOKEN_LIFETIME: i64 = 3600;
/// How far in the future an `iat` may be (clock skew), seconds.
const CLOCK_SKEW: i64 = 300;
/// Verified tokens remembered before the cache starts over.
const CACHE_LIMIT: usize = 4096;

/// A fresh P-256 key pair: the private key as a `.p8` file holds it (PKCS#8 PEM) and the
/// public key (SPKI PEM) the mock checks tokens with.
pub fn test_key() -> (String, String) {
    let pair = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)
        .expect("ring generates P-256 keys");
    (pair.serialize_pem(), pair.public_key_pem())
}

/// Why a provider token is refused: Apple's reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenProblem {
    /// No `authorization: bearer` header.
    Missing,
    /// Unknown key, bad signature, wrong team, malformed.
    Invalid,
    /// Older than an hour.
    Expired,
}

impl TokenProblem {
    /// The `reason` APNs gives.
    pub fn reason(self) -> &'static str {
        match self {
            TokenProblem::Missing => "MissingProviderToken",
            TokenProblem::Invalid => "InvalidProviderToken",
            TokenProblem::Expired => "ExpiredProviderToken",
        }
    }
}

struct Key {
    team_id: String,
    decoding: DecodingKey,
}

#[derive(serde::Deserialize)]
struct Claims {
    iss: String,
    iat: i64,
}

/// The keys tokens are checked with, and the tokens already verified.
pub struct TokenChecker {
    keys: HashMap<String, Key>,
    verified: Mutex<HashMap<String, i64>>,
    /// The token the last request carried and its `iat`: a client sends the same token for
    /// many minutes, and comparing it is cheaper than hashing it for the map.
    last: Mutex<Option<(String, i64)>>,
}

impl TokenChecker {
    /// A checker for `(key id, team id, public key PEM)` triples; a key that does not parse is
    /// an error naming its key id.
    pub fn new(keys: &[(String, String, String)]) -> std::io::Result<Self> {
        let mut map = HashMap::new();
        for (key_id, team_id, public_pem) in keys {
            let decoding = DecodingKey::from_ec_pem(public_pem.as_bytes()).map_err(|e| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!("APNs mock key {key_id}: {e}"),
                )
            })?;
            map.insert(
                key_id.clone(),
                Key {
                    team_id: team_id.clone(),
                    decoding,
                },
            );
        }
        Ok(TokenChecker {
            keys: map,
            verified: Mutex::new(HashMap::new()),
            last: Mutex::new(None),
        })
    }

    /// Whether tokens are checked at all (no keys: certificate auth or an open mock).
    pub fn enabled(&self) -> bool {
        !self.keys.is_empty()
    }

    /// Checks an `authorization` header value.
    pub fn check(&self, authorization: Option<&str>) -> Result<(), TokenProblem> {
        let jwt = authorization
            .and_then(|v| {
                v.strip_prefix("bearer ")
                    .or_else(|| v.strip_prefix("Bearer "))
            })
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or(TokenProblem::Missing)?;
        let last = match &*self.last.lock() {
            Some((token, iat)) if token == jwt => Some(*iat),
            _ => None,
        };
        let iat = match last.or_else(|| self.verified.lock().get(jwt).copied()) {
            Some(iat) => iat,
            None => {
                let iat = self.verify(jwt)?;
                let mut verified = self.verified.lock();
                if verified.len() >= CACHE_LIMIT {
                    verified.clear();
                }
                verified.insert(jwt.to_string(), iat);
                iat
            }
        };
        if last.is_none() {
            *self.last.lock() = Some((jwt.to_string(), iat));
        }
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        if iat > now + CLOCK_SKEW {
            return Err(TokenProblem::Invalid);
        }
        if now - iat > TOKEN_LIFETIME {
            return Err(TokenProblem::Expired);
        }
        Ok(())
    }

    fn verify(&self, jwt: &str) -> Result<i64, TokenProblem> {
        let header = jsonwebtoken::decode_header(jwt).map_err(|_| TokenProblem::Invalid)?;
        if header.alg != Algorithm::ES256 {
            return Err(TokenProblem::Invalid);
        }
        let key = header
            .kid
            .as_deref()
            .and_then(|kid| self.keys.get(kid))
            .ok_or(TokenProblem::Invalid)?;
        let mut validation = Validation::new(Algorithm::ES256);
        validation.required_spec_claims.clear();
        validation.validate_exp = false;
        let claims = jsonwebtoken::decode::<Claims>(jwt, &key.decoding, &validation)
            .map_err(|_| TokenProblem::Invalid)?
            .claims;
        if claims.iss != key.team_id {
            return Err(TokenProblem::Invalid);
        }
        Ok(claims.iat)
    }
}
