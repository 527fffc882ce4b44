//! Devices as both backends store them: the columns of a device row and how they become a
//! [`Device`] and its inbox cursor, what a registration changes beside the row (the tags added
//! and removed, the cursor of an id registered again after a delete), and how an audience is
//! counted from the tag index ([`AudienceCount`]).

use std::collections::HashMap;

use herald_core::log::StoreError;
use herald_push::device::{Device, InboxCursor, Platform, WebPushKeys};
use herald_push::Audience;

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

/// Counting the active devices an audience reaches (by [`Audience::reaches`]) without loading
/// every device. Only the tags the audience names decide a match, so a store reads just the
/// active devices holding one of them ([`AudienceCount::named`], one query per tag, each device
/// told with [`AudienceCount::holds`]); every other active device is reached exactly when a
/// device with none of them is (every device for [`Audience::All`], none for `sports`, all for
/// `NOT muted`), and those are counted, not read ([`AudienceCount::total`]).
pub(crate) struct AudienceCount<'a> {
    audience: &'a Audience,
    named: Vec<&'a str>,
    /// Each device read, with the indexes in `named` of the tags it holds.
    held: HashMap<String, Vec<usize>>,
}

impl<'a> AudienceCount<'a> {
    /// A count of `audience`'s devices, none read yet.
    pub(crate) fn new(audience: &'a Audience) -> Self {
        AudienceCount {
            audience,
            named: audience.named_tags(),
            held: HashMap::new(),
        }
    }

    /// The tags the audience names: read the active devices holding each, by index.
    pub(crate) fn named(&self) -> &[&'a str] {
        &self.named
    }

    /// Active `device` holds the named tag at index `tag`.
    pub(crate) fn holds(&mut self, device: String, tag: usize) {
        self.held.entry(device).or_default().push(tag);
    }

    /// Whether the count needs the number of the app's active devices: true when the devices
    /// holding none of the named tags are reached.
    pub(crate) fn counts_the_rest(&self) -> bool {
        self.audience.reaches(true, |_| false)
    }

    /// The devices reached, given the app's active devices (`active`, read only when
    /// [`AudienceCount::counts_the_rest`]; 0 otherwise).
    pub(crate) fn total(&self, active: u64) -> u64 {
        let named = &self.named;
        let mut n = self
            .held
            .values()
            .filter(|tags| {
                self.audience.reaches(true, |t| {
                    named
                        .iter()
                        .position(|x| *x == t)
                        .is_some_and(|i| tags.contains(&i))
                })
            })
            .count() as u64;
        if self.counts_the_rest() {
            n += active.saturating_sub(self.held.len() as u64);
        }
        n
    }
}
