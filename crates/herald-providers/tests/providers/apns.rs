//! The APNs client against the mock APNs over real TLS and HTTP/2: answers and their
//! outcomes, the provider token's reuse and refresh, one stream until the first token is
//! accepted, GOAWAY, stream limits, and credential validation.

use std::future::Future;
use std::time::Duration;

use herald_mock::apns::{test_key, ApnsMock, ApnsMockOptions, Scripted};
use herald_providers::apns::{
    ApnsAuth, ApnsClient, ApnsConfig, ApnsEndpoint, ApnsError, ApnsNotification, ApnsOptions,
    PushType,
};
use herald_providers::{Common, Outcome, RetryScope};

const KEY_ID: &str = "KEY1234567";
const TEAM_ID: &str = "TEAM123456";
const TOPIC: &str = "com.example.app";

/// A throwaway RSA key made for this test (APNs keys are P-256; this one must be refused).
const RSA_KEY: &str = r"-----BEGIN PRIVATE KEY-----
MIICdgIBADANBgkqhkiG9w0BAQEFAASCAmAwggJcAgEAAoGBAPcvzYll+3dCUn9+
p4awpmMSAv9O4IaY8Gmx/6XHciQ2IxBJvx2ti5CUPERszR0XgkPpMV1VAQyifq0r
Y11gg5QR+Mn2KLO/6eHuOoTus4XmCovEXIrmRX+FDcki1owLZBctoy5hLpnLJI0m
z/nenxsx1PFJ0JuHu8SMnw5ZOa5XAgMBAAECgYAzqjgpmbk/qgsYPt7BFjcQyfj6
aAAh4eGOFfg7LD69NtuJUgCyMU3UgEdAfgU5KWq+ywTYXyYDAAu+Ii14nO2jIhy8
k3XtmIl0PM7RVcsK4mMcNx1MmyeGr6EEVscZaoKRBDWlMW1n1Tl7Ebv25HEChm0i
VE69ZIzZVhIRc3zwwQJBAP4zGsqz+M44egO0y8odr3Ve9QB3BnhzgerWNMt9m6jT
zpaxvmSVA4yCCVOkWu44/7u6r4JKNKdvDoXgQqCc2xECQQD47/ukEIA3C+IGMxQS
TPA9zJ6cP3QMj5xcgxVCw0ZmAK/srNxJjKsD0KvCSzF9UI9Enu8JGlk1jcAZ5NFf
m+LnAkBtKKb1qulKLUiANPBaX/sLzPYq9/HoYbnFjazoQY1Jp4MMhVF8Qd1fRiwZ
JfgCWqm/BQD/UzxfNjqnVNFnxVPxAkEAygu96oOaDROP+AgtGk1oEECr25WE000c
U9nwv6dO1CtqnmYOxYNuqkILpj7xhAyGu+Njj7fbACR07o9RgJA9sQJAMokOn8aI
UiFVtPtGPlC/ikbcFyVZdxueYIxLfaf4ohzJ7t1QA8oUQUqPo8qWUPT04WK8yigh
JH52y5W1l9m+0w==
-----END PRIVATE KEY-----";
/// A throwaway P-384 key made for this test (the wrong curve).
const P384_KEY: &str = r"-----BEGIN PRIVATE KEY-----
MIG2AgEAMBAGByqGSM49AgEGBSuBBAAiBIGeMIGbAgEBBDDbtIkVhI0qzq0d+YZi
0gLUghrL8ZFqWikwVRReWYfrRFTVBHQ/O6PpzUBvSu/9AeGhZANiAATeL6QhuNFq
zOBbOYzL83plxTjqfs+pyYXxR0wmIM9/T2LAdr6SeIrPcnL/9yDX6cMoDX5Aj7uL
YWXp0gDc99oDujVZzAQKEYXQiz7TRa9CM89Tg+yKeuKODSuZy9lJdps=
-----END PRIVATE KEY-----";

async fn bounded<F: Future>(future: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(30), future)
        .await
        .expect("the test finished in time")
}

/// A mock that checks tokens signed with a fresh key, and that key's `.p8`.
async fn mock(mut options: ApnsMockOptions) -> (ApnsMock, String) {
    let (p8, public) = test_key();
    options.keys.push((KEY_ID.into(), TEAM_ID.into(), public));
    (ApnsMock::start(options).await.unwrap(), p8)
}

fn client(mock: &ApnsMock, key_pem: &str, connections: usize) -> ApnsClient {
    ApnsClient::new(ApnsConfig {
        auth: ApnsAuth::Token {
            key_pem: key_pem.into(),
            key_id: KEY_ID.into(),
            team_id: TEAM_ID.into(),
        },
        topic: TOPIC.into(),
        endpoint: ApnsEndpoint::Custom(mock.url()),
        extra_ca_pem: Some(mock.cert_pem.as_bytes().to_vec()),
        connections,
    })
    .unwrap()
}

fn device(n: u32) -> String {
    format!("{n:064x}")
}

fn alert() -> ApnsNotification {
    ApnsOptions::default()
        .render(&Common {
            title: Some("Hello"),
            push_id: "push-1",
            high_priority: Some(true),
            ..Common::default()
        })
        .unwrap()
}

/// Waits (bounded by the caller) until `condition` holds, yielding between looks.
async fn until(mut condition: impl FnMut() -> bool) {
    while !condition() {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

#[tokio::test]
async fn accepted_with_the_headers_apns_needs() {
    let (mock, p8) = mock(ApnsMockOptions::default()).await;
    let client = client(&mock, &p8, 1);
    let notification = alert();
    let outcome = bounded(client.send(&device(1), &notification)).await;
    let Outcome::Accepted { id: Some(id) } = outcome else {
        panic!("not accepted: {outcome:?}")
    };
    assert!(!id.is_empty());
    assert_eq!(mock.accepted(), 1);
    let received = mock.received();
    let r = &received[0];
    assert_eq!(r.token, device(1));
    assert_eq!(r.topic.as_deref(), Some(TOPIC));
    assert_eq!(r.push_type.as_deref(), Some("alert"));
    assert_eq!(r.priority.as_deref(), Some("10"));
    assert!(r.authorization.as_deref().unwrap().starts_with("bearer "));
    assert_eq!(&r.payload[..], &notification.payload[..]);

    let voip = ApnsOptions {
        push_type: Some(PushType::Voip),
        ..ApnsOptions::default()
    }
    .render(&Common {
        push_id: "push-2",
        ..Common::default()
    })
    .unwrap();
    let outcome = bounded(client.send(&device(2), &voip)).await;
    assert!(matches!(outcome, Outcome::Accepted { .. }), "{outcome:?}");
    assert_eq!(
        mock.received()[1].topic.as_deref(),
        Some("com.example.app.voip")
    );
    mock.stop();
}

#[tokio::test]
async fn every_failure_reason_has_its_outcome() {
    let (mock, p8) = mock(ApnsMockOptions::default()).await;
    let client = client(&mock, &p8, 2);
    let n = alert();
    assert!(matches!(
        bounded(client.send(&device(0), &n)).await,
        Outcome::Accepted { .. }
    ));
    let rejected = |reason: &str| Outcome::Rejected {
        reason: reason.into(),
    };
    let provider_retry = |reason: &str, after: Option<u64>| Outcome::Retry {
        reason: reason.into(),
        after: after.map(Duration::from_secs),
        scope: RetryScope::Provider,
    };
    let cases = [
        (
            Scripted::once(400, "BadDeviceToken"),
            rejected("BadDeviceToken"),
        ),
        (
            Scripted::once(400, "DeviceTokenNotForTopic"),
            rejected("DeviceTokenNotForTopic"),
        ),
        (Scripted::once(400, "BadTopic"), rejected("BadTopic")),
        (
            Scripted::once(413, "PayloadTooLarge"),
            rejected("PayloadTooLarge"),
        ),
        (
            Scripted::once(403, "BadCertificate"),
            rejected("BadCertificate"),
        ),
        (
            Scripted::once(410, "Unregistered").with_timestamp(1_700_000_000_123),
            Outcome::Unregistered {
                reason: "Unregistered".into(),
                since_ms: Some(1_700_000_000_123),
            },
        ),
        (
            Scripted::once(410, "ExpiredToken"),
            Outcome::Unregistered {
                reason: "ExpiredToken".into(),
                since_ms: None,
            },
        ),
        (
            Scripted::once(429, "TooManyRequests").with_retry_after(30),
            provider_retry("TooManyRequests", Some(30)),
        ),
        (
            Scripted::once(429, "TooManyProviderTokenUpdates"),
            provider_retry("TooManyProviderTokenUpdates", None),
        ),
        (
            Scripted::once(500, "InternalServerError"),
            provider_retry("InternalServerError", None),
        ),
        (
            Scripted::once(503, "ServiceUnavailable"),
            provider_retry("ServiceUnavailable", None),
        ),
        (
            Scripted::once(403, "InvalidProviderToken"),
            provider_retry("InvalidProviderToken", None),
        ),
    ];
    for (i, (answer, expected)) in cases.into_iter().enumerate() {
        let token = device(100 + i as u32);
        mock.script(&token, answer);
        assert_eq!(bounded(client.send(&token, &n)).await, expected, "case {i}");
        // Scripted once: the next send to the token is accepted.
        assert!(matches!(
            bounded(client.send(&token, &n)).await,
            Outcome::Accepted { .. }
        ));
    }

    // What the mock itself checks, not scripted.
    let too_big = ApnsNotification {
        payload: format!("{{\"aps\":{{}},\"x\":\"{}\"}}", "a".repeat(4100)).into(),
        ..alert()
    };
    assert_eq!(
        bounded(client.send(&device(7), &too_big)).await,
        rejected("PayloadTooLarge")
    );
    assert_eq!(
        bounded(client.send("abcd", &n)).await,
        rejected("BadDeviceToken")
    );
    // Not hex: refused by the client before anything is sent.
    let before = mock.received_count();
    assert_eq!(
        bounded(client.send("zz/../x", &n)).await,
        rejected("BadDeviceToken")
    );
    assert_eq!(
        bounded(client.send("", &n)).await,
        rejected("BadDeviceToken")
    );
    assert_eq!(mock.received_count(), before);
    mock.stop();
}

#[tokio::test]
async fn provider_token_is_reused_and_refreshed_after_expired_provider_token() {
    let (mock, p8) = mock(ApnsMockOptions::default()).await;
    let client = client(&mock, &p8, 1);
    let n = alert();
    for i in 0..3 {
        assert!(matches!(
            bounded(client.send(&device(i), &n)).await,
            Outcome::Accepted { .. }
        ));
    }
    assert_eq!(client.provider_tokens_made(), 1);
    let first = mock.received()[0].authorization.clone();
    assert!(mock.received().iter().all(|r| r.authorization == first));

    mock.script(&device(9), Scripted::once(403, "ExpiredProviderToken"));
    let outcome = bounded(client.send(&device(9), &n)).await;
    assert!(
        matches!(&outcome, Outcome::Retry { reason, scope: RetryScope::Provider, .. } if reason == "ExpiredProviderToken"),
        "{outcome:?}"
    );
    assert!(matches!(
        bounded(client.send(&device(9), &n)).await,
        Outcome::Accepted { .. }
    ));
    assert_eq!(client.provider_tokens_made(), 2);
    let last = mock.received().last().unwrap().authorization.clone();
    assert_ne!(last, first);

    // A key the mock does not know: InvalidProviderToken, and no new token at once (Apple
    // refuses token changes more often than every 20 minutes).
    let (other_p8, _) = test_key();
    let stranger = self::client(&mock, &other_p8, 1);
    for _ in 0..2 {
        let outcome = bounded(stranger.send(&device(1), &n)).await;
        assert!(
            matches!(&outcome, Outcome::Retry { reason, .. } if reason == "InvalidProviderToken"),
            "{outcome:?}"
        );
    }
    assert_eq!(stranger.provider_tokens_made(), 1);
    mock.stop();
}

#[tokio::test]
async fn one_stream_until_the_first_token_is_accepted() {
    let (mock, p8) = mock(ApnsMockOptions::default()).await;
    let client = client(&mock, &p8, 1);
    let refused = device(1);
    mock.script(&refused, Scripted::always(403, "InvalidProviderToken"));
    mock.hold();
    let sends: Vec<_> = (0..5)
        .map(|_| {
            let client = client.clone();
            let token = refused.clone();
            tokio::spawn(async move { client.send(&token, &alert()).await })
        })
        .collect();
    bounded(async {
        mock.wait_in_flight(1).await;
        until(|| client.waiting_for_first_answer() == 4).await;
    })
    .await;
    assert_eq!(mock.in_flight(), 1);
    mock.release();
    for send in sends {
        let outcome = bounded(send).await.unwrap();
        assert!(matches!(outcome, Outcome::Retry { .. }), "{outcome:?}");
    }
    assert_eq!(mock.max_in_flight(), 1);

    // The first answer that is not a 403 opens the client up.
    assert!(matches!(
        bounded(client.send(&device(2), &alert())).await,
        Outcome::Accepted { .. }
    ));
    mock.hold();
    let sends: Vec<_> = (0..10)
        .map(|i| {
            let client = client.clone();
            tokio::spawn(async move { client.send(&device(10 + i), &alert()).await })
        })
        .collect();
    bounded(mock.wait_in_flight(10)).await;
    mock.release();
    for send in sends {
        assert!(matches!(
            bounded(send).await.unwrap(),
            Outcome::Accepted { .. }
        ));
    }
    mock.stop();
}

#[tokio::test]
async fn goaway_after_n_requests_loses_nothing() {
    const N: u64 = 10;
    let (mock, p8) = mock(ApnsMockOptions {
        goaway_after: Some(N),
        ..ApnsMockOptions::default()
    })
    .await;
    let client = client(&mock, &p8, 1);
    assert!(matches!(
        bounded(client.send(&device(0), &alert())).await,
        Outcome::Accepted { .. }
    ));
    let sends: Vec<_> = (1..2 * N as u32)
        .map(|i| {
            let client = client.clone();
            tokio::spawn(async move { client.send(&device(i), &alert()).await })
        })
        .collect();
    for send in sends {
        let outcome = bounded(send).await.unwrap();
        assert!(matches!(outcome, Outcome::Accepted { .. }), "{outcome:?}");
    }
    assert_eq!(mock.accepted(), 2 * N);
    // And sequential sends across several GOAWAYs.
    for i in 0..2 * N as u32 {
        let outcome = bounded(client.send(&device(100 + i), &alert())).await;
        assert!(matches!(outcome, Outcome::Accepted { .. }), "{outcome:?}");
    }
    assert_eq!(mock.accepted(), 4 * N);
    mock.stop();
}

#[tokio::test]
async fn more_sends_in_flight_than_max_concurrent_streams_all_complete() {
    let (mock, p8) = mock(ApnsMockOptions {
        max_concurrent_streams: 5,
        ..ApnsMockOptions::default()
    })
    .await;
    let client = client(&mock, &p8, 1);
    assert!(matches!(
        bounded(client.send(&device(0), &alert())).await,
        Outcome::Accepted { .. }
    ));
    let sends: Vec<_> = (1..=60)
        .map(|i| {
            let client = client.clone();
            tokio::spawn(async move { client.send(&device(i), &alert()).await })
        })
        .collect();
    for send in sends {
        assert!(matches!(
            bounded(send).await.unwrap(),
            Outcome::Accepted { .. }
        ));
    }
    assert_eq!(mock.accepted(), 61);
    assert!(mock.max_in_flight() <= 5, "{}", mock.max_in_flight());
    mock.stop();
}

#[tokio::test]
async fn an_unreachable_server_is_a_provider_retry() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let (p8, _) = test_key();
    let client = ApnsClient::new(ApnsConfig {
        auth: ApnsAuth::Token {
            key_pem: p8,
            key_id: KEY_ID.into(),
            team_id: TEAM_ID.into(),
        },
        topic: TOPIC.into(),
        endpoint: ApnsEndpoint::Custom(format!("https://{addr}")),
        extra_ca_pem: None,
        connections: 1,
    })
    .unwrap();
    let outcome = bounded(client.send(&device(1), &alert())).await;
    assert!(
        matches!(
            outcome,
            Outcome::Retry {
                scope: RetryScope::Provider,
                ..
            }
        ),
        "{outcome:?}"
    );
}

#[test]
fn invalid_credentials_are_refused_by_validate() {
    let token = |key_pem: &str, key_id: &str, team_id: &str| ApnsAuth::Token {
        key_pem: key_pem.into(),
        key_id: key_id.into(),
        team_id: team_id.into(),
    };
    let (p8, public) = test_key();
    assert!(token(&p8, KEY_ID, TEAM_ID).validate().is_ok());
    for (bad, what) in [
        (RSA_KEY, "RSA"),
        (P384_KEY, "P-384"),
        ("garbage", "garbage"),
        ("", "empty"),
        (public.as_str(), "a public key"),
    ] {
        let error = token(bad, KEY_ID, TEAM_ID).validate().unwrap_err();
        assert!(matches!(error, ApnsError::SigningKey(_)), "{what}: {error}");
        assert!(
            error.to_string().contains("P-256") || error.to_string().contains("PKCS#8"),
            "{what}: {error}"
        );
        assert!(
            !error.to_string().contains("BEGIN PRIVATE KEY-----\n"),
            "no key in errors"
        );
    }
    assert!(matches!(
        token(&p8, "", TEAM_ID).validate(),
        Err(ApnsError::KeyId(0))
    ));
    assert!(matches!(
        token(&p8, "key1234567", TEAM_ID).validate(),
        Err(ApnsError::KeyId(_))
    ));
    assert!(matches!(
        token(&p8, KEY_ID, "").validate(),
        Err(ApnsError::TeamId(0))
    ));
    let certificate = ApnsAuth::Certificate {
        cert_pem: "not a certificate".into(),
        key_pem: "not a key".into(),
    };
    assert!(matches!(
        certificate.validate(),
        Err(ApnsError::Certificate(_))
    ));
    assert!(!format!("{:?}", token(&p8, KEY_ID, TEAM_ID)).contains("PRIVATE"));
    let config = ApnsConfig {
        auth: token(RSA_KEY, KEY_ID, TEAM_ID),
        topic: TOPIC.into(),
        endpoint: ApnsEndpoint::Sandbox,
        extra_ca_pem: None,
        connections: 1,
    };
    assert!(ApnsClient::new(config.clone()).is_err());
    let no_topic = ApnsConfig {
        auth: token(&p8, KEY_ID, TEAM_ID),
        topic: String::new(),
        ..config
    };
    assert!(matches!(ApnsClient::new(no_topic), Err(ApnsError::Topic)));
}

#[tokio::test]
async fn the_pool_opens_another_connection_only_when_volume_needs_it() {
    // A server that allows 10 streams per connection and holds every answer, so requests stay
    // in flight; no provider token is checked (the pool is below the APNs client).
    let mock = ApnsMock::start(ApnsMockOptions {
        max_concurrent_streams: 10,
        ..ApnsMockOptions::default()
    })
    .await
    .unwrap();
    let pool = pool_of_four(&mock);
    let url = mock.url();
    let request = move |n: u32| {
        http::Request::post(format!("{url}/3/device/{}", device(n)))
            .header("apns-topic", TOPIC)
            .body(())
            .unwrap()
    };
    let send = |n: u32| {
        let pool = pool.clone();
        let request = request.clone();
        let first = request(n);
        let again = move || request(n);
        async move {
            pool.send(first, again, bytes::Bytes::from_static(b"{}"))
                .await
        }
    };
    // Light volume: 5 at once fit in one connection's 10 streams.
    mock.hold();
    let light: Vec<_> = (0..5).map(|n| tokio::spawn(send(n))).collect();
    bounded(until(|| mock.in_flight() == 5)).await;
    assert_eq!(pool.connections_open(), 1);
    mock.release();
    for s in light {
        assert_eq!(bounded(s).await.unwrap().unwrap().0.status(), 200);
    }
    assert_eq!(pool.connections_made(), 1);
    // 35 at once need four connections of 10 streams: the pool grows to its maximum, and every
    // request is answered.
    mock.hold();
    let heavy: Vec<_> = (100..135).map(|n| tokio::spawn(send(n))).collect();
    // All 35 in flight at the server at once, which one connection's 10 streams never allow:
    // each request went to the connection with the fewest in flight.
    bounded(until(|| mock.in_flight() == 35)).await;
    assert_eq!(pool.connections_open(), 4);
    mock.release();
    for s in heavy {
        assert_eq!(bounded(s).await.unwrap().unwrap().0.status(), 200);
    }
    assert_eq!(pool.connections_made(), 4);
    assert_eq!(mock.accepted(), 40);
    mock.stop();
}

#[tokio::test]
async fn the_pool_spreads_many_streams_over_connections_even_when_the_server_allows_them_on_one() {
    use herald_providers::h2pool::BUSY_CONNECTION;
    // APNs allows 1,000 streams per connection, but one connection is driven by one task at
    // each end: past BUSY_CONNECTION requests in flight on each, the pool opens another.
    let mock = ApnsMock::start(ApnsMockOptions::default()).await.unwrap();
    let pool = pool_of_four(&mock);
    let url = mock.url();
    let send = |n: u32| {
        let pool = pool.clone();
        let url = url.clone();
        let request = move || {
            http::Request::post(format!("{url}/3/device/{}", device(n)))
                .header("apns-topic", TOPIC)
                .body(())
                .unwrap()
        };
        async move {
            pool.send(request(), request, bytes::Bytes::from_static(b"{}"))
                .await
        }
    };
    let busy = BUSY_CONNECTION as u32;
    mock.hold();
    let first: Vec<_> = (0..busy).map(|n| tokio::spawn(send(n))).collect();
    bounded(until(|| mock.in_flight() == busy as usize)).await;
    assert_eq!(pool.connections_open(), 1);
    let more: Vec<_> = (busy..busy * 2 + 1)
        .map(|n| tokio::spawn(send(n)))
        .collect();
    bounded(until(|| mock.in_flight() == busy as usize * 2 + 1)).await;
    assert_eq!(pool.connections_open(), 3);
    mock.release();
    for s in first.into_iter().chain(more) {
        assert_eq!(bounded(s).await.unwrap().unwrap().0.status(), 200);
    }
    assert_eq!(pool.connections_made(), 3);
    mock.stop();
}

/// An HTTP/2 pool of at most four connections to `mock`, trusting its certificate.
fn pool_of_four(mock: &ApnsMock) -> herald_providers::h2pool::H2Pool {
    let tls = herald_providers::tls::client_config(Some(mock.cert_pem.as_bytes()), None).unwrap();
    herald_providers::h2pool::H2Pool::new(
        "127.0.0.1",
        mock.url().rsplit(':').next().unwrap().parse().unwrap(),
        tls,
        4,
    )
}

/// A CA and a client certificate it signed (PEM certificate, PEM key), for certificate auth.
fn client_certificate(common_name: &str) -> (String, String, String) {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    };
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, format!("{common_name} CA"));
    let ca_key = KeyPair::generate().unwrap();
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params
        .distinguished_name
        .push(DnType::CommonName, common_name);
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let key = KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, &ca, &ca_key).unwrap();
    (ca.pem(), cert.pem(), key.serialize_pem())
}

#[tokio::test]
async fn certificate_auth_presents_the_client_certificate_in_the_tls_handshake() {
    let (ca, cert_pem, key_pem) = client_certificate("Apple Push Services: com.example.app");
    // A mock that asks for a client certificate from that CA and checks no token (as APNs does
    // for certificate auth).
    let mock = ApnsMock::start(ApnsMockOptions {
        client_ca_pem: Some(ca),
        ..ApnsMockOptions::default()
    })
    .await
    .unwrap();
    let with = |auth: ApnsAuth| {
        ApnsClient::new(ApnsConfig {
            auth,
            topic: TOPIC.into(),
            endpoint: ApnsEndpoint::Custom(mock.url()),
            extra_ca_pem: Some(mock.cert_pem.as_bytes().to_vec()),
            connections: 1,
        })
        .unwrap()
    };
    let client = with(ApnsAuth::Certificate { cert_pem, key_pem });
    let outcome = bounded(client.send(&device(1), &alert())).await;
    assert!(matches!(outcome, Outcome::Accepted { .. }), "{outcome:?}");
    assert_eq!(mock.accepted(), 1);
    assert_eq!(mock.received()[0].authorization, None, "no provider token");

    // A certificate from another CA, and token auth with no certificate at all: the handshake
    // fails, nothing reaches the mock.
    let (_, other_cert, other_key) = client_certificate("someone else");
    let stranger = with(ApnsAuth::Certificate {
        cert_pem: other_cert,
        key_pem: other_key,
    });
    let outcome = bounded(stranger.send(&device(2), &alert())).await;
    assert!(!matches!(outcome, Outcome::Accepted { .. }), "{outcome:?}");
    let (p8, _) = test_key();
    let token_only = with(ApnsAuth::Token {
        key_pem: p8,
        key_id: KEY_ID.into(),
        team_id: TEAM_ID.into(),
    });
    let outcome = bounded(token_only.send(&device(3), &alert())).await;
    assert!(!matches!(outcome, Outcome::Accepted { .. }), "{outcome:?}");
    assert_eq!(mock.accepted(), 1, "only the certified client got through");
    mock.stop();
}

/// Throughput to the mock on this machine (a measurement, not an assertion):
/// `cargo test -p herald-providers --test providers -- --ignored --nocapture throughput`.
/// `APNS_BENCH_SENDS`, `APNS_BENCH_IN_FLIGHT`, `APNS_BENCH_CONNECTIONS` change the defaults.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "a measurement; run with --ignored --nocapture"]
async fn throughput() {
    let env = |name: &str, default: usize| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let sends = env("APNS_BENCH_SENDS", 50_000);
    let in_flight = env("APNS_BENCH_IN_FLIGHT", 1000).max(1);
    let connections = env("APNS_BENCH_CONNECTIONS", 4);
    let (mock, p8) = mock(ApnsMockOptions::default()).await;
    let client = client(&mock, &p8, connections);
    let n = std::sync::Arc::new(alert());
    assert!(matches!(
        client.send(&device(0), &n).await,
        Outcome::Accepted { .. }
    ));
    let started = std::time::Instant::now();
    let workers: Vec<_> = (0..in_flight)
        .map(|w| {
            let client = client.clone();
            let n = n.clone();
            let share = sends / in_flight + usize::from(w < sends % in_flight);
            tokio::spawn(async move {
                let token = device(w as u32);
                let mut accepted = 0usize;
                for _ in 0..share {
                    if matches!(client.send(&token, &n).await, Outcome::Accepted { .. }) {
                        accepted += 1;
                    }
                }
                accepted
            })
        })
        .collect();
    let mut accepted = 0;
    for worker in workers {
        accepted += worker.await.unwrap();
    }
    let elapsed = started.elapsed();
    println!(
        "APNs to mock: {accepted}/{sends} accepted, {in_flight} in flight, {connections} connections, {:.2} s, {:.0} notifications/s",
        elapsed.as_secs_f64(),
        accepted as f64 / elapsed.as_secs_f64()
    );
    assert_eq!(accepted, sends);
    mock.stop();
}
