//! RFC 8292 VAPID: the application server's P-256 key pair, and the ES256 JWT that identifies
//! it to a push service (`Authorization: vapid t=<jwt>, k=<public key>`), signed once per
//! push-service origin and reused until an hour before it expires.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use p256::pkcs8::EncodePrivateKey;
use p256::SecretKey;
use serde::Serialize;

use super::WebPushError;

/// How long a VAPID token is valid (RFC 8292 allows at most 24 hours).
pub const VAPID_LIFETIME_SECS: u64 = 12 * 3600;
/// A cached token is replaced this long before it expires.
const RENEW_BEFORE_SECS: u64 = 3600;

/// An application server's VAPID key pair. `Debug` never shows the private key.
#[derive(Clone)]
pub struct VapidKeys {
    secret: SecretKey,
    public_b64url: String,
    signing: EncodingKey,
}

impl std::fmt::Debug for VapidKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VapidKeys")
            .field("public", &self.public_b64url)
            .field("private", &"<hidden>")
            .finish()
    }
}

impl VapidKeys {
    /// A new random key pair.
    pub fn generate() -> Self {
        let secret = SecretKey::random(&mut rand::rngs::OsRng);
        Self::from_secret(secret).expect("a valid P-256 key always encodes as PKCS#8")
    }

    /// The key pair whose private key is `private` (32 bytes, base64url, as
    /// [`VapidKeys::private_b64url`] gives and `web-push generate-vapid-keys` prints).
    pub fn from_private_b64url(private: &str) -> Result<Self, WebPushError> {
        let bytes = URL_SAFE_NO_PAD
            .decode(private.trim().trim_end_matches('=').as_bytes())
            .map_err(|_| WebPushError::BadVapidKey("not base64url".into()))?;
        if bytes.len() != 32 {
            return Err(WebPushError::BadVapidKey(format!(
                "{} bytes, not 32",
                bytes.len()
            )));
        }
        let secret = SecretKey::from_slice(&bytes)
            .map_err(|_| WebPushError::BadVapidKey("not a P-256 private key".into()))?;
        Self::from_secret(secret)
    }

    fn from_secret(secret: SecretKey) -> Result<Self, WebPushError> {
        let public_b64url = URL_SAFE_NO_PAD.encode(secret.public_key().to_sec1_bytes());
        let pkcs8 = secret
            .to_pkcs8_der()
            .map_err(|_| WebPushError::BadVapidKey("cannot encode the key".into()))?;
        let signing = EncodingKey::from_ec_der(pkcs8.as_bytes());
        Ok(VapidKeys {
            secret,
            public_b64url,
            signing,
        })
    }

    /// The public key, an uncompressed P-256 point (65 bytes) in base64url: what a web page
    /// passes to `pushManager.subscribe` as `applicationServerKey`.
    pub fn public_b64url(&self) -> String {
        self.public_b64url.clone()
    }

    /// The private key (32 bytes) in base64url, for storing the pair. Never log it.
    pub fn private_b64url(&self) -> String {
        URL_SAFE_NO_PAD.encode(self.secret.to_bytes())
    }

    /// A signed VAPID token for `audience` (a push service origin) and its expiry (Unix secs).
    pub(crate) fn token(
        &self,
        audience: &str,
        subject: &str,
        now_secs: u64,
    ) -> Result<(String, u64), WebPushError> {
        #[derive(Serialize)]
        struct Claims<'a> {
            aud: &'a str,
            exp: u64,
            sub: &'a str,
        }
        let exp = now_secs + VAPID_LIFETIME_SECS;
        let mut header = Header::new(Algorithm::ES256);
        header.typ = Some("JWT".into());
        let claims = Claims {
            aud: audience,
            exp,
            sub: subject,
        };
        let jwt = jsonwebtoken::encode(&header, &claims, &self.signing)
            .map_err(|e| WebPushError::BadVapidKey(format!("signing failed: {e}")))?;
        Ok((jwt, exp))
    }
}

/// The `Authorization` value cached for one origin.
#[derive(Clone)]
pub(crate) struct CachedAuthorization {
    pub value: String,
    renew_at: u64,
}

impl CachedAuthorization {
    /// A fresh `Authorization` value for `audience`.
    pub(crate) fn sign(
        keys: &VapidKeys,
        audience: &str,
        subject: &str,
        now_secs: u64,
    ) -> Result<Self, WebPushError> {
        let (jwt, exp) = keys.token(audience, subject, now_secs)?;
        Ok(CachedAuthorization {
            value: format!("vapid t={jwt}, k={}", keys.public_b64url),
            renew_at: exp - RENEW_BEFORE_SECS,
        })
    }

    /// Whether it can still be sent at `now_secs`.
    pub(crate) fn usable_at(&self, now_secs: u64) -> bool {
        now_secs < self.renew_at
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_and_hide_the_private_part() {
        let keys = VapidKeys::generate();
        let again = VapidKeys::from_private_b64url(&keys.private_b64url()).unwrap();
        assert_eq!(again.public_b64url(), keys.public_b64url());
        assert_eq!(
            URL_SAFE_NO_PAD.decode(keys.public_b64url()).unwrap().len(),
            65
        );
        let debug = format!("{keys:?}");
        assert!(!debug.contains(&keys.private_b64url()));
        assert!(debug.contains("<hidden>"));
        for bad in ["", "!!", "AAAA", &URL_SAFE_NO_PAD.encode([0u8; 32])] {
            let err = VapidKeys::from_private_b64url(bad).unwrap_err();
            assert!(matches!(err, WebPushError::BadVapidKey(_)), "{bad}");
        }
    }

    #[test]
    fn token_claims_and_cache_window() {
        let keys = VapidKeys::generate();
        let auth =
            CachedAuthorization::sign(&keys, "https://push.example", "mailto:a@b", 1000).unwrap();
        assert!(auth.value.starts_with("vapid t="));
        assert!(auth
            .value
            .ends_with(&format!(", k={}", keys.public_b64url())));
        assert!(auth.usable_at(1000 + 11 * 3600 - 1));
        assert!(!auth.usable_at(1000 + 11 * 3600));
        let (jwt, exp) = keys
            .token("https://push.example", "mailto:a@b", 1000)
            .unwrap();
        assert_eq!(exp, 1000 + 12 * 3600);
        let claims = jwt.split('.').nth(1).unwrap();
        let claims: serde_json::Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(claims).unwrap()).unwrap();
        assert_eq!(
            claims,
            serde_json::json!({"aud": "https://push.example", "exp": exp, "sub": "mailto:a@b"})
        );
    }
}
