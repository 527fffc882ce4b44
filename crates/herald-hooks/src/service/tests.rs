//! The service over the in-memory store: endpoints scoped to their app, the per-app limit,
//! secrets rotated with an overlap, the listener's cheap refusal, and the test request.

use std::sync::Arc;

use herald_core::lifecycle::{Connection, ConnectionId, LifecycleEvent, Transport};
use herald_push::credentials::sealer::generate_key;
use serde_json::{json, Value};

use super::*;
use crate::memory::MemoryHookStore;

pub(crate) fn shop() -> AppId {
    AppId::parse("shop").unwrap()
}

/// A service over `store` that may reach loopback (the tests' receivers), its snapshot loaded.
pub(crate) async fn hooks_over(store: Arc<dyn HookStore>, config: HooksConfig) -> Arc<Hooks> {
    let sealer = Arc::new(Sealer::new(&generate_key()).unwrap());
    let destinations = Destinations::allowing(vec![
        "127.0.0.0/8".parse().unwrap(),
        "::1/128".parse().unwrap(),
    ]);
    let hooks = Arc::new(Hooks::new(store, sealer, destinations, config).unwrap());
    hooks.reload().await.unwrap();
    hooks
}

pub(crate) async fn hooks() -> Arc<Hooks> {
    hooks_over(Arc::new(MemoryHookStore::new()), HooksConfig::default()).await
}

pub(crate) fn body(events: &[&str]) -> Value {
    json!({"url": "http://127.0.0.1:9/hooks", "events": events})
}

fn connected(app: &AppId) -> LifecycleEvent {
    LifecycleEvent::Connected {
        connection: Arc::new(Connection {
            id: ConnectionId { node: 1, seq: 1 },
            app: app.clone(),
            sub: Some("al".into()),
            device: None,
            transport: Transport::WebSocket,
        }),
    }
}

/// What the listener put on the node queue.
fn taken(hooks: &Hooks) -> Vec<HookEvent> {
    let mut queued = hooks.queued.lock();
    let queued = queued.as_mut().expect("not started");
    std::iter::from_fn(|| queued.try_recv().ok()).collect()
}

#[tokio::test]
async fn endpoints_belong_to_their_app() {
    let hooks = hooks().await;
    let blog = AppId::parse("blog").unwrap();
    let (endpoint, secret) = hooks
        .create(&shop(), &body(&["user.offline"]))
        .await
        .unwrap();
    assert!(secret.text().starts_with("whsec_"));
    assert_eq!(endpoint.app, shop());
    assert_eq!(endpoint.offline_delay_ms, 3_000);
    let id = endpoint.id;

    assert!(hooks.list(&blog).await.unwrap().is_empty());
    assert!(matches!(
        hooks.get(&blog, id).await,
        Err(HooksError::NotFound)
    ));
    assert!(matches!(
        hooks.update(&blog, id, &json!({"enabled": false})).await,
        Err(HooksError::NotFound)
    ));
    assert!(matches!(
        hooks.delete(&blog, id).await,
        Err(HooksError::NotFound)
    ));
    assert!(matches!(
        hooks.rotate_secret(&blog, id, Duration::ZERO).await,
        Err(HooksError::NotFound)
    ));
    assert!(matches!(
        hooks.test(&blog, id).await,
        Err(HooksError::NotFound)
    ));
    assert!(matches!(
        hooks.dead_letters(&blog, id, None, 10).await,
        Err(HooksError::NotFound)
    ));

    let updated = hooks
        .update(
            &shop(),
            id,
            &json!({"enabled": false, "description": "backend"}),
        )
        .await
        .unwrap();
    assert!(!updated.enabled);
    let views = hooks.list(&shop()).await.unwrap();
    assert_eq!(views.len(), 1);
    assert_eq!(views[0].to_json()["state"], "disabled");
    assert_eq!(views[0].to_json()["description"], "backend");
    assert_eq!(hooks.get(&shop(), id).await.unwrap(), views[0]);
    hooks.delete(&shop(), id).await.unwrap();
    assert!(hooks.list(&shop()).await.unwrap().is_empty());
}

#[tokio::test]
async fn bad_input_and_refused_destinations_store_nothing() {
    let hooks = hooks().await;
    let err = hooks
        .create(
            &shop(),
            &json!({"url": "http://127.0.0.1/", "events": ["user.gone"]}),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&err, HooksError::BadInput { field, .. } if field == "events"),
        "{err}"
    );
    let public = Hooks::new(
        Arc::new(MemoryHookStore::new()),
        Arc::new(Sealer::new(&generate_key()).unwrap()),
        Destinations::public_only(),
        HooksConfig::default(),
    )
    .unwrap();
    let err = public.create(&shop(), &body(&["*"])).await.unwrap_err();
    assert!(matches!(err, HooksError::Refused(_)), "{err}");
    assert!(public.list(&shop()).await.unwrap().is_empty());

    let (endpoint, _) = hooks.create(&shop(), &body(&["*"])).await.unwrap();
    let err = hooks
        .update(&shop(), endpoint.id, &json!({"url": "http://10.0.0.1/"}))
        .await
        .unwrap_err();
    assert!(matches!(err, HooksError::Refused(_)), "{err}");
    assert_eq!(
        hooks.get(&shop(), endpoint.id).await.unwrap().endpoint.url,
        "http://127.0.0.1:9/hooks"
    );
}

#[tokio::test]
async fn an_app_has_at_most_its_endpoints() {
    let config = HooksConfig {
        max_endpoints_per_app: 2,
        ..HooksConfig::default()
    };
    let hooks = hooks_over(Arc::new(MemoryHookStore::new()), config).await;
    hooks.create(&shop(), &body(&["*"])).await.unwrap();
    let (second, _) = hooks.create(&shop(), &body(&["*"])).await.unwrap();
    let err = hooks.create(&shop(), &body(&["*"])).await.unwrap_err();
    assert!(matches!(err, HooksError::TooMany { max: 2 }), "{err}");
    assert!(err.to_string().contains("at most 2"), "{err}");
    // Another app's are its own.
    let blog = AppId::parse("blog").unwrap();
    hooks.create(&blog, &body(&["*"])).await.unwrap();
    hooks.delete(&shop(), second.id).await.unwrap();
    hooks.create(&shop(), &body(&["*"])).await.unwrap();
    assert_eq!(HooksConfig::default().max_endpoints_per_app, 20);
}

#[tokio::test]
async fn creates_at_once_never_go_past_the_limit() {
    let config = HooksConfig {
        max_endpoints_per_app: 2,
        ..HooksConfig::default()
    };
    let hooks = hooks_over(Arc::new(MemoryHookStore::new()), config).await;
    // A name to resolve: every create counts the app's endpoints before any of them stores.
    let named = json!({"url": "http://localhost:9/hooks", "events": ["*"]});
    let shop = shop();
    let creates = (0..5).map(|_| hooks.create(&shop, &named));
    let results = futures_util::future::join_all(creates).await;
    let created = results.iter().filter(|r| r.is_ok()).count();
    let refused = results
        .iter()
        .filter(|r| matches!(r, Err(HooksError::TooMany { max: 2 })))
        .count();
    assert_eq!((created, refused), (2, 3), "{results:?}");
    assert_eq!(hooks.list(&shop).await.unwrap().len(), 2);
}

#[tokio::test]
async fn a_rotated_secret_signs_too_until_its_overlap_ends() {
    let hooks = hooks().await;
    let (endpoint, first) = hooks.create(&shop(), &body(&["*"])).await.unwrap();
    let stored = hooks.stored(&shop(), endpoint.id).await.unwrap();
    assert_eq!(
        seal::signing_secrets(hooks.sealer(), &stored, now_ms()).unwrap(),
        vec![first.clone()]
    );

    let before = now_ms();
    let overlap = Duration::from_secs(3600);
    let second = hooks
        .rotate_secret(&shop(), endpoint.id, overlap)
        .await
        .unwrap();
    assert_ne!(first, second);
    let stored = hooks.stored(&shop(), endpoint.id).await.unwrap();
    let (_, until) = stored.previous_secret.clone().unwrap();
    assert!(until >= before + 3_600_000 && until <= now_ms() + 3_600_000);
    assert_eq!(
        seal::signing_secrets(hooks.sealer(), &stored, until - 1).unwrap(),
        [second.clone(), first.clone()]
    );
    assert_eq!(
        seal::signing_secrets(hooks.sealer(), &stored, until).unwrap(),
        vec![second.clone()]
    );

    let err = hooks
        .rotate_secret(
            &shop(),
            endpoint.id,
            MAX_ROTATE_OVERLAP + Duration::from_secs(1),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&err, HooksError::BadInput { field, .. } if field == "overlap_seconds"),
        "{err}"
    );
    // The secrets are sealed at rest.
    assert!(!stored
        .secret
        .windows(second.bytes().len())
        .any(|w| w == second.bytes()));
}

#[tokio::test]
async fn the_listener_queues_only_what_an_enabled_endpoint_wants() {
    let hooks = hooks().await;
    let listener = hooks.listener();
    // Nothing configured: nothing queued.
    listener.on_event(&connected(&shop()));
    assert!(taken(&hooks).is_empty());

    let (endpoint, _) = hooks
        .create(&shop(), &body(&["client.connected"]))
        .await
        .unwrap();
    listener.on_event(&LifecycleEvent::UserOffline {
        app: shop(),
        sub: "al".into(),
    });
    listener.on_event(&connected(&AppId::parse("blog").unwrap()));
    assert!(taken(&hooks).is_empty());
    listener.on_event(&connected(&shop()));
    let queued = taken(&hooks);
    assert_eq!(queued.len(), 1);
    assert_eq!(queued[0].kind, EventType::ClientConnected);
    assert_eq!(queued[0].app, shop());

    hooks
        .update(&shop(), endpoint.id, &json!({"enabled": false}))
        .await
        .unwrap();
    listener.on_event(&connected(&shop()));
    assert!(taken(&hooks).is_empty());
}

#[tokio::test]
async fn a_full_node_queue_drops_events() {
    let config = HooksConfig {
        node_queue: 2,
        ..HooksConfig::default()
    };
    let hooks = hooks_over(Arc::new(MemoryHookStore::new()), config).await;
    hooks.create(&shop(), &body(&["*"])).await.unwrap();
    let listener = hooks.listener();
    for _ in 0..5 {
        listener.on_event(&connected(&shop()));
    }
    assert_eq!(taken(&hooks).len(), 2);
}

#[tokio::test]
async fn a_test_request_arrives_signed_and_says_what_came_of_it() {
    let receiver = crate::sender::tests::Receiver::start().await;
    let hooks = hooks().await;
    let (endpoint, secret) = hooks
        .create(
            &shop(),
            &json!({"url": receiver.url("/ok"), "events": ["*"], "enabled": false}),
        )
        .await
        .unwrap();
    let outcome = hooks.test(&shop(), endpoint.id).await.unwrap();
    assert!(outcome.delivered, "{outcome:?}");
    assert_eq!(
        (outcome.status, outcome.error.as_deref()),
        (Some(200), None)
    );
    let received = receiver.received();
    assert_eq!(received.len(), 1);
    let request = &received[0];
    let sent: Value = serde_json::from_slice(&request.body).unwrap();
    let event = &sent["events"][0];
    assert_eq!(event["type"], "hook.test");
    assert_eq!(event["app"], "shop");
    assert_eq!(event["data"], json!({"endpoint": endpoint.id}));
    let header = |name: &str| request.headers[name].to_str().unwrap().to_owned();
    let id = header("webhook-id");
    assert!(id.starts_with("msg_") && id.ends_with("_1"), "{id}");
    let timestamp: i64 = header("webhook-timestamp").parse().unwrap();
    assert_eq!(
        header("webhook-signature"),
        secret.sign(&id, timestamp, &request.body)
    );
    // Nothing was queued.
    assert_eq!(hooks.list(&shop()).await.unwrap()[0].depth.queued, 0);

    let closed = hooks.create(&shop(), &body(&["*"])).await.unwrap().0;
    let outcome = hooks.test(&shop(), closed.id).await.unwrap();
    assert!(!outcome.delivered);
    assert_eq!(outcome.status, None);
    assert!(outcome.error.is_some());
}

mod listening;
