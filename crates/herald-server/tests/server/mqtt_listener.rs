//! The MQTT listener as the server starts and stops it: off unless configured, its bound port
//! reported (port 0 asked), TLS refused without the server's certificate, and no longer
//! accepting once the server has shut down. What is spoken on it is herald-mqtt's (tested with
//! real clients in `crates/herald/tests/server/mqtt.rs`).

use std::net::SocketAddr;

use herald_server::{MqttPort, Server, ServerError};
use tokio::net::TcpStream;

use crate::support;

#[tokio::test]
async fn the_mqtt_listener_is_bound_on_request_refuses_tls_without_a_certificate_and_stops_at_shutdown(
) {
    let dir = tempfile::tempdir().unwrap();
    let server = support::start(support::settings(dir.path())).await;
    assert_eq!(server.addresses().mqtt, None, "off unless configured");
    server.shutdown().await.unwrap();

    let mut settings = support::settings(dir.path());
    settings.mqtt = MqttPort {
        listen: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
        tls: true,
        ..MqttPort::default()
    };
    match Server::builder(settings.clone()).start().await {
        Err(e @ ServerError::MqttTlsWithoutCertificate) => assert_eq!(
            e.to_string(),
            "mqtt_tls needs the server's certificate: set tls_cert and tls_key"
        ),
        Err(e) => panic!("unexpected error: {e}"),
        Ok(_) => panic!("mqtt_tls without a certificate started"),
    }

    settings.mqtt.tls = false;
    let server = support::start(settings).await;
    let mqtt = server.addresses().mqtt.expect("the bound MQTT address");
    assert!(mqtt.ip().is_loopback() && mqtt.port() != 0, "{mqtt}");
    TcpStream::connect(mqtt)
        .await
        .expect("the listener accepts");
    server.shutdown().await.unwrap();
    // Shutdown waits for the accept loop, which drops the listener when it ends.
    let after = TcpStream::connect(mqtt).await;
    assert!(after.is_err(), "still accepting after shutdown: {after:?}");
}
