//! `herald bench apns`: Herald's [`ApnsClient`] (token auth) against a raw h2 client sending the
//! same `POST /3/device/{token}` requests: the same topic and push type headers, one provider
//! token signed once (ES256 with the mock's `AuthKey.p8`), the same payload.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Context;
use bytes::Bytes;
use herald_providers::apns::{
    ApnsAuth, ApnsClient, ApnsConfig, ApnsEndpoint, ApnsNotification, PushType,
};
use herald_providers::Outcome;
use http::{HeaderValue, Method, Request, StatusCode};

use super::drive::Sender;
use super::mock::MockProcess;
use super::raw;

/// The key id and team id `herald mock apns` knows its `AuthKey.p8` by.
const MOCK_KEY_ID: &str = "MOCKKEY001";
/// See [`MOCK_KEY_ID`].
const MOCK_TEAM_ID: &str = "MOCKTEAM01";
/// The bundle id every notification is for.
const TOPIC: &str = "com.example.herald.bench";
/// The payload every notification carries (a small alert, as most pushes are).
const PAYLOAD: &str =
    r#"{"aps":{"alert":{"title":"Herald","body":"bench notification"},"sound":"default"}}"#;

/// What both contenders need from the mock.
pub(crate) struct ApnsSetup {
    url: String,
    ca_pem: Vec<u8>,
    key_pem: String,
}

/// The device token of notification `i`: 64 hex digits (`i`, zero-padded), a different device
/// for each. Written digit by digit on the stack: `format!("{i:064x}")` per send, with its
/// padding written a character at a time, was 3-4 % of the client process's CPU, the same for
/// both contenders but not part of either.
struct DeviceToken([u8; 64]);

impl DeviceToken {
    fn of(i: u64) -> DeviceToken {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut digits = [b'0'; 64];
        for (k, digit) in digits[48..].iter_mut().rev().enumerate() {
            *digit = HEX[((i >> (4 * k)) & 0xf) as usize];
        }
        DeviceToken(digits)
    }

    fn as_str(&self) -> &str {
        std::str::from_utf8(&self.0).expect("hex digits are ASCII")
    }
}

/// `{origin}/3/device/{token of i}`, the raw client's URI for notification `i`.
fn device_uri(origin: &str, i: u64) -> String {
    let mut uri = String::with_capacity(origin.len() + 10 + 64);
    uri.push_str(origin);
    uri.push_str("/3/device/");
    uri.push_str(DeviceToken::of(i).as_str());
    uri
}

impl ApnsSetup {
    /// Reads the mock's certificate and key.
    pub fn read(mock: &MockProcess) -> anyhow::Result<ApnsSetup> {
        Ok(ApnsSetup {
            url: mock.url.clone(),
            ca_pem: mock.file("ca.pem")?,
            key_pem: String::from_utf8(mock.file("AuthKey.p8")?).context("AuthKey.p8")?,
        })
    }

    /// Herald's client with `connections` connections.
    pub fn herald(&self, connections: usize) -> anyhow::Result<Sender> {
        let client = ApnsClient::new(ApnsConfig {
            auth: ApnsAuth::Token {
                key_pem: self.key_pem.clone(),
                key_id: MOCK_KEY_ID.into(),
                team_id: MOCK_TEAM_ID.into(),
            },
            topic: TOPIC.into(),
            endpoint: ApnsEndpoint::Custom(self.url.clone()),
            extra_ca_pem: Some(self.ca_pem.clone()),
            connections,
        })?;
        let notification = Arc::new(ApnsNotification {
            push_type: PushType::Alert,
            priority: None,
            expiration: None,
            collapse_id: None,
            payload: PAYLOAD.into(),
        });
        Ok(Arc::new(move |i| {
            let client = client.clone();
            let notification = notification.clone();
            Box::pin(async move {
                let token = DeviceToken::of(i);
                match client.send(token.as_str(), &notification).await {
                    Outcome::Accepted { .. } => Ok(()),
                    other => Err(format!("{other:?}")),
                }
            })
        }))
    }

    /// The raw h2 client with `connections` connections, connected now.
    pub async fn raw(&self, connections: usize) -> anyhow::Result<Sender> {
        let senders = raw::connect(&self.url, raw::tls_config(&self.ca_pem)?, connections).await?;
        let authorization = HeaderValue::from_str(&format!("bearer {}", self.provider_token()?))?;
        let origin = self.url.clone();
        let body = Bytes::from_static(PAYLOAD.as_bytes());
        Ok(Arc::new(move |i| {
            let sender = senders[(i % senders.len() as u64) as usize].clone();
            let request = Request::builder()
                .method(Method::POST)
                .uri(device_uri(&origin, i))
                .header("apns-topic", HeaderValue::from_static(TOPIC))
                .header("apns-push-type", HeaderValue::from_static("alert"))
                .header(http::header::AUTHORIZATION, authorization.clone())
                .body(());
            let body = body.clone();
            Box::pin(async move {
                let request = request.map_err(|e| e.to_string())?;
                raw::expect(raw::exchange(sender, request, body).await, StatusCode::OK)
            })
        }))
    }

    /// One ES256 provider token for the mock's key, signed here without Herald's code.
    fn provider_token(&self) -> anyhow::Result<String> {
        #[derive(serde::Serialize)]
        struct Claims {
            iss: &'static str,
            iat: u64,
        }
        let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
        header.kid = Some(MOCK_KEY_ID.into());
        let key = jsonwebtoken::EncodingKey::from_ec_pem(self.key_pem.as_bytes())
            .context("the mock's AuthKey.p8")?;
        let iat = SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs();
        let claims = Claims {
            iss: MOCK_TEAM_ID,
            iat,
        };
        Ok(jsonwebtoken::encode(&header, &claims, &key)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_tokens_are_the_number_in_64_hex_digits() {
        for i in [0, 1, 15, 16, 255, 0xdead_beef, u64::MAX - 1, u64::MAX] {
            assert_eq!(DeviceToken::of(i).as_str(), format!("{i:064x}"));
        }
        assert_eq!(
            device_uri("https://127.0.0.1:1", 10),
            format!("https://127.0.0.1:1/3/device/{:064x}", 10)
        );
    }
}
