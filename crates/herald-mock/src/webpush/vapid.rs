//! The push service's check of RFC 8292 VAPID: `Authorization: vapid t=<jwt>, k=<key>`, the
//! JWT verified (ES256) against `k`, `aud` the service's origin, `exp` in the future and at most
//! 24 hours ahead, a `sub`; and `k` equal to the key the subscription was made with, when it
//! was made with one.

use std::time::{SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;

/// Why a push's VAPID authorization was refused, and the status that says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct VapidRefusal {
    pub status: u16,
    pub message: String,
}

fn refuse(status: u16, message: impl Into<String>) -> VapidRefusal {
    VapidRefusal {
        status,
        message: message.into(),
    }
}

#[derive(Deserialize)]
struct Claims {
    exp: u64,
    #[serde(default)]
    sub: Option<String>,
}

/// Checks `authorization` for a push to `origin`; `restricted_to` is the subscription's
/// application server key (base64url), when it has one. Returns the key `k`.
pub(crate) fn check(
    authorization: Option<&str>,
    origin: &str,
    restricted_to: Option<&str>,
) -> Result<String, VapidRefusal> {
    let value = authorization.ok_or_else(|| refuse(401, "missing Authorization"))?;
    let params = value
        .strip_prefix("vapid ")
        .ok_or_else(|| refuse(401, "the Authorization scheme is not vapid"))?;
    let mut token = None;
    let mut key = None;
    for param in params.split(',') {
        let (name, v) = param
            .trim()
            .split_once('=')
            .ok_or_else(|| refuse(401, "malformed vapid parameters"))?;
        match name.trim() {
            "t" => token = Some(v.trim()),
            "k" => key = Some(v.trim()),
            _ => {}
        }
    }
    let (token, key) = token
        .zip(key)
        .ok_or_else(|| refuse(401, "vapid needs both t and k"))?;
    let point = URL_SAFE_NO_PAD
        .decode(key.trim_end_matches('='))
        .map_err(|_| refuse(401, "k is not base64url"))?;
    if point.len() != 65 || point[0] != 4 {
        return Err(refuse(401, "k is not an uncompressed P-256 point"));
    }
    let x = URL_SAFE_NO_PAD.encode(&point[1..33]);
    let y = URL_SAFE_NO_PAD.encode(&point[33..]);
    let decoding = DecodingKey::from_ec_components(&x, &y)
        .map_err(|_| refuse(401, "k is not a P-256 public key"))?;
    let mut validation = Validation::new(Algorithm::ES256);
    validation.set_audience(&[origin]);
    validation.set_required_spec_claims(&["exp", "aud"]);
    validation.leeway = 0;
    let claims = jsonwebtoken::decode::<Claims>(token, &decoding, &validation)
        .map_err(|e| refuse(401, format!("VAPID token refused: {e}")))?
        .claims;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    if claims.exp > now + 24 * 3600 {
        return Err(refuse(401, "VAPID exp is more than 24 hours ahead"));
    }
    if !claims
        .sub
        .as_deref()
        .is_some_and(|s| s.starts_with("mailto:") || s.starts_with("https:"))
    {
        return Err(refuse(401, "VAPID sub must be a mailto: or https: URL"));
    }
    if let Some(expected) = restricted_to {
        if expected.trim_end_matches('=') != key.trim_end_matches('=') {
            return Err(refuse(
                403,
                "the VAPID key is not the one the subscription was made with",
            ));
        }
    }
    Ok(key.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use jsonwebtoken::{EncodingKey, Header};
    use p256::pkcs8::EncodePrivateKey;
    use p256::SecretKey;

    fn keypair() -> (EncodingKey, String) {
        let secret = SecretKey::random(&mut rand::rngs::OsRng);
        let der = secret.to_pkcs8_der().unwrap();
        let public = URL_SAFE_NO_PAD.encode(secret.public_key().to_sec1_bytes());
        (EncodingKey::from_ec_der(der.as_bytes()), public)
    }

    fn header(signing: &EncodingKey, k: &str, aud: &str, exp_in: i64) -> String {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        let claims = serde_json::json!({"aud": aud, "exp": now + exp_in, "sub": "mailto:a@b.c"});
        let jwt = jsonwebtoken::encode(&Header::new(Algorithm::ES256), &claims, signing).unwrap();
        format!("vapid t={jwt}, k={k}")
    }

    #[test]
    fn accepts_a_good_token_and_refuses_the_rest() {
        let origin = "https://127.0.0.1:1";
        let (signing, public) = keypair();
        let (other_signing, other_public) = keypair();
        let good = header(&signing, &public, origin, 3600);
        assert_eq!(check(Some(&good), origin, None), Ok(public.clone()));
        assert_eq!(
            check(Some(&good), origin, Some(&public)),
            Ok(public.clone())
        );
        // Signed with another key than k.
        let forged = header(&other_signing, &public, origin, 3600);
        assert_eq!(check(Some(&forged), origin, None).unwrap_err().status, 401);
        // A consistent token, but not the subscription's key.
        let other = header(&other_signing, &other_public, origin, 3600);
        assert_eq!(
            check(Some(&other), origin, Some(&public))
                .unwrap_err()
                .status,
            403
        );
        for bad in [
            header(&signing, &public, "https://elsewhere", 3600),
            header(&signing, &public, origin, -10),
            header(&signing, &public, origin, 25 * 3600),
            "Bearer x".to_string(),
            "vapid t=x".to_string(),
            "vapid t=a.b.c, k=!!".to_string(),
        ] {
            assert_eq!(
                check(Some(&bad), origin, None).unwrap_err().status,
                401,
                "{bad}"
            );
        }
        assert!(check(None, origin, None).is_err());
    }
}
