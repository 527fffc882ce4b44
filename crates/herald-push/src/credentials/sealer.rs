//! Sealing provider credentials (and, through [`Sealer::seal_bound`], apps' token secrets) at
//! rest: AES-256-GCM under the server's credentials key, with a
//! fresh random nonce per seal and the app and provider as associated data, so a sealed blob
//! copied to another app's row does not open (one app's credentials are never used for
//! another's devices).

use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, NONCE_LEN};
use ring::rand::{SecureRandom, SystemRandom};

use herald_core::tenant::AppId;

use crate::device::Platform;

/// The credentials key cannot be used, or a sealed blob does not open.
#[derive(Debug, thiserror::Error)]
pub enum SealError {
    /// The key is not 32 bytes of hex.
    #[error("the credentials key must be 64 hex digits (32 bytes)")]
    BadKey,
    /// The blob was sealed under another key, for another app or provider, or is damaged.
    #[error("sealed credentials do not open with this server's credentials key (was the key changed, or the database copied from another server?)")]
    DoesNotOpen,
}

/// Seals and opens credentials with one key.
pub struct Sealer {
    key: LessSafeKey,
    rng: SystemRandom,
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sealer { .. }")
    }
}

/// A new random credentials key, as 64 hex digits.
pub fn generate_key() -> String {
    let mut key = [0u8; 32];
    SystemRandom::new()
        .fill(&mut key)
        .expect("the system random source failed");
    hex::encode(key)
}

fn aad(app: &AppId, provider: Platform) -> Vec<u8> {
    format!("herald-credentials:{}:{}", app.as_str(), provider.as_str()).into_bytes()
}

impl Sealer {
    /// A sealer for `key_hex` (64 hex digits).
    pub fn new(key_hex: &str) -> Result<Self, SealError> {
        let bytes = hex::decode(key_hex.trim()).map_err(|_| SealError::BadKey)?;
        let key = UnboundKey::new(&AES_256_GCM, &bytes).map_err(|_| SealError::BadKey)?;
        Ok(Sealer {
            key: LessSafeKey::new(key),
            rng: SystemRandom::new(),
        })
    }

    /// Seals `secret` for `app` and `provider`: nonce, then ciphertext and tag.
    pub fn seal(&self, app: &AppId, provider: Platform, secret: &[u8]) -> Vec<u8> {
        self.seal_bound(&aad(app, provider), secret)
    }

    /// Seals `secret` bound to `associated` (what it is and whose: it opens only with the same
    /// bytes): nonce, then ciphertext and tag.
    pub fn seal_bound(&self, associated: &[u8], secret: &[u8]) -> Vec<u8> {
        let mut nonce = [0u8; NONCE_LEN];
        self.rng
            .fill(&mut nonce)
            .expect("the system random source failed");
        let mut sealed = nonce.to_vec();
        let mut body = secret.to_vec();
        self.key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(associated),
                &mut body,
            )
            .expect("AES-GCM sealing of a short secret cannot fail");
        sealed.extend_from_slice(&body);
        sealed
    }

    /// Opens what [`Sealer::seal`] sealed for the same app and provider.
    pub fn open(
        &self,
        app: &AppId,
        provider: Platform,
        sealed: &[u8],
    ) -> Result<Vec<u8>, SealError> {
        self.open_bound(&aad(app, provider), sealed)
    }

    /// Opens what [`Sealer::seal_bound`] sealed with the same associated bytes.
    pub fn open_bound(&self, associated: &[u8], sealed: &[u8]) -> Result<Vec<u8>, SealError> {
        if sealed.len() < NONCE_LEN {
            return Err(SealError::DoesNotOpen);
        }
        let (nonce, body) = sealed.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| SealError::DoesNotOpen)?;
        let mut body = body.to_vec();
        let plain = self
            .key
            .open_in_place(nonce, Aad::from(associated), &mut body)
            .map_err(|_| SealError::DoesNotOpen)?;
        Ok(plain.to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opens_only_for_the_same_key_app_and_provider() {
        let sealer = Sealer::new(&generate_key()).unwrap();
        let a = AppId::parse("a").unwrap();
        let b = AppId::parse("b").unwrap();
        let sealed = sealer.seal(&a, Platform::Apns, b"secret");
        assert!(!sealed.windows(6).any(|w| w == b"secret"));
        assert_eq!(sealer.open(&a, Platform::Apns, &sealed).unwrap(), b"secret");
        assert!(sealer.open(&b, Platform::Apns, &sealed).is_err());
        assert!(sealer.open(&a, Platform::Fcm, &sealed).is_err());
        let other = Sealer::new(&generate_key()).unwrap();
        assert!(other.open(&a, Platform::Apns, &sealed).is_err());
        assert!(sealer.open(&a, Platform::Apns, &sealed[..5]).is_err());
        assert!(matches!(Sealer::new("abc"), Err(SealError::BadKey)));
    }
}
