//! Device ids: the grammar of the id a device token names and a device's own log is keyed by.
//! Core checks it where tokens are verified and stored log names are read back; devices
//! themselves (registration, tags, inbox cursors) live in `herald-push`.

use crate::error::{ErrorCode, HeraldError};

/// Longest device id, in bytes.
pub const MAX_DEVICE_ID_LEN: usize = 64;

/// Checks a device id: 1 to 64 bytes of `A-Z a-z 0-9 _ - . :`.
pub fn check_device_id(id: &str) -> Result<(), HeraldError> {
    let ok = !id.is_empty()
        && id.len() <= MAX_DEVICE_ID_LEN
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':'));
    if ok {
        Ok(())
    } else {
        Err(HeraldError::new(
            ErrorCode::DeviceInvalid,
            format!(
                "invalid device id {:?}: use 1 to {MAX_DEVICE_ID_LEN} of A-Z a-z 0-9 _ - . :",
                id.chars().take(80).collect::<String>()
            ),
        ))
    }
}
