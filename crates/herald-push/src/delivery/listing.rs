//! A push's provider results per device, as `GET /v1/push/{id}?devices=true` lists them.
//!
//! A device push has a send job per device, and the list is those jobs. A broadcast sends its
//! pages directly and writes no job row for a device the provider accepted (not in doubt)
//! (`delivery::broadcast`); every other result has a row. So once a broadcast's expansion has
//! finished, a device with no row that the push reached is listed as `done` / `accepted` with
//! one attempt, derived from the devices table: a device that matches the push's audience now,
//! still has a provider token, and was registered before the push was accepted. While the
//! expansion is still running, only devices with a row are listed (the rest are not known yet).
//! Derived from the devices table as it stands now: a device deactivated or whose tags changed
//! since the push is listed as it stands now (left out when no longer in the audience), and a
//! device registered after the push, which the expansion may have reached, is not listed.

use herald_core::log::StoreError;
use herald_core::tenant::AppId;
use herald_proto::SendResult;

use crate::delivery::worker::Deliverer;
use crate::jobs::DeviceJob;
use crate::registry::DeviceQuery;

/// Which push a listing is for.
#[derive(Debug, Clone, Copy)]
pub struct ListedPush<'a> {
    /// The app.
    pub app: &'a AppId,
    /// The push id.
    pub push: &'a str,
    /// When the push was accepted, milliseconds since the Unix epoch (its receipt's `created`).
    pub created_ms: i64,
    /// Whether its expansion is still running (the receipt's `providers.expanding`).
    pub expanding: bool,
}

impl Deliverer {
    /// The push's provider result per device, in device order after `after`, at most `limit`:
    /// its job rows, and for a broadcast whose expansion has finished the devices it reached
    /// that have no row, as `accepted` (see the module's description).
    pub async fn device_listing(
        &self,
        listed: ListedPush<'_>,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<DeviceJob>, StoreError> {
        let limit = limit.max(1);
        let rows = self
            .queue
            .device_jobs(listed.app, listed.push, after, limit)
            .await?;
        if listed.expanding {
            return Ok(rows);
        }
        let Some(record) = self.record(listed.app, listed.push).await? else {
            return Ok(rows);
        };
        if !record.broadcast {
            return Ok(rows);
        }
        // A damaged audience derives nothing: only the rows are known.
        let Ok(audience) = &record.audience else {
            return Ok(rows);
        };
        // Rows are known up to the last one read when the read was full, devices up to the
        // last one scanned: the list is the union, up to the nearer of the two.
        let rows_known_until = (rows.len() == limit).then(|| rows[rows.len() - 1].device.clone());
        let mut derived = Vec::new();
        let mut cursor = after.map(str::to_string);
        'scan: loop {
            let query = DeviceQuery {
                after: cursor.clone(),
                limit,
                provider_reachable: true,
                ..DeviceQuery::default()
            };
            let page = self.registry.devices(listed.app, &query).await?;
            for device in &page {
                if rows_known_until
                    .as_ref()
                    .is_some_and(|known| device.id > *known)
                {
                    break 'scan;
                }
                let reached = audience.reaches_tags(device.active, &device.tags)
                    && device.created <= listed.created_ms;
                let has_row = rows.binary_search_by(|r| r.device.cmp(&device.id)).is_ok();
                if reached && !has_row {
                    derived.push(DeviceJob {
                        device: device.id.clone(),
                        provider: device.platform,
                        state: "done".into(),
                        result: Some(SendResult::Accepted.to_string()),
                        attempts: 1,
                        in_doubt: false,
                    });
                    if derived.len() >= limit {
                        break 'scan;
                    }
                }
            }
            match page.last() {
                Some(last) if page.len() >= limit => cursor = Some(last.id.clone()),
                _ => break,
            }
        }
        let mut listed_devices = rows;
        listed_devices.extend(derived);
        listed_devices.sort_by(|a, b| a.device.cmp(&b.device));
        listed_devices.truncate(limit);
        Ok(listed_devices)
    }
}
