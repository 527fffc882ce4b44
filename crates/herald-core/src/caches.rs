//! Cache invalidation: the [`CacheEvent`]s the admin API publishes on the [`crate::bus::Bus`]
//! after a store write, and [`Caches`], the one subscriber on every node that applies them to
//! its publisher keys ([`ApiKeys`]), client-token secrets ([`Tokens`]) and app limits
//! ([`UsageMeter`]). Start-up loading applies the same events to the caches directly.

use std::fmt;
use std::sync::Arc;

use crate::auth::{ApiKeys, Tokens};
use crate::tenancy::AppLimits;
use crate::tenant::AppId;
use crate::usage::UsageMeter;

/// An app's client-token secret as carried by an event; its `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct TokenSecret(pub String);

impl fmt::Debug for TokenSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TokenSecret(..)")
    }
}

/// A change to what a node caches of its apps, published after the store holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CacheEvent {
    /// A publisher key (by its SHA-256 hex) now publishes for `app`.
    KeyAdded {
        /// The key's app.
        app: AppId,
        /// SHA-256 hex of the key.
        hash: String,
    },
    /// The publisher key of `app` whose hash starts with `key_id` is gone.
    KeyRemoved {
        /// The key's app.
        app: AppId,
        /// The key's short id (the start of its hash).
        key_id: String,
    },
    /// An app was created with these limits.
    AppCreated {
        /// The new app.
        app: AppId,
        /// Its limits.
        limits: AppLimits,
    },
    /// An app was deleted: its keys, token secret and counters are forgotten.
    AppDeleted {
        /// The deleted app.
        app: AppId,
    },
    /// An app's client tokens are now signed with this secret.
    TokenSecretSet {
        /// The app.
        app: AppId,
        /// Its secret.
        secret: TokenSecret,
    },
    /// An app's limits were replaced.
    LimitsChanged {
        /// The app.
        app: AppId,
        /// Its new limits.
        limits: AppLimits,
    },
}

/// What one node caches of its apps, and the subscriber that keeps it up to date.
pub struct Caches {
    /// Valid publisher keys, each for one app.
    pub keys: Arc<ApiKeys>,
    /// Every app's client-token secret.
    pub tokens: Arc<Tokens>,
    /// Per-app usage counters and limits.
    pub usage: Arc<UsageMeter>,
}

impl Caches {
    /// Caches with no app keys and no app secrets, over the default app's token secret.
    pub fn new(default_token_secret: &[u8]) -> Arc<Caches> {
        Arc::new(Caches {
            keys: Arc::new(ApiKeys::default()),
            tokens: Arc::new(Tokens::new(default_token_secret)),
            usage: UsageMeter::new(),
        })
    }

    /// Applies one event to this node's caches.
    pub fn apply(&self, event: &CacheEvent) {
        match event {
            CacheEvent::KeyAdded { app, hash } => self.keys.insert(hash.clone(), app.clone()),
            CacheEvent::KeyRemoved { app, key_id } => self.keys.remove(app, key_id),
            CacheEvent::AppCreated { app, limits } | CacheEvent::LimitsChanged { app, limits } => {
                self.usage.app(app).set_limits(*limits)
            }
            CacheEvent::AppDeleted { app } => {
                self.keys.remove_app(app);
                self.tokens.remove_app(app);
                self.usage.remove(app);
            }
            CacheEvent::TokenSecretSet { app, secret } => {
                self.tokens.set_app(app, secret.0.as_bytes())
            }
        }
    }
}
