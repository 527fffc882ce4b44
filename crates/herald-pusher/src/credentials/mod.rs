//! An app's Pusher credentials: the Pusher app id, the key and the secret (with the secret
//! being rotated out and the end of its overlap), as stored ([`StoredPusherCredentials`],
//! the secret sealed), kept ([`store::PusherCredentialStore`], implemented by herald-store on
//! both backends), managed ([`service::PusherCredentials`], what the admin API calls) and
//! cached on each node by key and by Pusher app id ([`cache`]).
//!
//! - [`input`]: the values an operator gives or Herald generates, checked.
//! - [`store`]: the storage trait and what creating can run into.
//! - [`service`]: create (generated or imported), show, rotate with an overlap, delete; the
//!   lookups the HTTP API and the client protocol make.
//! - [`cache`]: the credentials this node has opened, dropped by the bus's cache events.
//! - [`error`]: [`PusherError`], what the service answers when it does not do what it was
//!   asked.

pub mod cache;
pub mod error;
pub mod input;
pub mod service;
pub mod store;

use herald_core::tenant::AppId;
use herald_push::credentials::sealer::{SealError, Sealer};

pub use error::PusherError;

/// One app's Pusher credentials as the store keeps them (the secrets sealed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredPusherCredentials {
    /// The Herald app they belong to (one set per app).
    pub app: AppId,
    /// The Pusher app id (unique in the server): `/apps/{app_id}/...` of the HTTP API.
    pub app_id: String,
    /// The key (unique in the server): `auth_key`, and the client's `/app/{key}`.
    pub key: String,
    /// The secret, sealed with the app as associated data ([`seal_secret`]).
    pub secret: Vec<u8>,
    /// The secret it replaced, sealed, and until when it is still accepted (milliseconds
    /// since the Unix epoch).
    pub previous_secret: Option<(Vec<u8>, i64)>,
    /// Created, milliseconds since the Unix epoch.
    pub created_ms: i64,
}

fn associated(app: &AppId) -> Vec<u8> {
    format!("herald-pusher-secret:{}", app.as_str()).into_bytes()
}

/// `secret` sealed for `app`: sealed for one app, it does not open for another.
pub fn seal_secret(sealer: &Sealer, app: &AppId, secret: &[u8]) -> Vec<u8> {
    sealer.seal_bound(&associated(app), secret)
}

/// A sealed secret of `app`, opened.
pub fn open_secret(sealer: &Sealer, app: &AppId, sealed: &[u8]) -> Result<Vec<u8>, SealError> {
    sealer.open_bound(&associated(app), sealed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use herald_push::credentials::sealer::generate_key;

    #[test]
    fn a_secret_opens_for_its_app_only() {
        let sealer = Sealer::new(&generate_key()).unwrap();
        let shop = AppId::parse("shop").unwrap();
        let sealed = seal_secret(&sealer, &shop, b"7ad3773142a6692b25b8");
        assert!(!sealed.windows(20).any(|w| w == b"7ad3773142a6692b25b8"));
        assert_eq!(
            open_secret(&sealer, &shop, &sealed).unwrap(),
            b"7ad3773142a6692b25b8"
        );
        assert!(open_secret(&sealer, &AppId::default_app(), &sealed).is_err());
    }
}
