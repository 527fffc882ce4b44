//! The registry: apps, their publisher keys, devices and their inbox cursors, push receipts and
//! per-app usage, as the API and the transports see them. `herald-store` implements it in the
//! same database as the channel log, written by the same writer thread.

use async_trait::async_trait;
use serde::Serialize;

use crate::device::{Device, DeviceWrite, InboxCursor};
use crate::log::StoreError;
use crate::message::Cursor;
use crate::tags::TagExpr;
use crate::tenant::AppId;

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

/// Which devices to list.
#[derive(Debug, Clone, Default)]
pub struct DeviceQuery {
    /// Only devices of this user.
    pub user: Option<String>,
    /// Only devices holding this tag.
    pub tag: Option<String>,
    /// Start after this device id (paging).
    pub after: Option<String>,
    /// At most this many.
    pub limit: usize,
}

/// Which devices a push was for, to count them.
#[derive(Debug, Clone)]
pub enum Audience {
    /// Every active device.
    All,
    /// Active devices whose tags satisfy the expression.
    Tags(TagExpr),
}

/// What became of a push.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Receipt {
    /// Push id.
    pub id: String,
    /// Devices it was for (`None` while a broadcast's audience is still being counted).
    pub targeted: Option<u64>,
    /// Devices that acknowledged it.
    pub delivered: u64,
    /// Devices still expected to acknowledge it before it expires.
    pub pending: u64,
    /// Devices that did not acknowledge it before it expired.
    pub expired: u64,
    /// Accepted at, milliseconds since the Unix epoch.
    pub created: i64,
    /// Expires at, milliseconds since the Unix epoch.
    pub expires: i64,
}

impl Receipt {
    /// Fills `pending` and `expired` from `targeted`, `delivered` and the time.
    pub fn settle(mut self, now_ms: i64) -> Self {
        let open = self.targeted.unwrap_or(0).saturating_sub(self.delivered);
        if self.expires <= now_ms {
            self.expired = open;
            self.pending = 0;
        } else {
            self.pending = open;
            self.expired = 0;
        }
        self
    }
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

/// An acknowledgement that moves a device's cursor: the new cursor, and how many newly
/// acknowledged pushes there were per push id.
#[derive(Debug, Clone)]
pub struct Ack {
    /// Cursor before (the store applies the ack only if it still holds this one).
    pub from: InboxCursor,
    /// Cursor after.
    pub to: InboxCursor,
    /// Push ids newly acknowledged.
    pub pushes: Vec<String>,
}

/// Apps, keys, devices, receipts and usage.
#[async_trait]
pub trait Registry: Send + Sync {
    /// Creates an app; `false` if the id is taken or was used by an app since deleted (its
    /// channels' messages may still be in the log, and must never reach a new tenant).
    async fn create_app(&self, app: &App) -> Result<bool, StoreError>;
    /// Every app, by id.
    async fn apps(&self) -> Result<Vec<App>, StoreError>;
    /// One app, unless it is unknown or deleted.
    async fn app(&self, id: &AppId) -> Result<Option<App>, StoreError>;
    /// Replaces an app's limits; `false` if unknown.
    async fn set_limits(&self, id: &AppId, limits: AppLimits) -> Result<bool, StoreError>;
    /// Deletes an app with its keys, devices, receipts and usage, keeping its id reserved;
    /// `false` if unknown.
    async fn delete_app(&self, id: &AppId) -> Result<bool, StoreError>;

    /// Stores a publisher key's hash for an app.
    async fn add_key(&self, key: &KeyInfo) -> Result<(), StoreError>;
    /// Removes a key by its short id; `false` if the app has no such key.
    async fn remove_key(&self, app: &AppId, key_id: &str) -> Result<bool, StoreError>;
    /// Every key of every app.
    async fn keys(&self) -> Result<Vec<KeyInfo>, StoreError>;

    /// Registers or updates devices. A new device's cursor starts at `start` (it receives what
    /// is pushed from now on); an existing one keeps its cursor and creation time, and its
    /// `active` flag unless the write sets it. Returns each
    /// device as stored and whether it was created.
    async fn upsert_devices(
        &self,
        app: &AppId,
        devices: Vec<DeviceWrite>,
        start: InboxCursor,
    ) -> Result<Vec<(Device, bool)>, StoreError>;
    /// One device and its cursor.
    async fn device(
        &self,
        app: &AppId,
        id: &str,
    ) -> Result<Option<(Device, InboxCursor)>, StoreError>;
    /// Deletes a device; `false` if unknown.
    /// Deletes a device; `false` if unknown. `log_head` is where its own log stands: a device
    /// registered again under the same id starts there, so it never receives what was pushed
    /// to the deleted one.
    async fn delete_device(
        &self,
        app: &AppId,
        id: &str,
        log_head: Cursor,
    ) -> Result<bool, StoreError>;
    /// Devices in id order.
    async fn devices(&self, app: &AppId, query: &DeviceQuery) -> Result<Vec<Device>, StoreError>;
    /// How many devices an app has registered.
    async fn device_count(&self, app: &AppId) -> Result<u64, StoreError>;
    /// Ids of a user's active devices.
    async fn user_devices(&self, app: &AppId, user: &str) -> Result<Vec<String>, StoreError>;
    /// Counts the active devices an audience reaches.
    async fn count_audience(&self, app: &AppId, audience: &Audience) -> Result<u64, StoreError>;
    /// Applies an acknowledgement: moves the cursor and counts the pushes, in one transaction.
    /// `false` if the device's cursor was no longer `ack.from` (nothing changed).
    async fn ack(&self, app: &AppId, device: &str, ack: &Ack) -> Result<bool, StoreError>;

    /// Records a new push (no-op if its id is already recorded).
    async fn record_push(&self, app: &AppId, receipt: &Receipt) -> Result<(), StoreError>;
    /// Sets how many devices a push was for.
    async fn set_targeted(&self, app: &AppId, id: &str, targeted: u64) -> Result<(), StoreError>;
    /// A push's receipt as stored (`pending`/`expired` not yet settled).
    async fn receipt(&self, app: &AppId, id: &str) -> Result<Option<Receipt>, StoreError>;

    /// Stores an app's usage totals (see [`crate::usage`]).
    async fn set_usage(&self, app: &AppId, totals: Usage) -> Result<(), StoreError>;
    /// An app's usage counters.
    async fn usage(&self, app: &AppId) -> Result<Usage, StoreError>;
}
