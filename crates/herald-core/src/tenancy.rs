//! Tenancy as stored: apps, their publisher keys, limits and per-app usage. `herald-store`
//! implements [`Tenancy`] in the same database as the channel log, written by the same writer
//! thread; devices and receipts are `herald-push`'s `DeviceRegistry`. Revoked client tokens
//! ([`TokenRevocation`]) are kept here too.

use async_trait::async_trait;
use serde::Serialize;

use crate::limits::Rate;
use crate::log::StoreError;
use crate::revoked::TokenRevocation;
use crate::tenant::AppId;
use crate::token_keys::AppTokenKeys;

/// An app (tenant).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct App {
    /// Id.
    pub id: AppId,
    /// Human name.
    pub name: String,
    /// Secret that signs this app's client tokens; `None` for the default app, whose secret is
    /// the server's token secret.
    #[serde(skip)]
    pub token_secret: Option<String>,
    /// Limits of this app.
    pub limits: AppLimits,
    /// Creation time, milliseconds since the Unix epoch.
    pub created: i64,
}

/// What one app may use; `None` is unlimited (within the server's own limits).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AppLimits {
    /// Most registered devices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_devices: Option<u64>,
    /// Most live connections at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_connections: Option<u64>,
    /// Largest message or push payload, in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_message_bytes: Option<usize>,
    /// How long an `auto` push waits for a connected device's acknowledgement before its
    /// provider push is sent, in milliseconds (a push may set its own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ack_window_ms: Option<u64>,
    /// Messages the app may publish over HTTP, replacing the server's `limits.publish`
    /// (`"off"` turns it off for this app).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub publish_rate: Option<Rate>,
    /// Pushes the app may send, replacing the server's `limits.push`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub push_rate: Option<Rate>,
    /// Device registrations and updates the app may make, replacing the server's
    /// `limits.registration`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registration_rate: Option<Rate>,
}

/// A publisher key of an app, as listed (never the key itself).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KeyInfo {
    /// The app it publishes for.
    pub app: AppId,
    /// Short id to name it by (the first 12 hex digits of its hash).
    pub id: String,
    /// SHA-256 hex of the key.
    #[serde(skip)]
    pub hash: String,
    /// Label given at creation.
    pub label: String,
    /// Creation time, milliseconds since the Unix epoch.
    pub created: i64,
}

/// Per-app usage counters (the billing figures).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Usage {
    /// Messages published: channel messages and pushes.
    pub published: u64,
    /// Messages written to device connections.
    pub deliveries: u64,
    /// Pushes acknowledged by devices.
    pub acks: u64,
    /// Most live connections held at once.
    pub peak_connections: u64,
}

/// Apps, their keys, limits and usage: what a tenant is, as stored.
#[async_trait]
pub trait Tenancy: Send + Sync {
    /// Creates an app; `false` if the id is taken or was used by an app since deleted (its
    /// channels' messages may still be in the log, and must never reach a new tenant).
    async fn create_app(&self, app: &App) -> Result<bool, StoreError>;
    /// Every app, by id.
    async fn apps(&self) -> Result<Vec<App>, StoreError>;
    /// One app, unless it is unknown or deleted.
    async fn app(&self, id: &AppId) -> Result<Option<App>, StoreError>;
    /// Replaces an app's limits; `false` if unknown.
    async fn set_limits(&self, id: &AppId, limits: AppLimits) -> Result<bool, StoreError>;
    /// Deletes an app with its keys and usage, and everything else the store keeps for it
    /// (devices, receipts), in one transaction, keeping its id reserved; `false` if unknown.
    async fn delete_app(&self, id: &AppId) -> Result<bool, StoreError>;

    /// Stores a publisher key's hash for an app.
    async fn add_key(&self, key: &KeyInfo) -> Result<(), StoreError>;
    /// Removes a key by its short id; `false` if the app has no such key.
    async fn remove_key(&self, app: &AppId, key_id: &str) -> Result<bool, StoreError>;
    /// Every key of every app.
    async fn keys(&self) -> Result<Vec<KeyInfo>, StoreError>;

    /// Adds what one process counted since its last write to an app's stored usage:
    /// `published`, `deliveries` and `acks` are increments, `peak_connections` is kept as the
    /// larger of the stored and given figures (see [`crate::usage`]). Several nodes writing
    /// their own counts add up rather than overwrite each other.
    async fn add_usage(&self, app: &AppId, counted: Usage) -> Result<(), StoreError>;
    /// An app's usage counters.
    async fn usage(&self, app: &AppId) -> Result<Usage, StoreError>;

    /// Stores a revocation of tokens (a `jti` until its expiry, or an issue time, which only
    /// moves forward), forgetting `jti` revocations that have expired.
    async fn revoke_tokens(&self, revocation: &TokenRevocation) -> Result<(), StoreError>;
    /// Every revocation not yet expired, of every app.
    async fn token_revocations(&self) -> Result<Vec<TokenRevocation>, StoreError>;

    /// Everything that verifies an app's client tokens (its secret is the `apps` row's
    /// `token_secret`), as stored: the server seals the secrets before they arrive. `None` if
    /// the app is unknown or deleted.
    async fn token_keys(&self, id: &AppId) -> Result<Option<AppTokenKeys>, StoreError> {
        let _ = id;
        Err(StoreError::failed("this store keeps no token keys"))
    }
    /// [`Tenancy::token_keys`] of every app that is not deleted.
    async fn all_token_keys(&self) -> Result<Vec<(AppId, AppTokenKeys)>, StoreError> {
        Err(StoreError::failed("this store keeps no token keys"))
    }
    /// Replaces, in one transaction, everything that verifies an app's tokens (its secret
    /// included); `false` if the app is unknown or deleted.
    async fn set_token_keys(&self, id: &AppId, keys: &AppTokenKeys) -> Result<bool, StoreError> {
        let _ = (id, keys);
        Err(StoreError::failed("this store keeps no token keys"))
    }
}
