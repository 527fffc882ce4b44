//! Each app's provider clients, made from its sealed credentials the first time a worker needs
//! them and kept until the credentials change ([`Senders::forget`]). A client is only ever made
//! from the app's own row, opened with the app's id as associated data, so one app's
//! credentials never send to another app's devices.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

use herald_core::tenant::AppId;
use herald_providers::apns::{ApnsClient, ApnsConfig, ApnsEndpoint};
use herald_providers::destination::Destinations;
use herald_providers::fcm::{FcmClient, FcmConfig, FcmNotification};
use herald_providers::webpush::{Subscription, WebPushClient, WebPushConfig};
use herald_providers::Outcome;

use crate::credentials::input::ProviderCredentials;
use crate::credentials::sealer::Sealer;
use crate::credentials::CredentialStore;
use crate::delivery::payloads::Payloads;
use crate::device::{Device, Platform};

/// Where provider connections go, for every app: overrides for tests, benchmarks and proxies.
#[derive(Debug, Clone, Default)]
pub struct ProviderEndpoints {
    /// APNs base URL (`https://host:port`), instead of Apple's production or sandbox host.
    pub apns_url: Option<String>,
    /// FCM base URL, instead of `https://fcm.googleapis.com`.
    pub fcm_url: Option<String>,
    /// OAuth2 token URL for FCM, instead of the service account's `token_uri`.
    pub fcm_token_url: Option<String>,
    /// Extra CA certificates (PEM) trusted for provider connections (a mock's certificate).
    pub extra_ca_pem: Option<Vec<u8>>,
    /// Most HTTP/2 connections per provider and app (at least 1), opened as volume needs.
    pub connections: usize,
}

/// One app's client for one provider.
#[derive(Clone)]
pub enum Sender {
    /// APNs.
    Apns(ApnsClient),
    /// FCM.
    Fcm(FcmClient),
    /// Web Push.
    WebPush(WebPushClient),
}

impl Sender {
    /// Sends `payloads`' notification for the device's platform to the device. A push that
    /// expires at `expires_ms` is never kept by FCM or a Web Push service past then: when its
    /// time left is shorter than the TTL rendered when it was accepted (it waited for its ack
    /// window or for retries), the TTL sent is the time left.
    pub async fn send(&self, device: &Device, payloads: &Payloads, expires_ms: i64) -> Outcome {
        let left_secs = ((expires_ms - herald_core::message::now_millis()).max(0) / 1000) as u64;
        let Some(token) = device.token.as_deref() else {
            return Outcome::Rejected {
                reason: "no_token".into(),
            };
        };
        match self {
            Sender::Apns(c) => c.send(token, &payloads.apns).await,
            Sender::Fcm(c) => c.send(token, &fcm_within(&payloads.fcm, left_secs)).await,
            Sender::WebPush(c) => {
                let Some(keys) = &device.keys else {
                    return Outcome::Rejected {
                        reason: "no_subscription_keys".into(),
                    };
                };
                let subscription = Subscription {
                    endpoint: token,
                    p256dh: &keys.p256dh,
                    auth: &keys.auth,
                };
                if payloads.webpush.ttl_secs > left_secs {
                    let mut n = payloads.webpush.clone();
                    n.ttl_secs = left_secs;
                    c.send(&subscription, &n).await
                } else {
                    c.send(&subscription, &payloads.webpush).await
                }
            }
        }
    }
}

/// The FCM message to send with `left_secs` of the push's life left: the rendered one, or a
/// copy whose TTL is the time left when the rendered TTL is longer.
fn fcm_within(fcm: &FcmNotification, left_secs: u64) -> Cow<'_, FcmNotification> {
    match fcm.ttl_secs() {
        Some(ttl) if ttl > left_secs => Cow::Owned(fcm.with_ttl_secs(left_secs)),
        _ => Cow::Borrowed(fcm),
    }
}

/// Why an app has no client for a provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoSender {
    /// The app has no credentials for it.
    NoCredentials,
    /// Its credentials cannot be used (the message says why; it is never a secret).
    Unusable(String),
}

type Slot = Result<Sender, NoSender>;

/// Provider clients per app and provider.
pub struct Senders {
    store: Arc<dyn CredentialStore>,
    sealer: Arc<Sealer>,
    endpoints: ProviderEndpoints,
    /// Which addresses Web Push endpoints, which tenants give, may reach.
    destinations: Destinations,
    clients: Mutex<HashMap<(AppId, Platform), Slot>>,
}

impl Senders {
    /// Clients made from `store`'s credentials opened with `sealer`, connecting as `endpoints`
    /// says; Web Push endpoints reach only what `destinations` allows.
    pub fn new(
        store: Arc<dyn CredentialStore>,
        sealer: Arc<Sealer>,
        endpoints: ProviderEndpoints,
        destinations: Destinations,
    ) -> Self {
        Senders {
            store,
            sealer,
            endpoints,
            destinations,
            clients: Mutex::new(HashMap::new()),
        }
    }

    /// The sealer credentials are stored with.
    pub fn sealer(&self) -> &Arc<Sealer> {
        &self.sealer
    }

    /// Drops the client of `app` for `provider` (its credentials changed or were removed).
    pub fn forget(&self, app: &AppId, provider: Platform) {
        self.clients.lock().remove(&(app.clone(), provider));
    }

    /// Drops every client of `app`.
    pub fn forget_app(&self, app: &AppId) {
        self.clients.lock().retain(|(a, _), _| a != app);
    }

    /// The client of `app` for `provider`, made from its credentials on first use. A storage
    /// failure is an error (try again later); missing or unusable credentials are remembered
    /// until [`Senders::forget`].
    pub async fn get(
        &self,
        app: &AppId,
        provider: Platform,
    ) -> Result<Result<Sender, NoSender>, herald_core::log::StoreError> {
        if let Some(slot) = self.clients.lock().get(&(app.clone(), provider)) {
            return Ok(slot.clone());
        }
        let stored = self.store.credentials(app, provider).await?;
        let slot = match stored {
            None => Err(NoSender::NoCredentials),
            Some(stored) => self.build(app, provider, &stored.sealed),
        };
        if let Err(NoSender::Unusable(why)) = &slot {
            tracing::warn!(app = %app.as_str(), provider = provider.as_str(), %why, "provider credentials cannot be used");
        }
        self.clients
            .lock()
            .insert((app.clone(), provider), slot.clone());
        Ok(slot)
    }

    fn build(&self, app: &AppId, provider: Platform, sealed: &[u8]) -> Slot {
        let unusable = |e: &dyn std::fmt::Display| NoSender::Unusable(e.to_string());
        let secret = self
            .sealer
            .open(app, provider, sealed)
            .map_err(|e| unusable(&e))?;
        let credentials =
            ProviderCredentials::from_secret(provider, &secret).map_err(|e| unusable(&e))?;
        let e = &self.endpoints;
        let connections = e.connections.max(1);
        match credentials {
            ProviderCredentials::Apns(c) => {
                let auth = c.auth().map_err(|e| unusable(&e))?;
                let endpoint = match &e.apns_url {
                    Some(url) => ApnsEndpoint::Custom(url.clone()),
                    None => c.endpoint(),
                };
                ApnsClient::new(ApnsConfig {
                    auth,
                    topic: c.topic.clone(),
                    endpoint,
                    extra_ca_pem: e.extra_ca_pem.clone(),
                    connections,
                })
                .map(Sender::Apns)
                .map_err(|e| unusable(&e))
            }
            ProviderCredentials::Fcm(_, account) => FcmClient::new(FcmConfig {
                account,
                endpoint: e.fcm_url.clone(),
                token_uri: e.fcm_token_url.clone(),
                extra_ca_pem: e.extra_ca_pem.clone(),
                connections,
            })
            .map(Sender::Fcm)
            .map_err(|e| unusable(&e)),
            ProviderCredentials::WebPush(c, vapid) => WebPushClient::new(WebPushConfig {
                vapid,
                subject: c.subject.clone(),
                extra_ca_pem: e.extra_ca_pem.clone(),
                connections_per_origin: connections,
                destinations: self.destinations.clone(),
            })
            .map(Sender::WebPush)
            .map_err(|e| unusable(&e)),
        }
    }
}

impl herald_core::caches::CacheListener for Senders {
    /// Credentials set or removed on any node, or the app deleted: the clients made with the
    /// old credentials are dropped, and the next send makes one from the store.
    fn applied(&self, event: &herald_core::caches::CacheEvent) {
        use herald_core::caches::CacheEvent;
        match event {
            CacheEvent::CredentialsChanged { app, provider } => match Platform::parse(provider) {
                Ok(platform) => self.forget(app, platform),
                Err(_) => self.forget_app(app),
            },
            CacheEvent::AppDeleted { app } => self.forget_app(app),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_fcm_ttl_longer_than_the_time_left_is_sent_as_the_time_left() {
        let rendered = FcmNotification::new(json!({"data": {}, "android": {"ttl": "60s"}}));
        let sent = fcm_within(&rendered, 59);
        assert_eq!(sent.message["android"]["ttl"], "59s");
        assert_eq!(sent.ttl_secs(), Some(59));
        for left in [60, 61] {
            let sent = fcm_within(&rendered, left);
            assert!(matches!(sent, Cow::Borrowed(_)), "{left}: sent as rendered");
            assert_eq!(sent.message["android"]["ttl"], "60s");
        }
        let none = FcmNotification::new(json!({"data": {}}));
        assert!(matches!(fcm_within(&none, 0), Cow::Borrowed(_)));
    }
}
