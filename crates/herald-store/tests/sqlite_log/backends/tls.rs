//! TLS to PostgreSQL when the URL asks for it: a server that refuses plain TCP connections
//! (`hostssl` only) is reached with `sslmode=verify-full` and its CA in `sslrootcert`; without
//! the CA the certificate is refused, and `sslmode=disable` is refused by the server.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use herald_core::log::{ChannelLog, ReadFrom, Retention};
use herald_core::message::NewMessage;
use herald_core::name::ChannelName;
use herald_store::{PostgresOptions, PostgresStore};
use herald_testkit::Postgres;

use super::RecordingSink;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_url_that_asks_for_tls_gets_a_verified_tls_connection() {
    tokio::time::timeout(Duration::from_secs(120), async {
        let certified =
            rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()])
                .unwrap();
        let (cert_pem, key_pem) = (certified.cert.pem(), certified.key_pair.serialize_pem());
        let server =
            tokio::task::spawn_blocking(move || Postgres::start_with_tls(&cert_pem, &key_pem))
                .await
                .unwrap()
                .expect("start PostgreSQL with TLS");
        let plain = server.create_database("herald").unwrap();
        let ca = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(ca.path(), certified.cert.pem()).unwrap();
        let open = |url: String| async move {
            let sink = Arc::new(RecordingSink::default());
            PostgresStore::open(&url, PostgresOptions::default(), sink).await
        };

        let verified = format!(
            "{plain}?sslmode=verify-full&sslrootcert={}",
            ca.path().display()
        );
        let store = open(verified).await.expect("a verified TLS connection");
        let channel = ChannelName::parse("secure").unwrap();
        let keep = Retention {
            max_messages: 10,
            max_age_ms: 0,
        };
        let appended = store
            .append(
                &channel,
                vec![NewMessage {
                    id: None,
                    data: Bytes::from_static(b"\"over tls\""),
                    retain: Default::default(),
                    hold: None,
                }],
                keep,
            )
            .await
            .unwrap();
        assert_eq!(appended[0].message.seq, 1);
        let read = store.read(&channel, ReadFrom::After(0), 10).await.unwrap();
        assert_eq!(&read.messages[0].data[..], b"\"over tls\"");
        store.close().await;

        // The server's certificate is not signed by a public root: without the CA it is
        // refused, and the error says so.
        let unverified = open(format!("{plain}?sslmode=require")).await.unwrap_err();
        let text = unverified.chain();
        assert!(text.to_lowercase().contains("certificate"), "{text}");
        // Plain TCP is refused by the server (pg_hba: hostssl only), so the connection above
        // was TLS.
        let refused = open(format!("{plain}?sslmode=disable")).await.unwrap_err();
        assert!(!refused.chain().is_empty());
    })
    .await
    .expect("bounded");
}
