//! Web Push client against the Web Push mock: encrypted round trips, VAPID, statuses.

use herald_mock::webpush::{MockSubscription, Scripted, WebPushMock, WebPushMockOptions};
use herald_providers::common::Common;
use herald_providers::destination::Destinations;
use herald_providers::webpush::{
    Subscription, VapidKeys, WebPushClient, WebPushConfig, WebPushNotification, WebPushOptions,
};
use herald_providers::{Outcome, RetryScope};

use crate::bounded;

fn client_for(mock: &WebPushMock, vapid: VapidKeys) -> WebPushClient {
    WebPushClient::new(WebPushConfig {
        vapid,
        subject: "mailto:ops@herald.test".into(),
        extra_ca_pem: Some(mock.cert_pem.clone().into_bytes()),
        connections_per_origin: 1,
        destinations: loopback(),
    })
    .unwrap()
}

/// The mock listens on loopback, which a client reaches only when the operator allows it.
fn loopback() -> Destinations {
    Destinations::allowing(vec![
        "127.0.0.0/8".parse().unwrap(),
        "::1/128".parse().unwrap(),
    ])
}

fn subscription(s: &MockSubscription) -> Subscription<'_> {
    Subscription {
        endpoint: &s.endpoint,
        p256dh: &s.p256dh,
        auth: &s.auth,
    }
}

fn message(payload: &str) -> WebPushNotification {
    WebPushNotification {
        ttl_secs: 60,
        urgency: Some("high".into()),
        topic: Some("scores".into()),
        payload: payload.into(),
    }
}

#[tokio::test]
async fn round_trip_is_decrypted_by_the_push_service() {
    bounded(async {
        let mock = WebPushMock::start(WebPushMockOptions::default())
            .await
            .unwrap();
        let vapid = VapidKeys::generate();
        let sub = mock.subscription_for(&vapid.public_b64url());
        let client = client_for(&mock, vapid);
        let common = Common {
            title: Some("Goal"),
            push_id: "push-7",
            ..Default::default()
        };
        let rendered = WebPushOptions::default().render(&common).unwrap();
        let outcome = client.send(&subscription(&sub), &rendered).await;
        let Outcome::Accepted { id: Some(location) } = &outcome else {
            panic!("{outcome:?}")
        };
        assert!(location.starts_with(&mock.url()), "{location}");
        let second = client.send(&subscription(&sub), &message("second")).await;
        assert!(matches!(second, Outcome::Accepted { .. }), "{second:?}");
        let received = mock.received(&sub.id);
        assert_eq!(received.len(), 2);
        assert_eq!(
            String::from_utf8(received[0].clone()).unwrap(),
            rendered.payload
        );
        assert_eq!(received[1], b"second");
        // The largest payload render allows still fits the push service's 4096 bytes.
        let largest = "x".repeat(herald_providers::webpush::WEBPUSH_MAX_PLAINTEXT);
        let outcome = client.send(&subscription(&sub), &message(&largest)).await;
        assert!(matches!(outcome, Outcome::Accepted { .. }), "{outcome:?}");
        assert_eq!(mock.accepted(), 3);
    })
    .await;
}

#[tokio::test]
async fn vapid_of_another_key_is_refused() {
    bounded(async {
        let mock = WebPushMock::start(WebPushMockOptions::default())
            .await
            .unwrap();
        let registered = VapidKeys::generate();
        let sub = mock.subscription_for(&registered.public_b64url());
        let other = client_for(&mock, VapidKeys::generate());
        let outcome = other.send(&subscription(&sub), &message("x")).await;
        assert!(
            matches!(&outcome, Outcome::Rejected { reason } if reason.starts_with("403")),
            "{outcome:?}"
        );
        assert!(mock.received(&sub.id).is_empty());
        // The key stored and loaded again is the same key: accepted.
        let reloaded = VapidKeys::from_private_b64url(&registered.private_b64url()).unwrap();
        let outcome = client_for(&mock, reloaded)
            .send(&subscription(&sub), &message("x"))
            .await;
        assert!(matches!(outcome, Outcome::Accepted { .. }), "{outcome:?}");
    })
    .await;
}

#[tokio::test]
async fn statuses_map_to_outcomes() {
    bounded(async {
        let mock = WebPushMock::start(WebPushMockOptions::default())
            .await
            .unwrap();
        let client = client_for(&mock, VapidKeys::generate());
        let sub = mock.subscription();
        let s = subscription(&sub);
        mock.script(&sub.id, Scripted::once(413));
        assert!(matches!(
            client.send(&s, &message("x")).await,
            Outcome::Rejected { .. }
        ));
        assert!(matches!(
            client.send(&s, &message("x")).await,
            Outcome::Accepted { .. }
        ));
        mock.unsubscribe(&sub.id);
        let outcome = client.send(&s, &message("x")).await;
        assert!(
            matches!(&outcome, Outcome::Unregistered { reason, .. } if reason.starts_with("410")),
            "{outcome:?}"
        );
        // A subscription whose keys are not a browser's is rejected before anything is sent.
        let broken = Subscription {
            p256dh: "AAAA",
            ..s
        };
        assert!(matches!(
            client.send(&broken, &message("x")).await,
            Outcome::Rejected { .. }
        ));
        let plain_http = Subscription {
            endpoint: "http://127.0.0.1:1/push/x",
            ..s
        };
        assert!(matches!(
            client.send(&plain_http, &message("x")).await,
            Outcome::Rejected { .. }
        ));
    })
    .await;
}

#[tokio::test]
async fn a_failing_push_service_pauses_its_origin_only() {
    bounded(async {
        let failing = WebPushMock::start(WebPushMockOptions::default()).await.unwrap();
        let healthy = WebPushMock::start(WebPushMockOptions::default()).await.unwrap();
        let client = WebPushClient::new(WebPushConfig {
            vapid: VapidKeys::generate(),
            subject: "mailto:ops@herald.test".into(),
            extra_ca_pem: Some(
                format!("{}{}", failing.cert_pem, healthy.cert_pem).into_bytes(),
            ),
            connections_per_origin: 1,
            destinations: loopback(),
        })
        .unwrap();
        let (a, b) = (failing.subscription(), healthy.subscription());
        failing.script(&a.id, Scripted::once(429).with_retry_after(12));
        // The rate limit holds this origin's sends (not the provider's), with its Retry-After.
        let outcome = client.send(&subscription(&a), &message("x")).await;
        assert!(matches!(outcome, Outcome::Retry { scope: RetryScope::Notification, after: Some(w), .. } if w.as_secs() == 12), "{outcome:?}");
        let seen = failing.refused() + failing.accepted();
        let outcome = client.send(&subscription(&a), &message("x")).await;
        assert!(
            matches!(&outcome, Outcome::Retry { scope: RetryScope::Notification, after: Some(w), reason } if w.as_secs() <= 12 && reason.contains("paused")),
            "{outcome:?}"
        );
        assert_eq!(failing.refused() + failing.accepted(), seen, "a paused origin is not sent to");
        // Another push service of the same client is not held.
        let outcome = client.send(&subscription(&b), &message("x")).await;
        assert!(matches!(outcome, Outcome::Accepted { .. }), "{outcome:?}");
        // A 503 without Retry-After pauses its origin with a backoff.
        let other = client_for(&healthy, VapidKeys::generate());
        healthy.script(&b.endpoint, Scripted::once(503));
        let outcome = other.send(&subscription(&b), &message("x")).await;
        assert!(matches!(outcome, Outcome::Retry { scope: RetryScope::Notification, after: Some(_), .. }), "{outcome:?}");
    })
    .await;
}

#[tokio::test]
async fn endpoints_reach_only_allowed_addresses_and_failures_say_nothing_of_the_network() {
    bounded(async {
        let mock = WebPushMock::start(WebPushMockOptions::default()).await.unwrap();
        let sub = mock.subscription();
        // Without the operator's allowance, a loopback endpoint is refused before any connection.
        let strict = WebPushClient::new(WebPushConfig {
            vapid: VapidKeys::generate(),
            subject: "mailto:ops@herald.test".into(),
            extra_ca_pem: Some(mock.cert_pem.clone().into_bytes()),
            connections_per_origin: 1,
            destinations: Destinations::public_only(),
        })
        .unwrap();
        let before = mock.refused() + mock.accepted();
        let outcome = strict.send(&subscription(&sub), &message("x")).await;
        assert!(
            matches!(&outcome, Outcome::Rejected { reason } if reason.starts_with("the push service could not be reached")),
            "{outcome:?}"
        );
        assert_eq!(mock.refused() + mock.accepted(), before);
        for endpoint in ["https://169.254.169.254/latest/meta-data", "https://[::1]:9/x", "https://localhost:9/x"] {
            let s = Subscription { endpoint, ..subscription(&sub) };
            let outcome = strict.send(&s, &message("x")).await;
            assert!(matches!(outcome, Outcome::Rejected { .. }), "{endpoint}: {outcome:?}");
        }
        // Allowed: a closed port and an open port that is not TLS answer in the same words.
        let closed = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let open = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let open_port = open.local_addr().unwrap().port();
        let accept = tokio::spawn(async move {
            while let Ok((socket, _)) = open.accept().await {
                drop(socket);
            }
        });
        let client = client_for(&mock, VapidKeys::generate());
        let mut reasons = Vec::new();
        for port in [closed, open_port] {
            let endpoint = format!("https://127.0.0.1:{port}/push/x");
            let s = Subscription { endpoint: &endpoint, ..subscription(&sub) };
            match client.send(&s, &message("x")).await {
                Outcome::Retry { reason, .. } => reasons.push(reason),
                other => panic!("port {port}: {other:?}"),
            }
        }
        accept.abort();
        assert_eq!(reasons[0], "the push service could not be reached");
        assert_eq!(reasons[0], reasons[1]);
    })
    .await;
}

#[tokio::test]
async fn too_large_payload_is_refused_by_render() {
    let data =
        serde_json::value::RawValue::from_string(format!("\"{}\"", "x".repeat(4000))).unwrap();
    let common = Common {
        data: Some(&data),
        push_id: "p",
        ..Default::default()
    };
    let err = WebPushOptions::default().render(&common).unwrap_err();
    assert!(err.too_large);
    assert!(err.message.contains("4096"), "{}", err.message);
}
