//! [`HooksError`], what the `Hooks` service answers when it does not do what
//! it was asked. The API maps each to an HTTP status and an error code (bad input and a
//! refused destination: 400; no such endpoint: 404; too many endpoints: 409; the store: 503).

use herald_core::log::StoreError;
use herald_providers::destination::DestinationError;

/// Why a webhook operation was not done.
#[derive(Debug, Clone, thiserror::Error)]
pub enum HooksError {
    /// A field of the request is wrong (its name, and what is wrong with it).
    #[error("{field}: {message}")]
    BadInput {
        /// The field as the request names it (`url`, `events`, `channels[2]`).
        field: String,
        /// What is wrong.
        message: String,
    },
    /// The endpoint's URL may not be reached: its host is, or resolves to, an address the
    /// operator's rule refuses (the same rule as Web Push endpoints).
    #[error("url: {0}")]
    Refused(#[from] DestinationError),
    /// No such endpoint (or dead letter) in the app.
    #[error("no such webhook endpoint")]
    NotFound,
    /// The app already has as many endpoints as it may.
    #[error("an app may have at most {max} webhook endpoints; delete one first")]
    TooMany {
        /// The most an app may have.
        max: usize,
    },
    /// The store failed; nothing was done.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<crate::store::CreateEndpointError> for HooksError {
    fn from(e: crate::store::CreateEndpointError) -> Self {
        match e {
            crate::store::CreateEndpointError::TooMany { max } => HooksError::TooMany { max },
            crate::store::CreateEndpointError::Store(e) => HooksError::Store(e),
        }
    }
}

impl HooksError {
    /// A [`HooksError::BadInput`] for `field`.
    pub fn bad_input(field: impl Into<String>, message: impl Into<String>) -> Self {
        HooksError::BadInput {
            field: field.into(),
            message: message.into(),
        }
    }
}
