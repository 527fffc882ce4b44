//! The sender against a real HTTP receiver on loopback ([`Receiver`], also the worker's tests'
//! receiver): what it sends, and what it makes of each kind of answer.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use herald_core::tenant::AppId;
use herald_providers::destination::Destinations;

use super::*;
use crate::endpoint::Endpoint;
use crate::event::EventSet;

/// One request as the receiver got it.
#[derive(Debug, Clone)]
pub(crate) struct Received {
    pub(crate) path: String,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Bytes,
}

/// An HTTP receiver on `127.0.0.1:0` that records every request and answers by its path:
/// `/ok` 200, `/fail` 500, `/unavailable` 503 with `Retry-After: 120`, `/redirect` 302 to
/// `/ok?token=secret`, `/hang` never, `/huge` 500 with a body that never ends, `/switch` the
/// status last set with [`Receiver::set_status`] (200 at first).
pub(crate) struct Receiver {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Received>>>,
    switch: Arc<AtomicU16>,
    task: tokio::task::JoinHandle<()>,
}

#[derive(Clone)]
struct Shared {
    seen: Arc<Mutex<Vec<Received>>>,
    switch: Arc<AtomicU16>,
}

async fn answer(
    axum::extract::State(shared): axum::extract::State<Shared>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().to_string();
    shared.seen.lock().unwrap().push(Received {
        path: path.clone(),
        headers,
        body,
    });
    match path.as_str() {
        "/ok" => (StatusCode::OK, "thanks").into_response(),
        "/fail" => (StatusCode::INTERNAL_SERVER_ERROR, "boom\nat line 3").into_response(),
        "/unavailable" => (
            StatusCode::SERVICE_UNAVAILABLE,
            [("retry-after", "120")],
            "down for maintenance",
        )
            .into_response(),
        "/redirect" => (StatusCode::FOUND, [("location", "/ok?token=secret")]).into_response(),
        "/hang" => std::future::pending().await,
        "/huge" => {
            let chunk = Bytes::from(vec![b'x'; 4096]);
            let endless = futures_util::stream::repeat(Ok::<_, Infallible>(chunk));
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                Body::from_stream(endless),
            )
                .into_response()
        }
        "/switch" => {
            let status = StatusCode::from_u16(shared.switch.load(Ordering::SeqCst)).unwrap();
            (status, "switched").into_response()
        }
        _ => StatusCode::NOT_FOUND.into_response(),
    }
}

impl Receiver {
    /// A receiver listening now.
    pub(crate) async fn start() -> Receiver {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let shared = Shared {
            seen: Arc::default(),
            switch: Arc::new(AtomicU16::new(200)),
        };
        let router = axum::Router::new()
            .fallback(answer)
            .with_state(shared.clone());
        let task = tokio::spawn(async move {
            axum::serve(listener, router).await.unwrap();
        });
        Receiver {
            addr,
            seen: shared.seen,
            switch: shared.switch,
            task,
        }
    }

    /// The URL of `path` on this receiver.
    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// The requests received so far.
    pub(crate) fn received(&self) -> Vec<Received> {
        self.seen.lock().unwrap().clone()
    }

    /// What `/switch` answers from now on.
    pub(crate) fn set_status(&self, status: u16) {
        self.switch.store(status, Ordering::SeqCst);
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A sender that may reach loopback (as an operator's `outbound_allow = ["127.0.0.0/8"]`).
pub(crate) fn loopback_sender(timeout: Duration) -> Sender {
    let allowed = Destinations::allowing(vec!["127.0.0.0/8".parse().unwrap()]);
    Sender::new(allowed, timeout).unwrap()
}

/// An endpoint of the default app at `url` (its secrets are not read by the sender).
fn endpoint_at(url: &str) -> StoredEndpoint {
    StoredEndpoint {
        endpoint: Endpoint {
            id: 7,
            app: AppId::default_app(),
            url: url.to_string(),
            description: String::new(),
            events: EventSet::all(),
            channels: Vec::new(),
            enabled: true,
            offline_delay_ms: 3_000,
            created_ms: 0,
            format: crate::endpoint::Format::Standard,
        },
        secret: Vec::new(),
        previous_secret: None,
    }
}

fn events(ids: &[&str]) -> Vec<QueuedEvent> {
    ids.iter()
        .enumerate()
        .map(|(i, id)| QueuedEvent {
            row: i as i64 + 1,
            event_id: id.to_string(),
            payload: format!(r#"{{"id":"{id}","type":"channel.occupied","data":{{"n":{i}}}}}"#),
        })
        .collect()
}

async fn send_to(sender: &Sender, url: &str) -> SendOutcome {
    let secret = SigningSecret::generate();
    let batch = events(&["evt_01JDX5S8Q6Z4R1W2M3N4P5Q6R7"]);
    sender
        .send(&endpoint_at(url), &[&secret], "msg_1", batch_body(&batch))
        .await
}

fn header<'a>(request: &'a Received, name: &str) -> &'a str {
    request.headers.get(name).unwrap().to_str().unwrap()
}

#[tokio::test]
async fn a_batch_arrives_signed_with_every_secret_and_its_events_in_order() {
    let receiver = Receiver::start().await;
    let sender = loopback_sender(Duration::from_secs(10));
    let (current, previous) = (SigningSecret::generate(), SigningSecret::generate());
    let batch = events(&[
        "evt_01JDX5S8Q6Z4R1W2M3N4P5Q6R7",
        "evt_01JDX5S8Q6Z4R1W2M3N4P5Q6R8",
    ]);
    let id = webhook_id(&batch[0].event_id, batch.len());
    assert_eq!(id, "msg_01JDX5S8Q6Z4R1W2M3N4P5Q6R7_2");
    let outcome = sender
        .send(
            &endpoint_at(&receiver.url("/ok")),
            &[&current, &previous],
            &id,
            batch_body(&batch),
        )
        .await;
    assert_eq!(outcome.result, SendResult::Ok { status: 200 });
    assert_eq!(outcome.result.label(), "ok");

    let received = receiver.received();
    assert_eq!(received.len(), 1);
    let request = &received[0];
    assert_eq!(header(request, "content-type"), "application/json");
    assert_eq!(header(request, "user-agent"), USER_AGENT);
    assert!(USER_AGENT.starts_with("herald/"));
    assert_eq!(header(request, "webhook-id"), id);
    let timestamp: i64 = header(request, "webhook-timestamp").parse().unwrap();
    // Signed when sent: the receiver checks it against its clock (within minutes).
    assert!((timestamp - unix_seconds()).abs() < 300, "{timestamp}");
    // The receiver verifies: each secret's signature over id, timestamp and the body as sent.
    let expected = format!(
        "{} {}",
        current.sign(&id, timestamp, &request.body),
        previous.sign(&id, timestamp, &request.body)
    );
    assert_eq!(header(request, "webhook-signature"), expected);
    let body: serde_json::Value = serde_json::from_slice(&request.body).unwrap();
    let ids: Vec<&str> = body["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        [
            "evt_01JDX5S8Q6Z4R1W2M3N4P5Q6R7",
            "evt_01JDX5S8Q6Z4R1W2M3N4P5Q6R8"
        ]
    );
    assert_eq!(body["events"][1]["data"]["n"], 1);
}

#[tokio::test]
async fn a_refused_destination_is_never_connected_to() {
    let receiver = Receiver::start().await;
    let public = Sender::new(Destinations::public_only(), Duration::from_secs(10)).unwrap();
    // An IP literal, checked before the request.
    let outcome = send_to(&public, &receiver.url("/ok")).await;
    let SendResult::Refused(why) = &outcome.result else {
        panic!("{outcome:?}");
    };
    assert!(why.contains("loopback"), "{why}");
    assert_eq!(outcome.result.label(), "refused");
    // A name, whose addresses the client's resolver refuses.
    let by_name = format!("http://localhost:{}/ok", receiver.addr.port());
    let outcome = send_to(&public, &by_name).await;
    assert!(
        matches!(&outcome.result, SendResult::Refused(why) if why.contains("loopback")),
        "{outcome:?}"
    );
    // Not an http(s) URL.
    let outcome = send_to(&public, "ftp://example.com/hooks").await;
    assert_eq!(outcome.result.label(), "refused", "{outcome:?}");
    assert!(receiver.received().is_empty());
}

#[tokio::test]
async fn a_redirect_is_not_followed() {
    let receiver = Receiver::start().await;
    let sender = loopback_sender(Duration::from_secs(10));
    let outcome = send_to(&sender, &receiver.url("/redirect")).await;
    assert_eq!(
        outcome.result,
        SendResult::Redirect {
            status: 302,
            location: "/ok".into()
        }
    );
    assert_eq!(outcome.result.label(), "redirect");
    let reason = outcome.result.reason();
    assert!(reason.contains("redirect not followed"), "{reason}");
    assert!(!reason.contains("token"), "{reason}");
    let paths: Vec<String> = receiver.received().into_iter().map(|r| r.path).collect();
    assert_eq!(paths, ["/redirect"]);
}

#[tokio::test]
async fn an_error_status_keeps_its_retry_after_and_an_excerpt() {
    let receiver = Receiver::start().await;
    let sender = loopback_sender(Duration::from_secs(10));
    let outcome = send_to(&sender, &receiver.url("/unavailable")).await;
    assert_eq!(
        outcome.result,
        SendResult::Http {
            status: 503,
            retry_after: Some(Duration::from_secs(120)),
            excerpt: "down for maintenance".into()
        }
    );
    assert_eq!(outcome.result.label(), "http_5xx");
    assert_eq!(outcome.result.reason(), "HTTP 503: down for maintenance");
    let outcome = send_to(&sender, &receiver.url("/fail")).await;
    // Control characters of the body become spaces.
    assert_eq!(outcome.result.reason(), "HTTP 500: boom at line 3");
    let outcome = send_to(&sender, &receiver.url("/missing")).await;
    assert_eq!(outcome.result.label(), "http_4xx");
    assert_eq!(outcome.result.retry_after(), None);
}

#[tokio::test]
async fn a_receiver_that_never_answers_times_out() {
    let receiver = Receiver::start().await;
    let sender = loopback_sender(Duration::from_millis(300));
    let outcome = send_to(&sender, &receiver.url("/hang")).await;
    assert_eq!(outcome.result, SendResult::Timeout);
    assert_eq!(outcome.result.label(), "timeout");
    assert_eq!(receiver.received().len(), 1);
}

#[tokio::test]
async fn a_large_answer_is_read_only_up_to_the_excerpt() {
    let receiver = Receiver::start().await;
    // The body never ends: a sender reading it all would still be reading when the test's
    // bound (far below the request timeout) runs out.
    let sender = loopback_sender(Duration::from_secs(600));
    let outcome = tokio::time::timeout(
        Duration::from_secs(30),
        send_to(&sender, &receiver.url("/huge")),
    )
    .await
    .expect("the answer's body is not read to its end");
    let SendResult::Http {
        status, excerpt, ..
    } = &outcome.result
    else {
        panic!("{outcome:?}");
    };
    assert_eq!(*status, 500);
    assert_eq!(excerpt.len(), EXCERPT_BYTES);
    assert!(excerpt.bytes().all(|b| b == b'x'));
    assert!(outcome.result.reason().chars().count() <= REASON_CHARS);
}

#[tokio::test]
async fn a_closed_port_is_a_connection_failure_said_without_the_url() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let sender = loopback_sender(Duration::from_secs(10));
    let outcome = send_to(&sender, &format!("http://127.0.0.1:{port}/ok?token=secret")).await;
    assert_eq!(outcome.result.label(), "connect", "{outcome:?}");
    let reason = outcome.result.reason();
    assert!(reason.starts_with("connection failed: "), "{reason}");
    assert!(
        !reason.contains("token") && !reason.contains("http://"),
        "{reason}"
    );
}

#[test]
fn the_body_holds_the_stored_events_as_they_are() {
    let batch = events(&["evt_A", "evt_B"]);
    let body = batch_body(&batch);
    let expected = format!(
        r#"{{"events":[{},{}]}}"#,
        batch[0].payload, batch[1].payload
    );
    assert_eq!(String::from_utf8(body).unwrap(), expected);
    assert_eq!(batch_body(&[]), br#"{"events":[]}"#);
    assert_eq!(webhook_id("evt_01ABC", 1), "msg_01ABC_1");
}

#[test]
fn retry_after_reads_seconds_and_dates() {
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_445_412_480);
    assert_eq!(
        parse_retry_after(" 120 ", now),
        Some(Duration::from_secs(120))
    );
    // Wed, 21 Oct 2015 07:28:00 GMT is 1445412480.
    assert_eq!(
        parse_retry_after("Wed, 21 Oct 2015 07:30:00 GMT", now),
        Some(Duration::from_secs(120))
    );
    assert_eq!(
        parse_retry_after("Wed, 21 Oct 2015 07:00:00 GMT", now),
        Some(Duration::ZERO)
    );
    assert_eq!(parse_retry_after("soon", now), None);
}

#[test]
fn excerpts_and_reasons_stay_short_and_whole() {
    // A character cut by the byte bound is dropped, not shown half.
    let mut bytes = vec![b'a'; 255];
    bytes.extend_from_slice("é".as_bytes());
    assert_eq!(printable(&bytes[..256]), "a".repeat(255));
    let long = SendResult::Http {
        status: 500,
        retry_after: None,
        excerpt: "é".repeat(300),
    };
    assert_eq!(long.reason().chars().count(), REASON_CHARS);
    assert_eq!(
        location_excerpt("https://x.example/a?token=1#f"),
        "https://x.example/a"
    );
}
