//! MQTT with third-party clients (Debian's `mosquitto_pub`/`mosquitto_sub`, Eclipse Paho for
//! Python; `scripts/install-mqtt-clients.sh` installs them) against the listener `--mqtt`
//! starts: MQTT is a transport of the same system, so what an MQTT client publishes is a
//! channel's message that the HTTP API reads back with its seq, and what the HTTP API publishes
//! reaches MQTT subscribers of both versions.

use serde_json::json;

use crate::support::mqtt::{mosquitto_pub, PahoRun};
use crate::support::Server;

#[tokio::test]
async fn mosquitto_pub_publishes_qos1_with_a_token_over_both_versions_and_http_reads_it() {
    let server = Server::builder().mqtt().start().await;
    let mqtt = server.mqtt_addr();
    let token = server.token(&["sensors/*"], &["sensors/*"]);
    for (version, payload) in [("mqttv311", r#"{"t":21.5}"#), ("mqttv5", r#"{"t":22}"#)] {
        // mosquitto_pub exits 0 only once the server's PUBACK came: the message is stored.
        mosquitto_pub(
            mqtt,
            &[
                "-V",
                version,
                "-u",
                "default",
                "-P",
                &token,
                "-q",
                "1",
                "-t",
                "sensors/t",
                "-m",
                payload,
            ],
        )
        .await
        .ok();
    }
    let (status, history) = server.get("/v1/channels/sensors/t/messages").await;
    assert_eq!(status, 200, "{history}");
    let messages: Vec<_> = history["messages"]
        .as_array()
        .unwrap_or_else(|| panic!("no messages: {history}"))
        .iter()
        .map(|m| (m["seq"].clone(), m["data"].clone()))
        .collect();
    assert_eq!(
        messages,
        [(json!(1), json!({"t": 21.5})), (json!(2), json!({"t": 22}))],
        "each payload is valid JSON, so it is the message's data byte for byte"
    );
}

#[tokio::test]
async fn paho_subscribers_of_both_versions_receive_an_http_publish() {
    let server = Server::builder().mqtt().start().await;
    let mqtt = server.mqtt_addr();
    let token = server.token(&["sensors/*"], &[]);
    let mut subscribers = Vec::new();
    for version in ["3.1.1", "5"] {
        let mut run = PahoRun::start(
            mqtt,
            json!({
                "version": version,
                "username": "default",
                "password": token,
                "subscribe": [{"topic": "sensors/kitchen", "qos": 1}],
                "expect": 1,
            }),
        );
        let suback = run.until("suback").await;
        assert_eq!(
            suback["reason_codes"],
            json!([1]),
            "granted QoS 1: {suback}"
        );
        run.until("subscribed").await;
        subscribers.push((version, run));
    }
    server.publish("sensors/kitchen", json!({"t": 21.5})).await;
    for (version, run) in subscribers {
        let (code, events) = run.finish().await;
        assert_eq!(code, Some(0), "v{version}: {events:?}");
        let message = events
            .iter()
            .find(|e| e["event"] == "message")
            .unwrap_or_else(|| panic!("v{version}: no message in {events:?}"));
        assert_eq!(message["topic"], "sensors/kitchen", "v{version}");
        assert_eq!(
            message["payload"], r#"{"t":21.5}"#,
            "v{version}: the data as JSON text"
        );
    }
}
