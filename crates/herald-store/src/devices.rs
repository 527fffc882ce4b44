//! The SQLite implementation of [`DeviceRegistry`]: devices and their inbox cursors, users'
//! devices, audience counts, acknowledgements and push receipts. Writes run on the writer
//! thread (one transaction each, durable like appends); reads use the read pool.

use async_trait::async_trait;
use herald_core::log::StoreError;
use herald_core::message::now_millis;
use herald_core::message::Cursor;
use herald_core::tenant::AppId;
use herald_push::device::{Device, DeviceWrite, InboxCursor, Platform, WebPushKeys};
use herald_push::registry::{Ack, DeviceQuery, DeviceRegistry, Receipt};
use herald_push::Audience;
use rusqlite::{params, OptionalExtension, Row};

use crate::tenancy::to_json;
use crate::{backend, SqliteLog};

const DEVICE_COLUMNS: &str =
    "id, platform, token, keys, user_id, tags, locale, active, created, updated, cursor";

fn device_row(row: &Row<'_>) -> rusqlite::Result<(Device, InboxCursor)> {
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
            inactive_reason: None,
            created: row.get(8)?,
            updated: row.get(9)?,
        },
        InboxCursor::decode(&cursor),
    ))
}

#[async_trait]
impl DeviceRegistry for SqliteLog {
    async fn devices_by_id(
        &self,
        _app: &AppId,
        _ids: &[String],
    ) -> Result<Vec<(Device, InboxCursor)>, StoreError> {
        Err(StoreError::failed(
            "devices_by_id: being written (store helper)",
        ))
    }

    async fn deactivate_gone(
        &self,
        _app: &AppId,
        _id: &str,
        _token: &str,
        _since_ms: Option<i64>,
        _reason: &str,
    ) -> Result<bool, StoreError> {
        Err(StoreError::failed(
            "deactivate_gone: being written (store helper)",
        ))
    }

    async fn device_count(&self, app: &AppId) -> Result<u64, StoreError> {
        let app = app.clone();
        self.readers()
            .run(move |conn| {
                conn.query_row(
                    "SELECT count(*) FROM devices WHERE app = ?1",
                    [app.as_str()],
                    |r| r.get::<_, i64>(0),
                )
                .map(|n| n as u64)
                .map_err(backend)
            })
            .await
    }

    async fn upsert_devices(
        &self,
        app: &AppId,
        devices: Vec<DeviceWrite>,
        start: InboxCursor,
    ) -> Result<Vec<(Device, bool)>, StoreError> {
        let app = app.clone();
        self.write(move |tx| {
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
                         active, created, updated, cursor)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?10, ?11)
                     ON CONFLICT (app, id) DO UPDATE SET platform = excluded.platform,
                         token = excluded.token, keys = excluded.keys,
                         user_id = excluded.user_id, tags = excluded.tags,
                         locale = excluded.locale,
                         active = CASE WHEN ?12 THEN excluded.active ELSE devices.active END,
                         updated = excluded.updated
                     RETURNING active",
                )
                .map_err(backend)?;
            let mut untag = tx
                .prepare_cached(
                    "DELETE FROM device_tags WHERE app = ?1 AND tag = ?2 AND device = ?3",
                )
                .map_err(backend)?;
            let mut tag = tx
                .prepare_cached(
                    "INSERT OR IGNORE INTO device_tags (app, tag, device) VALUES (?1, ?2, ?3)",
                )
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
                let old_tags: Vec<String> = before
                    .as_ref()
                    .and_then(|(_, t)| serde_json::from_str(t).ok())
                    .unwrap_or_default();
                d.created = before.as_ref().map_or(now, |(c, _)| *c);
                d.updated = now;
                let mut cursor = std::borrow::Cow::Borrowed(start.as_str());
                if before.is_none() {
                    let head: Option<String> = tombstone
                        .query_row(params![app.as_str(), d.id], |r| r.get(0))
                        .optional()
                        .map_err(backend)?;
                    if let Some(head) = head {
                        let mut c = InboxCursor::decode(&start);
                        c.device = InboxCursor::decode(&format!(":0,{head}")).device;
                        cursor = std::borrow::Cow::Owned(c.encode());
                    }
                }
                d.active = put
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
                        ],
                        |r| r.get(0),
                    )
                    .map_err(backend)?;
                for t in old_tags.iter().filter(|t| !d.tags.contains(t)) {
                    untag
                        .execute(params![app.as_str(), t, d.id])
                        .map_err(backend)?;
                }
                for t in d.tags.iter().filter(|t| !old_tags.contains(t)) {
                    tag.execute(params![app.as_str(), t, d.id])
                        .map_err(backend)?;
                }
                out.push((d, before.is_none()));
            }
            Ok(out)
        })
        .await
    }

    async fn device(
        &self,
        app: &AppId,
        id: &str,
    ) -> Result<Option<(Device, InboxCursor)>, StoreError> {
        let (app, id) = (app.clone(), id.to_string());
        self.readers()
            .run(move |conn| {
                let mut stmt = conn
                    .prepare_cached(&format!(
                        "SELECT {DEVICE_COLUMNS} FROM devices WHERE app = ?1 AND id = ?2"
                    ))
                    .map_err(backend)?;
                stmt.query_row(params![app.as_str(), id], device_row)
                    .optional()
                    .map_err(backend)
            })
            .await
    }

    async fn delete_device(
        &self,
        app: &AppId,
        id: &str,
        log_head: Cursor,
    ) -> Result<bool, StoreError> {
        let (app, id) = (app.clone(), id.to_string());
        let head = format!("{}:{}", log_head.epoch, log_head.seq);
        self.write(move |tx| {
            tx.execute(
                "INSERT OR REPLACE INTO device_tombstones (app, id, log_head) VALUES (?1, ?2, ?3)",
                params![app.as_str(), id, head],
            )
            .map_err(backend)?;
            tx.execute(
                "DELETE FROM device_tags WHERE app = ?1 AND device = ?2",
                params![app.as_str(), id],
            )
            .map_err(backend)?;
            let n = tx
                .execute(
                    "DELETE FROM devices WHERE app = ?1 AND id = ?2",
                    params![app.as_str(), id],
                )
                .map_err(backend)?;
            Ok(n == 1)
        })
        .await
    }

    async fn devices(&self, app: &AppId, query: &DeviceQuery) -> Result<Vec<Device>, StoreError> {
        let (app, q) = (app.clone(), query.clone());
        self.readers()
            .run(move |conn| {
                let after = q.after.clone().unwrap_or_default();
                let limit = q.limit as i64;
                let (sql, arg): (String, Option<String>) = match (&q.user, &q.tag) {
                    (Some(user), _) => (
                        format!(
                            "SELECT {DEVICE_COLUMNS} FROM devices WHERE app = ?1 AND user_id = ?4
                             AND id > ?2 ORDER BY id LIMIT ?3"
                        ),
                        Some(user.clone()),
                    ),
                    (None, Some(tag)) => (
                        format!(
                            "SELECT {} FROM device_tags t JOIN devices d
                               ON d.app = t.app AND d.id = t.device
                             WHERE t.app = ?1 AND t.tag = ?4 AND t.device > ?2
                             ORDER BY t.device LIMIT ?3",
                            DEVICE_COLUMNS
                                .split(", ")
                                .map(|c| format!("d.{c}"))
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                        Some(tag.clone()),
                    ),
                    (None, None) => (
                        format!(
                            "SELECT {DEVICE_COLUMNS} FROM devices WHERE app = ?1 AND id > ?2
                             ORDER BY id LIMIT ?3"
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
            })
            .await
    }

    async fn user_devices(&self, app: &AppId, user: &str) -> Result<Vec<String>, StoreError> {
        let (app, user) = (app.clone(), user.to_string());
        self.readers()
            .run(move |conn| {
                let mut stmt = conn
                    .prepare_cached(
                        "SELECT id FROM devices WHERE app = ?1 AND user_id = ?2 AND active = 1
                         ORDER BY id",
                    )
                    .map_err(backend)?;
                let rows = stmt
                    .query_map(params![app.as_str(), user], |r| r.get::<_, String>(0))
                    .map_err(backend)?;
                rows.map(|r| r.map_err(backend)).collect()
            })
            .await
    }

    async fn count_audience(&self, app: &AppId, audience: &Audience) -> Result<u64, StoreError> {
        let (app, audience) = (app.clone(), audience.clone());
        self.readers()
            .run(move |conn| count_reached(conn, &app, &audience))
            .await
    }

    async fn ack(&self, app: &AppId, device: &str, ack: &Ack) -> Result<bool, StoreError> {
        let (app, device, ack) = (app.clone(), device.to_string(), ack.clone());
        self.write(move |tx| {
            let n = tx
                .execute(
                    "UPDATE devices SET cursor = ?1 WHERE app = ?2 AND id = ?3 AND cursor = ?4",
                    params![ack.to.encode(), app.as_str(), device, ack.from.encode()],
                )
                .map_err(backend)?;
            if n == 0 {
                return Ok(false);
            }
            let mut count = tx
                .prepare_cached("UPDATE pushes SET acked = acked + 1 WHERE app = ?1 AND id = ?2")
                .map_err(backend)?;
            for id in &ack.pushes {
                count.execute(params![app.as_str(), id]).map_err(backend)?;
            }
            Ok(true)
        })
        .await
    }

    async fn record_push(&self, app: &AppId, receipt: &Receipt) -> Result<(), StoreError> {
        let (app, r) = (app.clone(), receipt.clone());
        self.write(move |tx| {
            tx.execute(
                "INSERT OR IGNORE INTO pushes (app, id, created, expires, targeted)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                params![
                    app.as_str(),
                    r.id,
                    r.created,
                    r.expires,
                    r.targeted.map(|t| t as i64)
                ],
            )
            .map_err(backend)?;
            Ok(())
        })
        .await
    }

    async fn set_targeted(&self, app: &AppId, id: &str, targeted: u64) -> Result<(), StoreError> {
        let (app, id) = (app.clone(), id.to_string());
        self.write(move |tx| {
            tx.execute(
                "UPDATE pushes SET targeted = ?3 WHERE app = ?1 AND id = ?2",
                params![app.as_str(), id, targeted as i64],
            )
            .map_err(backend)?;
            Ok(())
        })
        .await
    }

    async fn receipt(&self, app: &AppId, id: &str) -> Result<Option<Receipt>, StoreError> {
        let (app, id) = (app.clone(), id.to_string());
        self.readers()
            .run(move |conn| {
                conn.query_row(
                    "SELECT created, expires, targeted, acked FROM pushes
                     WHERE app = ?1 AND id = ?2",
                    params![app.as_str(), id],
                    |r| {
                        Ok(Receipt {
                            id: id.clone(),
                            created: r.get(0)?,
                            expires: r.get(1)?,
                            targeted: r.get::<_, Option<i64>>(2)?.map(|t| t as u64),
                            delivered: r.get::<_, i64>(3)? as u64,
                            pending: 0,
                            expired: 0,
                            delivery: None,
                            providers: None,
                            devices: None,
                        })
                    },
                )
                .optional()
                .map_err(backend)
            })
            .await
    }
}

/// Active devices of an app (through the `devices_active` index).
fn count_active(conn: &rusqlite::Connection, app: &AppId) -> Result<u64, StoreError> {
    conn.query_row(
        "SELECT count(*) FROM devices WHERE app = ?1 AND active = 1",
        [app.as_str()],
        |r| r.get::<_, i64>(0),
    )
    .map(|n| n as u64)
    .map_err(backend)
}

/// Devices `audience` reaches, by [`Audience::reaches`]. An inactive device is never reached,
/// so only active devices are read. Only the tags the audience names decide a match, so it
/// reads just the devices holding one of them (from `device_tags`) and which of those tags each
/// holds; every other active device is reached exactly when a device with none of them is
/// (every device for [`Audience::All`], none for `sports`, all for `NOT muted`), and those are
/// counted, not read.
fn count_reached(
    conn: &rusqlite::Connection,
    app: &AppId,
    audience: &Audience,
) -> Result<u64, StoreError> {
    use std::collections::HashMap;
    debug_assert!(!audience.reaches(false, |_| true));
    let named = audience.named_tags();
    let mut held: HashMap<String, Vec<usize>> = HashMap::new();
    if !named.is_empty() {
        let mut stmt = conn
            .prepare_cached(
                "SELECT t.device FROM device_tags t JOIN devices d
                 ON d.app = t.app AND d.id = t.device
                 WHERE t.app = ?1 AND t.tag = ?2 AND d.active = 1",
            )
            .map_err(backend)?;
        for (i, tag) in named.iter().enumerate() {
            let mut rows = stmt.query(params![app.as_str(), tag]).map_err(backend)?;
            while let Some(row) = rows.next().map_err(backend)? {
                held.entry(row.get(0).map_err(backend)?)
                    .or_default()
                    .push(i);
            }
        }
    }
    let mut n = held
        .values()
        .filter(|tags| {
            audience.reaches(true, |t| {
                named
                    .iter()
                    .position(|x| *x == t)
                    .is_some_and(|i| tags.contains(&i))
            })
        })
        .count() as u64;
    if audience.reaches(true, |_| false) {
        n += count_active(conn, app)?.saturating_sub(held.len() as u64);
    }
    Ok(n)
}
