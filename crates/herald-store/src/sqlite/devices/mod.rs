//! The SQLite implementation of [`DeviceRegistry`]: devices and their inbox cursors, users'
//! devices, audience counts, acknowledgements and push receipts. Writes run on the writer
//! thread (one transaction each, durable like appends); reads use the read pool.
//!
//! Submodules: `rows` (reading and listing devices), `upsert` (registering them and
//! deactivating one whose token is gone), `audience` (audience counts).

mod audience;
mod rows;
mod upsert;

use async_trait::async_trait;
use herald_core::log::StoreError;
use herald_core::message::Cursor;
use herald_core::tenant::AppId;
use herald_push::device::{Device, DeviceWrite, InboxCursor};
use herald_push::registry::{Ack, DeviceQuery, DeviceRegistry, Receipt};
use herald_push::Audience;
use rusqlite::{params, OptionalExtension};

use crate::common::devices::{device_of, DEVICE_COLUMNS};
use crate::sqlite::{backend, SqliteLog};

#[async_trait]
impl DeviceRegistry for SqliteLog {
    async fn devices_by_id(
        &self,
        app: &AppId,
        ids: &[String],
    ) -> Result<Vec<(Device, InboxCursor)>, StoreError> {
        let (app, ids) = (app.clone(), ids.to_vec());
        self.readers()
            .run(move |conn| rows::by_id(conn, &app, ids))
            .await
    }

    async fn deactivate_gone(
        &self,
        app: &AppId,
        id: &str,
        token: &str,
        since_ms: Option<i64>,
        reason: &str,
    ) -> Result<bool, StoreError> {
        let (app, id, token, reason) = (
            app.clone(),
            id.to_string(),
            token.to_string(),
            reason.to_string(),
        );
        self.write(move |tx| upsert::deactivate_gone(tx, &app, &id, &token, since_ms, &reason))
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

    async fn upsert_devices(
        &self,
        app: &AppId,
        devices: Vec<DeviceWrite>,
        start: InboxCursor,
    ) -> Result<Vec<(Device, bool)>, StoreError> {
        let app = app.clone();
        self.write(move |tx| upsert::upsert(tx, &app, devices, start))
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
                        "SELECT {} FROM devices WHERE app = ?1 AND id = ?2",
                        DEVICE_COLUMNS
                    ))
                    .map_err(backend)?;
                stmt.query_row(params![app.as_str(), id], |r| Ok(device_of(r)))
                    .optional()
                    .map_err(backend)?
                    .transpose()
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
        let (app, query) = (app.clone(), query.clone());
        self.readers()
            .run(move |conn| rows::list(conn, &app, &query))
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
            .run(move |conn| audience::count_reached(conn, &app, &audience))
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

    async fn record_push(
        &self,
        app: &AppId,
        receipt: &Receipt,
        delivery: Option<&[u8]>,
    ) -> Result<(), StoreError> {
        let (app, r) = (app.clone(), receipt.clone());
        let record = delivery.map(<[u8]>::to_vec);
        self.write(move |tx| {
            tx.execute(
                "INSERT OR IGNORE INTO pushes
                     (app, id, created, expires, targeted, delivery, delivery_record)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![
                    app.as_str(),
                    r.id,
                    r.created,
                    r.expires,
                    r.targeted.map(|t| t as i64),
                    r.delivery,
                    record
                ],
            )
            .map_err(backend)?;
            Ok(())
        })
        .await
    }

    async fn delivery_record(&self, app: &AppId, id: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let (app, id) = (app.clone(), id.to_string());
        self.readers()
            .run(move |conn| {
                conn.query_row(
                    "SELECT delivery_record FROM pushes WHERE app = ?1 AND id = ?2",
                    params![app.as_str(), id],
                    |r| r.get::<_, Option<Vec<u8>>>(0),
                )
                .optional()
                .map(Option::flatten)
                .map_err(backend)
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
                    "SELECT created, expires, targeted, acked, delivery FROM pushes
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
                            delivery: r.get(4)?,
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
