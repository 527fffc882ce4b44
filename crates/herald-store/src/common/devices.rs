//! Devices as both backends store them: the columns of a device row and how they become a
//! [`Device`] and its inbox cursor, and what a registration changes beside the row (the tags
//! added and removed, the cursor of an id registered again after a delete).

use herald_core::log::StoreError;
use herald_push::device::{Device, InboxCursor, Platform, WebPushKeys};

use super::row::StoredRow;

/// The columns [`device_of`] reads, in order.
pub(crate) const DEVICE_COLUMNS: &str = "id, platform, token, keys, user_id, tags, locale, \
     active, created, updated, cursor, inactive_reason";

/// A device row ([`DEVICE_COLUMNS`]) as a device and its cursor.
pub(crate) fn device_of(row: &impl StoredRow) -> Result<(Device, InboxCursor), StoreError> {
    let platform: String = row.column(1)?;
    let keys: Option<String> = row.column(3)?;
    let tags: String = row.column(5)?;
    let cursor: String = row.column(10)?;
    Ok((
        Device {
            id: row.column(0)?,
            platform: Platform::parse(&platform).unwrap_or(Platform::Herald),
            token: row.column(2)?,
            keys: keys.and_then(|k| serde_json::from_str::<WebPushKeys>(&k).ok()),
            user: row.column(4)?,
            tags: serde_json::from_str(&tags).unwrap_or_default(),
            locale: row.column(6)?,
            active: row.column(7)?,
            inactive_reason: row.column(11)?,
            created: row.column(8)?,
            updated: row.column(9)?,
        },
        InboxCursor::decode(&cursor),
    ))
}

/// The tags a stored device's `tags` column holds (JSON; none if there is no row or it cannot
/// be read).
pub(crate) fn stored_tags(tags: Option<&str>) -> Vec<String> {
    tags.and_then(|t| serde_json::from_str(t).ok())
        .unwrap_or_default()
}

/// The inbox cursor a device registered again after a delete starts from: `start`, with its
/// device part at the log head its tombstone kept, so it does not get its old messages again.
pub(crate) fn cursor_after_tombstone(start: &str, head: &str) -> String {
    let mut c = InboxCursor::decode(start);
    c.device = InboxCursor::decode(&format!(":0,{head}")).device;
    c.encode()
}

/// The tags a registration removes (in `old`, not in `new`) and adds (in `new`, not in `old`).
pub(crate) fn tag_changes<'a>(
    old: &'a [String],
    new: &'a [String],
) -> (
    impl Iterator<Item = &'a String>,
    impl Iterator<Item = &'a String>,
) {
    (
        old.iter().filter(move |t| !new.contains(t)),
        new.iter().filter(move |t| !old.contains(t)),
    )
}
