//! [`PusherError`], what the credentials service answers when it does not do what it was
//! asked. The API maps each to an HTTP status and an error code (bad input: 400; no
//! credentials: 404; already there or taken: 409; the store: 503).

use herald_core::log::StoreError;

/// Why a credentials operation was not done.
#[derive(Debug, Clone, thiserror::Error)]
pub enum PusherError {
    /// A field of the request is wrong (its name, and what is wrong with it).
    #[error("{field}: {message}")]
    BadInput {
        /// The field as the request names it (`app_id`, `key`, `secret`).
        field: String,
        /// What is wrong.
        message: String,
    },
    /// The app has no Pusher credentials.
    #[error("the app has no Pusher credentials")]
    NotFound,
    /// The app has credentials already, or another app has the app id or key asked for.
    #[error("{0}")]
    Conflict(String),
    /// A stored secret does not open with this server's credentials key (the key changed).
    #[error("the app's Pusher secret does not open with this server's credentials_key")]
    Sealed,
    /// The store failed; nothing was done.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl PusherError {
    /// A [`PusherError::BadInput`] for `field`.
    pub fn bad_input(field: impl Into<String>, message: impl Into<String>) -> Self {
        PusherError::BadInput {
            field: field.into(),
            message: message.into(),
        }
    }
}
