//! The SQLite implementation of [`Tenancy`]: apps, keys, limits and usage. Writes run on the writer
//! thread (one transaction each, durable like appends); reads use the read pool. Deleting an app
//! removes its devices and receipts ([`crate::sqlite::devices`]), its provider jobs
//! ([`crate::sqlite::jobs`]) and its provider credentials ([`crate::sqlite::credentials`]) in the
//! same transaction; its channels, messages and retained messages go after it, a step at a
//! time (`common::app_purge`). How a row becomes an app or a key is shared with PostgreSQL
//! (`crate::common::tenancy`).

use async_trait::async_trait;
use herald_core::log::StoreError;
use herald_core::revoked::TokenRevocation;
use herald_core::tenancy::{App, AppLimits, KeyInfo, Tenancy, Usage};
use herald_core::tenant::AppId;
use herald_core::token_keys::AppTokenKeys;
use rusqlite::{params, OptionalExtension};

use crate::common::tenancy::{app_of, is_key_id, key_of, APP_TABLES};
use crate::common::values::to_json;
use crate::sqlite::{backend, SqliteLog};

#[async_trait]
impl Tenancy for SqliteLog {
    async fn create_app(&self, app: &App) -> Result<bool, StoreError> {
        let app = app.clone();
        self.write(move |tx| {
            let n = tx
                .execute(
                    "INSERT OR IGNORE INTO apps (id, name, token_secret, limits, created)
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                    params![
                        app.id.as_str(),
                        app.name,
                        app.token_secret,
                        to_json(&app.limits),
                        app.created
                    ],
                )
                .map_err(backend)?;
            Ok(n == 1)
        })
        .await
    }

    async fn apps(&self) -> Result<Vec<App>, StoreError> {
        self.readers()
            .run(|conn| {
                let mut stmt = conn
                    .prepare_cached(
                        "SELECT id, name, token_secret, created, limits FROM apps
                         WHERE deleted = 0 ORDER BY id",
                    )
                    .map_err(backend)?;
                let rows = stmt.query_map([], |r| Ok(app_of(r))).map_err(backend)?;
                let mut apps = Vec::new();
                for row in rows {
                    apps.push(row.map_err(backend)??);
                }
                Ok(apps)
            })
            .await
    }

    async fn app(&self, id: &AppId) -> Result<Option<App>, StoreError> {
        let id = id.as_str().to_owned();
        self.readers()
            .run(move |conn| {
                let mut stmt = conn
                    .prepare_cached(
                        "SELECT id, name, token_secret, created, limits FROM apps
                         WHERE id = ?1 AND deleted = 0",
                    )
                    .map_err(backend)?;
                let row = stmt
                    .query_row([&id], |r| Ok(app_of(r)))
                    .optional()
                    .map_err(backend)?;
                row.transpose()
            })
            .await
    }

    async fn set_limits(&self, id: &AppId, limits: AppLimits) -> Result<bool, StoreError> {
        let id = id.clone();
        self.write(move |tx| {
            let n = tx
                .execute(
                    "UPDATE apps SET limits = ?2 WHERE id = ?1 AND deleted = 0",
                    params![id.as_str(), to_json(&limits)],
                )
                .map_err(backend)?;
            Ok(n == 1)
        })
        .await
    }

    async fn delete_app(&self, id: &AppId) -> Result<bool, StoreError> {
        let id = id.clone();
        let deleted = self.write(move |tx| {
            let app = id.as_str();
            for table in APP_TABLES {
                let sql = format!("DELETE FROM {table} WHERE app = ?1");
                tx.execute(&sql, [app]).map_err(backend)?;
            }
            let n = tx
                .execute(
                    "UPDATE apps SET deleted = 1, token_secret = NULL WHERE id = ?1 AND deleted = 0",
                    [app],
                )
                .map_err(backend)?;
            Ok(n == 1)
        })
        .await?;
        if deleted {
            // Its channels, messages and retained messages go a step at a time.
            self.want_purge();
        }
        Ok(deleted)
    }

    async fn add_key(&self, key: &KeyInfo) -> Result<(), StoreError> {
        let key = key.clone();
        self.write(move |tx| {
            tx.execute(
                "INSERT OR IGNORE INTO api_keys (hash, label, created, app) VALUES (?1, ?2, ?3, ?4)",
                params![key.hash, key.label, key.created, key.app.as_str()],
            )
            .map_err(backend)?;
            Ok(())
        })
        .await
    }

    async fn remove_key(&self, app: &AppId, key_id: &str) -> Result<bool, StoreError> {
        let (app, key_id) = (app.clone(), key_id.to_string());
        if !is_key_id(&key_id) {
            return Ok(false);
        }
        self.write(move |tx| {
            let n = tx
                .execute(
                    "DELETE FROM api_keys WHERE app = ?1 AND substr(hash, 1, 12) = ?2",
                    params![app.as_str(), key_id],
                )
                .map_err(backend)?;
            Ok(n > 0)
        })
        .await
    }

    async fn keys(&self) -> Result<Vec<KeyInfo>, StoreError> {
        self.readers()
            .run(|conn| {
                let mut stmt = conn
                    .prepare_cached(
                        "SELECT app, hash, coalesce(label, ''), coalesce(created, 0) FROM api_keys
                         ORDER BY app, created",
                    )
                    .map_err(backend)?;
                let rows = stmt.query_map([], |r| Ok(key_of(r))).map_err(backend)?;
                let mut keys = Vec::new();
                for row in rows {
                    keys.push(row.map_err(backend)??);
                }
                Ok(keys)
            })
            .await
    }

    async fn add_usage(&self, app: &AppId, d: Usage) -> Result<(), StoreError> {
        let app = app.clone();
        self.write(move |tx| {
            tx.execute(
                "INSERT INTO usage (app, published, deliveries, acks, peak_connections)
                 VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (app) DO UPDATE SET published = published + excluded.published,
                     deliveries = deliveries + excluded.deliveries,
                     acks = acks + excluded.acks,
                     peak_connections = max(peak_connections, excluded.peak_connections)",
                params![
                    app.as_str(),
                    d.published as i64,
                    d.deliveries as i64,
                    d.acks as i64,
                    d.peak_connections as i64
                ],
            )
            .map_err(backend)?;
            Ok(())
        })
        .await
    }

    async fn usage(&self, app: &AppId) -> Result<Usage, StoreError> {
        let app = app.clone();
        self.readers()
            .run(move |conn| {
                conn.query_row(
                    "SELECT published, deliveries, acks, peak_connections FROM usage
                     WHERE app = ?1",
                    [app.as_str()],
                    |r| {
                        Ok(Usage {
                            published: r.get::<_, i64>(0)? as u64,
                            deliveries: r.get::<_, i64>(1)? as u64,
                            acks: r.get::<_, i64>(2)? as u64,
                            peak_connections: r.get::<_, i64>(3)? as u64,
                        })
                    },
                )
                .optional()
                .map(Option::unwrap_or_default)
                .map_err(backend)
            })
            .await
    }

    async fn revoke_tokens(&self, revocation: &TokenRevocation) -> Result<(), StoreError> {
        crate::sqlite::revocations::revoke(self, revocation).await
    }

    async fn token_revocations(&self) -> Result<Vec<TokenRevocation>, StoreError> {
        crate::sqlite::revocations::list(self).await
    }

    async fn token_keys(&self, id: &AppId) -> Result<Option<AppTokenKeys>, StoreError> {
        crate::sqlite::token_keys::get(self, id).await
    }

    async fn all_token_keys(&self) -> Result<Vec<(AppId, AppTokenKeys)>, StoreError> {
        crate::sqlite::token_keys::list(self).await
    }

    async fn set_token_keys(&self, id: &AppId, keys: &AppTokenKeys) -> Result<bool, StoreError> {
        crate::sqlite::token_keys::set(self, id, keys).await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bytes::Bytes;
    use herald_core::log::{ChannelLog, CommitSink, Retention};
    use herald_core::message::{NewMessage, SharedMessage};
    use herald_core::name::ChannelName;

    use super::*;
    use crate::sqlite::SqliteOptions;

    struct NoSink;

    impl CommitSink for NoSink {
        fn committed(&self, _: &[SharedMessage]) {}
    }

    #[tokio::test]
    async fn a_failing_write_undoes_only_itself_and_the_rest_of_its_commit_stands() {
        let dir = tempfile::tempdir().unwrap();
        let log = SqliteLog::open(dir.path(), SqliteOptions::default(), Arc::new(NoSink)).unwrap();
        let app = AppId::parse("a").unwrap();
        let bad = log.write(|c| {
            c.execute("INSERT INTO usage (app, published) VALUES ('x', 9)", [])
                .map_err(backend)?;
            Err::<(), _>(StoreError::failed("refused"))
        });
        let good = log.add_usage(
            &app,
            Usage {
                published: 5,
                ..Usage::default()
            },
        );
        let channel = ChannelName::parse("c").unwrap();
        let message = NewMessage {
            id: None,
            data: Bytes::from_static(b"1"),
            retain: Default::default(),
            hold: None,
        };
        let append = log.append(&channel, vec![message], Retention::default());
        let (bad, good, append) = tokio::join!(bad, good, append);
        assert!(bad.is_err());
        good.unwrap();
        assert_eq!(append.unwrap().len(), 1);
        assert_eq!(log.usage(&app).await.unwrap().published, 5);
        let x = AppId::parse("x").unwrap();
        assert_eq!(
            log.usage(&x).await.unwrap(),
            Usage::default(),
            "rolled back"
        );
        log.close().await;
    }
}
