//! APNs credentials: token auth (an ES256 `.p8` signing key with its key id and team id) or
//! certificate auth (a client certificate and key), and the checks that tell a user which
//! value is wrong before anything is sent. `Debug` never shows key material.

use ring::rand::SystemRandom;
use ring::signature::{EcdsaKeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};
use rustls_pemfile::Item;

use super::ApnsError;
use crate::tls::ClientIdentity;

/// How Herald proves to APNs that it may push for an app.
#[derive(Clone)]
pub enum ApnsAuth {
    /// Token auth: the .p8 key (PKCS#8 PEM of a P-256 key), its key id, the team id.
    Token {
        /// The `.p8` file's contents.
        key_pem: String,
        /// The key's id in the developer account (10 characters).
        key_id: String,
        /// The developer team's id (10 characters).
        team_id: String,
    },
    /// Certificate auth: certificate chain and private key, PEM.
    Certificate {
        /// The certificate chain, PEM.
        cert_pem: String,
        /// The certificate's private key, PEM.
        key_pem: String,
    },
}

impl std::fmt::Debug for ApnsAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ApnsAuth::Token {
                key_id, team_id, ..
            } => f
                .debug_struct("Token")
                .field("key_id", key_id)
                .field("team_id", team_id)
                .finish_non_exhaustive(),
            ApnsAuth::Certificate { .. } => f.write_str("Certificate { .. }"),
        }
    }
}

impl ApnsAuth {
    /// Checks the credentials can be used: a PKCS#8 PEM P-256 key and 10-character ids, or a
    /// certificate and key rustls accepts.
    pub fn validate(&self) -> Result<(), ApnsError> {
        match self {
            ApnsAuth::Token {
                key_pem,
                key_id,
                team_id,
            } => {
                if !is_apple_id(key_id) {
                    return Err(ApnsError::KeyId(key_id.chars().count()));
                }
                if !is_apple_id(team_id) {
                    return Err(ApnsError::TeamId(team_id.chars().count()));
                }
                signing_key_der(key_pem).map(|_| ())
            }
            ApnsAuth::Certificate { cert_pem, key_pem } => {
                let identity = ClientIdentity {
                    cert_pem: cert_pem.as_bytes().to_vec(),
                    key_pem: key_pem.as_bytes().to_vec(),
                };
                crate::tls::client_config(None, Some(&identity))
                    .map(|_| ())
                    .map_err(|e| ApnsError::Certificate(e.to_string()))
            }
        }
    }

    /// The TLS client identity certificate auth presents (`None` for token auth).
    pub fn client_identity(&self) -> Option<ClientIdentity> {
        match self {
            ApnsAuth::Token { .. } => None,
            ApnsAuth::Certificate { cert_pem, key_pem } => Some(ClientIdentity {
                cert_pem: cert_pem.as_bytes().to_vec(),
                key_pem: key_pem.as_bytes().to_vec(),
            }),
        }
    }
}

/// Apple's key and team ids: exactly 10 characters, A-Z and 0-9.
fn is_apple_id(id: &str) -> bool {
    id.len() == 10
        && id
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
}

/// The PKCS#8 DER of a `.p8` key, checked to be a P-256 key ring can sign with.
pub(crate) fn signing_key_der(key_pem: &str) -> Result<Vec<u8>, ApnsError> {
    let bad = |why: &str| ApnsError::SigningKey(why.to_string());
    let mut found = None;
    for item in rustls_pemfile::read_all(&mut key_pem.as_bytes()) {
        match item.map_err(|_| bad("not valid PEM"))? {
            Item::Pkcs8Key(der) => {
                found = Some(der.secret_pkcs8_der().to_vec());
                break;
            }
            Item::Sec1Key(_) => {
                return Err(bad(
                    "an EC key in SEC1 form (BEGIN EC PRIVATE KEY); a .p8 key is PKCS#8 (BEGIN PRIVATE KEY)",
                ))
            }
            Item::Pkcs1Key(_) => return Err(bad("an RSA key; APNs keys are P-256 EC keys")),
            _ => {}
        }
    }
    let der = found.ok_or_else(|| bad("no PKCS#8 private key (BEGIN PRIVATE KEY) found"))?;
    EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &der, &SystemRandom::new())
        .map_err(|_| bad("not a P-256 EC key (APNs keys are ES256, curve P-256)"))?;
    Ok(der)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_ten_uppercase_letters_or_digits() {
        assert!(is_apple_id("ABC123DEF4"));
        assert!(!is_apple_id("abc123def4"));
        assert!(!is_apple_id("ABC123DEF"));
        assert!(!is_apple_id(""));
        assert!(!is_apple_id("ABC123DEF45"));
    }

    #[test]
    fn garbage_keys_are_refused_without_echoing_them() {
        let auth = ApnsAuth::Token {
            key_pem: "-----BEGIN PRIVATE KEY-----\nc2VjcmV0\n-----END PRIVATE KEY-----\n".into(),
            key_id: "ABC123DEF4".into(),
            team_id: "TEAM123456".into(),
        };
        let message = auth.validate().unwrap_err().to_string();
        assert!(message.contains("P-256"), "{message}");
        assert!(!message.contains("c2VjcmV0"));
        assert!(!format!("{auth:?}").contains("c2VjcmV0"));
        let auth = ApnsAuth::Token {
            key_pem: "not pem".into(),
            key_id: "ABC123DEF4".into(),
            team_id: "TEAM123456".into(),
        };
        assert!(matches!(auth.validate(), Err(ApnsError::SigningKey(_))));
    }
}
