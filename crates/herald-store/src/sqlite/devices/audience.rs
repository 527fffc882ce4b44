//! Audience counts: how many active devices a broadcast or tag push reaches, read from the tag
//! index without loading every device.

use herald_core::log::StoreError;
use herald_core::tenant::AppId;
use herald_push::Audience;
use rusqlite::params;

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

/// Devices `audience` reaches, by [`Audience::reaches`]. An inactive device is never reached,
/// so only active devices are read. Only the tags the audience names decide a match, so it
/// reads just the devices holding one of them (from `device_tags`) and which of those tags each
/// holds; every other active device is reached exactly when a device with none of them is
/// (every device for [`Audience::All`], none for `sports`, all for `NOT muted`), and those are
/// counted, not read.
pub(super) fn count_reached(
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
