//! The service over a store in memory and a bus that tells the cache, as a node's does: values
//! drawn or kept, conflicts said, a drawn value that is taken drawn again, the cache dropped by
//! every change, rotation's overlap, the secret sealed.

use std::sync::{Arc, OnceLock};

use herald_core::caches::CacheListener;
use herald_core::log::{CommitSink, StoreError};
use herald_core::message::SharedMessage;
use herald_core::tenant::AppId;
use herald_push::credentials::sealer::generate_key;
use parking_lot::Mutex;

use super::*;

/// Pusher credentials in memory, with the store's uniqueness rules.
#[derive(Default)]
struct MemoryStore {
    sets: Mutex<Vec<StoredPusherCredentials>>,
    /// How many of the next creates find their app id taken (by another app).
    app_id_taken_next: Mutex<usize>,
    reads: Mutex<usize>,
}

#[async_trait::async_trait]
impl PusherCredentialStore for MemoryStore {
    async fn create_pusher_credentials(
        &self,
        new: StoredPusherCredentials,
    ) -> Result<(), CreatePusherError> {
        let mut sets = self.sets.lock();
        if sets.iter().any(|s| s.app == new.app) {
            return Err(CreatePusherError::AppHasCredentials);
        }
        let mut taken = self.app_id_taken_next.lock();
        if *taken > 0 {
            *taken -= 1;
            return Err(CreatePusherError::AppIdTaken);
        }
        if sets.iter().any(|s| s.app_id == new.app_id) {
            return Err(CreatePusherError::AppIdTaken);
        }
        if sets.iter().any(|s| s.key == new.key) {
            return Err(CreatePusherError::KeyTaken);
        }
        sets.push(new);
        Ok(())
    }

    async fn pusher_credentials(
        &self,
        app: &AppId,
    ) -> Result<Option<StoredPusherCredentials>, StoreError> {
        Ok(self.sets.lock().iter().find(|s| &s.app == app).cloned())
    }

    async fn pusher_credentials_by_key(
        &self,
        key: &str,
    ) -> Result<Option<StoredPusherCredentials>, StoreError> {
        *self.reads.lock() += 1;
        Ok(self.sets.lock().iter().find(|s| s.key == key).cloned())
    }

    async fn pusher_credentials_by_app_id(
        &self,
        app_id: &str,
    ) -> Result<Option<StoredPusherCredentials>, StoreError> {
        *self.reads.lock() += 1;
        Ok(self
            .sets
            .lock()
            .iter()
            .find(|s| s.app_id == app_id)
            .cloned())
    }

    async fn replace_pusher_secret(
        &self,
        app: &AppId,
        secret: Vec<u8>,
        previous: Option<(Vec<u8>, i64)>,
    ) -> Result<bool, StoreError> {
        let mut sets = self.sets.lock();
        let Some(set) = sets.iter_mut().find(|s| &s.app == app) else {
            return Ok(false);
        };
        set.secret = secret;
        set.previous_secret = previous;
        Ok(true)
    }

    async fn delete_pusher_credentials(&self, app: &AppId) -> Result<bool, StoreError> {
        let mut sets = self.sets.lock();
        let before = sets.len();
        sets.retain(|s| &s.app != app);
        Ok(sets.len() < before)
    }
}

/// A one-node bus: events to the cache at once.
#[derive(Default)]
struct TestBus {
    cache: OnceLock<Arc<CredentialCache>>,
    events: Mutex<usize>,
}

impl CommitSink for TestBus {
    fn committed(&self, _: &[SharedMessage]) {}
}

impl Bus for TestBus {
    fn publish(&self, event: CacheEvent) {
        *self.events.lock() += 1;
        if let Some(cache) = self.cache.get() {
            cache.applied(&event);
        }
    }

    /// None: these tests subscribe nothing.
    fn occupied_channels(
        &self,
        _: herald_core::bus::ChannelQuery,
    ) -> futures_util::future::BoxFuture<'_, herald_core::bus::OccupiedChannels> {
        Box::pin(std::future::ready(Default::default()))
    }
}

fn service() -> (PusherCredentials, Arc<MemoryStore>, Arc<TestBus>) {
    let store = Arc::new(MemoryStore::default());
    let bus = Arc::new(TestBus::default());
    let sealer = Arc::new(Sealer::new(&generate_key()).unwrap());
    let service = PusherCredentials::new(store.clone(), sealer, bus.clone());
    bus.cache.set(service.cache()).ok().unwrap();
    (service, store, bus)
}

fn app(id: &str) -> AppId {
    AppId::parse(id).unwrap()
}

#[tokio::test]
async fn created_values_are_drawn_or_kept_and_conflicts_are_said() {
    let (service, store, _) = service();
    let drawn = service
        .create(&app("shop"), GivenCredentials::default())
        .await
        .unwrap();
    assert_eq!(drawn.app_id.len(), 7);
    assert_eq!((drawn.key.len(), drawn.secret.len()), (20, 20));
    // The store holds the secret sealed, not as given.
    let stored = store.sets.lock()[0].clone();
    assert!(!stored
        .secret
        .windows(20)
        .any(|w| w == drawn.secret.as_bytes()));

    let again = service
        .create(&app("shop"), GivenCredentials::default())
        .await;
    assert!(matches!(again, Err(PusherError::Conflict(m)) if m.contains("already")));
    let given = GivenCredentials {
        app_id: Some(drawn.app_id.clone()),
        ..Default::default()
    };
    let taken = service.create(&app("blog"), given).await.unwrap_err();
    assert!(taken.to_string().starts_with("app_id:"), "{taken}");
    let bad = GivenCredentials {
        key: Some("a b".into()),
        ..Default::default()
    };
    let bad = service.create(&app("blog"), bad).await.unwrap_err();
    assert!(matches!(bad, PusherError::BadInput { ref field, .. } if field == "key"));

    // A drawn app id that is taken is drawn again, a few times.
    *store.app_id_taken_next.lock() = 5;
    let gave_up = service
        .create(&app("blog"), GivenCredentials::default())
        .await;
    assert!(matches!(gave_up, Err(PusherError::Conflict(m)) if m.contains("try again")));
    *store.app_id_taken_next.lock() = 2;
    let kept = GivenCredentials {
        app_id: None,
        key: Some("app-key".into()),
        secret: Some("app-secret".into()),
    };
    let imported = service.create(&app("blog"), kept).await.unwrap();
    assert_eq!(
        (imported.key.as_str(), imported.secret.as_str()),
        ("app-key", "app-secret")
    );
    let view = service.show(&app("blog")).await.unwrap();
    assert_eq!(
        (view.key.as_str(), view.previous_secret_until_ms),
        ("app-key", None)
    );
    assert!(matches!(
        service.show(&app("none")).await,
        Err(PusherError::NotFound)
    ));
}

#[tokio::test]
async fn lookups_are_cached_until_a_change_and_rotation_keeps_the_old_secret_for_its_overlap() {
    let (service, store, bus) = service();
    let created = service
        .create(&app("shop"), GivenCredentials::default())
        .await
        .unwrap();
    let found = service.by_key(&created.key).await.unwrap().unwrap();
    assert_eq!(found.secret(), created.secret.as_bytes());
    let by_id = service.by_app_id(&created.app_id).await.unwrap().unwrap();
    assert_eq!(by_id.key, created.key);
    let reads = *store.reads.lock();
    service.by_key(&created.key).await.unwrap().unwrap();
    assert_eq!(*store.reads.lock(), reads, "a cached set is not read again");

    let events = *bus.events.lock();
    let (secret, until) = service
        .rotate(&app("shop"), Duration::from_secs(60), None)
        .await
        .unwrap();
    assert_eq!(*bus.events.lock(), events + 1);
    assert!(until.is_some());
    let rotated = service.by_key(&created.key).await.unwrap().unwrap();
    assert_eq!(
        *store.reads.lock(),
        reads + 1,
        "the change dropped the cached set"
    );
    let now = now_millis();
    assert_eq!(
        rotated.secrets_at(now),
        vec![secret.as_bytes(), created.secret.as_bytes()]
    );
    assert_eq!(rotated.secrets_at(until.unwrap()), vec![secret.as_bytes()]);

    let (newest, until) = service
        .rotate(&app("shop"), Duration::ZERO, Some("given-secret".into()))
        .await
        .unwrap();
    assert_eq!((newest.as_str(), until), ("given-secret", None));
    let rotated = service.by_key(&created.key).await.unwrap().unwrap();
    assert_eq!(rotated.secrets_at(now_millis()), vec![&b"given-secret"[..]]);

    service.delete(&app("shop")).await.unwrap();
    assert!(service.by_key(&created.key).await.unwrap().is_none());
    assert!(matches!(
        service.delete(&app("shop")).await,
        Err(PusherError::NotFound)
    ));
    assert!(matches!(
        service.rotate(&app("shop"), Duration::ZERO, None).await,
        Err(PusherError::NotFound)
    ));
}
