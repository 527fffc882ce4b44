//! Reading devices: listing by user, tag or everything (optionally only provider-reachable
//! devices), and lookup by ids; a row becomes a [`Device`] in `crate::common::devices`.

use herald_core::log::StoreError;
use herald_core::tenant::AppId;
use herald_push::device::{Device, InboxCursor};
use herald_push::registry::DeviceQuery;
use rusqlite::{params, Connection, OptionalExtension};

use crate::common::devices::{device_of, DEVICE_COLUMNS};
use crate::common::qualified;
use crate::sqlite::backend;

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
                qualified(DEVICE_COLUMNS, "d"),
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
    let read = |r: &rusqlite::Row<'_>| Ok(device_of(r));
    let rows = match &arg {
        Some(a) => stmt.query_map(params![app.as_str(), after, limit, a], read),
        None => stmt.query_map(params![app.as_str(), after, limit], read),
    }
    .map_err(backend)?;
    rows.map(|r| r.map_err(backend)?.map(|(d, _)| d)).collect()
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
            .query_row(params![app.as_str(), id], |r| Ok(device_of(r)))
            .optional()
            .map_err(backend)?
        {
            found.push(device?);
        }
    }
    Ok(found)
}
