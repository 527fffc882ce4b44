//! The SQLite implementation of [`PusherCredentialStore`]: one row per app in
//! `pusher_credentials`, the Pusher app id and the key each unique, the secrets exactly as the
//! server sealed them. Writes run on the writer thread (a create checks and inserts in one
//! transaction, and the writer runs one at a time); reads use the read pool. Deleting an app
//! deletes its row ([`crate::sqlite::tenancy`]). A row is read by `crate::common::pusher`, as
//! on PostgreSQL.

use async_trait::async_trait;
use herald_core::log::StoreError;
use herald_core::tenant::AppId;
use herald_pusher::credentials::store::{CreatePusherError, PusherCredentialStore};
use herald_pusher::credentials::StoredPusherCredentials;
use rusqlite::{params, OptionalExtension};

use crate::common::pusher::{conflict, pusher_credentials_of, PUSHER_COLUMNS};
use crate::sqlite::{backend, SqliteLog};

impl SqliteLog {
    /// The set whose `column` (`app`, `app_id` or `key`) is `value`.
    async fn pusher_where(
        &self,
        column: &'static str,
        value: String,
    ) -> Result<Option<StoredPusherCredentials>, StoreError> {
        self.readers()
            .run(move |conn| {
                let sql =
                    format!("SELECT {PUSHER_COLUMNS} FROM pusher_credentials WHERE {column} = ?1");
                let row = conn
                    .prepare_cached(&sql)
                    .and_then(|mut stmt| {
                        stmt.query_row([&value], |r| Ok(pusher_credentials_of(r)))
                            .optional()
                    })
                    .map_err(backend)?;
                row.transpose()
            })
            .await
    }
}

#[async_trait]
impl PusherCredentialStore for SqliteLog {
    async fn create_pusher_credentials(
        &self,
        new: StoredPusherCredentials,
    ) -> Result<(), CreatePusherError> {
        let outcome = self
            .write(move |tx| {
                let (previous, until) = new.previous_secret.clone().unzip();
                let inserted = tx
                    .execute(
                        "INSERT INTO pusher_credentials
                             (app, app_id, key, secret, previous_secret, previous_until_ms,
                              created_ms)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT DO NOTHING",
                        params![
                            new.app.as_str(),
                            new.app_id,
                            new.key,
                            new.secret,
                            previous,
                            until,
                            new.created_ms
                        ],
                    )
                    .map_err(backend)?;
                if inserted == 1 {
                    return Ok(None);
                }
                let found: Vec<(String, String, String)> = tx
                    .prepare_cached(
                        "SELECT app, app_id, key FROM pusher_credentials
                         WHERE app = ?1 OR app_id = ?2 OR key = ?3",
                    )
                    .and_then(|mut stmt| {
                        stmt.query_map(params![new.app.as_str(), new.app_id, new.key], |r| {
                            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                        })?
                        .collect()
                    })
                    .map_err(backend)?;
                Ok(Some(conflict(&new, &found)))
            })
            .await?;
        outcome.map_or(Ok(()), Err)
    }

    async fn pusher_credentials(
        &self,
        app: &AppId,
    ) -> Result<Option<StoredPusherCredentials>, StoreError> {
        self.pusher_where("app", app.as_str().to_owned()).await
    }

    async fn pusher_credentials_by_key(
        &self,
        key: &str,
    ) -> Result<Option<StoredPusherCredentials>, StoreError> {
        self.pusher_where("key", key.to_owned()).await
    }

    async fn pusher_credentials_by_app_id(
        &self,
        app_id: &str,
    ) -> Result<Option<StoredPusherCredentials>, StoreError> {
        self.pusher_where("app_id", app_id.to_owned()).await
    }

    async fn replace_pusher_secret(
        &self,
        app: &AppId,
        secret: Vec<u8>,
        previous: Option<(Vec<u8>, i64)>,
    ) -> Result<bool, StoreError> {
        let app = app.clone();
        self.write(move |tx| {
            let (previous, until) = previous.unzip();
            let n = tx
                .execute(
                    "UPDATE pusher_credentials SET secret = ?2, previous_secret = ?3,
                         previous_until_ms = ?4
                     WHERE app = ?1",
                    params![app.as_str(), secret, previous, until],
                )
                .map_err(backend)?;
            Ok(n == 1)
        })
        .await
    }

    async fn delete_pusher_credentials(&self, app: &AppId) -> Result<bool, StoreError> {
        let app = app.clone();
        self.write(move |tx| {
            let n = tx
                .execute(
                    "DELETE FROM pusher_credentials WHERE app = ?1",
                    [app.as_str()],
                )
                .map_err(backend)?;
            Ok(n == 1)
        })
        .await
    }
}
