//! What CONNECT decides beyond the codes `mqtt_session.rs` checks: a configured publisher API
//! key works as the password whatever it looks like, a CONNECT without a user name is in the
//! app its credential names, and `mqtt.max_keep_alive` holds 3.1.1 clients too (which no CONNACK can tell), closing one that asked for more, or for none, after
//! one and a half times it of silence. With `mqtt.anonymous_ignores_unknown_passwords`, a
//! password that is no credential lets an anonymous client in, one shaped like a credential
//! that fails is refused. An anonymous client's user name is not read: a device's own (Tasmota's
//! `DVES_USER`) is no reason to refuse it.

use std::num::NonZeroU16;

use herald_mqtt::packet::{
    self, Connect, ConnectProperties, Packet, ProtocolVersion, QoS, ReasonCode,
};
use serde_json::json;

use crate::mqtt_session::{history, Raw};
use crate::support::mqtt::{mosquitto_pub, paho};
use crate::support::Server;

#[tokio::test]
async fn a_configured_api_key_without_the_hk_prefix_is_a_password() {
    let key = "configured-publisher-key-0123";
    let server = Server::builder()
        .mqtt()
        .env("HERALD_PREVIOUS_API_KEY", key)
        .start()
        .await;
    let mqtt = server.mqtt_addr();
    for version in [ProtocolVersion::V311, ProtocolVersion::V5] {
        let (mut raw, connack) = Raw::connect(mqtt, version, Some(key), 0).await;
        assert_eq!(connack.reason_code, ReasonCode::Success, "{version:?}");
        raw.send(&Packet::Publish(packet::Publish {
            dup: false,
            qos: QoS::AtLeastOnce,
            retain: false,
            topic: packet::TopicName::new("keyed").unwrap(),
            packet_id: NonZeroU16::new(1),
            properties: Default::default(),
            payload: packet::Bytes::from_static(b"1"),
        }))
        .await;
        match raw.next().await {
            Some(Packet::PubAck(ack)) => assert_eq!(ack.reason_code, ReasonCode::Success),
            other => panic!("{other:?}; {}", raw.why_closed()),
        }
    }
    mosquitto_pub(
        mqtt,
        &[
            "-V", "mqttv311", "-u", "default", "-P", key, "-q", "1", "-t", "keyed", "-m", "2",
        ],
    )
    .await
    .ok();
    assert_eq!(
        history(&server, "keyed").await,
        [(1, json!(1)), (2, json!(1)), (3, json!(2))]
    );
    // A key that is not one is still refused, with or without the prefix.
    for password in ["hk_not_a_key_at_all", "configured-publisher-key-9999"] {
        let (_, connack) = Raw::connect(mqtt, ProtocolVersion::V311, Some(password), 0).await;
        assert_eq!(connack.reason_code, ReasonCode::BadUserNameOrPassword);
    }
}

#[tokio::test]
async fn a_311_client_asking_for_more_than_max_keep_alive_or_none_is_held_to_it() {
    let server = Server::builder()
        .mqtt()
        .env("HERALD_MQTT_MAX_KEEP_ALIVE", "1")
        .start()
        .await;
    let mqtt = server.mqtt_addr();
    let token = server.token(&["*"], &[]);
    // 0 (none) and 600 s: both closed after 1.5 s of silence, without a DISCONNECT (3.1.1).
    for keep_alive in [0, 600] {
        let (mut raw, connack) =
            Raw::connect(mqtt, ProtocolVersion::V311, Some(&token), keep_alive).await;
        assert_eq!(connack.reason_code, ReasonCode::Success);
        raw.send(&Packet::PingReq).await;
        assert_eq!(raw.next().await, Some(Packet::PingResp));
        assert!(raw.until_closed().await.is_none(), "{}", raw.why_closed());
    }
    // v5 is told, and closed with 0x8D.
    let (mut raw, connack) = Raw::connect(mqtt, ProtocolVersion::V5, Some(&token), 0).await;
    assert_eq!(connack.properties.server_keep_alive, Some(1));
    let disconnect = raw.until_closed().await.expect("a DISCONNECT");
    assert_eq!(disconnect.reason_code, ReasonCode::KeepAliveTimeout);
}

#[tokio::test]
async fn without_a_user_name_the_credential_names_its_app() {
    const ADMIN: &str = "mqtt-admin-key-0123456789abcdef";
    let server = Server::builder()
        .mqtt()
        .arg("--admin-key")
        .arg(ADMIN)
        .start()
        .await;
    let mqtt = server.mqtt_addr();
    let created = server
        .http
        .post(server.url("/v1/apps"))
        .bearer_auth(ADMIN)
        .json(&json!({ "id": "shop" }))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let body: serde_json::Value = created.json().await.unwrap();
    let shop_key = body["key"].as_str().unwrap().to_owned();
    // An empty user name (Paho sends no password without a user name): the shop's key
    // publishes in the shop, in both versions.
    let specs = [
        json!({ "version": "3.1.1", "username": "", "password": shop_key }),
        json!({ "version": "5", "username": "", "password": shop_key }),
    ];
    for (n, mut spec) in specs.into_iter().enumerate() {
        spec["publish"] = json!([{ "topic": "orders", "payload": n.to_string(), "qos": 1 }]);
        let out = paho(mqtt, spec).await.ok();
        assert_eq!(
            out.events("connack")[0]["reason_code"],
            0,
            "{}",
            out.describe()
        );
    }
    let messages: serde_json::Value = server
        .http
        .get(server.url("/v1/channels/orders/messages"))
        .bearer_auth(&shop_key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let data: Vec<_> = messages["messages"]
        .as_array()
        .unwrap_or_else(|| panic!("{messages}"))
        .iter()
        .map(|m| m["data"].clone())
        .collect();
    assert_eq!(data, [json!(0), json!(1)]);
    assert_eq!(
        history(&server, "orders").await,
        [],
        "not the default app's"
    );
    // The user name `default` holds the credential to the default app.
    let out = paho(
        mqtt,
        json!({ "version": "5", "username": "default", "password": shop_key }),
    )
    .await;
    assert_eq!(
        out.events("connack")[0]["reason_code"],
        0x86,
        "{}",
        out.describe()
    );
}

/// Subscribes `raw` (an anonymous client under the rule `allow = "open/#"`) to `open/x` and
/// `closed/x`: the first granted, the second refused.
async fn assert_held_to_the_open_rule(raw: &mut Raw, version: ProtocolVersion) {
    raw.send(&Packet::Subscribe(packet::Subscribe {
        packet_id: NonZeroU16::new(1).unwrap(),
        properties: packet::SubscribeProperties::default(),
        filters: ["open/x", "closed/x"]
            .iter()
            .map(|f| {
                let filter = packet::TopicFilter::new(*f).unwrap();
                (filter, packet::SubscriptionOptions::default())
            })
            .collect(),
    }))
    .await;
    match raw.next().await {
        Some(Packet::SubAck(ack)) => {
            assert_eq!(ack.reason_codes[0], ReasonCode::GrantedQoS0, "{version:?}");
            assert_ne!(ack.reason_codes[1], ReasonCode::GrantedQoS0, "{version:?}");
        }
        other => panic!("expected SUBACK, got {other:?}; {}", raw.why_closed()),
    }
}

#[tokio::test]
async fn anonymous_ignores_unknown_passwords_takes_junk_as_none_and_still_refuses_bad_credentials()
{
    let rules = "\n[[mqtt.anonymous_rules]]\nallow = \"open/#\"\n";
    let on = format!(
        "[mqtt]\nallow_anonymous = true\nanonymous_ignores_unknown_passwords = true\n{rules}"
    );
    let off = format!("[mqtt]\nallow_anonymous = true\n{rules}");
    let server = Server::builder().mqtt().config(&on).start().await;
    let mqtt = server.mqtt_addr();
    let token = server.token(&["*"], &[]);
    let (body, signature) = token.rsplit_once('.').expect("a JWT");
    let forged = format!("{body}.{}", signature.chars().rev().collect::<String>());
    for version in [ProtocolVersion::V311, ProtocolVersion::V5] {
        // Junk: anonymous, held to the anonymous rules.
        let (mut raw, connack) = Raw::connect(mqtt, version, Some("secret"), 0).await;
        assert_eq!(connack.reason_code, ReasonCode::Success, "{version:?}");
        assert_held_to_the_open_rule(&mut raw, version).await;
        // Shaped like a credential and failing: refused as always.
        for bad in [forged.as_str(), "hk_0123456789abcdef0123"] {
            let (mut raw, connack) = Raw::connect(mqtt, version, Some(bad), 0).await;
            assert_eq!(
                connack.reason_code,
                ReasonCode::BadUserNameOrPassword,
                "{version:?} {bad}"
            );
            assert!(
                raw.until_closed().await.is_none(),
                "closed after the CONNACK"
            );
        }
        // A real token still is one.
        let (_raw, connack) = Raw::connect(mqtt, version, Some(&token), 0).await;
        assert_eq!(connack.reason_code, ReasonCode::Success, "{version:?}");
    }
    // Off (the default), with the anonymous mode on: junk is refused, as before.
    let server = Server::builder().mqtt().config(&off).start().await;
    for version in [ProtocolVersion::V311, ProtocolVersion::V5] {
        let (_raw, connack) = Raw::connect(server.mqtt_addr(), version, Some("secret"), 0).await;
        assert_eq!(
            connack.reason_code,
            ReasonCode::BadUserNameOrPassword,
            "{version:?}"
        );
    }
}

/// Devices moved from a Mosquitto with `allow_anonymous true` keep the user name they had
/// there, which is rarely an app id (Tasmota's default is `DVES_USER`, with `DVES_PASS`).
/// An anonymous client's user name is not read, so such a device connects (without a
/// password, or with one `anonymous_ignores_unknown_passwords` ignores) and is held to the
/// anonymous rules; with a credential the user name still names its app.
#[tokio::test]
async fn an_anonymous_client_may_send_a_user_name_that_is_no_app_id() {
    let server = Server::builder()
        .mqtt()
        .config(
            "[mqtt]\nallow_anonymous = true\nanonymous_ignores_unknown_passwords = true\n\
             [[mqtt.anonymous_rules]]\nallow = \"open/#\"\n",
        )
        .start()
        .await;
    let mqtt = server.mqtt_addr();
    let token = server.token(&["*"], &[]);
    let connect = |version, password: Option<&str>| Connect {
        protocol_version: version,
        clean_start: true,
        keep_alive: 0,
        client_id: String::new(),
        will: None,
        username: Some("DVES_USER".into()),
        password: password.map(|p| packet::Bytes::copy_from_slice(p.as_bytes())),
        properties: ConnectProperties::default(),
    };
    for version in [ProtocolVersion::V311, ProtocolVersion::V5] {
        for password in [None, Some("DVES_PASS")] {
            let (mut raw, connack) = Raw::connect_packet(mqtt, connect(version, password)).await;
            assert_eq!(
                connack.reason_code,
                ReasonCode::Success,
                "{version:?} {password:?}: {:?}",
                connack.properties.reason_string
            );
            // Anonymous: held to the rules.
            assert_held_to_the_open_rule(&mut raw, version).await;
        }
        // With a credential the user name names the app: one that is no app id is refused.
        let (_raw, connack) = Raw::connect_packet(mqtt, connect(version, Some(&token))).await;
        assert_eq!(
            connack.reason_code,
            ReasonCode::BadUserNameOrPassword,
            "{version:?}"
        );
    }
}
