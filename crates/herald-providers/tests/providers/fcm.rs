//! FCM client against the FCM mock: the access token's life, each v1 error and its outcome.

use herald_mock::fcm::{test_account, FcmMock, FcmMockOptions, Scripted};
use herald_providers::common::Common;
use herald_providers::fcm::{
    FcmClient, FcmConfig, FcmError, FcmNotification, FcmOptions, ServiceAccount,
};
use herald_providers::{Outcome, RetryScope};
use serde_json::json;

use crate::bounded;

fn client_for(mock: &FcmMock) -> FcmClient {
    let account = ServiceAccount::parse(&test_account(&mock.url())).unwrap();
    FcmClient::new(FcmConfig {
        account,
        endpoint: Some(mock.url()),
        token_uri: None,
        extra_ca_pem: Some(mock.cert_pem.clone().into_bytes()),
        connections: 2,
    })
    .unwrap()
}

fn notification() -> FcmNotification {
    let common = Common {
        title: Some("Hi"),
        body: Some("there"),
        push_id: "push-1",
        high_priority: Some(true),
        ..Default::default()
    };
    FcmOptions::default().render(&common).unwrap()
}

#[tokio::test]
async fn token_is_fetched_once_and_reused_across_concurrent_sends() {
    bounded(async {
        let mock = FcmMock::start(FcmMockOptions::default()).await.unwrap();
        let client = client_for(&mock);
        let n = notification();
        let sends = (0..20).map(|i| {
            let client = client.clone();
            let n = n.clone();
            tokio::spawn(async move { client.send(&format!("device-{i}"), &n).await })
        });
        for send in sends {
            let outcome = send.await.unwrap();
            assert!(
                matches!(&outcome, Outcome::Accepted { id: Some(name) } if name.starts_with("projects/herald-test/messages/")),
                "{outcome:?}"
            );
        }
        assert_eq!(client.send("device-x", &n).await.reason(), None);
        assert_eq!(mock.token_requests(), 1);
        assert_eq!(mock.accepted(), 21);
        let received = mock.received();
        let last = &received.last().unwrap().message;
        assert_eq!(last["token"], "device-x");
        assert_eq!(last["notification"], json!({"title": "Hi", "body": "there"}));
        assert_eq!(last["data"]["herald_id"], "push-1");
        assert_eq!(last["android"]["priority"], "HIGH");
    })
    .await;
}

#[tokio::test]
async fn token_is_refreshed_when_expiring_and_after_a_401() {
    bounded(async {
        // The token endpoint says tokens expire at once: every send refreshes first.
        let options = FcmMockOptions {
            expires_in: 0,
            ..Default::default()
        };
        let mock = FcmMock::start(options).await.unwrap();
        let client = client_for(&mock);
        for _ in 0..3 {
            assert!(matches!(
                client.send("d", &notification()).await,
                Outcome::Accepted { .. }
            ));
        }
        assert_eq!(mock.token_requests(), 3);

        let mock = FcmMock::start(FcmMockOptions::default()).await.unwrap();
        let client = client_for(&mock);
        assert!(matches!(
            client.send("d", &notification()).await,
            Outcome::Accepted { .. }
        ));
        mock.revoke_tokens();
        let outcome = client.send("d", &notification()).await;
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
        assert_eq!(mock.unauthenticated(), 1);
        assert!(matches!(
            client.send("d", &notification()).await,
            Outcome::Accepted { .. }
        ));
        assert_eq!(mock.token_requests(), 2);
    })
    .await;
}

#[tokio::test]
async fn each_error_code_maps_to_its_outcome() {
    bounded(async {
        let mock = FcmMock::start(FcmMockOptions::default()).await.unwrap();
        let client = client_for(&mock);
        mock.script("gone", Scripted::once(404, "UNREGISTERED"));
        mock.script("bad", Scripted::once(400, "INVALID_ARGUMENT").with_field_violation("message.token", "not a valid FCM registration token"));
        mock.script("other-sender", Scripted::once(403, "SENDER_ID_MISMATCH"));
        mock.script("quota", Scripted::once(429, "QUOTA_EXCEEDED").with_retry_after(30));
        mock.script("down", Scripted::once(503, "UNAVAILABLE"));
        mock.script("broken", Scripted::once(500, "INTERNAL"));
        let n = notification();
        assert_eq!(
            client.send("gone", &n).await,
            Outcome::Unregistered { reason: "UNREGISTERED".into(), since_ms: None }
        );
        assert_eq!(
            client.send("bad", &n).await,
            Outcome::Rejected { reason: "INVALID_ARGUMENT: message.token: not a valid FCM registration token".into() }
        );
        assert!(matches!(client.send("other-sender", &n).await, Outcome::Rejected { reason } if reason.starts_with("SENDER_ID_MISMATCH")));
        let quota = client.send("quota", &n).await;
        assert!(
            matches!(quota, Outcome::Retry { scope: RetryScope::Provider, after: Some(a), .. } if a.as_secs() == 30),
            "{quota:?}"
        );
        for token in ["down", "broken"] {
            let outcome = client.send(token, &n).await;
            assert!(matches!(outcome, Outcome::Retry { scope: RetryScope::Provider, after: None, .. }), "{token}: {outcome:?}");
        }
        // Scripted answers were used once: the same tokens are accepted now.
        assert!(matches!(client.send("gone", &n).await, Outcome::Accepted { .. }));
        // The mock checks the shape FCM checks: data values must be strings.
        let bad_data = FcmNotification::new(json!({"data": {"n": 1}}));
        let outcome = client.send("d", &bad_data).await;
        assert!(matches!(&outcome, Outcome::Rejected { reason } if reason.contains("message.data[n]")), "{outcome:?}");
        assert_eq!(mock.token_requests(), 1);
    })
    .await;
}

/// Forwards every TCP connection made to the answered address to `target`, byte for byte: a
/// forwarding proxy in front of the token endpoint, at a URL of its own.
async fn tcp_forwarder(target: std::net::SocketAddr) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            tokio::spawn(async move {
                if let Ok(mut outbound) = tokio::net::TcpStream::connect(target).await {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
            });
        }
    });
    addr
}

#[tokio::test]
async fn the_assertion_names_the_accounts_token_uri_when_tokens_are_fetched_through_a_proxy() {
    bounded(async {
        // The account's token_uri is the mock's `/token`, which checks `aud` against it; the
        // token requests go to a forwarder at another URL (`fcm_token_url`).
        let mock = FcmMock::start(FcmMockOptions::default()).await.unwrap();
        let mock_addr: std::net::SocketAddr =
            mock.url().trim_start_matches("https://").parse().unwrap();
        let forwarder = tcp_forwarder(mock_addr).await;
        let account = ServiceAccount::parse(&test_account(&mock.url())).unwrap();
        assert_eq!(account.token_uri, format!("{}/token", mock.url()));
        let client = FcmClient::new(FcmConfig {
            account,
            endpoint: Some(mock.url()),
            token_uri: Some(format!("https://{forwarder}/token")),
            extra_ca_pem: Some(mock.cert_pem.clone().into_bytes()),
            connections: 1,
        })
        .unwrap();
        let outcome = client.send("device-1", &notification()).await;
        assert!(matches!(outcome, Outcome::Accepted { .. }), "{outcome:?}");
        assert_eq!(mock.token_requests(), 1);
        assert_eq!(mock.accepted(), 1);
    })
    .await;
}

#[tokio::test]
async fn bad_accounts_and_refused_assertions() {
    bounded(async {
        assert!(matches!(
            ServiceAccount::parse("{"),
            Err(FcmError::NotJson(_))
        ));
        let mut account: serde_json::Value =
            serde_json::from_str(&test_account("https://127.0.0.1:1")).unwrap();
        account.as_object_mut().unwrap().remove("client_email");
        assert!(matches!(
            ServiceAccount::parse(&account.to_string()),
            Err(FcmError::MissingField("client_email"))
        ));
        let mut account: serde_json::Value =
            serde_json::from_str(&test_account("https://127.0.0.1:1")).unwrap();
        account["private_key"] =
            json!("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n");
        let err = ServiceAccount::parse(&account.to_string()).unwrap_err();
        assert!(matches!(err, FcmError::BadKey(_)), "{err}");
        let parsed = ServiceAccount::parse(&test_account("https://127.0.0.1:1")).unwrap();
        let debug = format!("{parsed:?}");
        assert!(
            !debug.contains("PRIVATE KEY") && debug.contains("<hidden>"),
            "{debug}"
        );

        // A mock that knows another account: the assertion is refused, the send rejected.
        let options = FcmMockOptions {
            accounts: vec![(
                "someone-else@x.iam.gserviceaccount.com".into(),
                herald_mock::fcm::TEST_PUBLIC_KEY_PEM.into(),
            )],
            ..Default::default()
        };
        let mock = FcmMock::start(options).await.unwrap();
        let outcome = client_for(&mock).send("d", &notification()).await;
        assert!(
            matches!(&outcome, Outcome::Rejected { reason } if reason.contains("invalid_grant")),
            "{outcome:?}"
        );
        assert_eq!(mock.accepted(), 0);

        // Nothing listening: the provider is unreachable, retry later.
        let gone_url = mock.url();
        let cert = mock.cert_pem.clone();
        mock.stop();
        let client = FcmClient::new(FcmConfig {
            account: ServiceAccount::parse(&test_account(&gone_url)).unwrap(),
            endpoint: Some(gone_url),
            token_uri: None,
            extra_ca_pem: Some(cert.into_bytes()),
            connections: 1,
        })
        .unwrap();
        let outcome = client.send("d", &notification()).await;
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
    })
    .await;
}
