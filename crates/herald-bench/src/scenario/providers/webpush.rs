//! `herald bench webpush`: Herald's [`WebPushClient`] (which encrypts every message for its
//! subscription, RFC 8291, and signs VAPID once per push service) against a raw h2 client that
//! posts bodies encrypted once per subscription before the run, with one VAPID header signed
//! here. Encryption is per device in real use, so its cost is measured apart, by
//! [`encryption_cost`].

use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use bytes::Bytes;
use herald_providers::destination::Destinations;
use herald_providers::webpush::{
    encrypt, Subscription, VapidKeys, WebPushClient, WebPushConfig, WebPushNotification,
};
use herald_providers::Outcome;
use http::{header, HeaderValue, Method, Request, StatusCode};
use p256::pkcs8::EncodePrivateKey;
use serde::Deserialize;

use super::drive::Sender;
use super::mock::MockProcess;
use super::raw;

/// The plaintext every message carries.
const PAYLOAD: &str = r#"{"title":"Herald","body":"bench notification","data":{"n":1}}"#;
/// The VAPID contact.
const SUBJECT: &str = "mailto:bench@herald.invalid";
/// The `TTL` header, seconds.
const TTL_SECS: u64 = 60;

/// One subscription from the mock's `subscriptions.json`.
#[derive(Debug, Clone, Deserialize)]
struct MockDevice {
    token: String,
    keys: MockKeys,
}

#[derive(Debug, Clone, Deserialize)]
struct MockKeys {
    p256dh: String,
    auth: String,
}

#[derive(Deserialize)]
struct MockDevices {
    devices: Vec<MockDevice>,
}

impl MockDevice {
    fn subscription(&self) -> Subscription<'_> {
        Subscription {
            endpoint: &self.token,
            p256dh: &self.keys.p256dh,
            auth: &self.keys.auth,
        }
    }
}

/// What both contenders need from the mock.
pub(crate) struct WebPushSetup {
    url: String,
    ca_pem: Vec<u8>,
    devices: Arc<Vec<MockDevice>>,
}

impl WebPushSetup {
    /// Reads the mock's certificate and subscriptions.
    pub fn read(mock: &MockProcess) -> anyhow::Result<WebPushSetup> {
        let devices: MockDevices = serde_json::from_slice(&mock.file("subscriptions.json")?)
            .context("subscriptions.json")?;
        anyhow::ensure!(
            !devices.devices.is_empty(),
            "the mock made no subscriptions"
        );
        Ok(WebPushSetup {
            url: mock.url.clone(),
            ca_pem: mock.file("ca.pem")?,
            devices: Arc::new(devices.devices),
        })
    }

    /// Herald's client with `connections` connections to the mock.
    pub fn herald(&self, connections: usize) -> anyhow::Result<Sender> {
        let client = WebPushClient::new(WebPushConfig {
            vapid: VapidKeys::generate(),
            subject: SUBJECT.into(),
            extra_ca_pem: Some(self.ca_pem.clone()),
            connections_per_origin: connections,
            // The mock listens on loopback, which endpoints reach only where allowed.
            destinations: Destinations::allowing(vec!["127.0.0.0/8".parse()?, "::1/128".parse()?]),
        })?;
        let notification = Arc::new(notification());
        let devices = self.devices.clone();
        Ok(Arc::new(move |i| {
            let client = client.clone();
            let notification = notification.clone();
            let devices = devices.clone();
            Box::pin(async move {
                let device = &devices[(i % devices.len() as u64) as usize];
                match client.send(&device.subscription(), &notification).await {
                    Outcome::Accepted { .. } => Ok(()),
                    other => Err(format!("{other:?}")),
                }
            })
        }))
    }

    /// The raw h2 client with `connections` connections, connected, each subscription's body
    /// encrypted once and one VAPID header signed.
    pub async fn raw(&self, connections: usize) -> anyhow::Result<Sender> {
        let senders = raw::connect(&self.url, raw::tls_config(&self.ca_pem)?, connections).await?;
        let authorization = HeaderValue::from_str(&vapid_authorization(&self.url)?)?;
        let mut prepared = Vec::with_capacity(self.devices.len());
        for device in self.devices.iter() {
            let body = encrypt(&device.subscription(), PAYLOAD.as_bytes())?;
            prepared.push((device.token.clone(), Bytes::from(body)));
        }
        Ok(Arc::new(move |i| {
            let sender = senders[(i % senders.len() as u64) as usize].clone();
            let (endpoint, body) = &prepared[(i % prepared.len() as u64) as usize];
            let request = Request::builder()
                .method(Method::POST)
                .uri(endpoint.as_str())
                .header(header::AUTHORIZATION, authorization.clone())
                .header(
                    header::CONTENT_ENCODING,
                    HeaderValue::from_static("aes128gcm"),
                )
                .header(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/octet-stream"),
                )
                .header("ttl", TTL_SECS)
                .body(());
            let body = body.clone();
            Box::pin(async move {
                let request = request.map_err(|e| e.to_string())?;
                raw::expect(
                    raw::exchange(sender, request, body).await,
                    StatusCode::CREATED,
                )
            })
        }))
    }

    /// Encrypts the payload `count` times for one subscription on this thread: wall and CPU
    /// microseconds per message.
    pub fn encryption_cost(&self, count: u64) -> anyhow::Result<(f64, f64)> {
        let device = &self.devices[0];
        let cpu_before = thread_cpu_seconds();
        let started = Instant::now();
        for _ in 0..count.max(1) {
            encrypt(&device.subscription(), PAYLOAD.as_bytes())?;
        }
        let wall = started.elapsed().as_secs_f64();
        // /proc counts in 10 ms ticks: below a few ticks the wall time is the better figure.
        let cpu = thread_cpu_seconds()
            .zip(cpu_before)
            .map(|(a, b)| a - b)
            .filter(|cpu| *cpu >= 0.05)
            .unwrap_or(wall);
        let per = |s: f64| s * 1e6 / count.max(1) as f64;
        Ok((per(wall), per(cpu)))
    }
}

fn notification() -> WebPushNotification {
    WebPushNotification {
        ttl_secs: TTL_SECS,
        urgency: None,
        topic: None,
        payload: PAYLOAD.into(),
    }
}

/// `vapid t=<jwt>, k=<public key>` for a fresh key pair, signed here without Herald's code.
fn vapid_authorization(audience: &str) -> anyhow::Result<String> {
    #[derive(serde::Serialize)]
    struct Claims<'a> {
        aud: &'a str,
        exp: u64,
        sub: &'a str,
    }
    let secret = p256::SecretKey::random(&mut rand::rngs::OsRng);
    let der = secret.to_pkcs8_der().context("PKCS#8")?;
    let public = base64::Engine::encode(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD,
        secret.public_key().to_sec1_bytes(),
    );
    let exp = SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs() + 12 * 3600;
    let mut jwt_header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
    jwt_header.typ = Some("JWT".into());
    let jwt = jsonwebtoken::encode(
        &jwt_header,
        &Claims {
            aud: audience,
            exp,
            sub: SUBJECT,
        },
        &jsonwebtoken::EncodingKey::from_ec_der(der.as_bytes()),
    )?;
    Ok(format!("vapid t={jwt}, k={public}"))
}

/// CPU seconds of the calling thread (utime + stime of /proc/thread-self/stat).
fn thread_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").ok()?;
    let after = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    // Linux reports these in USER_HZ, 100 on every platform Herald runs on.
    Some(ticks / 100.0)
}
