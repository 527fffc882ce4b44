//! [`PusherCredentialStore`] on PostgreSQL: one row per app in `pusher_credentials`, the
//! Pusher app id and the key each unique, with the SQLite implementation's semantics
//! (`crate::sqlite::pusher`). A create inserts `ON CONFLICT DO NOTHING`, so two nodes
//! creating at once never both succeed for one app, app id or key; when it inserted nothing
//! it reads which of the three was taken. Deleting an app deletes its row.

use async_trait::async_trait;
use herald_core::log::StoreError;
use herald_core::tenant::AppId;
use herald_pusher::credentials::store::{CreatePusherError, PusherCredentialStore};
use herald_pusher::credentials::StoredPusherCredentials;

use super::{pg_error, PostgresStore};
use crate::common::pusher::{conflict, pusher_credentials_of, PUSHER_COLUMNS};

impl PostgresStore {
    /// The set whose `column` (`app`, `app_id` or `key`) is `value`.
    async fn pusher_where(
        &self,
        column: &'static str,
        value: &str,
    ) -> Result<Option<StoredPusherCredentials>, StoreError> {
        let client = self.client().await?;
        let sql = format!("SELECT {PUSHER_COLUMNS} FROM pusher_credentials WHERE {column} = $1");
        let row = client.query_opt(&sql, &[&value]).await.map_err(pg_error)?;
        row.as_ref().map(pusher_credentials_of).transpose()
    }
}

#[async_trait]
impl PusherCredentialStore for PostgresStore {
    async fn create_pusher_credentials(
        &self,
        new: StoredPusherCredentials,
    ) -> Result<(), CreatePusherError> {
        let client = self.client().await?;
        let (previous, until) = new.previous_secret.clone().unzip();
        let inserted = client
            .execute(
                "INSERT INTO pusher_credentials
                     (app, app_id, key, secret, previous_secret, previous_until_ms, created_ms)
                 VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING",
                &[
                    &new.app.as_str(),
                    &new.app_id,
                    &new.key,
                    &new.secret,
                    &previous,
                    &until,
                    &new.created_ms,
                ],
            )
            .await
            .map_err(pg_error)?;
        if inserted == 1 {
            return Ok(());
        }
        let rows = client
            .query(
                "SELECT app, app_id, key FROM pusher_credentials
                 WHERE app = $1 OR app_id = $2 OR key = $3",
                &[&new.app.as_str(), &new.app_id, &new.key],
            )
            .await
            .map_err(pg_error)?;
        let found: Vec<(String, String, String)> = rows
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2)))
            .collect();
        Err(conflict(&new, &found))
    }

    async fn pusher_credentials(
        &self,
        app: &AppId,
    ) -> Result<Option<StoredPusherCredentials>, StoreError> {
        self.pusher_where("app", app.as_str()).await
    }

    async fn pusher_credentials_by_key(
        &self,
        key: &str,
    ) -> Result<Option<StoredPusherCredentials>, StoreError> {
        self.pusher_where("key", key).await
    }

    async fn pusher_credentials_by_app_id(
        &self,
        app_id: &str,
    ) -> Result<Option<StoredPusherCredentials>, StoreError> {
        self.pusher_where("app_id", app_id).await
    }

    async fn replace_pusher_secret(
        &self,
        app: &AppId,
        secret: Vec<u8>,
        previous: Option<(Vec<u8>, i64)>,
    ) -> Result<bool, StoreError> {
        let client = self.client().await?;
        let (previous, until) = previous.unzip();
        let n = client
            .execute(
                "UPDATE pusher_credentials SET secret = $2, previous_secret = $3,
                     previous_until_ms = $4
                 WHERE app = $1",
                &[&app.as_str(), &secret, &previous, &until],
            )
            .await
            .map_err(pg_error)?;
        Ok(n == 1)
    }

    async fn delete_pusher_credentials(&self, app: &AppId) -> Result<bool, StoreError> {
        let client = self.client().await?;
        let n = client
            .execute(
                "DELETE FROM pusher_credentials WHERE app = $1",
                &[&app.as_str()],
            )
            .await
            .map_err(pg_error)?;
        Ok(n == 1)
    }
}
