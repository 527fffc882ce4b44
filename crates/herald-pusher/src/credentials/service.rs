//! [`PusherCredentials`], the service the admin API calls for an app's Pusher credentials
//! (create, generated or imported; show; rotate the secret with an overlap; delete), and the
//! lookups the HTTP API makes (by key, by Pusher app id), through this node's
//! [`CredentialCache`]. Every change is published on the bus after the store write, so every
//! node's cache drops the app's set ([`super::cache`]). A secret is in two answers only, the
//! creation's and the rotation's.

use std::sync::Arc;
use std::time::Duration;

use herald_core::bus::Bus;
use herald_core::caches::CacheEvent;
use herald_core::message::now_millis;
use herald_core::tenant::AppId;
use herald_push::credentials::sealer::Sealer;

use super::cache::{CredentialCache, OpenCredentials, PROVIDER};
use super::input::{check_id, check_secret, generate_app_id, generate_hex20};
use super::store::{CreatePusherError, PusherCredentialStore};
use super::{open_secret, seal_secret, PusherError, StoredPusherCredentials};
use crate::connections::PusherConnections;

/// How many times a create draws new values when a generated app id or key is taken.
const GENERATE_ATTEMPTS: usize = 5;

/// What a create is given: each value absent is generated.
#[derive(Debug, Clone, Default)]
pub struct GivenCredentials {
    /// The Pusher app id to keep (a migration), else digits are drawn.
    pub app_id: Option<String>,
    /// The key to keep, else 20 hex digits are drawn.
    pub key: Option<String>,
    /// The secret to keep, else 20 hex digits are drawn.
    pub secret: Option<String>,
}

/// A set as created: the secret is in this answer only.
#[derive(Debug, Clone)]
pub struct CreatedCredentials {
    /// The Pusher app id.
    pub app_id: String,
    /// The key.
    pub key: String,
    /// The secret.
    pub secret: String,
    /// Created, milliseconds since the Unix epoch.
    pub created_ms: i64,
}

/// A set as shown (no secret).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CredentialsView {
    /// The Pusher app id.
    pub app_id: String,
    /// The key.
    pub key: String,
    /// Created, milliseconds since the Unix epoch.
    pub created_ms: i64,
    /// Until when the rotated-out secret is accepted, when it still is.
    pub previous_secret_until_ms: Option<i64>,
}

impl CredentialsView {
    fn of(stored: &StoredPusherCredentials, now_ms: i64) -> Self {
        CredentialsView {
            app_id: stored.app_id.clone(),
            key: stored.key.clone(),
            created_ms: stored.created_ms,
            previous_secret_until_ms: stored
                .previous_secret
                .as_ref()
                .map(|(_, until)| *until)
                .filter(|until| *until > now_ms),
        }
    }
}

/// An app's Pusher credentials, stored, sealed and cached.
pub struct PusherCredentials {
    store: Arc<dyn PusherCredentialStore>,
    sealer: Arc<Sealer>,
    bus: Arc<dyn Bus>,
    cache: Arc<CredentialCache>,
    connections: Arc<PusherConnections>,
}

impl PusherCredentials {
    /// The service over `store`, secrets sealed with `sealer`, changes told on `bus`. The
    /// node's caches must tell [`Self::cache`] the bus's events.
    pub fn new(
        store: Arc<dyn PusherCredentialStore>,
        sealer: Arc<Sealer>,
        bus: Arc<dyn Bus>,
    ) -> Self {
        let connections = Arc::new(PusherConnections::new(store.clone(), bus.clone()));
        PusherCredentials {
            store,
            sealer,
            bus,
            cache: Arc::new(CredentialCache::closing(connections.clone())),
            connections,
        }
    }

    /// This node's Pusher connections (closed when their key goes; `terminate_connections`).
    pub fn connections(&self) -> &Arc<PusherConnections> {
        &self.connections
    }

    /// This node's cache, the listener of the bus's cache events.
    pub fn cache(&self) -> Arc<CredentialCache> {
        self.cache.clone()
    }

    fn changed(&self, app: &AppId) {
        self.bus.publish(CacheEvent::CredentialsChanged {
            app: app.clone(),
            provider: PROVIDER.into(),
        });
    }

    /// Creates `app`'s set from `given`, drawing what it does not give.
    pub async fn create(
        &self,
        app: &AppId,
        given: GivenCredentials,
    ) -> Result<CreatedCredentials, PusherError> {
        if let Some(app_id) = &given.app_id {
            check_id("app_id", app_id)?;
        }
        if let Some(key) = &given.key {
            check_id("key", key)?;
        }
        if let Some(secret) = &given.secret {
            check_secret(secret)?;
        }
        let secret = given.secret.clone().unwrap_or_else(generate_hex20);
        let created_ms = now_millis();
        for _ in 0..GENERATE_ATTEMPTS {
            let app_id = given.app_id.clone().unwrap_or_else(generate_app_id);
            let key = given.key.clone().unwrap_or_else(generate_hex20);
            let stored = StoredPusherCredentials {
                app: app.clone(),
                app_id: app_id.clone(),
                key: key.clone(),
                secret: seal_secret(&self.sealer, app, secret.as_bytes()),
                previous_secret: None,
                created_ms,
            };
            match self.store.create_pusher_credentials(stored).await {
                Ok(()) => {
                    self.changed(app);
                    return Ok(CreatedCredentials {
                        app_id,
                        key,
                        secret,
                        created_ms,
                    });
                }
                Err(CreatePusherError::AppHasCredentials) => {
                    return Err(PusherError::Conflict(format!(
                        "app {app} has Pusher credentials already: rotate the secret, or \
                         delete them first"
                    )))
                }
                Err(CreatePusherError::AppIdTaken) if given.app_id.is_some() => {
                    return Err(PusherError::Conflict(format!(
                        "app_id: another app has the Pusher app id {app_id:?}"
                    )))
                }
                Err(CreatePusherError::KeyTaken) if given.key.is_some() => {
                    return Err(PusherError::Conflict(format!(
                        "key: another app has the Pusher key {key:?}"
                    )))
                }
                // A drawn value that is taken is drawn again.
                Err(CreatePusherError::AppIdTaken | CreatePusherError::KeyTaken) => continue,
                Err(CreatePusherError::Store(e)) => return Err(e.into()),
            }
        }
        Err(PusherError::Conflict(
            "the app ids and keys drawn were all taken; try again".into(),
        ))
    }

    /// `app`'s set, without its secret.
    pub async fn show(&self, app: &AppId) -> Result<CredentialsView, PusherError> {
        let stored = self
            .store
            .pusher_credentials(app)
            .await?
            .ok_or(PusherError::NotFound)?;
        Ok(CredentialsView::of(&stored, now_millis()))
    }

    /// A new secret for `app` (`given`, else drawn), answered with it; the secret it replaces
    /// is accepted too for `overlap` (none when zero). A secret already rotated out is
    /// dropped.
    pub async fn rotate(
        &self,
        app: &AppId,
        overlap: Duration,
        given: Option<String>,
    ) -> Result<(String, Option<i64>), PusherError> {
        if let Some(secret) = &given {
            check_secret(secret)?;
        }
        let stored = self
            .store
            .pusher_credentials(app)
            .await?
            .ok_or(PusherError::NotFound)?;
        let secret = given.unwrap_or_else(generate_hex20);
        let sealed = seal_secret(&self.sealer, app, secret.as_bytes());
        let overlap_ms = i64::try_from(overlap.as_millis()).unwrap_or(i64::MAX);
        let until = (overlap_ms > 0).then(|| now_millis().saturating_add(overlap_ms));
        let previous = until.map(|until| (stored.secret, until));
        if !self
            .store
            .replace_pusher_secret(app, sealed, previous)
            .await?
        {
            return Err(PusherError::NotFound);
        }
        self.changed(app);
        Ok((secret, until))
    }

    /// Deletes `app`'s set.
    pub async fn delete(&self, app: &AppId) -> Result<(), PusherError> {
        if !self.store.delete_pusher_credentials(app).await? {
            return Err(PusherError::NotFound);
        }
        self.changed(app);
        Ok(())
    }

    /// The set whose key is `key`, opened (cached).
    pub async fn by_key(&self, key: &str) -> Result<Option<Arc<OpenCredentials>>, PusherError> {
        if let Some(found) = self.cache.by_key(key) {
            return Ok(Some(found));
        }
        let generation = self.cache.generation();
        let stored = self.store.pusher_credentials_by_key(key).await?;
        stored.map(|s| self.opened(generation, s)).transpose()
    }

    /// `app`'s set, opened (read from the store: what a Pusher webhook request is signed with).
    pub async fn by_app(&self, app: &AppId) -> Result<Option<Arc<OpenCredentials>>, PusherError> {
        let generation = self.cache.generation();
        let stored = self.store.pusher_credentials(app).await?;
        stored.map(|s| self.opened(generation, s)).transpose()
    }

    /// The set whose Pusher app id is `app_id`, opened (cached).
    pub async fn by_app_id(
        &self,
        app_id: &str,
    ) -> Result<Option<Arc<OpenCredentials>>, PusherError> {
        if let Some(found) = self.cache.by_app_id(app_id) {
            return Ok(Some(found));
        }
        let generation = self.cache.generation();
        let stored = self.store.pusher_credentials_by_app_id(app_id).await?;
        stored.map(|s| self.opened(generation, s)).transpose()
    }

    fn opened(
        &self,
        generation: u64,
        stored: StoredPusherCredentials,
    ) -> Result<Arc<OpenCredentials>, PusherError> {
        let app = &stored.app;
        let secret = open_secret(&self.sealer, app, &stored.secret).map_err(|e| {
            tracing::error!(app = %app, error = %e, "a Pusher secret does not open");
            PusherError::Sealed
        })?;
        // A previous secret that does not open only takes away the overlap.
        let previous = stored.previous_secret.and_then(|(sealed, until)| {
            open_secret(&self.sealer, app, &sealed)
                .ok()
                .map(|s| (s, until))
        });
        let set = Arc::new(OpenCredentials::new(
            stored.app,
            stored.app_id,
            stored.key,
            secret,
            previous,
        ));
        self.cache.insert(generation, set.clone());
        Ok(set)
    }
}

#[cfg(test)]
mod tests;
