//! Cache invalidation: the [`CacheEvent`]s the admin API publishes on the [`crate::bus::Bus`]
//! after a store write, and [`Caches`], the one subscriber on every node that applies them to
//! its publisher keys ([`ApiKeys`]), client-token secrets and revoked tokens ([`Tokens`]) and
//! app limits ([`UsageMeter`]), and closes the live connections ([`LiveClients`]) an event
//! ends: every connection of a deleted app, those whose token the app's new secret no longer
//! verifies, those a revocation or a disconnect names. Start-up loading applies the same events
//! to the caches directly; a node that may have missed events (its bus reconnected) reloads
//! with [`Caches::reload`].

use std::fmt;
use std::sync::Arc;

use crate::auth::{ApiKeys, Tokens};
use crate::live::{LiveClients, Target};
use crate::outbox::CloseReason;
use crate::revoked::{RevokedKind, TokenRevocation};
use crate::tenancy::{App, AppLimits, KeyInfo};
use crate::tenant::AppId;
use crate::token_keys::AppTokenKeys;
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
    /// Everything that verifies an app's tokens was replaced (a rotation, public keys, a JWKS
    /// URL): the live connections whose key is gone are closed, and those verified by a
    /// rotated-out secret when its overlap ends. On the Redis bus it travels as "this app's
    /// keys changed" and each node reads them from the store (secrets never travel).
    TokenKeysSet {
        /// The app.
        app: AppId,
        /// Its keys (its `Debug` shows no secret).
        keys: AppTokenKeys,
    },
    /// An app's limits were replaced.
    LimitsChanged {
        /// The app.
        app: AppId,
        /// Its new limits.
        limits: AppLimits,
    },
    /// An app's credentials for a provider were set or removed: provider clients made with the
    /// old ones must be dropped (the caches hold none; their [`CacheListener`] does).
    CredentialsChanged {
        /// The app.
        app: AppId,
        /// The provider (`apns`, `fcm`, `webpush`).
        provider: String,
    },
    /// The live connections of `app` that `target` names are closed with `reason` on every
    /// node (nothing is stored: the clients may connect again if their tokens allow).
    Disconnect {
        /// The app.
        app: AppId,
        /// Which of its connections.
        target: Target,
        /// What they are told ([`CloseReason::Revoked`] or [`CloseReason::DeviceRevoked`]).
        reason: CloseReason,
    },
    /// Tokens of an app are revoked (the store holds the revocation): refused from now on, and
    /// their live connections closed with [`CloseReason::Revoked`].
    TokensRevoked(TokenRevocation),
}

impl TokenRevocation {
    /// The live connections this revocation ends.
    pub fn target(&self) -> Target {
        match &self.kind {
            RevokedKind::Jti { jti, .. } => Target::Jti(jti.clone()),
            RevokedKind::IssuedBefore(t) => Target::IssuedBefore(*t),
        }
    }
}

/// Told of every event after the caches applied it: for what other crates cache per app
/// (each app's provider clients).
pub trait CacheListener: Send + Sync {
    /// `event` was applied on this node.
    fn applied(&self, event: &CacheEvent);
}

/// What one node caches of its apps, and the subscriber that keeps it up to date.
pub struct Caches {
    /// Valid publisher keys, each for one app.
    pub keys: Arc<ApiKeys>,
    /// Every app's client-token secret.
    pub tokens: Arc<Tokens>,
    /// Per-app usage counters and limits.
    pub usage: Arc<UsageMeter>,
    /// This node's live client connections, which events close.
    pub live: Arc<LiveClients>,
    /// Told of every event applied (set once, by the server's wiring).
    listener: std::sync::OnceLock<Arc<dyn CacheListener>>,
}

impl Caches {
    /// Caches with no app keys and no app secrets, over the default app's token secret.
    pub fn new(default_token_secret: &[u8]) -> Arc<Caches> {
        Arc::new(Caches {
            keys: Arc::new(ApiKeys::default()),
            tokens: Arc::new(Tokens::new(default_token_secret)),
            usage: UsageMeter::new(),
            live: LiveClients::new(),
            listener: std::sync::OnceLock::new(),
        })
    }

    /// Sets the listener told of every event after it is applied; `false` if one was set.
    pub fn set_listener(&self, listener: Arc<dyn CacheListener>) -> bool {
        self.listener.set(listener).is_ok()
    }

    /// Brings the caches in line with the store's `apps` and `keys` (every app's, as
    /// [`crate::tenancy::Tenancy::apps`] and [`crate::tenancy::Tenancy::keys`] list them), for a
    /// node that may have missed events. Keys of apps the store no longer has are dropped with
    /// those apps' token secrets; the default app's keys are only added to, since the server's
    /// configured keys are not in the store. Usage counters are left as they are. The revoked
    /// tokens are replaced with `revocations`; live connections that what was missed ends
    /// (their app deleted, its secret changed, their token revoked) are closed.
    pub fn reload(&self, apps: &[App], keys: &[KeyInfo], revocations: &[TokenRevocation]) {
        let known: std::collections::HashSet<&AppId> = apps.iter().map(|a| &a.id).collect();
        self.keys.replace_stored(
            |app| !app.is_default(),
            keys.iter()
                .filter(|k| k.app.is_default() || known.contains(&k.app))
                .map(|k| (k.hash.clone(), k.app.clone())),
        );
        self.tokens
            .retain_apps(|app| known.contains(app) && !app.is_default());
        for app in apps {
            if let Some(secret) = app.token_secret.as_deref().filter(|_| !app.id.is_default()) {
                self.tokens.set_app(&app.id, secret.as_bytes());
            }
            self.usage.app(&app.id).set_limits(app.limits);
        }
        self.tokens.replace_revocations(revocations);
        for app in self.live.apps() {
            self.close_invalid(&app);
        }
    }

    /// Closes the live connections of `app` its current secret and revocations no longer
    /// allow; returns how many.
    fn close_invalid(&self, app: &AppId) -> usize {
        self.live
            .close_where(app, |who| self.tokens.still_valid(app, &who.token).err())
    }

    /// At `until` (seconds since the Unix epoch), closes the live connections of `app` whose
    /// token a rotated-out secret verified: every node does this from the stored expiry (also
    /// after a restart), so no node's timer is the only one. Needs a Tokio runtime (without one,
    /// tokens are still refused from `until` on, and the connections close at the app's next
    /// key change).
    fn close_when_overlap_ends(&self, app: &AppId, until: u64) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (tokens, live, app) = (self.tokens.clone(), self.live.clone(), app.clone());
        runtime.spawn(async move {
            let wait = until.saturating_sub(crate::revoked::now_secs());
            tokio::time::sleep(std::time::Duration::from_secs(wait)).await;
            // `until` is a whole second: wait until the clock has passed it.
            while crate::revoked::now_secs() < until {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            let closed = live.close_where(&app, |who| tokens.still_valid(&app, &who.token).err());
            tracing::info!(%app, closed, "the previous token secret's overlap ended");
        });
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
                self.live
                    .disconnect(app, &Target::All, CloseReason::AppDeleted);
            }
            CacheEvent::TokenSecretSet { app, secret } => {
                self.tokens.set_app(app, secret.0.as_bytes());
                self.close_invalid(app);
            }
            CacheEvent::TokenKeysSet { app, keys } => {
                self.tokens.set_app_keys(app, keys);
                self.close_invalid(app);
                if let Some(previous) = keys.previous_at(crate::revoked::now_secs()) {
                    self.close_when_overlap_ends(app, previous.until);
                }
            }
            CacheEvent::CredentialsChanged { .. } => {}
            CacheEvent::Disconnect {
                app,
                target,
                reason,
            } => {
                self.live.disconnect(app, target, *reason);
            }
            CacheEvent::TokensRevoked(revocation) => {
                self.tokens.revoke(revocation);
                self.live
                    .disconnect(&revocation.app, &revocation.target(), CloseReason::Revoked);
            }
        }
        if let Some(listener) = self.listener.get() {
            listener.applied(event);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::hash_api_key;

    fn app(id: &str, secret: Option<&str>, max_devices: Option<u64>) -> App {
        App {
            id: AppId::parse(id).unwrap(),
            name: id.into(),
            token_secret: secret.map(str::to_owned),
            limits: AppLimits {
                max_devices,
                ..AppLimits::default()
            },
            created: 0,
        }
    }

    fn key(app: &str, key: &str) -> KeyInfo {
        let hash = hash_api_key(key);
        KeyInfo {
            app: AppId::parse(app).unwrap(),
            id: hash[..12].to_owned(),
            hash,
            label: String::new(),
            created: 0,
        }
    }

    #[test]
    fn a_reload_catches_up_with_missed_events_and_keeps_configured_keys() {
        let caches = Caches::new(b"default-secret");
        let default = AppId::default_app();
        caches
            .keys
            .insert(hash_api_key("hk_configured"), default.clone());
        let (gone, shop) = (AppId::parse("gone").unwrap(), AppId::parse("shop").unwrap());
        caches.apply(&CacheEvent::KeyAdded {
            app: gone.clone(),
            hash: hash_api_key("hk_gone"),
        });
        caches.apply(&CacheEvent::KeyAdded {
            app: shop.clone(),
            hash: hash_api_key("hk_shop_old"),
        });
        caches.tokens.set_app(&gone, b"hs_gone");
        // Missed: "gone" deleted, shop's key replaced, its secret and limits set.
        caches.reload(
            &[app("shop", Some("hs_shop"), Some(4))],
            &[
                key("shop", "hk_shop_new"),
                key("default", "hk_stored_default"),
            ],
            &[],
        );
        assert_eq!(caches.keys.check("hk_configured"), Some(default.clone()));
        assert_eq!(caches.keys.check("hk_stored_default"), Some(default));
        assert_eq!(caches.keys.check("hk_gone"), None);
        assert_eq!(caches.keys.check("hk_shop_old"), None);
        assert_eq!(caches.keys.check("hk_shop_new"), Some(shop.clone()));
        assert_eq!(caches.usage.app(&shop).limits().max_devices, Some(4));
        let claims = crate::auth::ClientClaims {
            sub: "a".into(),
            exp: None,
            channels: vec![],
            publish: vec![],
            device: None,
            ..Default::default()
        };
        assert!(caches.tokens.mint(&gone, &claims).is_none());
        let token = caches.tokens.mint(&shop, &claims).expect("shop's secret");
        assert_eq!(caches.tokens.verify(&token).unwrap().app, shop);
    }

    #[test]
    fn events_close_the_live_connections_they_end() {
        use crate::outbox::Outbox;
        let caches = Caches::new(b"default-secret");
        let shop = AppId::parse("shop").unwrap();
        caches.tokens.set_app(&shop, b"hs_old");
        let claims = crate::auth::ClientClaims {
            sub: "alice".into(),
            ..Default::default()
        };
        let connect = |token: &str| {
            let client = caches.tokens.verify(token).unwrap();
            let outbox = Outbox::new(1024);
            let registration =
                caches
                    .live
                    .register(&client, &outbox, crate::lifecycle::Transport::WebSocket);
            (outbox, registration)
        };
        let old = connect(&caches.tokens.mint(&shop, &claims).unwrap());
        let default = connect(&caches.tokens.mint(&AppId::default_app(), &claims).unwrap());
        // The same secret again (a reload) ends nothing; a new one ends the old tokens' clients.
        caches.apply(&CacheEvent::TokenSecretSet {
            app: shop.clone(),
            secret: TokenSecret("hs_old".into()),
        });
        assert_eq!(old.0.closed(), None);
        caches.apply(&CacheEvent::TokenSecretSet {
            app: shop.clone(),
            secret: TokenSecret("hs_new".into()),
        });
        assert_eq!(old.0.closed(), Some(CloseReason::SecretChanged));
        let new = connect(&caches.tokens.mint(&shop, &claims).unwrap());
        assert_eq!(new.0.closed(), None);
        // A missed deletion is caught by a reload.
        caches.reload(&[], &[], &[]);
        assert_eq!(new.0.closed(), Some(CloseReason::AppDeleted));
        assert_eq!(default.0.closed(), None, "the default app's clients stay");
        caches.apply(&CacheEvent::TokensRevoked(TokenRevocation {
            app: AppId::default_app(),
            kind: RevokedKind::IssuedBefore(1),
        }));
        assert_eq!(
            default.0.closed(),
            Some(CloseReason::Revoked),
            "no iat: issued at 0"
        );
    }
}
