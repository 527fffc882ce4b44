//! An app's provider credentials: what an admin gives ([`input`]), how they are sealed before
//! the store sees them ([`sealer`]), and where they are kept ([`CredentialStore`]): the store
//! holds only ciphertext and the public part anyone may read (the VAPID public key, the APNs
//! key id).

pub mod input;
pub mod sealer;

use async_trait::async_trait;
use herald_core::log::StoreError;
use herald_core::tenant::AppId;

use crate::device::Platform;

/// One provider's credentials for one app, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredCredentials {
    /// The provider.
    pub provider: Platform,
    /// The sealed secret (nonce and ciphertext).
    pub sealed: Vec<u8>,
    /// What may be shown: JSON with no secret in it.
    pub public: String,
    /// Last change, milliseconds since the Unix epoch.
    pub updated_ms: i64,
}

/// Provider credentials per app and provider; deleting an app deletes them.
#[async_trait]
pub trait CredentialStore: Send + Sync {
    /// Sets (replaces) an app's credentials for `credentials.provider`.
    async fn put_credentials(
        &self,
        app: &AppId,
        credentials: StoredCredentials,
    ) -> Result<(), StoreError>;
    /// An app's credentials for one provider.
    async fn credentials(
        &self,
        app: &AppId,
        provider: Platform,
    ) -> Result<Option<StoredCredentials>, StoreError>;
    /// Every provider an app has credentials for.
    async fn all_credentials(&self, app: &AppId) -> Result<Vec<StoredCredentials>, StoreError>;
    /// Removes an app's credentials for one provider; `false` if there were none.
    async fn delete_credentials(&self, app: &AppId, provider: Platform)
        -> Result<bool, StoreError>;
}
