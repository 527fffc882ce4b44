//! Reading devices (a row becomes a [`Device`] in `crate::common::devices`): listing by
//! user, tag or everything (optionally only provider-reachable devices), lookup by ids, and
//! audience counts read from the tag index (as SQLite's `devices::audience` counts them).

use herald_core::log::StoreError;
use herald_core::tenant::AppId;
use herald_push::device::{Device, InboxCursor};
use herald_push::registry::DeviceQuery;
use herald_push::Audience;
use tokio_postgres::types::ToSql;

use crate::common::devices::{device_of, AudienceCount, DEVICE_COLUMNS};
use crate::common::qualified;
use crate::postgres::{pg_error, sql_limit};

/// What makes a device reachable through its provider, for columns prefixed by `p`.
fn reachable(p: &str) -> String {
    format!(" AND {p}active AND {p}platform <> 'herald' AND {p}token IS NOT NULL")
}

/// Devices of `app` by `query`, in id order.
pub(super) async fn list(
    client: &impl deadpool_postgres::GenericClient,
    app: &AppId,
    q: &DeviceQuery,
) -> Result<Vec<Device>, StoreError> {
    let after = q.after.clone().unwrap_or_default();
    let limit = sql_limit(q.limit);
    let only_reachable = |p: &str| {
        if q.provider_reachable {
            reachable(p)
        } else {
            String::new()
        }
    };
    let (sql, arg): (String, Option<&String>) = match (&q.user, &q.tag) {
        (Some(user), _) => (
            format!(
                "SELECT {DEVICE_COLUMNS} FROM devices WHERE app = $1 AND user_id = $4
                 AND id > $2{} ORDER BY id LIMIT $3",
                only_reachable("")
            ),
            Some(user),
        ),
        (None, Some(tag)) => (
            format!(
                "SELECT {} FROM device_tags t JOIN devices d
                   ON d.app = t.app AND d.id = t.device
                 WHERE t.app = $1 AND t.tag = $4 AND t.device > $2{}
                 ORDER BY t.device LIMIT $3",
                qualified(DEVICE_COLUMNS, "d"),
                only_reachable("d.")
            ),
            Some(tag),
        ),
        (None, None) => (
            format!(
                "SELECT {DEVICE_COLUMNS} FROM devices WHERE app = $1 AND id > $2{}
                 ORDER BY id LIMIT $3",
                only_reachable("")
            ),
            None,
        ),
    };
    let app = app.as_str();
    let mut params: Vec<&(dyn ToSql + Sync)> = vec![&app, &after, &limit];
    if let Some(arg) = &arg {
        params.push(arg);
    }
    let rows = client.query(&sql, &params).await.map_err(pg_error)?;
    rows.iter().map(|r| device_of(r).map(|(d, _)| d)).collect()
}

/// Devices of `app` with the given ids (unknown ones left out), in id order.
pub(super) async fn by_id(
    client: &impl deadpool_postgres::GenericClient,
    app: &AppId,
    mut ids: Vec<String>,
) -> Result<Vec<(Device, InboxCursor)>, StoreError> {
    ids.sort_unstable();
    ids.dedup();
    let rows = client
        .query(
            &format!(
                "SELECT {DEVICE_COLUMNS} FROM devices WHERE app = $1 AND id = ANY($2)
                 ORDER BY id"
            ),
            &[&app.as_str(), &ids],
        )
        .await
        .map_err(pg_error)?;
    rows.iter().map(device_of).collect()
}

/// Devices `audience` reaches, by [`Audience::reaches`], counted from the tag index (see
/// [`AudienceCount`]).
pub(super) async fn count_reached(
    client: &impl deadpool_postgres::GenericClient,
    app: &AppId,
    audience: &Audience,
) -> Result<u64, StoreError> {
    let mut count = AudienceCount::new(audience);
    for i in 0..count.named().len() {
        let tag = count.named()[i];
        let rows = client
            .query(
                "SELECT t.device FROM device_tags t JOIN devices d
                 ON d.app = t.app AND d.id = t.device
                 WHERE t.app = $1 AND t.tag = $2 AND d.active",
                &[&app.as_str(), &tag],
            )
            .await
            .map_err(pg_error)?;
        for row in rows {
            count.holds(row.try_get(0).map_err(pg_error)?, i);
        }
    }
    let mut active = 0;
    if count.counts_the_rest() {
        let n: i64 = client
            .query_one(
                "SELECT count(*) FROM devices WHERE app = $1 AND active",
                &[&app.as_str()],
            )
            .await
            .map_err(pg_error)?
            .try_get(0)
            .map_err(pg_error)?;
        active = u64::try_from(n).unwrap_or(0);
    }
    Ok(count.total(active))
}
