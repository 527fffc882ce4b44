//! `herald bench fcm`: Herald's [`FcmClient`] against a raw h2 client sending the same
//! `POST /v1/projects/{p}/messages:send` requests with one bearer token, fetched once from the
//! mock's token endpoint with the service account's RS256 assertion (signed here).

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context};
use bytes::Bytes;
use herald_providers::fcm::{FcmClient, FcmConfig, FcmNotification, ServiceAccount, FCM_SCOPE};
use herald_providers::Outcome;
use http::{header, HeaderValue, Method, Request, StatusCode};
use serde_json::{json, Value};

use super::drive::Sender;
use super::mock::MockProcess;
use super::raw;

/// The FCM v1 message every notification carries (the token is added per device).
fn message() -> Value {
    json!({
        "notification": {"title": "Herald", "body": "bench notification"},
        "android": {"priority": "high"},
    })
}

/// Where the raw client's body template takes the registration token.
const TOKEN_MARKER: &str = "@@registration-token@@";

/// The registration token of notification `i`, a different device for each.
fn registration_token(i: u64) -> String {
    format!("bench-device-{i:016x}")
}

/// What both contenders need from the mock.
pub(crate) struct FcmSetup {
    url: String,
    ca_pem: Vec<u8>,
    account_json: String,
}

impl FcmSetup {
    /// Reads the mock's certificate and service account.
    pub fn read(mock: &MockProcess) -> anyhow::Result<FcmSetup> {
        Ok(FcmSetup {
            url: mock.url.clone(),
            ca_pem: mock.file("ca.pem")?,
            account_json: String::from_utf8(mock.file("service-account.json")?)
                .context("service-account.json")?,
        })
    }

    fn account(&self) -> anyhow::Result<ServiceAccount> {
        Ok(ServiceAccount::parse(&self.account_json)?)
    }

    /// Herald's client with `connections` connections.
    pub fn herald(&self, connections: usize) -> anyhow::Result<Sender> {
        let client = FcmClient::new(FcmConfig {
            account: self.account()?,
            endpoint: Some(self.url.clone()),
            token_uri: None,
            extra_ca_pem: Some(self.ca_pem.clone()),
            connections,
        })?;
        let notification = Arc::new(FcmNotification::new(message()));
        Ok(Arc::new(move |i| {
            let client = client.clone();
            let notification = notification.clone();
            Box::pin(async move {
                match client.send(&registration_token(i), &notification).await {
                    Outcome::Accepted { .. } => Ok(()),
                    other => Err(format!("{other:?}")),
                }
            })
        }))
    }

    /// The raw h2 client with `connections` connections, connected and holding a bearer token.
    pub async fn raw(&self, connections: usize) -> anyhow::Result<Sender> {
        let account = self.account()?;
        let senders = raw::connect(&self.url, raw::tls_config(&self.ca_pem)?, connections).await?;
        let bearer = fetch_access_token(&account, senders[0].clone()).await?;
        let authorization = HeaderValue::from_str(&format!("Bearer {bearer}"))?;
        let send_url = format!(
            "{}/v1/projects/{}/messages:send",
            self.url, account.project_id
        );
        // The message without its token, split where the token goes: the same JSON Herald
        // sends, made by string concatenation per device.
        let mut fields = message();
        fields["token"] = json!(TOKEN_MARKER);
        let with_marker = json!({ "message": fields }).to_string();
        let (head, tail) = with_marker
            .split_once(TOKEN_MARKER)
            .map(|(h, t)| (h.to_string(), t.to_string()))
            .context("marker")?;
        Ok(Arc::new(move |i| {
            let sender = senders[(i % senders.len() as u64) as usize].clone();
            let body = Bytes::from(format!("{head}{}{tail}", registration_token(i)));
            let request = Request::builder()
                .method(Method::POST)
                .uri(&send_url)
                .header(header::AUTHORIZATION, authorization.clone())
                .header(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                )
                .body(());
            Box::pin(async move {
                let request = request.map_err(|e| e.to_string())?;
                raw::expect(raw::exchange(sender, request, body).await, StatusCode::OK)
            })
        }))
    }
}

/// Exchanges a signed assertion for an access token at the account's token endpoint.
async fn fetch_access_token(
    account: &ServiceAccount,
    sender: h2::client::SendRequest<Bytes>,
) -> anyhow::Result<String> {
    #[derive(serde::Serialize)]
    struct Claims<'a> {
        iss: &'a str,
        scope: &'a str,
        aud: &'a str,
        iat: u64,
        exp: u64,
    }
    let iat = SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs();
    let claims = Claims {
        iss: &account.client_email,
        scope: FCM_SCOPE,
        aud: &account.token_uri,
        iat,
        exp: iat + 3600,
    };
    let key = jsonwebtoken::EncodingKey::from_rsa_pem(account.private_key_pem().as_bytes())?;
    let assertion = jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::RS256),
        &claims,
        &key,
    )?;
    let form = format!(
        "grant_type={}&assertion={assertion}",
        "urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer"
    );
    let request = Request::builder()
        .method(Method::POST)
        .uri(&account.token_uri)
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(())?;
    let (status, body) = raw::exchange(sender, request, Bytes::from(form))
        .await
        .map_err(|e| anyhow::anyhow!("token endpoint: {e}"))?;
    if status != StatusCode::OK {
        bail!("the mock's token endpoint answered {status}");
    }
    let answer: Value = serde_json::from_slice(&body).context("token endpoint answer")?;
    answer["access_token"]
        .as_str()
        .map(str::to_string)
        .context("no access_token in the token endpoint's answer")
}
