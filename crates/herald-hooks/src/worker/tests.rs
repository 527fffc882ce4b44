//! The worker over the in-memory store, sending to a real receiver on loopback: rounds driven
//! at chosen times (settlements, retries, the horizon, pauses), and the loop itself.

use std::time::Duration;

use herald_core::tenant::AppId;
use herald_providers::destination::Destinations;
use herald_push::credentials::sealer::generate_key;

use super::*;
use crate::event::{EventId, EventSet, EventType};
use crate::memory::MemoryHookStore;
use crate::sender::tests::{loopback_sender, Received, Receiver};
use crate::store::{EndpointDepth, Enqueue, NewEndpoint};

/// A time the rounds start from, milliseconds since the Unix epoch.
const T0: i64 = 1_700_000_000_000;

fn settings() -> WorkerSettings {
    WorkerSettings {
        batch_max: 100,
        batch_delay: Duration::from_secs(1),
        horizon: Duration::from_secs(60),
        request_timeout: Duration::from_secs(5),
    }
}

struct Fixture {
    store: Arc<MemoryHookStore>,
    sealer: Arc<Sealer>,
    worker: Arc<Worker>,
    receiver: Receiver,
    app: AppId,
    secret: SigningSecret,
}

impl Fixture {
    async fn new(settings: WorkerSettings) -> Fixture {
        Fixture::with_sender(settings, loopback_sender(Duration::from_secs(5))).await
    }

    async fn with_sender(settings: WorkerSettings, sender: Sender) -> Fixture {
        let store = Arc::new(MemoryHookStore::new());
        let sealer = Arc::new(Sealer::new(&generate_key()).unwrap());
        let worker = Worker::new(
            store.clone(),
            sender,
            sealer.clone(),
            settings,
            Arc::new(Notify::new()),
        );
        Fixture {
            store,
            sealer,
            worker: Arc::new(worker),
            receiver: Receiver::start().await,
            app: AppId::parse("shop").unwrap(),
            secret: SigningSecret::generate(),
        }
    }

    /// An endpoint at the receiver's `path`, its secret sealed with `sealer`.
    async fn endpoint_sealed_by(&self, path: &str, sealer: &Sealer) -> EndpointId {
        let new = NewEndpoint {
            app: self.app.clone(),
            url: self.receiver.url(path),
            description: String::new(),
            events: EventSet::all(),
            channels: Vec::new(),
            enabled: true,
            offline_delay_ms: 3_000,
            secret: seal::seal(sealer, &self.app, &self.secret),
            created_ms: T0,
            format: crate::endpoint::Format::Standard,
        };
        self.store
            .create_endpoint(new, 20)
            .await
            .unwrap()
            .endpoint
            .id
    }

    async fn endpoint(&self, path: &str) -> EndpointId {
        self.endpoint_sealed_by(path, &self.sealer).await
    }

    /// Queues `n` events for `endpoint`, due at `due_ms`; answers their ids.
    async fn queue(&self, endpoint: EndpointId, n: usize, due_ms: i64) -> Vec<String> {
        let ids: Vec<String> = (0..n)
            .map(|i| EventId::new(due_ms + i as i64).as_str().to_string())
            .collect();
        let events = ids
            .iter()
            .map(|id| Enqueue {
                endpoint,
                event_id: id.clone(),
                kind: EventType::ChannelOccupied,
                due_ms,
                payload: format!(r#"{{"id":"{id}","type":"channel.occupied"}}"#),
                hold: None,
            })
            .collect();
        self.store.enqueue(events, 1_000).await.unwrap();
        ids
    }

    async fn depth(&self, endpoint: EndpointId) -> EndpointDepth {
        let depth = self.store.depth(None).await.unwrap();
        depth.into_iter().find(|d| d.endpoint == endpoint).unwrap()
    }

    async fn round(&self, now_ms: i64) -> Vec<BatchReport> {
        self.worker.round(now_ms).await.unwrap()
    }
}

/// The ids of the events a request carried.
fn event_ids(request: &Received) -> Vec<String> {
    let body: serde_json::Value = serde_json::from_slice(&request.body).unwrap();
    body["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap().to_string())
        .collect()
}

fn header<'a>(request: &'a Received, name: &str) -> &'a str {
    request.headers.get(name).unwrap().to_str().unwrap()
}

/// The signatures a receiver holding `secret` computes for `request`.
fn signed_by(secret: &SigningSecret, request: &Received) -> String {
    let timestamp = header(request, "webhook-timestamp").parse().unwrap();
    secret.sign(header(request, "webhook-id"), timestamp, &request.body)
}

fn retry_at(settlement: &Settlement) -> i64 {
    match settlement {
        Settlement::Retry {
            next_attempt_ms, ..
        } => *next_attempt_ms,
        other => panic!("not a retry: {other:?}"),
    }
}

#[tokio::test]
async fn a_due_batch_is_delivered_signed_in_order_and_settled() {
    let f = Fixture::new(settings()).await;
    let id = f.endpoint("/ok").await;
    let ids = f.queue(id, 3, T0).await;
    // The oldest has not waited the batch delay for others to join it.
    assert!(f.round(T0 + 500).await.is_empty());
    let reports = f.round(T0 + 1_000).await;
    assert_eq!(reports.len(), 1);
    let report = &reports[0];
    assert_eq!((report.endpoint, report.events), (id, 3));
    assert_eq!(report.outcome.as_ref().unwrap().result.label(), "ok");
    assert!(matches!(&report.settlement, Settlement::Delivered { rows } if rows.len() == 3));

    let received = f.receiver.received();
    assert_eq!(received.len(), 1);
    let request = &received[0];
    assert_eq!(event_ids(request), ids);
    assert_eq!(header(request, "webhook-id"), webhook_id(&ids[0], 3));
    assert_eq!(
        header(request, "webhook-signature"),
        signed_by(&f.secret, request)
    );
    let depth = f.depth(id).await;
    assert_eq!((depth.queued, depth.delivered, depth.failures), (0, 3, 0));
    assert!(f.round(T0 + 10_000).await.is_empty());
}

#[tokio::test]
async fn a_backlog_goes_out_in_fewer_larger_requests_and_a_quiet_endpoint_in_normal_ones() {
    let f = Fixture::new(WorkerSettings {
        batch_max: 10,
        ..settings()
    })
    .await;
    let id = f.endpoint("/ok").await;
    // 250 due, more than batch_max: up to 10 x batch_max per request.
    let ids = f.queue(id, 250, T0).await;
    let mut sizes = Vec::new();
    for round in 0..5 {
        for report in f.round(T0 + round).await {
            sizes.push(report.events);
        }
    }
    assert_eq!(sizes, [100, 100, 50], "3 requests, not 25");
    let sent: Vec<String> = f.receiver.received().iter().flat_map(event_ids).collect();
    assert_eq!(sent, ids, "every event once, in order");

    // Eight due: fewer than batch_max, sent once the oldest waited the delay, as they are.
    f.queue(id, 8, T0 + 10).await;
    assert!(f.round(T0 + 500).await.is_empty());
    let reports = f.round(T0 + 1_010).await;
    assert_eq!(reports.iter().map(|r| r.events).collect::<Vec<_>>(), [8]);
    // Fifteen due: ready at once (batch_max are due), sent in one grown batch.
    f.queue(id, 15, T0 + 2_000).await;
    let reports = f.round(T0 + 2_000).await;
    assert_eq!(reports.iter().map(|r| r.events).collect::<Vec<_>>(), [15]);
}

#[test]
fn a_grown_batch_is_ten_times_the_normal_at_most_a_thousand() {
    assert_eq!(Batching::growing(100, 0).most, 1_000);
    assert_eq!(Batching::growing(10, 0).most, 100);
    assert_eq!(Batching::growing(500, 0).most, 1_000);
    assert_eq!(Batching::growing(1_000, 0).most, 1_000);
    assert_eq!(
        Batching::growing(1, 7),
        Batching {
            size: 1,
            most: 10,
            delay_ms: 7
        }
    );
}

#[tokio::test]
async fn a_rotated_secret_signs_too_while_its_overlap_lasts() {
    let f = Fixture::new(settings()).await;
    let id = f.endpoint("/ok").await;
    let new = SigningSecret::generate();
    let sealed = seal::seal(&f.sealer, &f.app, &new);
    assert!(f
        .store
        .rotate_secret(&f.app, id, sealed, T0 + 10_000)
        .await
        .unwrap());
    f.queue(id, 1, T0).await;
    f.round(T0 + 1_000).await;
    f.queue(id, 1, T0 + 20_000).await;
    f.round(T0 + 21_000).await;
    let received = f.receiver.received();
    assert_eq!(received.len(), 2);
    let during = format!(
        "{} {}",
        signed_by(&new, &received[0]),
        signed_by(&f.secret, &received[0])
    );
    assert_eq!(header(&received[0], "webhook-signature"), during);
    assert_eq!(
        header(&received[1], "webhook-signature"),
        signed_by(&new, &received[1])
    );
}

#[tokio::test]
async fn a_retry_after_is_honoured_and_the_events_wait_for_it() {
    let f = Fixture::new(settings()).await;
    let id = f.endpoint("/unavailable").await;
    f.queue(id, 2, T0).await;
    let now = T0 + 1_000;
    let reports = f.round(now).await;
    assert_eq!(
        reports[0].settlement,
        Settlement::Retry {
            next_attempt_ms: now + 120_000,
            reason: "HTTP 503: down for maintenance".into()
        }
    );
    assert_eq!(
        reports[0].outcome.as_ref().unwrap().result.label(),
        "http_5xx"
    );
    let depth = f.depth(id).await;
    assert_eq!((depth.queued, depth.failures), (2, 1));
    assert_eq!(
        depth.last_error.as_deref(),
        Some("HTTP 503: down for maintenance")
    );
    assert!(f.round(now + 119_999).await.is_empty());
    let again = f.round(now + 120_000).await;
    assert_eq!(again.len(), 1);
    assert_eq!(f.receiver.received().len(), 2);
}

#[tokio::test]
async fn retries_back_off_and_a_retry_after_is_capped() {
    let f = Fixture::new(settings()).await;
    let hours = |h: u64| Duration::from_secs(h * 3600);
    assert_eq!(f.worker.retry_wait(1, Some(hours(2))), hours(1));
    assert_eq!(
        f.worker.retry_wait(1, Some(Duration::from_secs(90))),
        Duration::from_secs(90)
    );
    for _ in 0..20 {
        let first = f.worker.retry_wait(1, None);
        assert!(first >= Duration::from_millis(500) && first <= Duration::from_secs(1));
        let late = f.worker.retry_wait(40, None);
        assert!(late >= Duration::from_secs(300) && late <= Duration::from_secs(600));
    }
}

#[tokio::test]
async fn failing_past_the_horizon_makes_dead_letters_and_the_endpoint_goes_on() {
    let f = Fixture::new(settings()).await;
    let id = f.endpoint("/fail").await;
    let ids = f.queue(id, 2, T0).await;
    let first = T0 + 1_000;
    let next = retry_at(&f.round(first).await[0].settlement);
    // Within the horizon (60 s since the first failure): retried.
    let after = retry_at(&f.round(next).await[0].settlement);
    assert!(after < first + 60_000);
    let reports = f.round(first + 60_000).await;
    assert_eq!(
        reports[0].settlement,
        Settlement::Dead {
            rows: vec![1, 2],
            reason: "HTTP 500: boom at line 3".into()
        }
    );
    let dead = f
        .store
        .dead_letters(&f.app, Some(id), None, 10)
        .await
        .unwrap();
    let dead_ids: Vec<&str> = dead.iter().map(|d| d.event_id.as_str()).collect();
    assert_eq!(dead_ids, ids);
    assert_eq!(f.depth(id).await.queued, 0);
    // Its next batch is tried at once.
    f.queue(id, 1, first + 60_000).await;
    assert_eq!(f.round(first + 61_000).await.len(), 1);
    assert_eq!(f.receiver.received().len(), 4);
}

#[tokio::test]
async fn five_failures_in_a_row_pause_the_endpoint_until_a_success() {
    let f = Fixture::new(WorkerSettings {
        horizon: Duration::from_secs(86_400),
        ..settings()
    })
    .await;
    let id = f.endpoint("/switch").await;
    f.receiver.set_status(500);
    f.queue(id, 1, T0).await;
    let mut now = T0 + 1_000;
    for failure in 1..=PAUSE_AFTER {
        let reports = f.round(now).await;
        assert_eq!(reports.len(), 1, "failure {failure}");
        let next = retry_at(&reports[0].settlement);
        let paused = f.worker.outbound.pauses().is_paused(&id, now);
        assert_eq!(paused, failure >= PAUSE_AFTER, "failure {failure}");
        now = next;
    }
    assert_eq!(f.depth(id).await.failures, PAUSE_AFTER);
    f.receiver.set_status(200);
    let reports = f.round(now).await;
    assert!(matches!(
        reports[0].settlement,
        Settlement::Delivered { .. }
    ));
    assert!(reports[0].resumed, "said once that it delivers again");
    assert!(f.worker.outbound.pauses().paused(now).is_empty());
    f.queue(id, 1, now).await;
    let reports = f.round(now + 1_000).await;
    assert!(!reports[0].resumed);
    assert_eq!(f.depth(id).await.failures, 0);
}

#[tokio::test]
async fn a_secret_that_does_not_open_fails_without_a_request() {
    let f = Fixture::new(settings()).await;
    let other = Sealer::new(&generate_key()).unwrap();
    let id = f.endpoint_sealed_by("/ok", &other).await;
    f.queue(id, 1, T0).await;
    let reports = f.round(T0 + 1_000).await;
    assert_eq!(reports[0].outcome, None);
    let Settlement::Retry { reason, .. } = &reports[0].settlement else {
        panic!("{:?}", reports[0].settlement);
    };
    assert!(reason.contains("signing secret"), "{reason}");
    assert!(f.receiver.received().is_empty());
}

#[tokio::test]
async fn a_refused_destination_fails_as_refused() {
    let public = Sender::new(Destinations::public_only(), Duration::from_secs(5)).unwrap();
    let f = Fixture::with_sender(settings(), public).await;
    let id = f.endpoint("/ok").await;
    f.queue(id, 1, T0).await;
    let reports = f.round(T0 + 1_000).await;
    assert_eq!(
        reports[0].outcome.as_ref().unwrap().result.label(),
        "refused"
    );
    assert!(matches!(reports[0].settlement, Settlement::Retry { .. }));
    assert!(f.receiver.received().is_empty());
}

#[tokio::test]
async fn the_loop_delivers_what_is_queued_and_stops_on_shutdown() {
    let f = Fixture::new(WorkerSettings {
        batch_delay: Duration::ZERO,
        ..settings()
    })
    .await;
    let id = f.endpoint("/ok").await;
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(f.worker.clone().run(shutdown.clone()));
    let ids = f.queue(id, 2, now_millis()).await;
    f.worker.wake.notify_one();
    let delivered = async {
        while f.depth(id).await.delivered < 2 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(20), delivered)
        .await
        .expect("the loop delivers the queued events");
    let received = f.receiver.received();
    assert_eq!(received.len(), 1);
    assert_eq!(event_ids(&received[0]), ids);
    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(20), running)
        .await
        .expect("the loop stops on shutdown")
        .unwrap();
}
