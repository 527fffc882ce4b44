//! What verifies an app's client tokens, as stored and as carried between nodes
//! ([`AppTokenKeys`]): its HS256 secret, the previous secret during a rotation's overlap, PEM
//! public keys (RSA for RS256, P-256 for ES256) and a JWKS URL. The checks an admin's input
//! passes before it is stored live here too; using the keys is `crate::keyring`'s.

use std::fmt;

use jsonwebtoken::DecodingKey;
use serde::{Deserialize, Serialize};

use crate::error::HeraldError;

/// Most public keys one app may have (besides its JWKS).
pub const MAX_PUBLIC_KEYS: usize = 16;

/// Longest key id (`kid`), in bytes.
pub const MAX_KID_LEN: usize = 128;

/// Longest JWKS URL, in bytes.
pub const MAX_JWKS_URL_LEN: usize = 2048;

/// The public-key algorithms a token may be signed with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum KeyAlg {
    /// RSASSA-PKCS1-v1_5 with SHA-256 (an RSA key).
    RS256,
    /// ECDSA on P-256 with SHA-256.
    ES256,
}

impl KeyAlg {
    /// The algorithm as `jsonwebtoken` names it.
    pub fn jwt(self) -> jsonwebtoken::Algorithm {
        match self {
            KeyAlg::RS256 => jsonwebtoken::Algorithm::RS256,
            KeyAlg::ES256 => jsonwebtoken::Algorithm::ES256,
        }
    }

    /// The name in a token's header.
    pub fn as_str(self) -> &'static str {
        match self {
            KeyAlg::RS256 => "RS256",
            KeyAlg::ES256 => "ES256",
        }
    }
}

/// One public key that verifies an app's tokens.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PublicKeySpec {
    /// The key id a token's header names it by; without one, the key is tried for tokens that
    /// name no key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kid: Option<String>,
    /// The algorithm the key verifies.
    pub alg: KeyAlg,
    /// The public key, PEM (`-----BEGIN PUBLIC KEY-----`, or `RSA PUBLIC KEY` for RS256).
    pub pem: String,
}

impl PublicKeySpec {
    /// The key, parsed for its algorithm.
    pub fn decoding_key(&self) -> Result<DecodingKey, HeraldError> {
        let name = self.kid.as_deref().unwrap_or("without kid");
        if self.pem.contains("PRIVATE KEY") {
            return Err(HeraldError::bad_request(format!(
                "key {name:?} is a private key: give Herald only the public key (openssl pkey \
                 -pubout); the private key stays with your backend"
            )));
        }
        let parsed = match self.alg {
            KeyAlg::RS256 => DecodingKey::from_rsa_pem(self.pem.as_bytes()),
            KeyAlg::ES256 => DecodingKey::from_ec_pem(self.pem.as_bytes()),
        };
        parsed.map_err(|_| {
            HeraldError::bad_request(format!(
                "key {name:?} is not a PEM {} public key ({})",
                match self.alg {
                    KeyAlg::RS256 => "RSA",
                    KeyAlg::ES256 => "P-256 (EC)",
                },
                self.alg.as_str()
            ))
        })
    }
}

/// The previous HS256 secret of an app during a rotation's overlap.
#[derive(Clone, PartialEq, Eq)]
pub struct PreviousSecret {
    /// The secret.
    pub secret: String,
    /// Until when it still verifies tokens, seconds since the Unix epoch.
    pub until: u64,
}

impl fmt::Debug for PreviousSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PreviousSecret")
            .field("secret", &"..")
            .field("until", &self.until)
            .finish()
    }
}

/// Everything that verifies one app's client tokens.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct AppTokenKeys {
    /// The HS256 secret Herald mints with (`POST /v1/tokens`); `None` when the app's tokens are
    /// only minted by its backend with a private key. The default app's is the server's
    /// configured token secret, never stored.
    pub secret: Option<String>,
    /// The secret before the last rotation, while its overlap lasts.
    pub previous: Option<PreviousSecret>,
    /// Public keys (RS256, ES256).
    pub public_keys: Vec<PublicKeySpec>,
    /// Where the app's key set (JWKS) is fetched from.
    pub jwks_url: Option<String>,
}

impl fmt::Debug for AppTokenKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AppTokenKeys")
            .field("secret", &self.secret.as_ref().map(|_| ".."))
            .field("previous", &self.previous)
            .field("public_keys", &self.public_keys.len())
            .field("jwks_url", &self.jwks_url)
            .finish()
    }
}

impl AppTokenKeys {
    /// The previous secret, if its overlap has not ended by `now` (seconds).
    pub fn previous_at(&self, now: u64) -> Option<&PreviousSecret> {
        self.previous.as_ref().filter(|p| p.until > now)
    }

    /// Whether anything but an HS256 secret verifies the app's tokens.
    pub fn has_public_keys(&self) -> bool {
        !self.public_keys.is_empty() || self.jwks_url.is_some()
    }
}

/// Checks public keys and a JWKS URL an admin gives: at most [`MAX_PUBLIC_KEYS`], each a
/// public key of its algorithm, key ids short, printable and unique; the URL `http://` or
/// `https://`.
pub fn check_public_keys(
    keys: &[PublicKeySpec],
    jwks_url: Option<&str>,
) -> Result<(), HeraldError> {
    if keys.len() > MAX_PUBLIC_KEYS {
        return Err(HeraldError::bad_request(format!(
            "at most {MAX_PUBLIC_KEYS} public keys per app (use a jwks_url for more)"
        )));
    }
    let mut seen = std::collections::HashSet::new();
    for key in keys {
        if let Some(kid) = &key.kid {
            if kid.is_empty()
                || kid.len() > MAX_KID_LEN
                || !kid.bytes().all(|b| b.is_ascii_graphic())
            {
                return Err(HeraldError::bad_request(format!(
                    "invalid kid {:?}: use 1 to {MAX_KID_LEN} printable ASCII characters \
                     without spaces",
                    kid.chars().take(40).collect::<String>()
                )));
            }
            if !seen.insert(kid.as_str()) {
                return Err(HeraldError::bad_request(format!(
                    "two keys have the kid {kid:?}: a token names one key"
                )));
            }
        }
        key.decoding_key()?;
    }
    if let Some(url) = jwks_url {
        let scheme_ok = url.starts_with("https://") || url.starts_with("http://");
        if !scheme_ok || url.len() > MAX_JWKS_URL_LEN || url.chars().any(char::is_whitespace) {
            return Err(HeraldError::bad_request(format!(
                "jwks_url must be an http:// or https:// URL of at most {MAX_JWKS_URL_LEN} \
                 bytes, without spaces"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_a_secret() {
        let keys = AppTokenKeys {
            secret: Some("hs_current_secret".into()),
            previous: Some(PreviousSecret {
                secret: "hs_previous_secret".into(),
                until: 5,
            }),
            ..AppTokenKeys::default()
        };
        let shown = format!("{keys:?}");
        assert!(!shown.contains("hs_"), "{shown}");
        assert_eq!(keys.previous_at(4).map(|p| p.until), Some(5));
        assert!(keys.previous_at(5).is_none());
    }

    #[test]
    fn bad_keys_are_explained() {
        let key = |kid: &str, pem: &str| PublicKeySpec {
            kid: Some(kid.into()),
            alg: KeyAlg::ES256,
            pem: pem.into(),
        };
        let e = check_public_keys(&[key("a", "junk")], None).unwrap_err();
        assert!(e.message.contains("not a PEM P-256"), "{}", e.message);
        let e = check_public_keys(&[key("a", "-----BEGIN PRIVATE KEY-----")], None).unwrap_err();
        assert!(e.message.contains("private key"), "{}", e.message);
        let e = check_public_keys(&[key("a b", "x")], None).unwrap_err();
        assert!(e.message.contains("invalid kid"), "{}", e.message);
        let e = check_public_keys(&[], Some("ftp://x")).unwrap_err();
        assert!(e.message.contains("jwks_url"), "{}", e.message);
        assert!(check_public_keys(&[], Some("https://idp.example/jwks.json")).is_ok());
    }
}
