//! Devices as stored: registrations and their inbox cursors, users' devices, audience counts,
//! acknowledgements and push receipts. `herald-store` implements [`DeviceRegistry`] in the same
//! database as the channel log and the apps (`herald_core::tenancy::Tenancy`), so deleting an
//! app removes its devices and receipts in the same transaction.

use async_trait::async_trait;
use herald_core::log::StoreError;
use herald_core::message::Cursor;
use herald_core::tenant::AppId;

use crate::audience::Audience;
use crate::device::{Device, DeviceWrite, InboxCursor};

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
    /// Only active devices with a provider token (`apns`, `fcm`, `webpush`): what a
    /// broadcast's provider expansion reads.
    pub provider_reachable: bool,
}

/// What became of a push: the wire shape, shared with clients.
pub use herald_proto::receipt::Receipt;

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

/// Devices, their cursors, acknowledgements and receipts.
#[async_trait]
pub trait DeviceRegistry: Send + Sync {
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
    /// Devices and their cursors by id (unknown ids are left out), in id order.
    async fn devices_by_id(
        &self,
        app: &AppId,
        ids: &[String],
    ) -> Result<Vec<(Device, InboxCursor)>, StoreError>;
    /// Deactivates a device because its provider says `token` no longer reaches it, recording
    /// `reason` (shown as the device's `inactive_reason`). Apple's rule: when the provider says
    /// since when (`since_ms`) and the device's token was registered after that, or the device
    /// now holds another token, nothing changes. Returns whether it was deactivated.
    async fn deactivate_gone(
        &self,
        app: &AppId,
        id: &str,
        token: &str,
        since_ms: Option<i64>,
        reason: &str,
    ) -> Result<bool, StoreError>;
    /// One device and its cursor.
    async fn device(
        &self,
        app: &AppId,
        id: &str,
    ) -> Result<Option<(Device, InboxCursor)>, StoreError>;
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
    /// Counts the devices an audience reaches, by [`Audience::reaches`].
    async fn count_audience(&self, app: &AppId, audience: &Audience) -> Result<u64, StoreError>;
    /// Applies an acknowledgement: moves the cursor and counts the pushes, in one transaction.
    /// `false` if the device's cursor was no longer `ack.from` (nothing changed).
    async fn ack(&self, app: &AppId, device: &str, ack: &Ack) -> Result<bool, StoreError>;

    /// Records a new push (no-op if its id is already recorded), with its delivery record
    /// (`crate::delivery::record::DeliveryRecord`, encoded) when it has provider pushes.
    async fn record_push(
        &self,
        app: &AppId,
        receipt: &Receipt,
        delivery: Option<&[u8]>,
    ) -> Result<(), StoreError>;
    /// A push's delivery record as [`DeviceRegistry::record_push`] stored it.
    async fn delivery_record(&self, app: &AppId, id: &str) -> Result<Option<Vec<u8>>, StoreError>;
    /// Sets how many devices a push was for.
    async fn set_targeted(&self, app: &AppId, id: &str, targeted: u64) -> Result<(), StoreError>;
    /// A push's receipt as stored (`pending`/`expired` not yet settled).
    async fn receipt(&self, app: &AppId, id: &str) -> Result<Option<Receipt>, StoreError>;
}
