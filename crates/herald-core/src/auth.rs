//! Who may do what: publisher API keys (kept only as SHA-256 hashes) and client tokens (HS256
//! JWTs with `sub`, `exp`, `channels` and `publish` claims).

use std::collections::HashSet;

use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use parking_lot::RwLock;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{ErrorCode, HeraldError};
use crate::pattern::PatternSet;

/// Claims of a client token.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ClientClaims {
    /// Who the client is (user id); shown to nobody else.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub sub: String,
    /// Expiry, seconds since the Unix epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exp: Option<u64>,
    /// Patterns of channels the client may subscribe to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub channels: Vec<String>,
    /// Patterns of channels the client may publish to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub publish: Vec<String>,
}

/// An authenticated (or anonymous) client and what it may do.
#[derive(Debug, Clone)]
pub struct Client {
    /// The token's `sub`, empty for anonymous clients.
    pub sub: String,
    /// When the token expires, seconds since the Unix epoch.
    pub expires: Option<u64>,
    /// Channels it may subscribe to.
    pub subscribe: PatternSet,
    /// Channels it may publish to.
    pub publish: PatternSet,
}

impl Client {
    /// An anonymous client (only when the server allows it): may subscribe to any channel and
    /// publish to none.
    pub fn anonymous() -> Self {
        Client {
            sub: String::new(),
            expires: None,
            subscribe: PatternSet::all(),
            publish: PatternSet::default(),
        }
    }

    /// Checks subscribe permission.
    pub fn check_subscribe(&self, channel: &str) -> Result<(), HeraldError> {
        if self.subscribe.allows(channel) {
            Ok(())
        } else {
            Err(HeraldError::forbidden(format!(
                "the token does not allow subscribing to {channel:?}"
            )))
        }
    }

    /// Checks publish permission.
    pub fn check_publish(&self, channel: &str) -> Result<(), HeraldError> {
        if self.publish.allows(channel) {
            Ok(())
        } else {
            Err(HeraldError::forbidden(format!(
                "the token does not allow publishing to {channel:?}"
            )))
        }
    }
}

/// Signs and verifies client tokens with one HS256 secret.
pub struct TokenKeys {
    encoding: EncodingKey,
    decoding: DecodingKey,
    validation: Validation,
}

impl TokenKeys {
    /// Keys from a shared secret.
    pub fn new(secret: &[u8]) -> Self {
        let mut validation = Validation::new(Algorithm::HS256);
        validation.required_spec_claims = HashSet::new();
        validation.leeway = 0;
        validation.validate_exp = true;
        validation.validate_nbf = true;
        validation.validate_aud = false;
        TokenKeys {
            encoding: EncodingKey::from_secret(secret),
            decoding: DecodingKey::from_secret(secret),
            validation,
        }
    }

    /// Verifies a token and returns the client it names.
    pub fn verify(&self, token: &str) -> Result<Client, HeraldError> {
        use jsonwebtoken::errors::ErrorKind;
        let data = jsonwebtoken::decode::<ClientClaims>(token, &self.decoding, &self.validation)
            .map_err(|e| match e.kind() {
                ErrorKind::ExpiredSignature => {
                    HeraldError::new(ErrorCode::TokenExpired, "the token has expired")
                }
                ErrorKind::InvalidSignature => HeraldError::new(
                    ErrorCode::Unauthorized,
                    "the token's signature is not valid for this server",
                ),
                other => HeraldError::new(
                    ErrorCode::Unauthorized,
                    format!("the token is not valid: {other:?}"),
                ),
            })?;
        let c = data.claims;
        Ok(Client {
            subscribe: PatternSet::new(&c.channels),
            publish: PatternSet::new(&c.publish),
            sub: c.sub,
            expires: c.exp,
        })
    }

    /// Signs a token with these claims.
    pub fn mint(&self, claims: &ClientClaims) -> String {
        jsonwebtoken::encode(&Header::new(Algorithm::HS256), claims, &self.encoding)
            .expect("HS256 signing of plain claims cannot fail")
    }
}

/// SHA-256 hex of an API key; only this is ever stored.
pub fn hash_api_key(key: &str) -> String {
    hex::encode(Sha256::digest(key.as_bytes()))
}

/// A new random API key (`hk_` and 40 hex digits).
pub fn generate_secret(prefix: &str) -> String {
    let bytes: [u8; 20] = rand::random();
    format!("{prefix}{}", hex::encode(bytes))
}

/// The set of valid publisher API keys, by hash.
#[derive(Default)]
pub struct ApiKeys {
    hashes: RwLock<HashSet<String>>,
}

impl ApiKeys {
    /// A set holding these hashes.
    pub fn from_hashes(hashes: impl IntoIterator<Item = String>) -> Self {
        ApiKeys {
            hashes: RwLock::new(hashes.into_iter().collect()),
        }
    }

    /// Whether `key` is a valid publisher key.
    pub fn check(&self, key: &str) -> bool {
        self.hashes.read().contains(&hash_api_key(key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mint_verify_roundtrip_and_permissions() {
        let keys = TokenKeys::new(b"secret");
        let token = keys.mint(&ClientClaims {
            sub: "alice".into(),
            exp: Some(u64::MAX / 2),
            channels: vec!["news".into(), "chat/*".into()],
            publish: vec!["chat/*".into()],
        });
        let c = keys.verify(&token).unwrap();
        assert_eq!(c.sub, "alice");
        assert!(c.check_subscribe("chat/1").is_ok());
        assert_eq!(
            c.check_subscribe("other").unwrap_err().code,
            ErrorCode::Forbidden
        );
        assert!(c.check_publish("news").is_err());
    }

    #[test]
    fn rejects_forged_and_expired_and_garbage() {
        let keys = TokenKeys::new(b"secret");
        let forged = TokenKeys::new(b"other").mint(&ClientClaims::default());
        assert_eq!(
            keys.verify(&forged).unwrap_err().code,
            ErrorCode::Unauthorized
        );
        let expired = keys.mint(&ClientClaims {
            exp: Some(1000),
            ..Default::default()
        });
        assert_eq!(
            keys.verify(&expired).unwrap_err().code,
            ErrorCode::TokenExpired
        );
        assert_eq!(
            keys.verify("not.a.jwt").unwrap_err().code,
            ErrorCode::Unauthorized
        );
        // no exp at all is accepted
        assert!(keys.verify(&keys.mint(&ClientClaims::default())).is_ok());
    }

    #[test]
    fn api_keys_by_hash() {
        let k = generate_secret("hk_");
        let keys = ApiKeys::from_hashes([hash_api_key(&k)]);
        assert!(keys.check(&k));
        assert!(!keys.check("hk_wrong"));
    }
}
