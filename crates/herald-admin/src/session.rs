//! The dashboard's session cookie: stateless, so any node of a cluster accepts it. Its value is
//! `v1.<key hash>.<expiry>.<signature>`: the SHA-256 hex of the key that logged in (what
//! `ApiKeys` and the admin key's hash are compared with), when the session ends (seconds since
//! the Unix epoch), and an HMAC-SHA256 of both under a key derived from the server's token
//! secret (every node of a cluster shares it). The cookie never holds the key itself, and the
//! server re-checks on every request that the hashed key still exists, so revoking a key ends
//! its sessions at once.
//!
//! A cookie is sent by the browser on any request to the server, cross-site ones included, so
//! herald-api accepts it only on requests that also carry [`SESSION_HEADER`]: a page on another
//! origin cannot add a custom header without a CORS grant, and none is given.

use std::time::Duration;

use axum::http::{header, HeaderMap};
use hmac::{Hmac, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// The cookie's name.
pub const COOKIE_NAME: &str = "herald_admin";

/// The request header without which the cookie is not accepted (value `1`).
pub const SESSION_HEADER: &str = "x-herald-session";

/// The version tag every cookie value starts with.
const VERSION: &str = "v1";

/// What the session key is derived with, so it differs from every other use of the secret.
const DERIVATION_LABEL: &[u8] = b"herald admin session cookie v1";

/// How long a session lasts when the configuration does not say.
pub const DEFAULT_TTL: Duration = Duration::from_secs(3600);

/// Why a cookie was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SessionError {
    /// Not a cookie value this server writes.
    #[error("the session cookie is malformed: log in again")]
    Malformed,
    /// The signature does not match: written by another server or altered.
    #[error("the session cookie's signature is not valid for this server: log in again")]
    Forged,
    /// Past its expiry.
    #[error("the session has expired: log in again")]
    Expired,
}

/// The HMAC key sessions are signed with, derived from the token secret. `Debug` shows nothing
/// of it.
#[derive(Clone)]
pub struct SessionKey([u8; 32]);

impl std::fmt::Debug for SessionKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SessionKey(..)")
    }
}

/// A session a valid cookie names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    /// SHA-256 hex of the key that logged in.
    pub key_hash: String,
    /// When the session ends, seconds since the Unix epoch.
    pub expires_at: u64,
}

impl SessionKey {
    /// The session key of a server whose token secret is `token_secret`:
    /// HMAC-SHA256(token_secret, a fixed label).
    pub fn derive(token_secret: &[u8]) -> SessionKey {
        let mut mac = HmacSha256::new_from_slice(token_secret).expect("HMAC takes any key length");
        mac.update(DERIVATION_LABEL);
        SessionKey(mac.finalize().into_bytes().into())
    }

    fn mac(&self, payload: &str) -> HmacSha256 {
        let mut mac = HmacSha256::new_from_slice(&self.0).expect("HMAC takes any key length");
        mac.update(payload.as_bytes());
        mac
    }

    /// The cookie value of a session of the key hashed as `key_hash`, ending at `expires_at`.
    pub fn seal(&self, key_hash: &str, expires_at: u64) -> String {
        let payload = format!("{VERSION}.{key_hash}.{expires_at}");
        let signature = hex::encode(self.mac(&payload).finalize().into_bytes());
        format!("{payload}.{signature}")
    }

    /// The session a cookie value names, if this server signed it and it has not expired at
    /// `now` (seconds since the Unix epoch).
    pub fn open(&self, value: &str, now: u64) -> Result<Session, SessionError> {
        let (payload, signature) = value.rsplit_once('.').ok_or(SessionError::Malformed)?;
        let mut parts = payload.split('.');
        let (Some(VERSION), Some(key_hash), Some(expires), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(SessionError::Malformed);
        };
        let well_formed_hash = key_hash.len() == 64
            && key_hash
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if !well_formed_hash || expires.is_empty() || !expires.bytes().all(|b| b.is_ascii_digit()) {
            return Err(SessionError::Malformed);
        }
        let expires_at: u64 = expires.parse().map_err(|_| SessionError::Malformed)?;
        let signature = hex::decode(signature).map_err(|_| SessionError::Forged)?;
        self.mac(payload)
            .verify_slice(&signature)
            .map_err(|_| SessionError::Forged)?;
        if now >= expires_at {
            return Err(SessionError::Expired);
        }
        Ok(Session {
            key_hash: key_hash.to_owned(),
            expires_at,
        })
    }
}

/// How the server issues sessions: the signing key, their lifetime, and whether the cookie is
/// marked `Secure` (the server is reached over https, through a proxy that terminates TLS).
#[derive(Debug, Clone)]
pub struct Sessions {
    /// Signs and checks cookies.
    pub key: SessionKey,
    /// How long a session lasts from its login.
    pub ttl: Duration,
    /// Add `Secure` to the cookie.
    pub secure_cookie: bool,
}

impl Sessions {
    /// Sessions signed with a key derived from `token_secret`, lasting [`DEFAULT_TTL`], with a
    /// cookie not marked `Secure`.
    pub fn new(token_secret: &[u8]) -> Sessions {
        Sessions {
            key: SessionKey::derive(token_secret),
            ttl: DEFAULT_TTL,
            secure_cookie: false,
        }
    }

    /// The `Set-Cookie` value that starts a session of `key_hash` at `now` (seconds since the
    /// Unix epoch); also returns when it ends.
    pub fn start(&self, key_hash: &str, now: u64) -> (String, u64) {
        let ttl = self.ttl.as_secs().max(1);
        let expires_at = now.saturating_add(ttl);
        let value = self.key.seal(key_hash, expires_at);
        (self.cookie(&value, ttl), expires_at)
    }

    /// The `Set-Cookie` value that ends the session in the browser.
    pub fn clear(&self) -> String {
        self.cookie("", 0)
    }

    fn cookie(&self, value: &str, max_age: u64) -> String {
        let secure = if self.secure_cookie { "; Secure" } else { "" };
        format!(
            "{COOKIE_NAME}={value}; Path=/; Max-Age={max_age}; HttpOnly; SameSite=Strict{secure}"
        )
    }
}

/// The session cookie's value among the request's `Cookie` headers.
pub fn cookie_value(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE_NAME)
        .map(|(_, value)| value.trim())
        .filter(|value| !value.is_empty())
}

/// Whether the request carries [`SESSION_HEADER`] (with value `1`).
pub fn has_session_header(headers: &HeaderMap) -> bool {
    headers
        .get(SESSION_HEADER)
        .is_some_and(|v| v.as_bytes() == b"1")
}

#[cfg(test)]
mod tests {
    use super::*;

    const HASH: &str = "8d969eef6ecad3c29a3a629280e686cf0c3f5d5a86aff3ca12020c923adc6c92";

    #[test]
    fn a_sealed_session_opens_until_it_expires() {
        let key = SessionKey::derive(b"a-token-secret-0123456789");
        let value = key.seal(HASH, 1_000);
        let session = key.open(&value, 999).unwrap();
        assert_eq!(session.key_hash, HASH);
        assert_eq!(session.expires_at, 1_000);
        assert_eq!(key.open(&value, 1_000), Err(SessionError::Expired));
    }

    #[test]
    fn another_secret_or_an_altered_value_is_forged() {
        let key = SessionKey::derive(b"a-token-secret-0123456789");
        let other = SessionKey::derive(b"another-secret-0123456789");
        let value = other.seal(HASH, 2_000);
        assert_eq!(key.open(&value, 1), Err(SessionError::Forged));
        // A later expiry with the old signature.
        let good = key.seal(HASH, 2_000);
        let (_, signature) = good.rsplit_once('.').unwrap();
        let stretched = format!("v1.{HASH}.9999999999.{signature}");
        assert_eq!(key.open(&stretched, 1), Err(SessionError::Forged));
        assert_eq!(key.open(&format!("{good}00"), 1), Err(SessionError::Forged));
    }

    #[test]
    fn garbage_is_malformed_and_never_panics() {
        let key = SessionKey::derive(b"a-token-secret-0123456789");
        for value in [
            "",
            ".",
            "v1",
            "v1...",
            "v2.abc.1.00",
            &format!("v1.{HASH}.x.00"),
            &format!("v1.{HASH}.-1.00"),
            &format!("v1.{}.1.00", &HASH[..63]),
            &format!("v1.{HASH}.1.2.00"),
            &format!("v1.{HASH}.99999999999999999999999.00"),
            "v1.ÿÿ.1.00",
        ] {
            assert_eq!(
                key.open(value, 0),
                Err(SessionError::Malformed),
                "{value:?}"
            );
        }
    }

    #[test]
    fn cookies_carry_the_attributes() {
        let mut sessions = Sessions::new(b"a-token-secret-0123456789");
        let (cookie, expires) = sessions.start(HASH, 100);
        assert_eq!(expires, 3_700);
        assert!(cookie.starts_with("herald_admin=v1."), "{cookie}");
        assert!(cookie.ends_with("; Path=/; Max-Age=3600; HttpOnly; SameSite=Strict"));
        sessions.secure_cookie = true;
        assert!(sessions
            .clear()
            .ends_with("Max-Age=0; HttpOnly; SameSite=Strict; Secure"));
        assert_eq!(format!("{:?}", sessions.key), "SessionKey(..)");
    }

    #[test]
    fn the_cookie_is_found_among_others() {
        let mut headers = HeaderMap::new();
        headers.append(
            header::COOKIE,
            "a=1; herald_admin=v1.x ; b=2".parse().unwrap(),
        );
        assert_eq!(cookie_value(&headers), Some("v1.x"));
        headers.clear();
        headers.append(header::COOKIE, "herald_admin=".parse().unwrap());
        assert_eq!(cookie_value(&headers), None);
        assert!(!has_session_header(&headers));
        headers.insert(SESSION_HEADER, "1".parse().unwrap());
        assert!(has_session_header(&headers));
    }
}
