//! Writing devices: registering or updating them (with their tags and, for an id registered
//! again after a delete, the tombstone's log head), and deactivating one whose provider says its
//! token is gone, with the SQLite implementation's rules (`crate::sqlite::devices::upsert`).
//!
//! An existing device's row is locked (`FOR UPDATE`) before it is compared with the write, so
//! two nodes updating one device's tags take turns rather than each undoing the other's.

use std::borrow::Cow;

use deadpool_postgres::Transaction;
use herald_core::log::StoreError;
use herald_core::message::now_millis;
use herald_core::tenant::AppId;
use herald_push::device::{Device, DeviceWrite, InboxCursor};

use crate::common::devices::{cursor_after_tombstone, stored_tags, tag_changes};
use crate::common::values::to_json;
use crate::postgres::pg_error;

const FIND: &str = "SELECT created, tags FROM devices WHERE app = $1 AND id = $2 FOR UPDATE";
const TOMBSTONE: &str =
    "DELETE FROM device_tombstones WHERE app = $1 AND id = $2 RETURNING log_head";
const PUT: &str = "INSERT INTO devices (app, id, platform, token, keys, user_id, tags, locale,
         active, created, updated, cursor, token_updated)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $13, $11,
         CASE WHEN $4::text IS NULL THEN NULL ELSE $13::bigint END)
     ON CONFLICT (app, id) DO UPDATE SET platform = excluded.platform,
         token = excluded.token, keys = excluded.keys,
         user_id = excluded.user_id, tags = excluded.tags,
         locale = excluded.locale,
         active = CASE WHEN $12 THEN excluded.active ELSE devices.active END,
         updated = excluded.updated,
         inactive_reason = CASE
             WHEN ($12 AND excluded.active) OR devices.token IS DISTINCT FROM excluded.token
             THEN NULL ELSE devices.inactive_reason END,
         token_updated = CASE WHEN devices.token IS NOT DISTINCT FROM excluded.token
             THEN devices.token_updated ELSE excluded.token_updated END
     RETURNING active, inactive_reason";
const UNTAG: &str = "DELETE FROM device_tags WHERE app = $1 AND tag = $2 AND device = $3";
const TAG: &str = "INSERT INTO device_tags (app, tag, device) VALUES ($1, $2, $3)
     ON CONFLICT DO NOTHING";

/// Registers or updates `devices` (see `DeviceRegistry::upsert_devices`).
pub(super) async fn upsert(
    tx: &Transaction<'_>,
    app: &AppId,
    devices: Vec<DeviceWrite>,
    start: InboxCursor,
) -> Result<Vec<(Device, bool)>, StoreError> {
    let now = now_millis();
    let start = start.encode();
    let app = app.as_str();
    let mut out = Vec::with_capacity(devices.len());
    let find = tx.prepare_cached(FIND).await.map_err(pg_error)?;
    let tombstone = tx.prepare_cached(TOMBSTONE).await.map_err(pg_error)?;
    let put = tx.prepare_cached(PUT).await.map_err(pg_error)?;
    let untag = tx.prepare_cached(UNTAG).await.map_err(pg_error)?;
    let tag = tx.prepare_cached(TAG).await.map_err(pg_error)?;
    for DeviceWrite {
        device: mut d,
        set_active,
    } in devices
    {
        let before = tx
            .query_opt(&find, &[&app, &d.id])
            .await
            .map_err(pg_error)?;
        let before: Option<(i64, String)> = match before {
            Some(row) => Some((
                row.try_get(0).map_err(pg_error)?,
                row.try_get(1).map_err(pg_error)?,
            )),
            None => None,
        };
        let old_tags = stored_tags(before.as_ref().map(|(_, t)| t.as_str()));
        d.created = before.as_ref().map_or(now, |(c, _)| *c);
        d.updated = now;
        let mut cursor = Cow::Borrowed(start.as_str());
        if before.is_none() {
            let head = tx
                .query_opt(&tombstone, &[&app, &d.id])
                .await
                .map_err(pg_error)?;
            if let Some(head) = head {
                let head: String = head.try_get(0).map_err(pg_error)?;
                cursor = Cow::Owned(cursor_after_tombstone(&start, &head));
            }
        }
        let keys = d.keys.as_ref().map(to_json);
        let tags = to_json(&d.tags);
        let row = tx
            .query_one(
                &put,
                &[
                    &app,
                    &d.id,
                    &d.platform.as_str(),
                    &d.token,
                    &keys,
                    &d.user,
                    &tags,
                    &d.locale,
                    &d.active,
                    &d.created,
                    &cursor.as_ref(),
                    &set_active,
                    &d.updated,
                ],
            )
            .await
            .map_err(pg_error)?;
        d.active = row.try_get(0).map_err(pg_error)?;
        d.inactive_reason = row.try_get(1).map_err(pg_error)?;
        let (removed, added) = tag_changes(&old_tags, &d.tags);
        for t in removed {
            tx.execute(&untag, &[&app, t, &d.id])
                .await
                .map_err(pg_error)?;
        }
        for t in added {
            tx.execute(&tag, &[&app, t, &d.id])
                .await
                .map_err(pg_error)?;
        }
        out.push((d, before.is_none()));
    }
    Ok(out)
}

/// Deactivates device `id` of `app`, recording `reason`, if it is active and still holds
/// `token`, unless the token was stored after the provider saw it go (`since_ms`, Apple's
/// rule). Returns whether it was deactivated.
pub(super) async fn deactivate_gone(
    client: &impl deadpool_postgres::GenericClient,
    app: &AppId,
    id: &str,
    token: &str,
    since_ms: Option<i64>,
    reason: &str,
) -> Result<bool, StoreError> {
    let n = client
        .execute(
            "UPDATE devices SET active = FALSE, inactive_reason = $5, updated = $6
             WHERE app = $1 AND id = $2 AND token = $3 AND active
               AND ($4::bigint IS NULL OR token_updated IS NULL OR token_updated <= $4)",
            &[
                &app.as_str(),
                &id,
                &token,
                &since_ms,
                &reason,
                &now_millis(),
            ],
        )
        .await
        .map_err(pg_error)?;
    Ok(n == 1)
}
