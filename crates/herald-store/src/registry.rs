//! The SQLite implementation of [`Registry`]: apps, keys, devices, receipts and usage. Writes
//! run on the writer thread (one transaction each, durable like appends); reads use the read
//! pool.

use async_trait::async_trait;
use herald_core::device::{Device, DeviceWrite, InboxCursor, Platform, WebPushKeys};
use herald_core::log::StoreError;
use herald_core::message::now_millis;
use herald_core::message::Cursor;
use herald_core::registry::{
    Ack, App, AppLimits, Audience, DeviceQuery, KeyInfo, Receipt, Registry, Usage,
};
use herald_core::tenant::AppId;
use rusqlite::{params, OptionalExtension, Row};

use crate::{backend, SqliteLog};

const DEVICE_COLUMNS: &str =
    "id, platform, token, keys, user_id, tags, locale, active, created, updated, cursor";

fn app_id(s: String) -> Result<AppId, StoreError> {
    AppId::parse(&s).map_err(|_| StoreError::Backend(format!("corrupt app id {s:?} in store")))
}

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
            created: row.get(8)?,
            updated: row.get(9)?,
        },
        InboxCursor::decode(&cursor),
    ))
}

fn to_json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// The columns of an `apps` row: id, name, token secret, created, limits (JSON).
type AppRow = (String, String, Option<String>, i64, String);

fn app_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<AppRow> {
    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
}

fn app_from_row((id, name, token_secret, created, limits): AppRow) -> Result<App, StoreError> {
    Ok(App {
        id: app_id(id)?,
        name,
        token_secret,
        limits: serde_json::from_str(&limits).unwrap_or_default(),
        created,
    })
}

#[async_trait]
impl Registry for SqliteLog {
    async fn create_app(&self, app: &App) -> Result<bool, StoreError> {
        let app = app.clone();
        self.write(move |tx| {
            let n = tx
                .execute(
                    "INSERT OR IGNORE INTO apps (id, name, token_secret, limits, created)
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                    params![
                        app.id.as_str(),
                        app.name,
                        app.token_secret,
                        to_json(&app.limits),
                        app.created
                    ],
                )
                .map_err(backend)?;
            Ok(n == 1)
        })
        .await
    }

    async fn apps(&self) -> Result<Vec<App>, StoreError> {
        self.readers()
            .run(|conn| {
                let mut stmt = conn
                    .prepare_cached(
                        "SELECT id, name, token_secret, created, limits FROM apps
                         WHERE deleted = 0 ORDER BY id",
                    )
                    .map_err(backend)?;
                let rows = stmt.query_map([], app_row).map_err(backend)?;
                let mut apps = Vec::new();
                for row in rows {
                    apps.push(app_from_row(row.map_err(backend)?)?);
                }
                Ok(apps)
            })
            .await
    }

    async fn app(&self, id: &AppId) -> Result<Option<App>, StoreError> {
        let id = id.as_str().to_owned();
        self.readers()
            .run(move |conn| {
                let mut stmt = conn
                    .prepare_cached(
                        "SELECT id, name, token_secret, created, limits FROM apps
                         WHERE id = ?1 AND deleted = 0",
                    )
                    .map_err(backend)?;
                let row = stmt.query_row([&id], app_row).optional().map_err(backend)?;
                row.map(app_from_row).transpose()
            })
            .await
    }

    async fn set_limits(&self, id: &AppId, limits: AppLimits) -> Result<bool, StoreError> {
        let id = id.clone();
        self.write(move |tx| {
            let n = tx
                .execute(
                    "UPDATE apps SET limits = ?2 WHERE id = ?1 AND deleted = 0",
                    params![id.as_str(), to_json(&limits)],
                )
                .map_err(backend)?;
            Ok(n == 1)
        })
        .await
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

    async fn delete_app(&self, id: &AppId) -> Result<bool, StoreError> {
        let id = id.clone();
        self.write(move |tx| {
            let app = id.as_str();
            for sql in [
                "DELETE FROM api_keys WHERE app = ?1",
                "DELETE FROM devices WHERE app = ?1",
                "DELETE FROM device_tags WHERE app = ?1",
                "DELETE FROM device_tombstones WHERE app = ?1",
                "DELETE FROM pushes WHERE app = ?1",
                "DELETE FROM usage WHERE app = ?1",
            ] {
                tx.execute(sql, [app]).map_err(backend)?;
            }
            let n = tx
                .execute(
                    "UPDATE apps SET deleted = 1, token_secret = NULL WHERE id = ?1 AND deleted = 0",
                    [app],
                )
                .map_err(backend)?;
            Ok(n == 1)
        })
        .await
    }

    async fn add_key(&self, key: &KeyInfo) -> Result<(), StoreError> {
        let key = key.clone();
        self.write(move |tx| {
            tx.execute(
                "INSERT OR IGNORE INTO api_keys (hash, label, created, app) VALUES (?1, ?2, ?3, ?4)",
                params![key.hash, key.label, key.created, key.app.as_str()],
            )
            .map_err(backend)?;
            Ok(())
        })
        .await
    }

    async fn remove_key(&self, app: &AppId, key_id: &str) -> Result<bool, StoreError> {
        let (app, key_id) = (app.clone(), key_id.to_string());
        if key_id.len() != 12
            || !key_id
                .bytes()
                .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        {
            return Ok(false);
        }
        self.write(move |tx| {
            let n = tx
                .execute(
                    "DELETE FROM api_keys WHERE app = ?1 AND substr(hash, 1, 12) = ?2",
                    params![app.as_str(), key_id],
                )
                .map_err(backend)?;
            Ok(n > 0)
        })
        .await
    }

    async fn keys(&self) -> Result<Vec<KeyInfo>, StoreError> {
        self.readers()
            .run(|conn| {
                let mut stmt = conn
                    .prepare_cached(
                        "SELECT app, hash, coalesce(label, ''), coalesce(created, 0) FROM api_keys
                         ORDER BY app, created",
                    )
                    .map_err(backend)?;
                let rows = stmt
                    .query_map([], |r| {
                        Ok((
                            r.get::<_, String>(0)?,
                            r.get::<_, String>(1)?,
                            r.get::<_, String>(2)?,
                            r.get::<_, i64>(3)?,
                        ))
                    })
                    .map_err(backend)?;
                let mut keys = Vec::new();
                for row in rows {
                    let (app, hash, label, created) = row.map_err(backend)?;
                    keys.push(KeyInfo {
                        app: app_id(app)?,
                        id: hash.chars().take(12).collect(),
                        hash,
                        label,
                        created,
                    });
                }
                Ok(keys)
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
            .run(move |conn| match audience {
                Audience::All => count_active(conn, &app),
                Audience::Tags(expr) => count_tagged(conn, &app, &expr),
            })
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
                        })
                    },
                )
                .optional()
                .map_err(backend)
            })
            .await
    }

    async fn set_usage(&self, app: &AppId, d: Usage) -> Result<(), StoreError> {
        let app = app.clone();
        self.write(move |tx| {
            tx.execute(
                "INSERT INTO usage (app, published, deliveries, acks, peak_connections)
                 VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (app) DO UPDATE SET published = excluded.published,
                     deliveries = excluded.deliveries, acks = excluded.acks,
                     peak_connections = max(peak_connections, excluded.peak_connections)",
                params![
                    app.as_str(),
                    d.published as i64,
                    d.deliveries as i64,
                    d.acks as i64,
                    d.peak_connections as i64
                ],
            )
            .map_err(backend)?;
            Ok(())
        })
        .await
    }

    async fn usage(&self, app: &AppId) -> Result<Usage, StoreError> {
        let app = app.clone();
        self.readers()
            .run(move |conn| {
                conn.query_row(
                    "SELECT published, deliveries, acks, peak_connections FROM usage
                     WHERE app = ?1",
                    [app.as_str()],
                    |r| {
                        Ok(Usage {
                            published: r.get::<_, i64>(0)? as u64,
                            deliveries: r.get::<_, i64>(1)? as u64,
                            acks: r.get::<_, i64>(2)? as u64,
                            peak_connections: r.get::<_, i64>(3)? as u64,
                        })
                    },
                )
                .optional()
                .map(Option::unwrap_or_default)
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

/// Active devices whose tags satisfy `expr`. Only the tags the expression
/// names decide a match, so it reads just the devices holding one of them (from `device_tags`)
/// and which of those tags each holds; every other active device matches exactly when the
/// expression matches a device with none of them (`NOT muted`, say).
fn count_tagged(
    conn: &rusqlite::Connection,
    app: &AppId,
    expr: &herald_core::tags::TagExpr,
) -> Result<u64, StoreError> {
    use std::collections::HashMap;
    let named = expr.tags();
    let mut held: HashMap<String, Vec<usize>> = HashMap::new();
    let mut stmt = conn
        .prepare_cached(
            "SELECT t.device FROM device_tags t JOIN devices d ON d.app = t.app AND d.id = t.device
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
    let mut n = held
        .values()
        .filter(|tags| {
            expr.matches(|t| {
                named
                    .iter()
                    .position(|x| *x == t)
                    .is_some_and(|i| tags.contains(&i))
            })
        })
        .count() as u64;
    if expr.matches(|_| false) {
        n += count_active(conn, app)?.saturating_sub(held.len() as u64);
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bytes::Bytes;
    use herald_core::log::{ChannelLog, CommitSink, Retention};
    use herald_core::message::{NewMessage, SharedMessage};
    use herald_core::name::ChannelName;

    use super::*;
    use crate::SqliteOptions;

    struct NoSink;

    impl CommitSink for NoSink {
        fn committed(&self, _: &[SharedMessage]) {}
    }

    #[tokio::test]
    async fn one_app_is_read_by_id_and_a_deleted_one_is_gone() {
        let dir = tempfile::tempdir().unwrap();
        let log = SqliteLog::open(dir.path(), SqliteOptions::default(), Arc::new(NoSink)).unwrap();
        let shop = AppId::parse("shop").unwrap();
        let app = App {
            id: shop.clone(),
            name: "Shop".into(),
            token_secret: Some("s".repeat(32)),
            limits: AppLimits {
                max_devices: Some(7),
                ..AppLimits::default()
            },
            created: 123,
        };
        assert!(log.create_app(&app).await.unwrap());
        let read = log.app(&shop).await.unwrap().expect("stored");
        assert_eq!(
            (read.name.as_str(), read.created, read.limits.max_devices),
            ("Shop", 123, Some(7))
        );
        assert_eq!(read.token_secret, app.token_secret);
        let other = AppId::parse("other").unwrap();
        assert!(log.app(&other).await.unwrap().is_none());
        assert!(log.delete_app(&shop).await.unwrap());
        assert!(log.app(&shop).await.unwrap().is_none(), "deleted");
        log.close().await;
    }

    #[tokio::test]
    async fn a_failing_write_undoes_only_itself_and_the_rest_of_its_commit_stands() {
        let dir = tempfile::tempdir().unwrap();
        let log = SqliteLog::open(dir.path(), SqliteOptions::default(), Arc::new(NoSink)).unwrap();
        let app = AppId::parse("a").unwrap();
        let bad = log.write(|c| {
            c.execute("INSERT INTO usage (app, published) VALUES ('x', 9)", [])
                .map_err(backend)?;
            Err::<(), _>(StoreError::Backend("refused".into()))
        });
        let good = log.set_usage(
            &app,
            Usage {
                published: 5,
                ..Usage::default()
            },
        );
        let channel = ChannelName::parse("c").unwrap();
        let message = NewMessage {
            id: None,
            data: Bytes::from_static(b"1"),
        };
        let append = log.append(&channel, vec![message], Retention::default());
        let (bad, good, append) = tokio::join!(bad, good, append);
        assert!(bad.is_err());
        good.unwrap();
        assert_eq!(append.unwrap().len(), 1);
        assert_eq!(log.usage(&app).await.unwrap().published, 5);
        let x = AppId::parse("x").unwrap();
        assert_eq!(
            log.usage(&x).await.unwrap(),
            Usage::default(),
            "rolled back"
        );
        log.close().await;
    }
}
