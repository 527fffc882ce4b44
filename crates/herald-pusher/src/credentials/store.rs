//! [`PusherCredentialStore`], the storage trait a store implements for Pusher credentials
//! (table `pusher_credentials`, in the same database as the apps: SQLite on one node,
//! PostgreSQL shared by a cluster's nodes). One set per app; the Pusher app id and the key are
//! each unique in the server. Deleting an app deletes its set.

use async_trait::async_trait;
use herald_core::log::StoreError;
use herald_core::tenant::AppId;

use super::StoredPusherCredentials;

/// Why a set of credentials was not created.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CreatePusherError {
    /// The app has a set already.
    #[error("the app has Pusher credentials already")]
    AppHasCredentials,
    /// Another app's set has this Pusher app id.
    #[error("the Pusher app id is another app's")]
    AppIdTaken,
    /// Another app's set has this key.
    #[error("the Pusher key is another app's")]
    KeyTaken,
    /// The store failed; nothing was created.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Where Pusher credentials are kept.
#[async_trait]
pub trait PusherCredentialStore: Send + Sync {
    /// Stores a new set, unless its app has one or its app id or key is taken (checked and
    /// inserted at once: two creates never both succeed for one app id or key).
    async fn create_pusher_credentials(
        &self,
        new: StoredPusherCredentials,
    ) -> Result<(), CreatePusherError>;

    /// The set of `app`.
    async fn pusher_credentials(
        &self,
        app: &AppId,
    ) -> Result<Option<StoredPusherCredentials>, StoreError>;

    /// The set whose key is `key`.
    async fn pusher_credentials_by_key(
        &self,
        key: &str,
    ) -> Result<Option<StoredPusherCredentials>, StoreError>;

    /// The set whose Pusher app id is `app_id`.
    async fn pusher_credentials_by_app_id(
        &self,
        app_id: &str,
    ) -> Result<Option<StoredPusherCredentials>, StoreError>;

    /// Replaces the secret of `app`'s set with `secret` (sealed) and its previous secret
    /// with `previous` (sealed, and the end of its overlap; `None`: no previous one). Whether
    /// the app had a set.
    async fn replace_pusher_secret(
        &self,
        app: &AppId,
        secret: Vec<u8>,
        previous: Option<(Vec<u8>, i64)>,
    ) -> Result<bool, StoreError>;

    /// Deletes `app`'s set; whether it had one.
    async fn delete_pusher_credentials(&self, app: &AppId) -> Result<bool, StoreError>;
}
