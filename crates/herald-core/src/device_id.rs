//! Device ids: the grammar of the id a device token names and a device's own log is keyed by.
//! Core checks it where tokens are verified and stored log names are read back; devices
//! themselves (registration, tags, inbox cursors) live in `herald-push`.

pub use herald_proto::token::{check_device_id, MAX_DEVICE_ID_LEN};
