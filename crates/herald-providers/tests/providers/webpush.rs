//! Web Push client against the Web Push mock: encrypted round trips, VAPID, statuses.

use herald_mock::webpush::{MockSubscription, Scripted, WebPushMock, WebPushMockOptions};
use herald_providers::common::Common;
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
    })
    .unwrap()
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
        let mock = WebPushMock::start(WebPushMockOptions::default()).await.unwrap();
        let client = client_for(&mock, VapidKeys::generate());
        let sub = mock.subscription();
        let s = subscription(&sub);
        mock.script(&sub.id, Scripted::once(429).with_retry_after(12));
        let outcome = client.send(&s, &message("x")).await;
        assert!(matches!(outcome, Outcome::Retry { scope: RetryScope::Provider, after: Some(a), .. } if a.as_secs() == 12), "{outcome:?}");
        mock.script(&sub.endpoint, Scripted::once(503));
        assert!(matches!(client.send(&s, &message("x")).await, Outcome::Retry { scope: RetryScope::Provider, .. }));
        mock.script(&sub.id, Scripted::once(413));
        assert!(matches!(client.send(&s, &message("x")).await, Outcome::Rejected { .. }));
        assert!(matches!(client.send(&s, &message("x")).await, Outcome::Accepted { .. }));
        mock.unsubscribe(&sub.id);
        let outcome = client.send(&s, &message("x")).await;
        assert!(matches!(&outcome, Outcome::Unregistered { reason, .. } if reason.starts_with("410")), "{outcome:?}");
        // A subscription whose keys are not a browser's is rejected before anything is sent.
        let broken = Subscription { p256dh: "AAAA", ..s };
        assert!(matches!(client.send(&broken, &message("x")).await, Outcome::Rejected { .. }));
        let plain_http = Subscription { endpoint: "http://127.0.0.1:1/push/x", ..s };
        assert!(matches!(client.send(&plain_http, &message("x")).await, Outcome::Rejected { .. }));
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
