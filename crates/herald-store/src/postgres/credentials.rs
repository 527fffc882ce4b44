//! [`CredentialStore`] on PostgreSQL: one row per app and provider in `credentials`, holding
//! the sealed secret exactly as the server sealed it (the store never sees plaintext) and the
//! public part, as SQLite does (`crate::sqlite::credentials`). Deleting an app deletes its rows.

use async_trait::async_trait;
use herald_core::log::StoreError;
use herald_core::tenant::AppId;
use herald_push::credentials::{CredentialStore, StoredCredentials};
use herald_push::device::Platform;

use super::{pg_error, PostgresStore};
use crate::common::credentials::credentials_of;

#[async_trait]
impl CredentialStore for PostgresStore {
    async fn put_credentials(
        &self,
        app: &AppId,
        credentials: StoredCredentials,
    ) -> Result<(), StoreError> {
        let client = self.client().await?;
        client
            .execute(
                "INSERT INTO credentials (app, provider, sealed, public, updated)
                 VALUES ($1, $2, $3, $4, $5)
                 ON CONFLICT (app, provider) DO UPDATE SET sealed = excluded.sealed,
                     public = excluded.public, updated = excluded.updated",
                &[
                    &app.as_str(),
                    &credentials.provider.as_str(),
                    &credentials.sealed,
                    &credentials.public,
                    &credentials.updated_ms,
                ],
            )
            .await
            .map_err(pg_error)?;
        Ok(())
    }

    async fn credentials(
        &self,
        app: &AppId,
        provider: Platform,
    ) -> Result<Option<StoredCredentials>, StoreError> {
        let client = self.client().await?;
        let row = client
            .query_opt(
                "SELECT provider, sealed, public, updated FROM credentials
                 WHERE app = $1 AND provider = $2",
                &[&app.as_str(), &provider.as_str()],
            )
            .await
            .map_err(pg_error)?;
        row.as_ref().map(credentials_of).transpose()
    }

    async fn all_credentials(&self, app: &AppId) -> Result<Vec<StoredCredentials>, StoreError> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT provider, sealed, public, updated FROM credentials
                 WHERE app = $1 ORDER BY provider",
                &[&app.as_str()],
            )
            .await
            .map_err(pg_error)?;
        rows.iter().map(credentials_of).collect()
    }

    async fn delete_credentials(
        &self,
        app: &AppId,
        provider: Platform,
    ) -> Result<bool, StoreError> {
        let client = self.client().await?;
        let n = client
            .execute(
                "DELETE FROM credentials WHERE app = $1 AND provider = $2",
                &[&app.as_str(), &provider.as_str()],
            )
            .await
            .map_err(pg_error)?;
        Ok(n == 1)
    }
}
