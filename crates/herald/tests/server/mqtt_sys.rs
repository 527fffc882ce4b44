//! The `$SYS/` statistics (herald-mqtt's `sys.rs`) with real clients: `mosquitto_sub -t
//! '$SYS/#'` is sent the current values at once, as retained messages, `$SYS/broker/version`
//! among them, and then the values that change, every `mqtt.sys_interval`; the values are
//! the node's metrics; a PUBLISH to `$SYS/x` is refused (Paho v5: PUBACK 0x87); with
//! `mqtt.sys_interval = 0` nothing is published.

use serde_json::json;

use crate::support::mqtt::{mosquitto_sub, PahoRun};
use crate::support::{Server, API_KEY};

/// `mosquitto_sub` with the publisher key on `topic`, printing `RETAIN TOPIC PAYLOAD`, until
/// `count` messages or `secs` seconds; its lines.
async fn sys_sub(server: &Server, topic: &str, count: &str, secs: &str) -> Vec<String> {
    let args = [
        "-V", "mqttv5", "-u", "default", "-P", API_KEY, "-t", topic, "-F", "%r %t %p", "-C", count,
        "-W", secs,
    ];
    let out = mosquitto_sub(server.mqtt_addr(), &args).await;
    // `-W` ends a run that got fewer messages than `-C` with 27.
    assert!(matches!(out.code, Some(0) | Some(27)), "{}", out.describe());
    out.stdout.lines().map(str::to_owned).collect()
}

#[tokio::test]
async fn mosquitto_sub_gets_the_sys_tree_at_once_and_its_changes() {
    let server = Server::builder()
        .mqtt()
        .env("HERALD_MQTT_SYS_INTERVAL", "1")
        .start()
        .await;
    for n in 1..=3 {
        server.publish("sys/t", json!(n)).await;
    }
    // Twelve topics, each retained at once.
    let lines = sys_sub(&server, "$SYS/#", "12", "10").await;
    let version = format!(
        "1 $SYS/broker/version herald version {}",
        env!("CARGO_PKG_VERSION")
    );
    assert!(lines.contains(&version), "{lines:?}");
    assert_eq!(lines.len(), 12, "{lines:?}");
    assert!(
        lines.iter().all(|l| l.starts_with("1 $SYS/broker/")),
        "{lines:?}"
    );
    // The node's metrics: the three messages published over HTTP, once the values were read
    // after them (every second here).
    let mut received = 0;
    for _ in 0..40 {
        let lines = sys_sub(&server, "$SYS/broker/messages/received", "1", "5").await;
        let value = lines.first().and_then(|l| l.rsplit(' ').next());
        received = value.and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        if received >= 3 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    assert!(received >= 3, "messages/received stayed at {received}");
    // The uptime changes every second: retained first, then published live.
    let lines = sys_sub(&server, "$SYS/broker/uptime", "2", "10").await;
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(lines[0].starts_with("1 $SYS/broker/uptime "), "{lines:?}");
    assert!(lines[1].starts_with("0 $SYS/broker/uptime "), "{lines:?}");
    assert!(lines[1].ends_with(" seconds"), "{lines:?}");
}

#[tokio::test]
async fn a_publish_to_sys_is_refused() {
    let server = Server::builder().mqtt().start().await;
    let mut client = PahoRun::start(
        server.mqtt_addr(),
        json!({
            "version": "5", "username": "default", "password": API_KEY,
            "publish": [
                { "topic": "$SYS/x", "payload": "1", "qos": 1 },
                { "topic": "$SYS/broker/version", "payload": "forged", "qos": 1 }
            ],
            "timeout": 15
        }),
    );
    let first = client.until("published").await;
    assert_eq!(first["reason_code"], json!(0x87), "{first}");
    let second = client.until("published").await;
    assert_eq!(second["reason_code"], json!(0x87), "{second}");
    let (code, events) = client.finish().await;
    assert_eq!(code, Some(0), "{events:?}");
    // Nothing was stored in the channel the topic maps to.
    let (status, body) = server.get("/v1/channels/==24SYS/x/messages").await;
    assert!(
        status == 404 || body["messages"].as_array().is_some_and(|m| m.is_empty()),
        "{status} {body}"
    );
}

#[tokio::test]
async fn sys_interval_0_publishes_nothing() {
    let server = Server::builder()
        .mqtt()
        .env("HERALD_MQTT_SYS_INTERVAL", "0")
        .start()
        .await;
    let lines = sys_sub(&server, "$SYS/#", "1", "2").await;
    assert!(lines.is_empty(), "{lines:?}");
}
