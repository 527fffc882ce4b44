//! Reading devices: the columns of a device row and how they become a [`Device`], listing by
//! user, tag or everything (optionally only provider-reachable devices), and lookup by ids.

use herald_core::log::StoreError;
use herald_core::tenant::AppId;
use herald_push::device::{Device, InboxCursor, Platform, WebPushKeys};
use herald_push::registry::DeviceQuery;
use rusqlite::{params, Connection, OptionalExtension, Row};

use crate::sqlite::backend;

/// The columns [`device_row`] reads, in order.
pub(super) const DEVICE_COLUMNS: &str = "id, platform, token, keys, user_id, tags, locale, \
     active, created, updated, cursor, inactive_reason";

/// A device row ([`DEVICE_COLUMNS`]) as a device and its cursor.
pub(super) fn device_row(row: &Row<'_>) -> rusqlite::Result<(Device, InboxCursor)> {
    let platform: String = row.get(1)?;
    let keys: Option<String> = row.get(3)?;
    let tags: String = row.get(5)?;
    let cursor: String = row.get(10)?;
    Ok((
        Device {
            id: row.get(0)?,
            platform: Platform::parse(&platform).unwrap_or(Platform::Herald),
            token: row.get(2)?,
            keys: keys.and_then(|k| serde_json::from_str::<WebPushKeys>(&k).ok()),
            user: row.get(4)?,
            tags: serde_json::from_str(&tags).unwrap_or_default(),
            locale: row.get(6)?,
            active: row.get(7)?,
            inactive_reason: row.get(11)?,
            created: row.get(8)?,
            updated: row.get(9)?,
        },
        InboxCursor::decode(&cursor),
    ))
}

/// What makes a device reachable through its provider (the `devices_provider_reachable`
/// index's condition), for columns prefixed by `p`.
fn reachable(p: &str) -> String {
    format!(" AND {p}active = 1 AND {p}platform <> 'herald' AND {p}token IS NOT NULL")
}

/// Devices of `app` by `query`, in id order.
pub(super) fn list(
    conn: &Connection,
    app: &AppId,
    q: &DeviceQuery,
) -> Result<Vec<Device>, StoreError> {
    let after = q.after.clone().unwrap_or_default();
    let limit = i64::try_from(q.limit).unwrap_or(i64::MAX);
    let only_reachable = |p: &str| {
        if q.provider_reachable {
            reachable(p)
        } else {
            String::new()
        }
    };
    let (sql, arg): (String, Option<String>) = match (&q.user, &q.tag) {
        (Some(user), _) => (
            format!(
                "SELECT {DEVICE_COLUMNS} FROM devices WHERE app = ?1 AND user_id = ?4
                 AND id > ?2{} ORDER BY id LIMIT ?3",
                only_reachable("")
            ),
            Some(user.clone()),
        ),
        (None, Some(tag)) => (
            format!(
                "SELECT {} FROM device_tags t JOIN devices d
                   ON d.app = t.app AND d.id = t.device
                 WHERE t.app = ?1 AND t.tag = ?4 AND t.device > ?2{}
                 ORDER BY t.device LIMIT ?3",
                DEVICE_COLUMNS
                    .split(", ")
                    .map(|c| format!("d.{c}"))
                    .collect::<Vec<_>>()
                    .join(", "),
                only_reachable("d.")
            ),
            Some(tag.clone()),
        ),
        (None, None) => (
            format!(
                "SELECT {DEVICE_COLUMNS} FROM devices WHERE app = ?1 AND id > ?2{}
                 ORDER BY id LIMIT ?3",
                only_reachable("")
            ),
            None,
        ),
    };
    let mut stmt = conn.prepare_cached(&sql).map_err(backend)?;
    let rows = match &arg {
        Some(a) => stmt.query_map(params![app.as_str(), after, limit, a], device_row),
        None => stmt.query_map(params![app.as_str(), after, limit], device_row),
    }
    .map_err(backend)?;
    rows.map(|r| r.map(|(d, _)| d).map_err(backend)).collect()
}

/// Devices of `app` with the given ids (unknown ones left out), in id order.
pub(super) fn by_id(
    conn: &Connection,
    app: &AppId,
    mut ids: Vec<String>,
) -> Result<Vec<(Device, InboxCursor)>, StoreError> {
    ids.sort_unstable();
    ids.dedup();
    let mut stmt = conn
        .prepare_cached(&format!(
            "SELECT {DEVICE_COLUMNS} FROM devices WHERE app = ?1 AND id = ?2"
        ))
        .map_err(backend)?;
    let mut found = Vec::with_capacity(ids.len());
    for id in ids {
        if let Some(device) = stmt
            .query_row(params![app.as_str(), id], device_row)
            .optional()
            .map_err(backend)?
        {
            found.push(device);
        }
    }
    Ok(found)
}
