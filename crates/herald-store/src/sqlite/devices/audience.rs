//! Audience counts in SQLite: how many active devices a broadcast or tag push reaches, read
//! from the tag index without loading every device (the rule is `crate::common::devices`'s).

use herald_core::log::StoreError;
use herald_core::tenant::AppId;
use herald_push::Audience;
use rusqlite::params;

use crate::common::devices::AudienceCount;
use crate::sqlite::backend;

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

/// Devices `audience` reaches, by [`Audience::reaches`], counted from the tag index (see
/// [`AudienceCount`]).
pub(super) fn count_reached(
    conn: &rusqlite::Connection,
    app: &AppId,
    audience: &Audience,
) -> Result<u64, StoreError> {
    debug_assert!(!audience.reaches(false, |_| true));
    let mut count = AudienceCount::new(audience);
    if !count.named().is_empty() {
        let mut stmt = conn
            .prepare_cached(
                "SELECT t.device FROM device_tags t JOIN devices d
                 ON d.app = t.app AND d.id = t.device
                 WHERE t.app = ?1 AND t.tag = ?2 AND d.active = 1",
            )
            .map_err(backend)?;
        for i in 0..count.named().len() {
            let tag = count.named()[i];
            let mut rows = stmt.query(params![app.as_str(), tag]).map_err(backend)?;
            while let Some(row) = rows.next().map_err(backend)? {
                count.holds(row.get(0).map_err(backend)?, i);
            }
        }
    }
    let active = if count.counts_the_rest() {
        count_active(conn, app)?
    } else {
        0
    };
    Ok(count.total(active))
}
