//! [`DeviceRegistry`] on PostgreSQL: devices and their inbox cursors, users' devices, audience
//! counts, acknowledgements and push receipts, with the SQLite implementation's semantics
//! (`crate::sqlite::devices`). Each write is one transaction on a pooled connection; an ack moves
//! the cursor only from the value the device read (compare and set), so acks from two nodes never
//! both apply.
//!
//! Submodules: `rows` (reading, listing, audience counts), `upsert` (registering devices and
//! deactivating one whose token is gone).

mod rows;
mod upsert;

use async_trait::async_trait;
use herald_core::log::StoreError;
use herald_core::message::Cursor;
use herald_core::tenant::AppId;
use herald_push::device::{Device, DeviceWrite, InboxCursor};
use herald_push::registry::{Ack, DeviceQuery, DeviceRegistry, Receipt};
use herald_push::Audience;

use super::{pg_error, PostgresStore};
use crate::common::devices::{device_of, DEVICE_COLUMNS};

#[async_trait]
impl DeviceRegistry for PostgresStore {
    async fn devices_by_id(
        &self,
        app: &AppId,
        ids: &[String],
    ) -> Result<Vec<(Device, InboxCursor)>, StoreError> {
        let client = self.client().await?;
        rows::by_id(&client, app, ids.to_vec()).await
    }

    async fn deactivate_gone(
        &self,
        app: &AppId,
        id: &str,
        token: &str,
        since_ms: Option<i64>,
        reason: &str,
    ) -> Result<bool, StoreError> {
        let client = self.client().await?;
        upsert::deactivate_gone(&client, app, id, token, since_ms, reason).await
    }

    async fn device_count(&self, app: &AppId) -> Result<u64, StoreError> {
        let client = self.client().await?;
        let n: i64 = client
            .query_one(
                "SELECT count(*) FROM devices WHERE app = $1",
                &[&app.as_str()],
            )
            .await
            .map_err(pg_error)?
            .try_get(0)
            .map_err(pg_error)?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    async fn upsert_devices(
        &self,
        app: &AppId,
        devices: Vec<DeviceWrite>,
        start: InboxCursor,
    ) -> Result<Vec<(Device, bool)>, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(pg_error)?;
        let out = upsert::upsert(&tx, app, devices, start).await?;
        tx.commit().await.map_err(pg_error)?;
        Ok(out)
    }

    async fn device(
        &self,
        app: &AppId,
        id: &str,
    ) -> Result<Option<(Device, InboxCursor)>, StoreError> {
        let client = self.client().await?;
        let row = client
            .query_opt(
                &format!(
                    "SELECT {} FROM devices WHERE app = $1 AND id = $2",
                    DEVICE_COLUMNS
                ),
                &[&app.as_str(), &id],
            )
            .await
            .map_err(pg_error)?;
        row.as_ref().map(device_of).transpose()
    }

    async fn delete_device(
        &self,
        app: &AppId,
        id: &str,
        log_head: Cursor,
    ) -> Result<bool, StoreError> {
        let head = format!("{}:{}", log_head.epoch, log_head.seq);
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(pg_error)?;
        tx.execute(
            "INSERT INTO device_tombstones (app, id, log_head) VALUES ($1, $2, $3)
             ON CONFLICT (app, id) DO UPDATE SET log_head = excluded.log_head",
            &[&app.as_str(), &id, &head],
        )
        .await
        .map_err(pg_error)?;
        tx.execute(
            "DELETE FROM device_tags WHERE app = $1 AND device = $2",
            &[&app.as_str(), &id],
        )
        .await
        .map_err(pg_error)?;
        let n = tx
            .execute(
                "DELETE FROM devices WHERE app = $1 AND id = $2",
                &[&app.as_str(), &id],
            )
            .await
            .map_err(pg_error)?;
        tx.commit().await.map_err(pg_error)?;
        Ok(n == 1)
    }

    async fn devices(&self, app: &AppId, query: &DeviceQuery) -> Result<Vec<Device>, StoreError> {
        let client = self.client().await?;
        rows::list(&client, app, query).await
    }

    async fn user_devices(&self, app: &AppId, user: &str) -> Result<Vec<String>, StoreError> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT id FROM devices WHERE app = $1 AND user_id = $2 AND active
                 ORDER BY id",
                &[&app.as_str(), &user],
            )
            .await
            .map_err(pg_error)?;
        rows.iter()
            .map(|r| r.try_get(0).map_err(pg_error))
            .collect()
    }

    async fn count_audience(&self, app: &AppId, audience: &Audience) -> Result<u64, StoreError> {
        let client = self.client().await?;
        rows::count_reached(&client, app, audience).await
    }

    async fn ack(&self, app: &AppId, device: &str, ack: &Ack) -> Result<bool, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(pg_error)?;
        let n = tx
            .execute(
                "UPDATE devices SET cursor = $1 WHERE app = $2 AND id = $3 AND cursor = $4",
                &[&ack.to.encode(), &app.as_str(), &device, &ack.from.encode()],
            )
            .await
            .map_err(pg_error)?;
        if n == 0 {
            return Ok(false);
        }
        let count = tx
            .prepare_cached("UPDATE pushes SET acked = acked + 1 WHERE app = $1 AND id = $2")
            .await
            .map_err(pg_error)?;
        for id in &ack.pushes {
            tx.execute(&count, &[&app.as_str(), id])
                .await
                .map_err(pg_error)?;
        }
        tx.commit().await.map_err(pg_error)?;
        Ok(true)
    }

    async fn record_push(
        &self,
        app: &AppId,
        r: &Receipt,
        delivery: Option<&[u8]>,
    ) -> Result<(), StoreError> {
        let client = self.client().await?;
        let targeted = r.targeted.map(|t| i64::try_from(t).unwrap_or(i64::MAX));
        client
            .execute(
                "INSERT INTO pushes (app, id, created, expires, targeted, delivery,
                     delivery_record)
                 VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (app, id) DO NOTHING",
                &[
                    &app.as_str(),
                    &r.id,
                    &r.created,
                    &r.expires,
                    &targeted,
                    &r.delivery,
                    &delivery,
                ],
            )
            .await
            .map_err(pg_error)?;
        Ok(())
    }

    async fn delivery_record(&self, app: &AppId, id: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let client = self.client().await?;
        let row = client
            .query_opt(
                "SELECT delivery_record FROM pushes WHERE app = $1 AND id = $2",
                &[&app.as_str(), &id],
            )
            .await
            .map_err(pg_error)?;
        match row {
            Some(row) => row.try_get(0).map_err(pg_error),
            None => Ok(None),
        }
    }

    async fn set_targeted(&self, app: &AppId, id: &str, targeted: u64) -> Result<(), StoreError> {
        let client = self.client().await?;
        let targeted = i64::try_from(targeted).unwrap_or(i64::MAX);
        client
            .execute(
                "UPDATE pushes SET targeted = $3 WHERE app = $1 AND id = $2",
                &[&app.as_str(), &id, &targeted],
            )
            .await
            .map_err(pg_error)?;
        Ok(())
    }

    async fn receipt(&self, app: &AppId, id: &str) -> Result<Option<Receipt>, StoreError> {
        let client = self.client().await?;
        let row = client
            .query_opt(
                "SELECT created, expires, targeted, acked, delivery FROM pushes
                 WHERE app = $1 AND id = $2",
                &[&app.as_str(), &id],
            )
            .await
            .map_err(pg_error)?;
        let Some(row) = row else {
            return Ok(None);
        };
        let targeted: Option<i64> = row.try_get(2).map_err(pg_error)?;
        let acked: i64 = row.try_get(3).map_err(pg_error)?;
        Ok(Some(Receipt {
            id: id.to_string(),
            created: row.try_get(0).map_err(pg_error)?,
            expires: row.try_get(1).map_err(pg_error)?,
            targeted: targeted.map(|t| u64::try_from(t).unwrap_or(0)),
            delivered: u64::try_from(acked).unwrap_or(0),
            pending: 0,
            expired: 0,
            delivery: row.try_get(4).map_err(pg_error)?,
            providers: None,
            devices: None,
        }))
    }
}
