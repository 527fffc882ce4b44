//! The Pusher credentials this node has read and opened, by key and by Pusher app id, so a
//! request or a connection does not read the store or open a secret each time.
//!
//! A change made on any node is published on the bus as
//! `CacheEvent::CredentialsChanged { app, provider: "pusher" }` (the event provider
//! credentials use; herald-push's provider clients ignore what they do not hold); every
//! node's cache, a [`CacheListener`], drops the app's set when it hears it or the app's
//! deletion, and reads it again when next asked. A read that began before a drop is not
//! cached (a generation count tells), so a drop is never undone by a stale read. Entries also
//! expire after [`CACHE_TTL`]: a node that missed events (its bus reconnected) is right again
//! within that time. On the same event the node's Pusher connections whose key went are
//! closed ([`crate::connections`]).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use herald_core::caches::{CacheEvent, CacheListener};
use herald_core::tenant::AppId;
use parking_lot::RwLock;

use crate::connections::PusherConnections;

/// The `provider` of the cache event a change of Pusher credentials is published as.
pub const PROVIDER: &str = "pusher";

/// How long a cached set is used before it is read again, events or not.
pub const CACHE_TTL: Duration = Duration::from_secs(60);

/// One app's credentials with their secrets opened.
pub struct OpenCredentials {
    /// The Herald app.
    pub app: AppId,
    /// The Pusher app id.
    pub app_id: String,
    /// The key.
    pub key: String,
    secret: Vec<u8>,
    previous: Option<(Vec<u8>, i64)>,
    loaded: Instant,
}

impl std::fmt::Debug for OpenCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenCredentials")
            .field("app", &self.app)
            .field("app_id", &self.app_id)
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

impl OpenCredentials {
    /// A set with its secret and the previous one (and the end of its overlap, ms) opened.
    pub fn new(
        app: AppId,
        app_id: String,
        key: String,
        secret: Vec<u8>,
        previous: Option<(Vec<u8>, i64)>,
    ) -> Self {
        OpenCredentials {
            app,
            app_id,
            key,
            secret,
            previous,
            loaded: Instant::now(),
        }
    }

    /// The secret signatures are made with now.
    pub fn secret(&self) -> &[u8] {
        &self.secret
    }

    /// The secrets a signature is accepted with at `now_ms`: the current one, and the one it
    /// replaced while its overlap lasts.
    pub fn secrets_at(&self, now_ms: i64) -> Vec<&[u8]> {
        let mut secrets = vec![&self.secret[..]];
        if let Some((previous, until_ms)) = &self.previous {
            if now_ms < *until_ms {
                secrets.push(previous);
            }
        }
        secrets
    }
}

#[derive(Default)]
struct Sets {
    by_key: HashMap<String, Arc<OpenCredentials>>,
    key_of_app_id: HashMap<String, String>,
    /// Moved by every drop: a read that began before one is not cached.
    generation: u64,
}

/// This node's opened credentials.
#[derive(Default)]
pub struct CredentialCache {
    sets: RwLock<Sets>,
    /// This node's connections, closed when their key goes ([`crate::connections`]).
    connections: Option<Arc<PusherConnections>>,
}

impl CredentialCache {
    /// An empty cache that also has `connections` check their key when an app's set changes.
    pub fn closing(connections: Arc<PusherConnections>) -> Self {
        CredentialCache {
            sets: RwLock::default(),
            connections: Some(connections),
        }
    }

    /// The count of drops so far: read before a store read, given back to [`Self::insert`].
    pub fn generation(&self) -> u64 {
        self.sets.read().generation
    }

    /// The cached set whose key is `key`, unless it expired.
    pub fn by_key(&self, key: &str) -> Option<Arc<OpenCredentials>> {
        let sets = self.sets.read();
        sets.by_key
            .get(key)
            .filter(|c| c.loaded.elapsed() < CACHE_TTL)
            .cloned()
    }

    /// The cached set whose Pusher app id is `app_id`, unless it expired.
    pub fn by_app_id(&self, app_id: &str) -> Option<Arc<OpenCredentials>> {
        let sets = self.sets.read();
        let key = sets.key_of_app_id.get(app_id)?;
        sets.by_key
            .get(key)
            .filter(|c| c.loaded.elapsed() < CACHE_TTL)
            .cloned()
    }

    /// Caches `set`, read from the store when the cache's generation was `generation`:
    /// unless something was dropped since (the read may be older than the drop).
    pub fn insert(&self, generation: u64, set: Arc<OpenCredentials>) {
        let mut sets = self.sets.write();
        if sets.generation != generation {
            return;
        }
        // An expired set of the same app under another key or app id goes first.
        let app = set.app.clone();
        Self::remove_app(&mut sets, &app);
        sets.key_of_app_id
            .insert(set.app_id.clone(), set.key.clone());
        sets.by_key.insert(set.key.clone(), set);
    }

    /// Drops `app`'s set.
    pub fn forget(&self, app: &AppId) {
        let mut sets = self.sets.write();
        sets.generation += 1;
        Self::remove_app(&mut sets, app);
    }

    fn remove_app(sets: &mut Sets, app: &AppId) {
        let keys: Vec<String> = sets
            .by_key
            .values()
            .filter(|c| &c.app == app)
            .map(|c| c.key.clone())
            .collect();
        for key in keys {
            if let Some(set) = sets.by_key.remove(&key) {
                sets.key_of_app_id.remove(&set.app_id);
            }
        }
    }
}

impl CacheListener for CredentialCache {
    fn applied(&self, event: &CacheEvent) {
        match event {
            CacheEvent::CredentialsChanged { app, provider } if provider == PROVIDER => {
                self.forget(app);
                if let Some(connections) = &self.connections {
                    connections.credentials_changed(app);
                }
            }
            CacheEvent::AppDeleted { app } => self.forget(app),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(app: &str, app_id: &str, key: &str) -> Arc<OpenCredentials> {
        Arc::new(OpenCredentials::new(
            AppId::parse(app).unwrap(),
            app_id.into(),
            key.into(),
            b"s".to_vec(),
            Some((b"old".to_vec(), 1_000)),
        ))
    }

    #[test]
    fn sets_are_found_by_key_and_app_id_until_their_app_changes() {
        let cache = CredentialCache::default();
        cache.insert(cache.generation(), set("shop", "123", "k1"));
        cache.insert(cache.generation(), set("blog", "456", "k2"));
        assert_eq!(cache.by_key("k1").unwrap().app_id, "123");
        assert_eq!(cache.by_app_id("456").unwrap().key, "k2");
        cache.applied(&CacheEvent::CredentialsChanged {
            app: AppId::parse("shop").unwrap(),
            provider: PROVIDER.into(),
        });
        assert!(cache.by_key("k1").is_none() && cache.by_app_id("123").is_none());
        assert!(cache.by_key("k2").is_some());
        // Another provider's change is not this cache's business.
        cache.applied(&CacheEvent::CredentialsChanged {
            app: AppId::parse("blog").unwrap(),
            provider: "apns".into(),
        });
        assert!(cache.by_key("k2").is_some());
        cache.applied(&CacheEvent::AppDeleted {
            app: AppId::parse("blog").unwrap(),
        });
        assert!(cache.by_key("k2").is_none());
    }

    #[test]
    fn a_read_older_than_a_drop_is_not_cached() {
        let cache = CredentialCache::default();
        let before = cache.generation();
        cache.forget(&AppId::parse("shop").unwrap());
        cache.insert(before, set("shop", "123", "k1"));
        assert!(cache.by_key("k1").is_none());
    }

    #[test]
    fn a_rotated_out_secret_counts_until_its_overlap_ends() {
        let s = set("shop", "1", "k");
        assert_eq!(s.secrets_at(999), vec![&b"s"[..], b"old"]);
        assert_eq!(s.secrets_at(1_000), vec![&b"s"[..]]);
        assert!(!format!("{s:?}").contains("old"));
    }
}
