//! Writing devices: registering or updating them (with their tags and, for an id registered
//! again after a delete, the tombstone's log head), and deactivating one whose provider says its
//! token is gone.
//!
//! A device's `inactive_reason` is cleared when it is activated again or its token changes;
//! `token_updated` is set when a token is first stored or changes (Apple's rule in
//! [`deactivate_gone`] compares it with when the provider saw the token go).

use std::borrow::Cow;

use herald_core::log::StoreError;
use herald_core::message::now_millis;
use herald_core::tenant::AppId;
use herald_push::device::{Device, DeviceWrite, InboxCursor};
use rusqlite::{params, Connection, OptionalExtension};

use crate::common::devices::{cursor_after_tombstone, stored_tags, tag_changes};
use crate::common::values::to_json;
use crate::sqlite::backend;

/// Registers or updates `devices` (see `DeviceRegistry::upsert_devices`).
pub(super) fn upsert(
    tx: &Connection,
    app: &AppId,
    devices: Vec<DeviceWrite>,
    start: InboxCursor,
) -> Result<Vec<(Device, bool)>, StoreError> {
    let now = now_millis();
    let start = start.encode();
    let mut out = Vec::with_capacity(devices.len());
    let mut find = tx
        .prepare_cached("SELECT created, tags FROM devices WHERE app = ?1 AND id = ?2")
        .map_err(backend)?;
    let mut tombstone = tx
        .prepare_cached(
            "DELETE FROM device_tombstones WHERE app = ?1 AND id = ?2 RETURNING log_head",
        )
        .map_err(backend)?;
    let mut put = tx
        .prepare_cached(
            "INSERT INTO devices (app, id, platform, token, keys, user_id, tags, locale,
                 active, created, updated, cursor, token_updated)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?13, ?11,
                 CASE WHEN ?4 IS NULL THEN NULL ELSE ?13 END)
             ON CONFLICT (app, id) DO UPDATE SET platform = excluded.platform,
                 token = excluded.token, keys = excluded.keys,
                 user_id = excluded.user_id, tags = excluded.tags,
                 locale = excluded.locale,
                 active = CASE WHEN ?12 THEN excluded.active ELSE devices.active END,
                 updated = excluded.updated,
                 inactive_reason = CASE
                     WHEN (?12 AND excluded.active) OR devices.token IS NOT excluded.token
                     THEN NULL ELSE devices.inactive_reason END,
                 token_updated = CASE WHEN devices.token IS excluded.token
                     THEN devices.token_updated ELSE excluded.token_updated END
             RETURNING active, inactive_reason",
        )
        .map_err(backend)?;
    let mut untag = tx
        .prepare_cached("DELETE FROM device_tags WHERE app = ?1 AND tag = ?2 AND device = ?3")
        .map_err(backend)?;
    let mut tag = tx
        .prepare_cached("INSERT OR IGNORE INTO device_tags (app, tag, device) VALUES (?1, ?2, ?3)")
        .map_err(backend)?;
    for DeviceWrite {
        device: mut d,
        set_active,
    } in devices
    {
        let before: Option<(i64, String)> = find
            .query_row(params![app.as_str(), d.id], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()
            .map_err(backend)?;
        let old_tags = stored_tags(before.as_ref().map(|(_, t)| t.as_str()));
        d.created = before.as_ref().map_or(now, |(c, _)| *c);
        d.updated = now;
        let mut cursor = Cow::Borrowed(start.as_str());
        if before.is_none() {
            let head: Option<String> = tombstone
                .query_row(params![app.as_str(), d.id], |r| r.get(0))
                .optional()
                .map_err(backend)?;
            if let Some(head) = head {
                cursor = Cow::Owned(cursor_after_tombstone(&start, &head));
            }
        }
        (d.active, d.inactive_reason) = put
            .query_row(
                params![
                    app.as_str(),
                    d.id,
                    d.platform.as_str(),
                    d.token,
                    d.keys.as_ref().map(to_json),
                    d.user,
                    to_json(&d.tags),
                    d.locale,
                    d.active,
                    d.created,
                    cursor.as_ref(),
                    set_active,
                    d.updated,
                ],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .map_err(backend)?;
        let (removed, added) = tag_changes(&old_tags, &d.tags);
        for t in removed {
            untag
                .execute(params![app.as_str(), t, d.id])
                .map_err(backend)?;
        }
        for t in added {
            tag.execute(params![app.as_str(), t, d.id])
                .map_err(backend)?;
        }
        out.push((d, before.is_none()));
    }
    Ok(out)
}

/// Deactivates device `id` of `app`, recording `reason`, if it is active and still holds
/// `token`, unless the provider says since when the token is gone (`since_ms`) and the token
/// was stored after that (Apple's rule: the device registered the token again since). Returns
/// whether it was deactivated.
pub(super) fn deactivate_gone(
    tx: &Connection,
    app: &AppId,
    id: &str,
    token: &str,
    since_ms: Option<i64>,
    reason: &str,
) -> Result<bool, StoreError> {
    let n = tx
        .execute(
            "UPDATE devices SET active = 0, inactive_reason = ?5, updated = ?6
             WHERE app = ?1 AND id = ?2 AND token = ?3 AND active = 1
               AND (?4 IS NULL OR token_updated IS NULL OR token_updated <= ?4)",
            params![app.as_str(), id, token, since_ms, reason, now_millis()],
        )
        .map_err(backend)?;
    Ok(n == 1)
}
