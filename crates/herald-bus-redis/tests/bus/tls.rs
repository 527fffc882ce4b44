//! The bus over TLS (`rediss://`) to a real Redis serving a self-signed certificate: with the
//! certificate given as the extra CA, nodes hear each other; without it, connecting fails
//! clearly and in bounded time.

use std::time::Duration;

use herald_bus_redis::{BusError, BusOptions, RedisBus};
use herald_core::caches::Caches;
use herald_testkit::Redis;

use super::harness::{assert_exact, eventually, receive, Node};
use super::{bounded, stores};

/// A Redis accepting only TLS, with a fresh self-signed certificate for `localhost`; answers
/// the certificate's PEM (the CA a client must trust) too.
fn tls_redis() -> (Redis, String) {
    let certified =
        rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).expect("a certificate");
    let cert_pem = certified.cert.pem();
    let redis =
        Redis::start_tls(&cert_pem, &certified.key_pair.serialize_pem()).expect("redis with TLS");
    (redis, cert_pem)
}

fn trusting(ca_pem: &str) -> BusOptions {
    BusOptions {
        presence_period: Duration::from_millis(100),
        tls_ca_pem: Some(ca_pem.as_bytes().to_vec()),
        ..BusOptions::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_over_rediss_with_the_ca_given_hear_each_other() {
    let (redis, ca_pem) = tls_redis();
    assert!(redis.url().starts_with("rediss://"), "{}", redis.url());
    let (log, tenancy) = stores();
    bounded(async {
        let a = Node::start_with(&[redis.url()], &log, &tenancy, trusting(&ca_pem)).await;
        let b = Node::start_with(&[redis.url()], &log, &tenancy, trusting(&ca_pem)).await;
        let on_b = b.subscribe("secure").await;
        eventually("B to listen", || b.bus.listening_channels() == 1).await;
        for n in 1..=20 {
            assert_eq!(a.publish("secure", n).await, n);
        }
        assert_exact(&receive(&on_b, 20).await, 20);
        // Through Redis over TLS, not only from the log: the log read that follows a new
        // subscription can deliver all 20 before their batches arrive (a slow machine), but
        // the batches do arrive.
        eventually("a batch through Redis over TLS", || {
            b.bus.stats().received_batches > 0
        })
        .await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_ca_the_certificate_is_refused_with_a_clear_error() {
    let (redis, _ca_pem) = tls_redis();
    let error = bounded(async {
        let options = BusOptions {
            max_reconnect_delay: Duration::from_millis(100),
            ..BusOptions::default()
        };
        match RedisBus::connect(&[redis.url()], Caches::new(b"s"), options).await {
            Ok(_) => panic!("a self-signed certificate no root signs was accepted"),
            Err(e) => e,
        }
    })
    .await;
    let shown = error.to_string();
    assert!(matches!(error, BusError::Connect { .. }), "{error:?}");
    assert!(
        shown.contains(&redis.url()) && shown.contains("certificate did not verify"),
        "names the server and the certificate: {shown}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_url_to_a_tls_only_redis_does_not_connect_and_a_scheme_mix_is_refused() {
    let (redis, ca_pem) = tls_redis();
    let plain = redis.url().replacen("rediss://", "redis://", 1);
    let mixed = [redis.url(), "redis://localhost:1".to_string()];
    bounded(async {
        let options = BusOptions {
            max_reconnect_delay: Duration::from_millis(100),
            ..trusting(&ca_pem)
        };
        let e = RedisBus::connect(&mixed, Caches::new(b"s"), options.clone())
            .await
            .err()
            .expect("a mix of schemes is refused");
        assert!(matches!(e, BusError::Url { .. }), "{e:?}");
        assert!(
            RedisBus::connect(&[plain], Caches::new(b"s"), options)
                .await
                .is_err(),
            "a plain client gets no answer from a TLS port"
        );
    })
    .await;
}
