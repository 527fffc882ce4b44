//! Pusher credentials as both backends store them (`pusher_credentials`): the columns a read
//! selects and how a row becomes [`StoredPusherCredentials`], and which uniqueness a create
//! that inserted nothing ran into.

use herald_core::log::StoreError;
use herald_pusher::credentials::store::CreatePusherError;
use herald_pusher::credentials::StoredPusherCredentials;

use super::row::StoredRow;
use super::values::app_id;

/// The columns [`pusher_credentials_of`] reads, in order.
pub(crate) const PUSHER_COLUMNS: &str =
    "app, app_id, key, secret, previous_secret, previous_until_ms, created_ms";

/// A `pusher_credentials` row selected as [`PUSHER_COLUMNS`].
pub(crate) fn pusher_credentials_of(
    row: &impl StoredRow,
) -> Result<StoredPusherCredentials, StoreError> {
    let previous: Option<Vec<u8>> = row.column(4)?;
    let until: Option<i64> = row.column(5)?;
    Ok(StoredPusherCredentials {
        app: app_id(row.column(0)?)?,
        app_id: row.column(1)?,
        key: row.column(2)?,
        secret: row.column(3)?,
        previous_secret: previous.zip(until),
        created_ms: row.column(6)?,
    })
}

/// What a create that inserted nothing (`ON CONFLICT DO NOTHING`) ran into, from the app,
/// app id and key of the row found with any of the new set's: the app's own set first.
pub(crate) fn conflict(
    new: &StoredPusherCredentials,
    found: &[(String, String, String)],
) -> CreatePusherError {
    if found.iter().any(|(app, _, _)| app == new.app.as_str()) {
        CreatePusherError::AppHasCredentials
    } else if found.iter().any(|(_, app_id, _)| app_id == &new.app_id) {
        CreatePusherError::AppIdTaken
    } else if found.iter().any(|(_, _, key)| key == &new.key) {
        CreatePusherError::KeyTaken
    } else {
        CreatePusherError::Store(StoreError::failed(
            "a Pusher credentials insert conflicted with no row",
        ))
    }
}
