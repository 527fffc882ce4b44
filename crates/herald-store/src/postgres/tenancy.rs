//! [`Tenancy`] on PostgreSQL: apps, keys, limits and usage, with the SQLite implementation's
//! semantics (`crate::sqlite::tenancy`; rows read by `crate::common::tenancy`). Each write is one
//! transaction on a pooled connection. Usage counters are added in the database (`published =
//! published + $n`), so several nodes writing their own counts add up. Deleting an app removes
//! everything kept for it by app in one transaction; its channels, messages and retained
//! messages go after it, a step at a time (`common::app_purge`).

use async_trait::async_trait;
use herald_core::log::StoreError;
use herald_core::revoked::TokenRevocation;
use herald_core::tenancy::{App, AppLimits, KeyInfo, Tenancy, Usage};
use herald_core::tenant::AppId;
use herald_core::token_keys::AppTokenKeys;

use super::{pg_error, PostgresStore};
use crate::common::tenancy::{app_of, is_key_id, key_of, APP_TABLES};
use crate::common::values::to_json;

/// A counter as an SQL integer (counts beyond `i64::MAX` are clamped).
fn count(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// A stored counter (a negative one reads as 0).
fn counted(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

#[async_trait]
impl Tenancy for PostgresStore {
    async fn create_app(&self, app: &App) -> Result<bool, StoreError> {
        let client = self.client().await?;
        let n = client
            .execute(
                "INSERT INTO apps (id, name, token_secret, limits, created)
                 VALUES ($1, $2, $3, $4, $5) ON CONFLICT (id) DO NOTHING",
                &[
                    &app.id.as_str(),
                    &app.name,
                    &app.token_secret,
                    &to_json(&app.limits),
                    &app.created,
                ],
            )
            .await
            .map_err(pg_error)?;
        Ok(n == 1)
    }

    async fn apps(&self) -> Result<Vec<App>, StoreError> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT id, name, token_secret, created, limits FROM apps
                 WHERE NOT deleted ORDER BY id",
                &[],
            )
            .await
            .map_err(pg_error)?;
        rows.iter().map(app_of).collect()
    }

    async fn app(&self, id: &AppId) -> Result<Option<App>, StoreError> {
        let client = self.client().await?;
        let row = client
            .query_opt(
                "SELECT id, name, token_secret, created, limits FROM apps
                 WHERE id = $1 AND NOT deleted",
                &[&id.as_str()],
            )
            .await
            .map_err(pg_error)?;
        row.as_ref().map(app_of).transpose()
    }

    async fn set_limits(&self, id: &AppId, limits: AppLimits) -> Result<bool, StoreError> {
        let client = self.client().await?;
        let n = client
            .execute(
                "UPDATE apps SET limits = $2 WHERE id = $1 AND NOT deleted",
                &[&id.as_str(), &to_json(&limits)],
            )
            .await
            .map_err(pg_error)?;
        Ok(n == 1)
    }

    async fn delete_app(&self, id: &AppId) -> Result<bool, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(pg_error)?;
        let app = id.as_str();
        for table in APP_TABLES {
            let sql = format!("DELETE FROM {table} WHERE app = $1");
            tx.execute(&sql, &[&app]).await.map_err(pg_error)?;
        }
        let n = tx
            .execute(
                "UPDATE apps SET deleted = TRUE, token_secret = NULL
                 WHERE id = $1 AND NOT deleted",
                &[&app],
            )
            .await
            .map_err(pg_error)?;
        tx.commit().await.map_err(pg_error)?;
        if n == 1 {
            // Its channels, messages and retained messages go a step at a time.
            self.want_purge();
        }
        Ok(n == 1)
    }

    async fn add_key(&self, key: &KeyInfo) -> Result<(), StoreError> {
        let client = self.client().await?;
        client
            .execute(
                "INSERT INTO api_keys (hash, label, created, app) VALUES ($1, $2, $3, $4)
                 ON CONFLICT (hash) DO NOTHING",
                &[&key.hash, &key.label, &key.created, &key.app.as_str()],
            )
            .await
            .map_err(pg_error)?;
        Ok(())
    }

    async fn remove_key(&self, app: &AppId, key_id: &str) -> Result<bool, StoreError> {
        if !is_key_id(key_id) {
            return Ok(false);
        }
        let client = self.client().await?;
        let n = client
            .execute(
                "DELETE FROM api_keys WHERE app = $1 AND substr(hash, 1, 12) = $2",
                &[&app.as_str(), &key_id],
            )
            .await
            .map_err(pg_error)?;
        Ok(n > 0)
    }

    async fn keys(&self) -> Result<Vec<KeyInfo>, StoreError> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT app, hash, coalesce(label, ''), coalesce(created, 0) FROM api_keys
                 ORDER BY app, created",
                &[],
            )
            .await
            .map_err(pg_error)?;
        rows.iter().map(key_of).collect()
    }

    async fn add_usage(&self, app: &AppId, d: Usage) -> Result<(), StoreError> {
        let client = self.client().await?;
        client
            .execute(
                "INSERT INTO usage (app, published, deliveries, acks, peak_connections)
                 VALUES ($1, $2, $3, $4, $5)
                 ON CONFLICT (app) DO UPDATE SET
                     published = usage.published + excluded.published,
                     deliveries = usage.deliveries + excluded.deliveries,
                     acks = usage.acks + excluded.acks,
                     peak_connections = GREATEST(usage.peak_connections,
                                                 excluded.peak_connections)",
                &[
                    &app.as_str(),
                    &count(d.published),
                    &count(d.deliveries),
                    &count(d.acks),
                    &count(d.peak_connections),
                ],
            )
            .await
            .map_err(pg_error)?;
        Ok(())
    }

    async fn usage(&self, app: &AppId) -> Result<Usage, StoreError> {
        let client = self.client().await?;
        let row = client
            .query_opt(
                "SELECT published, deliveries, acks, peak_connections FROM usage
                 WHERE app = $1",
                &[&app.as_str()],
            )
            .await
            .map_err(pg_error)?;
        let Some(row) = row else {
            return Ok(Usage::default());
        };
        Ok(Usage {
            published: counted(row.try_get(0).map_err(pg_error)?),
            deliveries: counted(row.try_get(1).map_err(pg_error)?),
            acks: counted(row.try_get(2).map_err(pg_error)?),
            peak_connections: counted(row.try_get(3).map_err(pg_error)?),
        })
    }

    async fn revoke_tokens(&self, revocation: &TokenRevocation) -> Result<(), StoreError> {
        super::revocations::revoke(self, revocation).await
    }

    async fn token_revocations(&self) -> Result<Vec<TokenRevocation>, StoreError> {
        super::revocations::list(self).await
    }

    async fn token_keys(&self, id: &AppId) -> Result<Option<AppTokenKeys>, StoreError> {
        super::token_keys::get(self, id).await
    }

    async fn all_token_keys(&self) -> Result<Vec<(AppId, AppTokenKeys)>, StoreError> {
        super::token_keys::list(self).await
    }

    async fn set_token_keys(&self, id: &AppId, keys: &AppTokenKeys) -> Result<bool, StoreError> {
        super::token_keys::set(self, id, keys).await
    }
}
