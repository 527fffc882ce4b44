//! The service account a Firebase project gives (its JSON key file), and the signed RS256
//! assertion Herald exchanges at Google's token endpoint for an OAuth2 access token.

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde::{Deserialize, Serialize};

use super::FcmError;

/// The scope an FCM access token is asked for.
pub const FCM_SCOPE: &str = "https://www.googleapis.com/auth/firebase.messaging";

/// How long a signed assertion is valid (Google accepts at most an hour).
const ASSERTION_LIFETIME_SECS: u64 = 3600;

/// A Google service account: the parts of its JSON key file FCM needs. `Debug` never shows the
/// private key.
#[derive(Clone)]
pub struct ServiceAccount {
    /// The Firebase project the account belongs to (the `{project_id}` in `messages:send`).
    pub project_id: String,
    /// The account's e-mail address: the assertion's issuer.
    pub client_email: String,
    /// Where assertions are exchanged for access tokens.
    pub token_uri: String,
    private_key_pem: String,
    signing_key: EncodingKey,
}

impl std::fmt::Debug for ServiceAccount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceAccount")
            .field("project_id", &self.project_id)
            .field("client_email", &self.client_email)
            .field("token_uri", &self.token_uri)
            .field("private_key", &"<hidden>")
            .finish()
    }
}

#[derive(Deserialize)]
struct KeyFile {
    #[serde(default)]
    project_id: Option<String>,
    #[serde(default)]
    client_email: Option<String>,
    #[serde(default)]
    private_key: Option<String>,
    #[serde(default)]
    token_uri: Option<String>,
}

#[derive(Serialize)]
struct AssertionClaims<'a> {
    iss: &'a str,
    scope: &'a str,
    aud: &'a str,
    iat: u64,
    exp: u64,
}

impl ServiceAccount {
    /// Parses the JSON key file Google gives for a service account. Errors say which field is
    /// missing or that the key is not an RSA private key; they never quote the key.
    pub fn parse(json: &str) -> Result<Self, FcmError> {
        let file: KeyFile = serde_json::from_str(json).map_err(|e| {
            // serde_json's message gives a position, never the content.
            FcmError::NotJson(e.to_string())
        })?;
        let field = |value: Option<String>, name: &'static str| {
            value
                .filter(|v| !v.trim().is_empty())
                .ok_or(FcmError::MissingField(name))
        };
        let project_id = field(file.project_id, "project_id")?;
        let client_email = field(file.client_email, "client_email")?;
        let private_key_pem = field(file.private_key, "private_key")?;
        let token_uri = field(file.token_uri, "token_uri")?;
        let signing_key = EncodingKey::from_rsa_pem(private_key_pem.as_bytes())
            .map_err(|e| FcmError::BadKey(e.to_string()))?;
        let account = ServiceAccount {
            project_id,
            client_email,
            token_uri,
            private_key_pem,
            signing_key,
        };
        // The PEM is only parsed when used: sign once now so a bad key fails here.
        account.assertion(&account.token_uri, 0)?;
        Ok(account)
    }

    /// The private key, PEM, for whoever must store the account again (never log it).
    pub fn private_key_pem(&self) -> &str {
        &self.private_key_pem
    }

    /// A signed assertion for `audience` (the account's `token_uri`) issued at `now_secs`.
    pub(crate) fn assertion(&self, audience: &str, now_secs: u64) -> Result<String, FcmError> {
        let claims = AssertionClaims {
            iss: &self.client_email,
            scope: FCM_SCOPE,
            aud: audience,
            iat: now_secs,
            exp: now_secs + ASSERTION_LIFETIME_SECS,
        };
        jsonwebtoken::encode(&Header::new(Algorithm::RS256), &claims, &self.signing_key)
            .map_err(|e| FcmError::BadKey(format!("signing with the key failed: {e}")))
    }
}
