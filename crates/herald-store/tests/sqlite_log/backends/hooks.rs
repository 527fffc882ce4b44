//! Webhook endpoints and their queues (`HookStore`, through [`Backend::hooks`]) on both
//! backends, with the helpers [`super::hooks_queue`] shares: endpoints kept per app (another
//! app can neither read, change, rotate nor delete one), and no more of them per app than
//! asked, even created at once; the offline debounce (withdrawn by the user's return while not
//! due, not once due, not while leased; by a withdrawal, which is never queued itself); a full
//! queue and a missing
//! endpoint dropping; an endpoint's and an app's deletion taking their rows; depth and the next
//! due time. On PostgreSQL, nodes leasing (and settling) at once never get the same
//! endpoint. Leases, batches and settlements are in [`super::hooks_queue`].

use std::collections::HashSet;
use std::sync::Arc;

use herald_core::tenancy::App;
use herald_core::tenant::AppId;
use herald_hooks::endpoint::{EndpointId, Format};
use herald_hooks::event::{EventSet, EventType};
use herald_hooks::store::{
    CreateEndpointError, EndpointPatch, Enqueue, Enqueued, Hold, HookStore, LeasedBatch,
    NewEndpoint, Settlement,
};
use herald_hooks::StoredEndpoint;
use herald_store::{PostgresOptions, PostgresStore};

use super::{Backend, RecordingSink};

crate::on_both!(
    endpoints_are_kept_per_app,
    an_app_never_has_more_endpoints_than_asked,
    a_return_withdraws_a_pending_offline,
    a_withdrawal_withdraws_and_is_never_queued,
    full_queues_and_deletions_drop_events,
    depth_and_next_due,
);

pub(super) fn app(id: &str) -> AppId {
    AppId::parse(id).unwrap()
}

pub(super) fn new_endpoint(app: &AppId, url: &str) -> NewEndpoint {
    NewEndpoint {
        app: app.clone(),
        url: url.into(),
        description: String::new(),
        events: EventSet::all(),
        channels: Vec::new(),
        enabled: true,
        offline_delay_ms: 3_000,
        secret: b"sealed-secret".to_vec(),
        created_ms: 1_000,
        format: Format::Standard,
    }
}

/// Most endpoints per app the helpers ask for (more than any test creates).
pub(super) const MANY: usize = 1_000;

pub(super) async fn endpoint(s: &dyn HookStore, app_id: &str) -> EndpointId {
    let url = format!("https://{app_id}.example/hook");
    s.create_endpoint(new_endpoint(&app(app_id), &url), MANY)
        .await
        .unwrap()
        .endpoint
        .id
}

/// An event whose payload (and id) is `name`.
pub(super) fn event(endpoint: EndpointId, name: &str, due_ms: i64) -> Enqueue {
    Enqueue {
        endpoint,
        event_id: format!("evt_{name}"),
        kind: EventType::ClientConnected,
        due_ms,
        payload: name.into(),
        hold: None,
    }
}

pub(super) fn offline(endpoint: EndpointId, user: &str, due_ms: i64) -> Enqueue {
    Enqueue {
        kind: EventType::UserOffline,
        hold: Some(Hold::Offline { user: user.into() }),
        ..event(endpoint, &format!("offline:{user}@{due_ms}"), due_ms)
    }
}

pub(super) fn online(endpoint: EndpointId, user: &str, due_ms: i64) -> Enqueue {
    Enqueue {
        kind: EventType::UserOnline,
        hold: Some(Hold::Online { user: user.into() }),
        ..event(endpoint, &format!("online:{user}@{due_ms}"), due_ms)
    }
}

/// A `user.online` for an endpoint that did not ask for it: it only withdraws.
pub(super) fn withdrawal(endpoint: EndpointId, user: &str, due_ms: i64) -> Enqueue {
    Enqueue {
        kind: EventType::UserOnline,
        hold: Some(Hold::Withdraw { user: user.into() }),
        ..event(endpoint, &format!("withdrawal:{user}@{due_ms}"), due_ms)
    }
}

pub(super) fn counts(queued: u64, withdrawn: u64, dropped: u64) -> Enqueued {
    Enqueued {
        queued,
        withdrawn,
        dropped,
    }
}

/// Leases at `now_ms` (up to 10 endpoints, for 1 s, no batch delay).
pub(super) async fn lease(s: &dyn HookStore, now_ms: i64, batch_max: usize) -> Vec<LeasedBatch> {
    s.lease(now_ms, 10, 1_000, batch_max, 0, &[]).await.unwrap()
}

/// Each leased endpoint with its batch's payloads, in the order leased.
pub(super) fn batches(leased: &[LeasedBatch]) -> Vec<(EndpointId, Vec<String>)> {
    leased
        .iter()
        .map(|l| {
            let payloads = l.events.iter().map(|e| e.payload.clone()).collect();
            (l.endpoint.endpoint.id, payloads)
        })
        .collect()
}

pub(super) fn delivered(l: &LeasedBatch) -> (EndpointId, i64, Settlement) {
    let rows = l.events.iter().map(|e| e.row).collect();
    (
        l.endpoint.endpoint.id,
        l.lease_until_ms,
        Settlement::Delivered { rows },
    )
}

/// `queued` and `dead` of `endpoint` as depth reports them.
pub(super) async fn queued_and_dead(s: &dyn HookStore, endpoint: EndpointId) -> (u64, u64) {
    let depth = s.depth(None).await.unwrap();
    let d = depth
        .iter()
        .find(|d| d.endpoint == endpoint)
        .expect("listed");
    (d.queued, d.dead)
}

/// Rows in `hook_events`, read from the database itself.
pub(super) async fn event_rows(b: &Backend) -> i64 {
    if let Some(dir) = b.sqlite_dir() {
        let db = rusqlite::Connection::open(dir.join(herald_store::DB_FILE_NAME)).unwrap();
        return db
            .query_row("SELECT count(*) FROM hook_events", [], |r| r.get(0))
            .unwrap();
    }
    let url = b.postgres_url().unwrap();
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    let row = client
        .query_one("SELECT count(*) FROM hook_events", &[])
        .await
        .unwrap();
    row.get(0)
}

pub(super) fn strings(names: &[&str]) -> Vec<String> {
    names.iter().map(|n| n.to_string()).collect()
}

async fn endpoints_are_kept_per_app(b: Backend) {
    let s = b.hooks();
    let (shop, other) = (app("shop"), app("other"));
    let first = s
        .create_endpoint(new_endpoint(&shop, "https://a.example/hook"), MANY)
        .await
        .unwrap();
    let foreign = s
        .create_endpoint(new_endpoint(&other, "https://c.example/hook"), MANY)
        .await
        .unwrap();
    let asked = NewEndpoint {
        description: "second".into(),
        events: [EventType::UserOnline, EventType::UserOffline]
            .into_iter()
            .collect(),
        channels: vec!["rooms/*".into()],
        enabled: false,
        offline_delay_ms: 5_000,
        format: Format::Pusher,
        ..new_endpoint(&shop, "http://b.example/in")
    };
    let second = s.create_endpoint(asked.clone(), MANY).await.unwrap();
    assert!(first.endpoint.id < foreign.endpoint.id && foreign.endpoint.id < second.endpoint.id);
    let e = &second.endpoint;
    assert_eq!(
        (&e.app, e.url.as_str(), e.description.as_str(), e.events),
        (&shop, "http://b.example/in", "second", asked.events)
    );
    assert_eq!(
        (&e.channels, e.enabled, e.offline_delay_ms, e.created_ms),
        (&asked.channels, false, 5_000, 1_000)
    );
    assert_eq!(
        (first.endpoint.format, e.format),
        (Format::Standard, Format::Pusher)
    );
    let read = s.endpoint(&shop, e.id).await.unwrap().unwrap();
    assert_eq!(read.endpoint.format, Format::Pusher);
    assert_eq!(
        (second.secret.as_slice(), second.previous_secret.as_ref()),
        (&b"sealed-secret"[..], None)
    );

    let ids = |list: Vec<StoredEndpoint>| list.iter().map(|e| e.endpoint.id).collect::<Vec<_>>();
    assert_eq!(
        ids(s.endpoints(None).await.unwrap()),
        [first.endpoint.id, foreign.endpoint.id, second.endpoint.id]
    );
    assert_eq!(
        ids(s.endpoints(Some(&shop)).await.unwrap()),
        [first.endpoint.id, second.endpoint.id]
    );
    assert_eq!(
        s.endpoint(&shop, second.endpoint.id).await.unwrap(),
        Some(second.clone())
    );
    assert_eq!(s.endpoint(&other, second.endpoint.id).await.unwrap(), None);

    let patch = EndpointPatch {
        url: Some("https://b.example/new".into()),
        enabled: Some(true),
        events: Some([EventType::ChannelVacated].into_iter().collect()),
        ..EndpointPatch::default()
    };
    let id = second.endpoint.id;
    assert_eq!(s.update_endpoint(&other, id, &patch).await.unwrap(), None);
    assert_eq!(s.endpoint(&shop, id).await.unwrap(), Some(second.clone()));
    let updated = s.update_endpoint(&shop, id, &patch).await.unwrap().unwrap();
    let mut expected = second.clone();
    expected.endpoint.url = "https://b.example/new".into();
    expected.endpoint.enabled = true;
    expected.endpoint.events = [EventType::ChannelVacated].into_iter().collect();
    assert_eq!(updated, expected, "only the patched fields change");
    assert_eq!(s.endpoint(&shop, id).await.unwrap(), Some(expected.clone()));
    let unchanged = s
        .update_endpoint(&shop, id, &EndpointPatch::default())
        .await;
    assert_eq!(unchanged.unwrap(), Some(expected.clone()));

    assert!(!s
        .rotate_secret(&other, id, b"stolen".to_vec(), 9)
        .await
        .unwrap());
    assert!(s
        .rotate_secret(&shop, id, b"second-key".to_vec(), 9_000)
        .await
        .unwrap());
    let rotated = s.endpoint(&shop, id).await.unwrap().unwrap();
    assert_eq!(rotated.secret, b"second-key");
    assert_eq!(
        rotated.previous_secret,
        Some((b"sealed-secret".to_vec(), 9_000))
    );
    assert!(s
        .rotate_secret(&shop, id, b"third-key".to_vec(), 10_000)
        .await
        .unwrap());
    let rotated = s.endpoint(&shop, id).await.unwrap().unwrap();
    assert_eq!(rotated.secret, b"third-key");
    assert_eq!(
        rotated.previous_secret,
        Some((b"second-key".to_vec(), 10_000))
    );

    assert!(!s.delete_endpoint(&other, id).await.unwrap());
    assert!(s.endpoint(&shop, id).await.unwrap().is_some());
    assert!(s.delete_endpoint(&shop, id).await.unwrap());
    assert_eq!(s.endpoint(&shop, id).await.unwrap(), None);
    assert!(!s.delete_endpoint(&shop, id).await.unwrap());
    assert_eq!(
        ids(s.endpoints(Some(&shop)).await.unwrap()),
        [first.endpoint.id]
    );
}

async fn a_return_withdraws_a_pending_offline(b: Backend) {
    let s = b.hooks();
    let one = endpoint(s, "shop").await;
    let added = s.enqueue(vec![offline(one, "alice", 4_000)], 100).await;
    assert_eq!(added.unwrap(), counts(1, 0, 0));
    let back = s.enqueue(vec![online(one, "alice", 2_000)], 100).await;
    assert_eq!(back.unwrap(), counts(0, 1, 0), "both gone");
    assert_eq!(queued_and_dead(s, one).await, (0, 0));
    // In one call, in order; another user's return withdraws nothing.
    let calls = vec![
        offline(one, "bob", 4_000),
        offline(one, "carol", 4_000),
        online(one, "bob", 2_000),
        online(one, "dave", 2_000),
    ];
    assert_eq!(s.enqueue(calls, 100).await.unwrap(), counts(3, 1, 0));
    // Once due, the offline is sent and so is the online.
    let late = vec![offline(one, "erin", 4_000), online(one, "erin", 4_000)];
    assert_eq!(s.enqueue(late, 100).await.unwrap(), counts(2, 0, 0));
    let sent = lease(s, 10_000, 10).await;
    assert_eq!(
        batches(&sent),
        [(
            one,
            strings(&[
                "online:dave@2000",
                "offline:carol@4000",
                "offline:erin@4000",
                "online:erin@4000"
            ])
        )]
    );
    s.settle(10_000, vec![delivered(&sent[0])]).await.unwrap();

    // Leased with its batch, an offline is not withdrawn: the batch may have been sent.
    let two = endpoint(s, "shop").await;
    s.enqueue(vec![offline(two, "frank", 4_000)], 100)
        .await
        .unwrap();
    let leased = lease(s, 4_000, 10).await;
    assert_eq!(batches(&leased), [(two, strings(&["offline:frank@4000"]))]);
    let slow = s.enqueue(vec![online(two, "frank", 3_500)], 100).await;
    assert_eq!(slow.unwrap(), counts(1, 0, 0));
    assert_eq!(event_rows(&b).await, 2);
}

async fn a_withdrawal_withdraws_and_is_never_queued(b: Backend) {
    let s = b.hooks();
    let one = endpoint(s, "shop").await;
    s.enqueue(vec![offline(one, "alice", 4_000)], 100)
        .await
        .unwrap();
    let back = s.enqueue(vec![withdrawal(one, "alice", 2_000)], 100).await;
    assert_eq!(back.unwrap(), counts(0, 1, 0), "withdrawn, nothing queued");
    assert_eq!(queued_and_dead(s, one).await, (0, 0));
    assert_eq!(event_rows(&b).await, 0);
    // Nothing held, another user's, or held but due: nothing withdrawn, nothing queued.
    let calls = vec![
        withdrawal(one, "alice", 2_500),
        offline(one, "bob", 4_000),
        withdrawal(one, "carol", 2_000),
        offline(one, "erin", 4_000),
        withdrawal(one, "erin", 4_000),
    ];
    assert_eq!(s.enqueue(calls, 100).await.unwrap(), counts(2, 0, 0));
    // A full queue drops no withdrawal (and still lets it withdraw); a deleted endpoint's is
    // nothing either.
    let full = vec![
        withdrawal(one, "dave", 2_000),
        withdrawal(9_999_999, "bob", 2_000),
    ];
    assert_eq!(s.enqueue(full, 2).await.unwrap(), counts(0, 0, 0));
    let full = vec![withdrawal(one, "bob", 2_000), event(one, "a", 10)];
    assert_eq!(s.enqueue(full, 2).await.unwrap(), counts(1, 1, 0));
    let sent = lease(s, 10_000, 10).await;
    assert_eq!(
        batches(&sent),
        [(one, strings(&["a", "offline:erin@4000"]))]
    );
    s.settle(10_000, vec![delivered(&sent[0])]).await.unwrap();

    // Leased with its batch, an offline is not withdrawn.
    s.enqueue(vec![offline(one, "frank", 12_000)], 100)
        .await
        .unwrap();
    let leased = lease(s, 12_000, 10).await;
    assert_eq!(batches(&leased), [(one, strings(&["offline:frank@12000"]))]);
    let slow = s.enqueue(vec![withdrawal(one, "frank", 11_500)], 100).await;
    assert_eq!(slow.unwrap(), counts(0, 0, 0));
    assert_eq!(event_rows(&b).await, 1);
}

async fn an_app_never_has_more_endpoints_than_asked(b: Backend) {
    let s = b.hooks();
    let (shop, other) = (app("shop"), app("other"));
    let create = |app: &AppId| s.create_endpoint(new_endpoint(app, "https://a.example/"), 2);
    let first = create(&shop).await.unwrap();
    create(&other).await.unwrap();
    create(&shop).await.unwrap();
    let refused = create(&shop).await;
    assert!(
        matches!(refused, Err(CreateEndpointError::TooMany { max: 2 })),
        "{refused:?}"
    );
    assert_eq!(s.endpoints(Some(&shop)).await.unwrap().len(), 2);
    assert!(s.delete_endpoint(&shop, first.endpoint.id).await.unwrap());
    create(&shop).await.unwrap();

    // Created at once (on PostgreSQL, each on its own connection): never past the limit.
    for round in 0..5 {
        let rush = app(&format!("rush{round}"));
        let results = futures_util::future::join_all((0..12).map(|_| create(&rush))).await;
        let created = results.iter().filter(|r| r.is_ok()).count();
        let refused = results
            .iter()
            .filter(|r| matches!(r, Err(CreateEndpointError::TooMany { max: 2 })))
            .count();
        assert_eq!((created, refused), (2, 10), "{results:?}");
        assert_eq!(s.endpoints(Some(&rush)).await.unwrap().len(), 2);
    }
}

async fn full_queues_and_deletions_drop_events(b: Backend) {
    let s = b.hooks();
    let shop = app("shop");
    b.store()
        .create_app(&App {
            id: shop.clone(),
            name: "Shop".into(),
            token_secret: None,
            limits: Default::default(),
            created: 1,
        })
        .await
        .unwrap();
    let (one, two, theirs) = (
        endpoint(s, "shop").await,
        endpoint(s, "shop").await,
        endpoint(s, "other").await,
    );
    let queue = vec![
        event(one, "a", 10),
        event(one, "b", 10),
        event(one, "c", 10),
        event(two, "x", 10),
        event(9_999_999, "nowhere", 10),
    ];
    assert_eq!(s.enqueue(queue, 2).await.unwrap(), counts(3, 0, 2));
    assert_eq!(queued_and_dead(s, one).await, (2, 0));
    // A withdrawing return needs no room.
    let at_max = vec![event(one, "d", 10), offline(two, "u", 900)];
    assert_eq!(s.enqueue(at_max, 2).await.unwrap(), counts(1, 0, 1));
    let back = s
        .enqueue(vec![online(two, "u", 800), event(two, "y", 10)], 2)
        .await;
    assert_eq!(back.unwrap(), counts(1, 1, 0));
    s.enqueue(vec![event(theirs, "o", 10)], 2).await.unwrap();

    // One's batch dies, then the endpoint is deleted: its queue and dead letters go with it.
    let leased = s.lease(100, 10, 1_000, 1, 0, &[two, theirs]).await.unwrap();
    let rows = leased[0].events.iter().map(|e| e.row).collect();
    let reason = "gone".to_string();
    s.settle(
        100,
        vec![(
            one,
            leased[0].lease_until_ms,
            Settlement::Dead { rows, reason },
        )],
    )
    .await
    .unwrap();
    assert_eq!(queued_and_dead(s, one).await, (1, 1));
    assert_eq!(event_rows(&b).await, 5);
    assert!(s.delete_endpoint(&shop, one).await.unwrap());
    assert_eq!(event_rows(&b).await, 3);
    assert!(s
        .dead_letters(&shop, Some(one), None, 10)
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        s.enqueue(vec![event(one, "e", 10)], 100).await.unwrap(),
        counts(0, 0, 1)
    );

    // Deleting the app empties its endpoints and their rows; another app's stay.
    let leased = s.lease(100, 10, 1_000, 1, 0, &[theirs]).await.unwrap();
    assert_eq!(batches(&leased), [(two, strings(&["x"]))]);
    let (rows, reason) = (vec![leased[0].events[0].row], "gone".to_string());
    s.settle(
        100,
        vec![(
            two,
            leased[0].lease_until_ms,
            Settlement::Dead { rows, reason },
        )],
    )
    .await
    .unwrap();
    assert!(b.store().delete_app(&shop).await.unwrap());
    assert!(s.endpoints(Some(&shop)).await.unwrap().is_empty());
    assert!(s.depth(Some(&shop)).await.unwrap().is_empty());
    assert!(s
        .dead_letters(&shop, None, None, 10)
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        event_rows(&b).await,
        1,
        "only the other app's event is left"
    );
    assert_eq!(
        s.enqueue(vec![event(two, "z", 10)], 100).await.unwrap(),
        counts(0, 0, 1)
    );
    assert_eq!(s.endpoints(None).await.unwrap().len(), 1);
    assert_eq!(queued_and_dead(s, theirs).await, (1, 0));
}

async fn depth_and_next_due(b: Backend) {
    let s = b.hooks();
    assert_eq!(s.next_due().await.unwrap(), None);
    let (one, off, three) = (
        endpoint(s, "shop").await,
        endpoint(s, "shop").await,
        endpoint(s, "other").await,
    );
    let disable = EndpointPatch {
        enabled: Some(false),
        ..EndpointPatch::default()
    };
    s.update_endpoint(&app("shop"), off, &disable)
        .await
        .unwrap()
        .unwrap();
    let queue = vec![
        event(one, "a", 500),
        event(one, "b", 300),
        event(off, "z", 100),
        offline(three, "u", 900),
    ];
    s.enqueue(queue, 100).await.unwrap();
    assert_eq!(
        s.next_due().await.unwrap(),
        Some(300),
        "a disabled endpoint waits"
    );
    let all = s.depth(None).await.unwrap();
    let figures: Vec<(EndpointId, u64, Option<i64>)> = all
        .iter()
        .map(|d| (d.endpoint, d.queued, d.oldest_due_ms))
        .collect();
    assert_eq!(
        figures,
        [
            (one, 2, Some(300)),
            (off, 1, Some(100)),
            (three, 1, Some(900))
        ]
    );
    assert!(all
        .iter()
        .all(|d| d.dead == 0 && d.delivered == 0 && d.failures == 0));
    let theirs = s.depth(Some(&app("other"))).await.unwrap();
    assert_eq!(
        theirs.iter().map(|d| d.endpoint).collect::<Vec<_>>(),
        [three]
    );

    let leased = s.lease(10_000, 10, 1_000, 1, 0, &[three]).await.unwrap();
    assert_eq!(
        batches(&leased),
        [(one, strings(&["b"]))],
        "not the disabled one"
    );
    assert_eq!(
        s.next_due().await.unwrap(),
        Some(900),
        "one is leased until 11000"
    );
    assert!(s.delete_endpoint(&app("other"), three).await.unwrap());
    assert_eq!(s.next_due().await.unwrap(), Some(11_000));
    let retry = Settlement::Retry {
        next_attempt_ms: 20_000,
        reason: "HTTP 500".into(),
    };
    s.settle(10_000, vec![(one, leased[0].lease_until_ms, retry)])
        .await
        .unwrap();
    assert_eq!(s.next_due().await.unwrap(), Some(20_000));
    s.update_endpoint(&app("shop"), one, &disable)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        s.next_due().await.unwrap(),
        None,
        "nothing an enabled endpoint holds"
    );
}

/// Nodes on one PostgreSQL database leasing at once never hold the same endpoint: each
/// holds its own, and while nodes lease, deliver and settle over and over, every event is
/// delivered once, in batches that are never empty and in each endpoint's order.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn nodes_never_lease_one_endpoint_at_once() {
    let b = Backend::postgres().await;
    let url = b.postgres_url().unwrap().to_string();
    let s = b.hooks();
    let mut queue = Vec::new();
    for _ in 0..40 {
        let id = endpoint(s, "shop").await;
        queue.extend((0..6).map(|n| event(id, &format!("{id}:{n}"), 10 + n)));
    }
    s.enqueue(queue, 100).await.unwrap();
    let open = || async {
        let sink = Arc::new(RecordingSink::default());
        PostgresStore::open(&url, PostgresOptions::default(), sink)
            .await
            .unwrap()
    };
    let nodes = [open().await, open().await, open().await];

    // Leased and held: each endpoint goes to one node.
    let held = nodes.iter().map(|node| {
        let node = node.clone();
        tokio::spawn(async move {
            let mut got = Vec::new();
            for _ in 0..20 {
                let leased = node.lease(100, 3, 60_000, 10, 0, &[]).await.unwrap();
                got.extend(leased.iter().map(|l| l.endpoint.endpoint.id));
            }
            got
        })
    });
    let mut all = Vec::new();
    for task in held.collect::<Vec<_>>() {
        all.extend(task.await.unwrap());
    }
    let distinct: HashSet<EndpointId> = all.iter().copied().collect();
    assert_eq!(
        distinct.len(),
        all.len(),
        "an endpoint leased twice: {all:?}"
    );
    assert_eq!(distinct.len(), 40);

    // Those leases run out; now each batch is settled as soon as it is leased.
    let churn = nodes.iter().map(|node| {
        let node = node.clone();
        tokio::spawn(async move {
            let mut sent = Vec::new();
            for _ in 0..200 {
                let leased = node.lease(60_100, 2, 60_000, 2, 0, &[]).await.unwrap();
                let mut settled = Vec::new();
                for l in &leased {
                    assert!(!l.events.is_empty(), "an empty batch");
                    sent.push(l.events.iter().map(|e| e.payload.clone()).collect());
                    settled.push(delivered(l));
                }
                node.settle(60_100, settled).await.unwrap();
            }
            sent
        })
    });
    let mut batches: Vec<Vec<String>> = Vec::new();
    for task in churn.collect::<Vec<_>>() {
        batches.extend(task.await.unwrap());
    }
    let events: Vec<&String> = batches.iter().flatten().collect();
    let once: HashSet<&String> = events.iter().copied().collect();
    assert_eq!(once.len(), events.len(), "an event delivered twice");
    assert_eq!(once.len(), 240, "every event delivered");
    for batch in &batches {
        let ns: Vec<i64> = batch
            .iter()
            .map(|p| p.split(':').nth(1).unwrap().parse().unwrap())
            .collect();
        assert!(ns.windows(2).all(|w| w[0] + 1 == w[1]), "{batch:?}");
    }
    assert!(s
        .depth(None)
        .await
        .unwrap()
        .iter()
        .all(|d| d.queued == 0 && d.delivered == 6));
}
