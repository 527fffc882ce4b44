//! Client tokens as the contract defines them: the claims (`sub`, `exp`, `channels`, `publish`,
//! `device`) and minting, HS256 over the app's token secret, with the app id as the header's
//! `kid` for every app but `default`. Verifying belongs to the server (`herald-core`'s auth).

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde::{Deserialize, Serialize};

/// Claims of a client token. Every claim is optional; empty ones are left out of the token.
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
    /// The device this token is for: a device token receives that device's inbox.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
}

/// The app id that needs no `kid` in a token's header.
pub const DEFAULT_APP: &str = "default";

/// Signs a token for the `default` app (no `kid`) with its secret.
pub fn mint(secret: &[u8], claims: &ClientClaims) -> String {
    mint_for_app(secret, DEFAULT_APP, claims)
}

/// Signs a token for `app` with that app's secret: the header's `kid` names the app, so the
/// server knows which secret verifies it (none for [`DEFAULT_APP`]).
pub fn mint_for_app(secret: &[u8], app: &str, claims: &ClientClaims) -> String {
    let mut header = Header::new(Algorithm::HS256);
    if app != DEFAULT_APP {
        header.kid = Some(app.to_string());
    }
    jsonwebtoken::encode(&header, claims, &EncodingKey::from_secret(secret))
        .expect("HS256 signing of plain claims cannot fail")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minting_is_deterministic_and_names_the_app() {
        let claims = ClientClaims {
            sub: "alice".into(),
            ..Default::default()
        };
        assert_eq!(mint(b"s", &claims), mint(b"s", &claims));
        assert_ne!(mint(b"s", &claims), mint(b"t", &claims));
        let header = mint_for_app(b"s", "shop", &claims);
        let header = header.split('.').next().unwrap();
        assert_ne!(header, mint(b"s", &claims).split('.').next().unwrap());
    }
}
