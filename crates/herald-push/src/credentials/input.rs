//! Provider credentials as an admin gives them (`PUT /v1/apps/{id}/providers/{provider}`),
//! checked before anything is stored: an APNs `.p8` must be a P-256 key, a certificate must
//! parse, a service account must be Google's JSON with an RSA key, a VAPID key must be a P-256
//! private key. What is stored is the whole secret (sealed) and a public view with no secret in
//! it, which the API and `herald providers` show.

use base64::Engine;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use herald_core::error::{ErrorCode, HeraldError};
use herald_providers::apns::{ApnsAuth, ApnsEndpoint};
use herald_providers::fcm::ServiceAccount;
use herald_providers::webpush::VapidKeys;

use crate::device::Platform;

/// APNs environment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum ApnsEnvironment {
    /// `api.push.apple.com`.
    #[default]
    Production,
    /// `api.sandbox.push.apple.com` (development builds).
    Sandbox,
}

/// APNs credentials: token auth (`key`, `key_id`, `team_id`) or certificate auth
/// (`certificate`, `private_key`), plus the app's bundle id (`topic`).
#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApnsCredentials {
    /// The bundle id, the `apns-topic` of alert pushes.
    pub topic: String,
    /// Production or sandbox.
    #[serde(default)]
    pub environment: ApnsEnvironment,
    /// The `.p8` signing key (PEM).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// The key's id (10 characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_id: Option<String>,
    /// The team id (10 characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub team_id: Option<String>,
    /// The push certificate (PEM).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certificate: Option<String>,
    /// The certificate's private key (PEM).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub private_key: Option<String>,
    /// The certificate and key as a PKCS#12 file (base64), instead of `certificate` and
    /// `private_key`: read once, kept as PEM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pkcs12: Option<String>,
    /// The PKCS#12 file's password.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
}

/// FCM credentials: the service-account JSON Google's console gives (as an object or a string).
#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FcmCredentials {
    /// The service account.
    pub service_account: Value,
}

/// Web Push credentials: the VAPID key pair and the contact (`mailto:` or `https:`).
#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebPushCredentials {
    /// Contact the push service may use (`mailto:ops@example.com`).
    pub subject: String,
    /// The VAPID private key (base64url, 32 bytes); absent with `generate`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub private_key: Option<String>,
    /// Make a new key pair instead of giving one.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub generate: bool,
}

/// One provider's credentials, checked.
#[derive(Clone)]
pub enum ProviderCredentials {
    /// APNs.
    Apns(ApnsCredentials),
    /// FCM, with its parsed account.
    Fcm(FcmCredentials, ServiceAccount),
    /// Web Push, with its key pair.
    WebPush(WebPushCredentials, VapidKeys),
}

impl std::fmt::Debug for ProviderCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ProviderCredentials({})", self.provider().as_str())
    }
}

fn invalid(provider: Platform, message: impl std::fmt::Display) -> HeraldError {
    HeraldError::new(
        ErrorCode::BadRequest,
        format!("{} credentials: {message}", provider.as_str()),
    )
}

impl ProviderCredentials {
    /// Parses and checks the body given for `provider` (a JSON object).
    pub fn parse(provider: Platform, body: &[u8]) -> Result<Self, HeraldError> {
        match provider {
            Platform::Herald => Err(HeraldError::bad_request(
                "herald devices need no provider credentials: use apns, fcm or webpush",
            )),
            Platform::Apns => {
                let mut c: ApnsCredentials =
                    serde_json::from_slice(body).map_err(|e| invalid(provider, e))?;
                if let Some(p12) = c.pkcs12.take() {
                    if c.certificate.is_some() || c.private_key.is_some() || c.key.is_some() {
                        return Err(invalid(
                            provider,
                            "give \"pkcs12\" alone, not with \"certificate\", \"private_key\" or \"key\"",
                        ));
                    }
                    let der = base64::engine::general_purpose::STANDARD
                        .decode(p12.split_whitespace().collect::<String>())
                        .map_err(|_| invalid(provider, "\"pkcs12\" must be base64"))?;
                    let password = c.password.take().unwrap_or_default();
                    match herald_providers::apns::pkcs12::from_pkcs12(&der, &password)
                        .map_err(|e| invalid(provider, e))?
                    {
                        ApnsAuth::Certificate { cert_pem, key_pem } => {
                            c.certificate = Some(cert_pem);
                            c.private_key = Some(key_pem);
                        }
                        ApnsAuth::Token { .. } => unreachable!("PKCS#12 gives certificate auth"),
                    }
                } else if c.password.is_some() {
                    return Err(invalid(provider, "\"password\" goes with \"pkcs12\""));
                }
                if c.topic.is_empty() || c.topic.len() > 255 {
                    return Err(invalid(
                        provider,
                        "\"topic\" (the bundle id) is required, at most 255 bytes",
                    ));
                }
                c.auth()?.validate().map_err(|e| invalid(provider, e))?;
                Ok(ProviderCredentials::Apns(c))
            }
            Platform::Fcm => {
                let c: FcmCredentials =
                    serde_json::from_slice(body).map_err(|e| invalid(provider, e))?;
                let text = match &c.service_account {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                let account = ServiceAccount::parse(&text).map_err(|e| invalid(provider, e))?;
                Ok(ProviderCredentials::Fcm(c, account))
            }
            Platform::Webpush => {
                let mut c: WebPushCredentials =
                    serde_json::from_slice(body).map_err(|e| invalid(provider, e))?;
                if !(c.subject.starts_with("mailto:") || c.subject.starts_with("https:")) {
                    return Err(invalid(
                        provider,
                        "\"subject\" must be a mailto: or https: URL the push service can contact",
                    ));
                }
                let keys = match (&c.private_key, c.generate) {
                    (Some(k), false) => {
                        VapidKeys::from_private_b64url(k).map_err(|e| invalid(provider, e))?
                    }
                    (None, true) => VapidKeys::generate(),
                    _ => {
                        return Err(invalid(
                            provider,
                            "give \"private_key\" (base64url) or \"generate\": true, not both",
                        ))
                    }
                };
                c.private_key = Some(keys.private_b64url());
                c.generate = false;
                Ok(ProviderCredentials::WebPush(c, keys))
            }
        }
    }

    /// Reads credentials as [`ProviderCredentials::secret`] wrote them.
    pub fn from_secret(provider: Platform, secret: &[u8]) -> Result<Self, HeraldError> {
        Self::parse(provider, secret)
    }

    /// The provider they are for.
    pub fn provider(&self) -> Platform {
        match self {
            ProviderCredentials::Apns(_) => Platform::Apns,
            ProviderCredentials::Fcm(..) => Platform::Fcm,
            ProviderCredentials::WebPush(..) => Platform::Webpush,
        }
    }

    /// The whole secret, to seal (JSON; a generated VAPID key is included).
    pub fn secret(&self) -> Vec<u8> {
        match self {
            ProviderCredentials::Apns(c) => serde_json::to_vec(c),
            ProviderCredentials::Fcm(c, _) => serde_json::to_vec(c),
            ProviderCredentials::WebPush(c, _) => serde_json::to_vec(c),
        }
        .expect("credentials serialize")
    }

    /// What may be shown: no key, certificate or private field.
    pub fn public(&self) -> Value {
        match self {
            ProviderCredentials::Apns(c) => json!({
                "provider": "apns",
                "auth": if c.key.is_some() { "token" } else { "certificate" },
                "topic": c.topic,
                "environment": c.environment,
                "key_id": c.key_id,
                "team_id": c.team_id,
            }),
            ProviderCredentials::Fcm(_, account) => json!({
                "provider": "fcm",
                "project_id": account.project_id,
                "client_email": account.client_email,
            }),
            ProviderCredentials::WebPush(c, keys) => json!({
                "provider": "webpush",
                "subject": c.subject,
                "public_key": keys.public_b64url(),
            }),
        }
    }
}

impl ApnsCredentials {
    /// The client's auth from the given fields: exactly one of token or certificate auth.
    pub fn auth(&self) -> Result<ApnsAuth, HeraldError> {
        match (
            &self.key,
            &self.key_id,
            &self.team_id,
            &self.certificate,
            &self.private_key,
        ) {
            (Some(key), Some(key_id), Some(team_id), None, None) => Ok(ApnsAuth::Token {
                key_pem: key.clone(),
                key_id: key_id.clone(),
                team_id: team_id.clone(),
            }),
            (None, None, None, Some(cert), Some(key)) => Ok(ApnsAuth::Certificate {
                cert_pem: cert.clone(),
                key_pem: key.clone(),
            }),
            _ => Err(invalid(
                Platform::Apns,
                "give either \"key\", \"key_id\" and \"team_id\" (token auth) or \
                 \"certificate\" and \"private_key\" (certificate auth)",
            )),
        }
    }

    /// Where this app's pushes go, unless the server overrides it.
    pub fn endpoint(&self) -> ApnsEndpoint {
        match self.environment {
            ApnsEnvironment::Production => ApnsEndpoint::Production,
            ApnsEnvironment::Sandbox => ApnsEndpoint::Sandbox,
        }
    }
}
