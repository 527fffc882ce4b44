//! The MQTT connection end to end (herald-mqtt's `serve`, `connect`, `wire`, `inbound`,
//! `outbound`): QoS 0, 1 and 2 publishes from `mosquitto_pub` reaching the HTTP API and a
//! WebSocket subscriber with the same seq, HTTP publishes reaching `mosquitto_sub` and Paho
//! (with a v5 envelope's properties), the channel's last message as the retained message,
//! refused credentials and the anonymous rules with the codes the standards name, and bad input
//! and keep-alive expiry from a raw client (herald-mqtt's codec on a TCP socket), which closes
//! only that connection.

use std::net::SocketAddr;
use std::num::NonZeroU16;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use bytes::BytesMut;
use herald_mqtt::packet::{
    self, ConnAck, Connect, ConnectProperties, Packet, ProtocolVersion, QoS, ReasonCode, Subscribe,
    SubscribeProperties, SubscriptionOptions, TopicFilter,
};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::mqtt::{mosquitto_pub, mosquitto_sub, paho, PahoRun};
use crate::support::{Server, Ws};

/// A raw MQTT client: packets encoded and decoded with herald-mqtt's codec over a plain TCP
/// socket, so a test can send what no client library would and see exactly what comes back
/// (`mqtt_refusals.rs` and `mqtt_connect.rs` use it too).
pub(crate) struct Raw {
    stream: TcpStream,
    buf: BytesMut,
    version: ProtocolVersion,
    /// The last packet the server sent, for a test that sees the connection close.
    last: Option<String>,
}

impl Raw {
    /// Connects and sends CONNECT with a client identifier of its own; returns the client and
    /// the server's CONNACK.
    pub(crate) async fn connect(
        addr: SocketAddr,
        version: ProtocolVersion,
        password: Option<&str>,
        keep_alive: u16,
    ) -> (Raw, ConnAck) {
        static NEXT: AtomicU32 = AtomicU32::new(1);
        let client_id = format!("raw-{}", NEXT.fetch_add(1, Ordering::Relaxed));
        Raw::connect_as(addr, version, password, keep_alive, &client_id).await
    }

    /// [`Raw::connect`] with client identifier `client_id`.
    async fn connect_as(
        addr: SocketAddr,
        version: ProtocolVersion,
        password: Option<&str>,
        keep_alive: u16,
        client_id: &str,
    ) -> (Raw, ConnAck) {
        let properties = ConnectProperties::default();
        Raw::connect_with(addr, version, password, keep_alive, client_id, properties).await
    }

    /// [`Raw::connect_as`] with the CONNECT's (v5) `properties`.
    pub(crate) async fn connect_with(
        addr: SocketAddr,
        version: ProtocolVersion,
        password: Option<&str>,
        keep_alive: u16,
        client_id: &str,
        properties: ConnectProperties,
    ) -> (Raw, ConnAck) {
        let connect = Connect {
            protocol_version: version,
            clean_start: true,
            keep_alive,
            client_id: client_id.into(),
            will: None,
            username: password.map(|_| "default".to_owned()),
            password: password.map(|p| packet::Bytes::copy_from_slice(p.as_bytes())),
            properties,
        };
        Raw::connect_packet(addr, connect).await
    }

    /// Connects and sends `connect` as it is (a will, say); returns the client and the
    /// server's CONNACK.
    pub(crate) async fn connect_packet(addr: SocketAddr, connect: Connect) -> (Raw, ConnAck) {
        let stream = TcpStream::connect(addr).await.expect("connect");
        let mut raw = Raw {
            stream,
            buf: BytesMut::new(),
            version: connect.protocol_version,
            last: None,
        };
        raw.send(&Packet::Connect(Box::new(connect))).await;
        match raw.next().await {
            Some(Packet::ConnAck(connack)) => (raw, *connack),
            other => panic!("expected CONNACK, got {other:?}; {}", raw.why_closed()),
        }
    }

    pub(crate) async fn send(&mut self, packet: &Packet) {
        let mut out = BytesMut::new();
        packet::encode(packet, self.version, &mut out).expect("encodes");
        self.send_bytes(&out).await;
    }

    async fn send_bytes(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).await.expect("write");
    }

    /// The next packet from the server; `None` once it closed the connection. Panics after
    /// 10 s without either.
    pub(crate) async fn next(&mut self) -> Option<Packet> {
        loop {
            match packet::decode(&mut self.buf, Some(self.version), u32::MAX) {
                Ok(Some(p)) => {
                    self.last = Some(format!("{p:?}"));
                    return Some(p);
                }
                Ok(None) => {}
                Err(e) => panic!("the server sent what does not decode: {e}"),
            }
            let mut chunk = [0u8; 4096];
            let read = tokio::time::timeout(Duration::from_secs(10), self.stream.read(&mut chunk))
                .await
                .unwrap_or_else(|_| {
                    panic!("nothing from the server in 10 s; {}", self.why_closed())
                });
            match read {
                Ok(0) | Err(_) => return None,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
            }
        }
    }

    /// Reads until the server closes the connection: the DISCONNECT it said goodbye with, if it
    /// sent one.
    pub(crate) async fn until_closed(&mut self) -> Option<packet::Disconnect> {
        let mut disconnect = None;
        while let Some(p) = self.next().await {
            if let Packet::Disconnect(d) = p {
                disconnect = Some(d);
            }
        }
        disconnect
    }

    /// The next packet; a panic naming the server's last packet if the connection closed.
    pub(crate) async fn next_packet(&mut self) -> Packet {
        let next = self.next().await;
        next.unwrap_or_else(|| panic!("closed; {}", self.why_closed()))
    }

    pub(crate) fn why_closed(&self) -> String {
        format!(
            "the server's last packet: {}",
            self.last.as_deref().unwrap_or("none")
        )
    }
}

fn subscribe_packet(topic: &str, qos: QoS) -> Packet {
    Packet::Subscribe(Subscribe {
        packet_id: NonZeroU16::new(1).unwrap(),
        properties: SubscribeProperties::default(),
        filters: vec![(
            TopicFilter::new(topic).unwrap(),
            SubscriptionOptions {
                qos,
                ..Default::default()
            },
        )],
    })
}

/// The channel's messages over HTTP as (seq, data).
pub(crate) async fn history(server: &Server, channel: &str) -> Vec<(u64, Value)> {
    let (status, body) = server
        .get(&format!("/v1/channels/{channel}/messages"))
        .await;
    assert_eq!(status, 200, "{body}");
    body["messages"]
        .as_array()
        .unwrap_or_else(|| panic!("no messages: {body}"))
        .iter()
        .map(|m| (m["seq"].as_u64().unwrap(), m["data"].clone()))
        .collect()
}

#[tokio::test]
async fn qos_0_1_2_publishes_from_mosquitto_pub_in_both_versions_reach_http_and_websocket_alike() {
    let server = Server::builder().mqtt().start().await;
    let mqtt = server.mqtt_addr();
    let token = server.token(&["plant/*"], &["plant/*"]);
    let mut ws = Ws::connect(&server.ws_url(&format!("?token={token}"))).await;
    let r = ws
        .request("subscribe", json!({ "channel": "plant/line-1" }))
        .await;
    assert!(r.get("error").is_none(), "{r}");
    let mut sent = Vec::new();
    for version in ["mqttv311", "mqttv5"] {
        for qos in ["0", "1", "2"] {
            let payload = json!({ "version": version, "qos": qos }).to_string();
            let args = [
                "-V",
                version,
                "-i",
                "pub-1",
                "-u",
                "default",
                "-P",
                &token,
                "-q",
                qos,
                "-t",
                "plant/line-1",
                "-m",
                &payload,
            ];
            mosquitto_pub(mqtt, &args).await.ok();
            sent.push(serde_json::from_str::<Value>(&payload).unwrap());
        }
    }
    // Every message reaches the WebSocket subscriber, in order, with its seq.
    let mut over_ws = Vec::new();
    while over_ws.len() < sent.len() {
        let frame = ws.frame().await;
        if let Some(m) = frame.get("message") {
            over_ws.push((m["seq"].as_u64().unwrap(), m["data"].clone()));
        }
    }
    let expected: Vec<(u64, Value)> = (1..).zip(sent).collect();
    assert_eq!(over_ws, expected, "the WebSocket subscriber's messages");
    assert_eq!(
        history(&server, "plant/line-1").await,
        expected,
        "the same messages, with the same seqs, over HTTP"
    );
}

#[tokio::test]
async fn an_http_publish_reaches_mosquitto_sub_in_both_versions_and_paho_with_v5_properties() {
    let server = Server::builder().mqtt().start().await;
    let mqtt = server.mqtt_addr();
    let token = server.token(&["news/*"], &[]);
    for version in ["mqttv311", "mqttv5"] {
        // -R: stale (retained) messages are not printed, so the one printed is live; the
        // publisher goes on until the subscriber, subscribed some time meanwhile, got one.
        let args: Vec<String> = [
            "-V",
            version,
            "-u",
            "default",
            "-P",
            &token,
            "-t",
            "news/live",
            "-q",
            "1",
            "-R",
            "-C",
            "1",
            "-W",
            "15",
            "-F",
            "%t|%q|%r|%p",
        ]
        .iter()
        .map(|a| a.to_string())
        .collect();
        let sub = tokio::spawn(async move {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            mosquitto_sub(mqtt, &args).await
        });
        let mut n = 0;
        while !sub.is_finished() {
            n += 1;
            server.publish("news/live", json!({ "headline": n })).await;
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let out = sub.await.unwrap().ok();
        let line = out.stdout.trim();
        let (head, payload) = line.rsplit_once('|').unwrap_or_else(|| panic!("{line:?}"));
        assert_eq!(
            head, "news/live|1|0",
            "topic, QoS 1 as granted, not retained"
        );
        let data: Value = serde_json::from_str(payload).unwrap();
        assert!(data["headline"].as_u64().is_some(), "{line}");
    }

    // Paho v5 at QoS 1: an envelope published over HTTP arrives as its payload, with its
    // properties.
    let mut paho_sub = PahoRun::start(
        mqtt,
        json!({
            "version": "5", "username": "default", "password": token,
            "subscribe": [{ "topic": "news/switch", "qos": 1 }], "expect": 1, "timeout": 15
        }),
    );
    paho_sub.until("subscribed").await;
    let envelope = json!({ "$mqtt": {
        "text": "ON", "content_type": "text/plain", "user_properties": [["room", "kitchen"]]
    }});
    server.publish("news/switch", envelope).await;
    let (code, events) = paho_sub.finish().await;
    assert_eq!(code, Some(0), "{events:?}");
    let message = events
        .iter()
        .find(|e| e["event"] == "message")
        .unwrap_or_else(|| panic!("no message: {events:?}"));
    assert_eq!(message["topic"], "news/switch");
    assert_eq!(
        message["payload"], "ON",
        "the envelope's payload, not the envelope"
    );
    assert_eq!(message["qos"], 1);
    assert_eq!(message["retain"], false);
    assert_eq!(
        message["properties"]["ContentType"], "text/plain",
        "{message}"
    );
    assert_eq!(
        message["properties"]["UserProperty"],
        json!([["room", "kitchen"]]),
        "{message}"
    );
}

#[tokio::test]
async fn a_subscription_gets_the_channels_last_message_as_the_retained_message() {
    let server = Server::builder().mqtt().start().await;
    let mqtt = server.mqtt_addr();
    let token = server.token(&["prices/*"], &[]);
    server.publish("prices/eurusd", json!(1.07)).await;
    server.publish("prices/eurusd", json!(1.08)).await;
    for version in ["mqttv311", "mqttv5"] {
        let args = [
            "-V",
            version,
            "-u",
            "default",
            "-P",
            &token,
            "-t",
            "prices/eurusd",
            "-C",
            "1",
            "-W",
            "10",
            "-F",
            "%r|%p",
        ];
        let out = mosquitto_sub(mqtt, &args).await.ok();
        assert_eq!(
            out.stdout.trim(),
            "1|1.08",
            "RETAIN set, the newest message"
        );
    }
    // A channel without messages has no retained message: nothing comes.
    let args = [
        "-u",
        "default",
        "-P",
        &token,
        "-t",
        "prices/none",
        "-C",
        "1",
        "-W",
        "2",
    ];
    let out = mosquitto_sub(mqtt, &args).await;
    assert_eq!(out.stdout, "", "{}", out.describe());
}

#[tokio::test]
async fn refused_credentials_get_the_connack_code_of_their_version() {
    let server = Server::builder().mqtt().start().await;
    let mqtt = server.mqtt_addr();
    // Paho (v5) reports the reason code: 0x86 Bad User Name or Password, with a reason string.
    let out = paho(
        mqtt,
        json!({ "version": "5", "username": "default", "password": "not-a-token" }),
    )
    .await;
    assert_eq!(out.code, Some(3), "refused: {}", out.describe());
    let connack = &out.events("connack")[0];
    assert_eq!(connack["reason_code"], 0x86, "{connack}");
    assert!(
        connack["properties"]["ReasonString"]
            .as_str()
            .is_some_and(|r| r.contains("token")),
        "{connack}"
    );
    // The raw codes, both versions: bad credentials, then none.
    let cases = [
        (
            ProtocolVersion::V5,
            Some("not-a-token"),
            ReasonCode::BadUserNameOrPassword,
        ),
        (
            ProtocolVersion::V311,
            Some("not-a-token"),
            ReasonCode::BadUserNameOrPassword,
        ),
        (ProtocolVersion::V5, None, ReasonCode::NotAuthorized),
        (ProtocolVersion::V311, None, ReasonCode::NotAuthorized),
    ];
    for (version, password, code) in cases {
        let (mut raw, connack) = Raw::connect(mqtt, version, password, 0).await;
        assert_eq!(connack.reason_code, code, "{version:?} {password:?}");
        assert!(!connack.session_present);
        assert!(
            raw.until_closed().await.is_none(),
            "closed after the CONNACK"
        );
    }
    // A token of the default app with another app's name as the user name is refused too.
    let token = server.token(&["*"], &[]);
    let out = paho(
        mqtt,
        json!({ "version": "5", "username": "other-app", "password": token }),
    )
    .await;
    assert_eq!(
        out.events("connack")[0]["reason_code"],
        0x86,
        "{}",
        out.describe()
    );
}

#[tokio::test]
async fn anonymous_clients_are_held_to_the_allow_and_deny_rules() {
    let server = Server::builder()
        .mqtt()
        .config(
            r#"
[mqtt]
allow_anonymous = true

[[mqtt.anonymous_rules]]
allow = "public/#"

[[mqtt.anonymous_rules]]
deny = "public/locked"
action = "publish"
"#,
        )
        .start()
        .await;
    let mqtt = server.mqtt_addr();
    let out = paho(
        mqtt,
        json!({
            "version": "5",
            "subscribe": [{ "topic": "public/a", "qos": 1 }, { "topic": "private/a", "qos": 1 }],
            "publish": [
                { "topic": "public/a", "payload": "{\"ok\":1}", "qos": 1 },
                { "topic": "public/locked", "payload": "{\"ok\":2}", "qos": 1 },
                { "topic": "private/a", "payload": "{\"ok\":3}", "qos": 1 }
            ],
            "expect": 1
        }),
    )
    .await
    .ok();
    let granted: Vec<Value> = out
        .events("suback")
        .iter()
        .flat_map(|s| s["reason_codes"].as_array().cloned().unwrap_or_default())
        .collect();
    assert_eq!(granted, [json!(1), json!(0x87)], "{}", out.describe());
    let codes: Vec<Value> = out
        .events("published")
        .iter()
        .map(|p| p["reason_code"].clone())
        .collect();
    assert_eq!(
        codes,
        [json!(0), json!(0x87), json!(0x87)],
        "{}",
        out.describe()
    );
    let messages = out.events("message");
    assert_eq!(
        messages[0]["payload"], "{\"ok\":1}",
        "its own publish, allowed both ways"
    );
    assert_eq!(
        history(&server, "public/a").await,
        [(1, json!({ "ok": 1 }))]
    );
    assert_eq!(history(&server, "public/locked").await, []);
}

#[tokio::test]
async fn a_malformed_packet_closes_only_its_connection_with_the_reason_code() {
    let server = Server::builder().mqtt().start().await;
    let mqtt = server.mqtt_addr();
    let token = server.token(&["*"], &["*"]);
    let (mut good, connack) = Raw::connect(mqtt, ProtocolVersion::V5, Some(&token), 0).await;
    assert_eq!(connack.reason_code, ReasonCode::Success);
    good.send(&subscribe_packet("lobby", QoS::AtMostOnce)).await;
    assert!(
        matches!(good.next().await, Some(Packet::SubAck(_))),
        "{}",
        good.why_closed()
    );

    // v5: a PUBLISH with both QoS bits set is malformed: DISCONNECT 0x81, then the close.
    let (mut bad, _) = Raw::connect(mqtt, ProtocolVersion::V5, Some(&token), 0).await;
    bad.send_bytes(&[0x36, 0x05, 0x00, 0x01, b'a', 0x00, 0x01])
        .await;
    let disconnect = bad.until_closed().await;
    let disconnect = disconnect.unwrap_or_else(|| panic!("no DISCONNECT; {}", bad.why_closed()));
    assert_eq!(
        disconnect.reason_code,
        ReasonCode::MalformedPacket,
        "{disconnect:?}"
    );
    // 3.1.1: the connection is closed, nothing sent; so is a second CONNECT in v5 (0x82).
    let (mut bad, _) = Raw::connect(mqtt, ProtocolVersion::V311, Some(&token), 0).await;
    bad.send_bytes(&[0x36, 0x05, 0x00, 0x01, b'a', 0x00, 0x01])
        .await;
    assert!(bad.until_closed().await.is_none(), "{}", bad.why_closed());
    let (mut again, _) = Raw::connect(mqtt, ProtocolVersion::V5, Some(&token), 0).await;
    let connect = Packet::Connect(Box::new(Connect {
        protocol_version: ProtocolVersion::V5,
        clean_start: true,
        keep_alive: 0,
        client_id: "again".into(),
        will: None,
        username: None,
        password: None,
        properties: ConnectProperties::default(),
    }));
    again.send(&connect).await;
    let disconnect = again.until_closed().await.expect("a DISCONNECT");
    assert_eq!(disconnect.reason_code, ReasonCode::ProtocolError);
    // v5: a packet over the Maximum Packet Size (1 MiB) is refused from its fixed header:
    // DISCONNECT 0x95.
    let (mut big, _) = Raw::connect(mqtt, ProtocolVersion::V5, Some(&token), 0).await;
    big.send_bytes(&[0x30, 0x80, 0x80, 0x80, 0x01]).await;
    let disconnect = big.until_closed().await.expect("a DISCONNECT");
    assert_eq!(disconnect.reason_code, ReasonCode::PacketTooLarge);
    // A packet before CONNECT: closed without an answer.
    let mut early = TcpStream::connect(mqtt).await.unwrap();
    early.write_all(&[0xC0, 0x00]).await.unwrap();
    let mut rest = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), early.read_to_end(&mut rest)).await;
    assert!(
        matches!(read, Ok(Ok(0))),
        "closed, nothing sent: {read:?} {rest:?}"
    );

    // The first connection still works.
    server.publish("lobby", json!("still here")).await;
    match good.next().await {
        Some(Packet::Publish(p)) => assert_eq!(&p.payload[..], b"\"still here\""),
        other => panic!("{other:?}; {}", good.why_closed()),
    }
    good.send(&Packet::PingReq).await;
    assert_eq!(good.next().await, Some(Packet::PingResp));
}

#[tokio::test]
async fn a_silent_client_is_closed_after_one_and_a_half_keep_alives() {
    let server = Server::builder().mqtt().start().await;
    let mqtt = server.mqtt_addr();
    let token = server.token(&["*"], &[]);
    // Keep-alive 1 s: pings keep the connection, then silence ends it with 0x8D.
    let (mut raw, connack) = Raw::connect(mqtt, ProtocolVersion::V5, Some(&token), 1).await;
    assert_eq!(connack.reason_code, ReasonCode::Success);
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_millis(700)).await;
        raw.send(&Packet::PingReq).await;
        assert_eq!(
            raw.next().await,
            Some(Packet::PingResp),
            "{}",
            raw.why_closed()
        );
    }
    let disconnect = raw.until_closed().await;
    let disconnect = disconnect.unwrap_or_else(|| panic!("no DISCONNECT; {}", raw.why_closed()));
    assert_eq!(
        disconnect.reason_code,
        ReasonCode::KeepAliveTimeout,
        "{disconnect:?}"
    );
    // 3.1.1 just closes.
    let (mut raw, _) = Raw::connect(mqtt, ProtocolVersion::V311, Some(&token), 1).await;
    assert!(raw.until_closed().await.is_none(), "{}", raw.why_closed());
}

#[tokio::test]
async fn qos2_resent_with_the_same_packet_id_is_stored_once_and_a_reused_id_is_a_new_message() {
    let server = Server::builder().mqtt().start().await;
    let mqtt = server.mqtt_addr();
    let token = server.token(&["*"], &["*"]);
    let (mut raw, _) = Raw::connect(mqtt, ProtocolVersion::V5, Some(&token), 0).await;
    let id = NonZeroU16::new(7).unwrap();
    let publish = |payload: &'static str, dup: bool| {
        Packet::Publish(packet::Publish {
            dup,
            qos: QoS::ExactlyOnce,
            retain: false,
            topic: packet::TopicName::new("orders").unwrap(),
            packet_id: Some(id),
            properties: Default::default(),
            payload: packet::Bytes::from_static(payload.as_bytes()),
        })
    };
    raw.send(&publish("1", false)).await;
    assert!(
        matches!(raw.next().await, Some(Packet::PubRec(r)) if r.reason_code == ReasonCode::Success)
    );
    raw.send(&publish("1", true)).await;
    assert!(
        matches!(raw.next().await, Some(Packet::PubRec(_))),
        "{}",
        raw.why_closed()
    );
    raw.send(&Packet::PubRel(packet::PubRel::new(id))).await;
    assert!(
        matches!(raw.next().await, Some(Packet::PubComp(c)) if c.reason_code == ReasonCode::Success)
    );
    // PUBCOMP released the id: a PUBREL for it again is told Packet Identifier not found.
    raw.send(&Packet::PubRel(packet::PubRel::new(id))).await;
    assert!(
        matches!(raw.next().await, Some(Packet::PubComp(c)) if c.reason_code == ReasonCode::PacketIdentifierNotFound)
    );
    // The id reused for the next message.
    raw.send(&publish("2", false)).await;
    assert!(matches!(raw.next().await, Some(Packet::PubRec(_))));
    assert_eq!(
        history(&server, "orders").await,
        [(1, json!(1)), (2, json!(2))],
        "the resend stored once, the reused id stored anew"
    );
}

#[tokio::test]
async fn a_second_connection_with_the_same_client_id_takes_over() {
    let server = Server::builder().mqtt().start().await;
    let mqtt = server.mqtt_addr();
    let token = server.token(&["*"], &["*"]);
    let (mut first, _) =
        Raw::connect_as(mqtt, ProtocolVersion::V5, Some(&token), 0, "sensor-9").await;
    let (mut second, connack) =
        Raw::connect_as(mqtt, ProtocolVersion::V5, Some(&token), 0, "sensor-9").await;
    assert_eq!(connack.reason_code, ReasonCode::Success);
    let disconnect = first.until_closed().await;
    let disconnect = disconnect.unwrap_or_else(|| panic!("no DISCONNECT; {}", first.why_closed()));
    assert_eq!(disconnect.reason_code, ReasonCode::SessionTakenOver);
    second.send(&Packet::PingReq).await;
    assert_eq!(
        second.next().await,
        Some(Packet::PingResp),
        "the new one stays"
    );
}

#[tokio::test]
async fn a_message_expiry_interval_is_forwarded_as_the_time_left() {
    let server = Server::builder().mqtt().start().await;
    let mqtt = server.mqtt_addr();
    let token = server.token(&["*"], &["*"]);
    let (mut sub, _) = Raw::connect(mqtt, ProtocolVersion::V5, Some(&token), 0).await;
    sub.send(&subscribe_packet("alerts", QoS::AtLeastOnce))
        .await;
    assert!(
        matches!(sub.next().await, Some(Packet::SubAck(_))),
        "{}",
        sub.why_closed()
    );
    let (mut publisher, _) = Raw::connect(mqtt, ProtocolVersion::V5, Some(&token), 0).await;
    let properties = packet::PublishProperties {
        message_expiry_interval: Some(60),
        ..Default::default()
    };
    publisher
        .send(&Packet::Publish(packet::Publish {
            dup: false,
            qos: QoS::AtLeastOnce,
            retain: false,
            topic: packet::TopicName::new("alerts").unwrap(),
            packet_id: NonZeroU16::new(3),
            properties,
            payload: packet::Bytes::from_static(b"fire"),
        }))
        .await;
    assert!(matches!(publisher.next().await, Some(Packet::PubAck(_))));
    match sub.next().await {
        Some(Packet::Publish(p)) => {
            assert_eq!(&p.payload[..], b"fire");
            assert_eq!(p.qos, QoS::AtLeastOnce);
            let left = p
                .properties
                .message_expiry_interval
                .expect("an expiry interval");
            assert!((1..=60).contains(&left), "{left}");
        }
        other => panic!("{other:?}; {}", sub.why_closed()),
    }
}

#[tokio::test]
async fn connect_refusals_and_assigned_identifiers_follow_each_version() {
    let server = Server::builder().mqtt().start().await;
    let mqtt = server.mqtt_addr();
    let token = server.token(&["*"], &[]);
    // MQTT 3.1 (`MQIsdp`, level 3): 3.1.1's CONNACK 0x01, unacceptable protocol version.
    let mut old = TcpStream::connect(mqtt).await.unwrap();
    old.write_all(b"\x10\x0f\x00\x06MQIsdp\x03\x02\x00\x3c\x00\x01a")
        .await
        .unwrap();
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), old.read_to_end(&mut answer)).await;
    assert!(read.is_ok(), "closed after the answer");
    assert_eq!(answer, [0x20, 0x02, 0x00, 0x01]);
    // 3.1.1, an empty client id without a clean session: 0x02 identifier rejected.
    let connect = |version, clean_start| {
        Packet::Connect(Box::new(Connect {
            protocol_version: version,
            clean_start,
            keep_alive: 0,
            client_id: String::new(),
            will: None,
            username: Some("default".into()),
            password: Some(packet::Bytes::from(token.clone().into_bytes())),
            properties: ConnectProperties::default(),
        }))
    };
    let mut raw = Raw {
        stream: TcpStream::connect(mqtt).await.unwrap(),
        buf: BytesMut::new(),
        version: ProtocolVersion::V311,
        last: None,
    };
    // (Written by hand: the codec refuses to encode it.)
    let mut body = b"\x00\x04MQTT\x04\xc0\x00\x00\x00\x00\x00\x07default".to_vec();
    body.extend_from_slice(&(token.len() as u16).to_be_bytes());
    body.extend_from_slice(token.as_bytes());
    let mut bytes = vec![0x10];
    let mut remaining = body.len();
    loop {
        let byte = (remaining % 128) as u8;
        remaining /= 128;
        bytes.push(if remaining > 0 { byte | 0x80 } else { byte });
        if remaining == 0 {
            break;
        }
    }
    bytes.extend_from_slice(&body);
    raw.send_bytes(&bytes).await;
    match raw.next().await {
        Some(Packet::ConnAck(c)) => {
            assert_eq!(c.reason_code, ReasonCode::ClientIdentifierNotValid)
        }
        other => panic!("{other:?}"),
    }
    // v5, an empty client id: accepted, and the CONNACK says the id assigned, with what the
    // server holds the client to.
    let mut raw = Raw {
        stream: TcpStream::connect(mqtt).await.unwrap(),
        buf: BytesMut::new(),
        version: ProtocolVersion::V5,
        last: None,
    };
    raw.send(&connect(ProtocolVersion::V5, false)).await;
    let Some(Packet::ConnAck(c)) = raw.next().await else {
        panic!("no CONNACK; {}", raw.why_closed());
    };
    assert_eq!(c.reason_code, ReasonCode::Success);
    assert!(!c.session_present, "clean sessions only in phase 1");
    let p = &c.properties;
    assert!(p
        .assigned_client_identifier
        .as_deref()
        .is_some_and(|id| !id.is_empty()));
    assert_eq!(p.receive_maximum.get(), 100);
    assert_eq!(p.maximum_packet_size.map(|m| m.get()), Some(1 << 20));
    assert_eq!(p.topic_alias_maximum, 10);
    assert!(p.retain_available);
    assert!(p.wildcard_subscription_available);
    assert!(
        p.shared_subscription_available,
        "shared subscriptions are served"
    );
    assert!(p.subscription_identifiers_available);
    assert_eq!(
        p.server_keep_alive,
        Some(300),
        "keep-alive 0 capped at max_keep_alive"
    );
}

#[tokio::test]
async fn qos1_deliveries_wait_for_the_clients_receive_maximum() {
    let server = Server::builder().mqtt().start().await;
    let mqtt = server.mqtt_addr();
    let token = server.token(&["*"], &[]);
    let mut raw = Raw {
        stream: TcpStream::connect(mqtt).await.unwrap(),
        buf: BytesMut::new(),
        version: ProtocolVersion::V5,
        last: None,
    };
    let properties = ConnectProperties {
        receive_maximum: NonZeroU16::new(1).unwrap(),
        ..Default::default()
    };
    raw.send(&Packet::Connect(Box::new(Connect {
        protocol_version: ProtocolVersion::V5,
        clean_start: true,
        keep_alive: 0,
        client_id: "narrow".into(),
        will: None,
        username: Some("default".into()),
        password: Some(packet::Bytes::from(token.into_bytes())),
        properties,
    })))
    .await;
    assert!(matches!(raw.next().await, Some(Packet::ConnAck(_))));
    raw.send(&subscribe_packet("ticks", QoS::AtLeastOnce)).await;
    assert!(matches!(raw.next().await, Some(Packet::SubAck(_))));
    for n in 1..=3 {
        server.publish("ticks", json!(n)).await;
    }
    let mut got = Vec::new();
    for n in 1..=3 {
        let Some(Packet::Publish(p)) = raw.next().await else {
            panic!("no PUBLISH; {}", raw.why_closed());
        };
        assert_eq!(p.payload, packet::Bytes::from(n.to_string()));
        assert_eq!(p.qos, QoS::AtLeastOnce);
        // Nothing more while this one is unacknowledged: a ping is answered first.
        tokio::time::sleep(Duration::from_millis(300)).await;
        raw.send(&Packet::PingReq).await;
        assert_eq!(
            raw.next().await,
            Some(Packet::PingResp),
            "one in flight at most"
        );
        let id = p.packet_id.expect("a packet id");
        raw.send(&Packet::PubAck(packet::PubAck::new(id))).await;
        got.push(n);
    }
    assert_eq!(got, [1, 2, 3]);
}

#[tokio::test]
async fn publishes_over_the_command_limit_are_refused_then_the_connection_closed() {
    let server = Server::builder()
        .mqtt()
        .env("HERALD_LIMITS_COMMAND", "1/h burst 3")
        .start()
        .await;
    let mqtt = server.mqtt_addr();
    let token = server.token(&["*"], &["*"]);
    let (mut raw, _) = Raw::connect(mqtt, ProtocolVersion::V5, Some(&token), 0).await;
    let mut codes = Vec::new();
    for n in 1..=6u16 {
        raw.send(&Packet::Publish(packet::Publish {
            dup: false,
            qos: QoS::AtLeastOnce,
            retain: false,
            topic: packet::TopicName::new("busy").unwrap(),
            packet_id: NonZeroU16::new(n),
            properties: Default::default(),
            payload: packet::Bytes::from(n.to_string()),
        }))
        .await;
        match raw.next().await {
            Some(Packet::PubAck(ack)) => codes.push(ack.reason_code),
            other => panic!("{other:?}; {}", raw.why_closed()),
        }
    }
    use ReasonCode::{QuotaExceeded, Success};
    assert_eq!(
        codes,
        [
            Success,
            Success,
            Success,
            QuotaExceeded,
            QuotaExceeded,
            QuotaExceeded
        ]
    );
    raw.send(&subscribe_packet("busy", QoS::AtMostOnce)).await;
    let disconnect = raw.until_closed().await;
    let disconnect = disconnect.unwrap_or_else(|| panic!("no DISCONNECT; {}", raw.why_closed()));
    assert_eq!(disconnect.reason_code, ReasonCode::MessageRateTooHigh);
    assert_eq!(
        history(&server, "busy").await,
        [(1, json!(1)), (2, json!(2)), (3, json!(3))]
    );
}

#[tokio::test]
async fn a_server_shutting_down_says_so_to_v5_clients() {
    let server = Server::builder().mqtt().start().await;
    let mqtt = server.mqtt_addr();
    let token = server.token(&["*"], &[]);
    let (mut raw, _) = Raw::connect(mqtt, ProtocolVersion::V5, Some(&token), 0).await;
    raw.send(&subscribe_packet("news", QoS::AtLeastOnce)).await;
    assert!(matches!(raw.next().await, Some(Packet::SubAck(_))));
    server.signal("TERM");
    let disconnect = raw.until_closed().await;
    let disconnect = disconnect.unwrap_or_else(|| panic!("no DISCONNECT; {}", raw.why_closed()));
    assert_eq!(disconnect.reason_code, ReasonCode::ServerShuttingDown);
}
