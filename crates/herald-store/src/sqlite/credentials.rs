//! The SQLite implementation of [`CredentialStore`]: one row per app and provider in `credentials`,
//! holding the sealed secret exactly as the server sealed it (the store never sees plaintext) and
//! the public part. Writes run on the writer thread; reads use the read pool. Deleting an app
//! deletes its rows ([`crate::sqlite::tenancy`]). A row is read by `crate::common::credentials`, as
//! on PostgreSQL.

use async_trait::async_trait;
use herald_core::log::StoreError;
use herald_core::tenant::AppId;
use herald_push::credentials::{CredentialStore, StoredCredentials};
use herald_push::device::Platform;
use rusqlite::{params, OptionalExtension};

use crate::common::credentials::credentials_of;
use crate::sqlite::{backend, SqliteLog};

#[async_trait]
impl CredentialStore for SqliteLog {
    async fn put_credentials(
        &self,
        app: &AppId,
        credentials: StoredCredentials,
    ) -> Result<(), StoreError> {
        let app = app.clone();
        self.write(move |tx| {
            tx.execute(
                "INSERT INTO credentials (app, provider, sealed, public, updated)
                 VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (app, provider) DO UPDATE SET sealed = excluded.sealed,
                     public = excluded.public, updated = excluded.updated",
                params![
                    app.as_str(),
                    credentials.provider.as_str(),
                    credentials.sealed,
                    credentials.public,
                    credentials.updated_ms
                ],
            )
            .map_err(backend)?;
            Ok(())
        })
        .await
    }

    async fn credentials(
        &self,
        app: &AppId,
        provider: Platform,
    ) -> Result<Option<StoredCredentials>, StoreError> {
        let app = app.clone();
        self.readers()
            .run(move |conn| {
                let row = conn
                    .prepare_cached(
                        "SELECT provider, sealed, public, updated FROM credentials
                         WHERE app = ?1 AND provider = ?2",
                    )
                    .and_then(|mut stmt| {
                        stmt.query_row(params![app.as_str(), provider.as_str()], |r| {
                            Ok(credentials_of(r))
                        })
                        .optional()
                    })
                    .map_err(backend)?;
                row.transpose()
            })
            .await
    }

    async fn all_credentials(&self, app: &AppId) -> Result<Vec<StoredCredentials>, StoreError> {
        let app = app.clone();
        self.readers()
            .run(move |conn| {
                let rows: Vec<Result<StoredCredentials, StoreError>> = conn
                    .prepare_cached(
                        "SELECT provider, sealed, public, updated FROM credentials
                         WHERE app = ?1 ORDER BY provider",
                    )
                    .and_then(|mut stmt| {
                        stmt.query_map([app.as_str()], |r| Ok(credentials_of(r)))?
                            .collect()
                    })
                    .map_err(backend)?;
                rows.into_iter().collect()
            })
            .await
    }

    async fn delete_credentials(
        &self,
        app: &AppId,
        provider: Platform,
    ) -> Result<bool, StoreError> {
        let app = app.clone();
        self.write(move |tx| {
            let n = tx
                .execute(
                    "DELETE FROM credentials WHERE app = ?1 AND provider = ?2",
                    params![app.as_str(), provider.as_str()],
                )
                .map_err(backend)?;
            Ok(n == 1)
        })
        .await
    }
}
