//! MQTT over WebSocket at `/mqtt` on the HTTP listener (`mqtt.websocket`): mqtt.js's Node build
//! (`tests/mqtt/mqttjs_client.mjs`) over `ws://.../mqtt` receives an HTTP publish that a
//! WebSocket subscriber gets with its seq, and its QoS 1 publish reaches that subscriber and the
//! channel's history; a raw WebSocket client (tokio-tungstenite, herald-mqtt's codec) sends
//! packets split across binary messages and several in one message, sees the subprotocol
//! answered, a text message closed with 1003, both size bounds, and the app's connection limit
//! shared with the TCP listener; an idle connection parks, answers PINGREQ parked and wakes with
//! its session intact; an upgrade without an MQTT subprotocol is refused with a JSON error, and
//! `/mqtt` is not served unless switched on.

use std::num::NonZeroU16;
use std::time::Duration;

use bytes::BytesMut;
use futures_util::{SinkExt, StreamExt};
use herald_mqtt::packet::{
    self, ConnAck, Connect, ConnectProperties, Packet, ProtocolVersion, QoS, ReasonCode, Subscribe,
    SubscribeProperties, SubscriptionOptions, TopicFilter,
};
use serde_json::{json, Value};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::mqtt_parking::{metric, wait_parked};
use crate::mqtt_persistence::subscribe;
use crate::mqtt_session::{history, Raw};
use crate::support::mqtt::{mqttjs_command, run, PahoRun};
use crate::support::{Server, Ws};

/// A server with MQTT over WebSocket on (and no TCP listener).
async fn server_with_websocket() -> Server {
    Server::builder()
        .env("HERALD_MQTT_WEBSOCKET", "true")
        .start()
        .await
}

fn mqtt_url(server: &Server) -> String {
    format!("ws://{}/mqtt", server.addr)
}

#[tokio::test]
async fn mqttjs_over_websocket_gets_an_http_publish_and_its_qos1_publish_reaches_a_websocket_subscriber(
) {
    let server = server_with_websocket().await;
    let url = mqtt_url(&server);
    let token = server.token(&["sensors/*"], &["sensors/*"]);
    let mut ws = Ws::connect(&server.ws_url(&format!("?token={token}"))).await;
    let r = ws
        .request("subscribe", json!({ "channel": "sensors/kitchen" }))
        .await;
    assert!(r.get("error").is_none(), "{r}");
    let mut subscribers = Vec::new();
    for version in [5, 4] {
        let mut run = PahoRun::spawn(mqttjs_command(
            &url,
            json!({
                "version": version,
                "username": "default",
                "password": token,
                "subscribe": [{"topic": "sensors/kitchen", "qos": 1}],
                "expect": 2,
            }),
        ));
        let connack = run.until("connack").await;
        assert_eq!(connack["reason_code"], 0, "v{version}: {connack}");
        let suback = run.until("suback").await;
        assert_eq!(suback["granted"], json!([1]), "v{version}: {suback}");
        run.until("subscribed").await;
        subscribers.push((version, run));
    }
    // An HTTP publish: the WebSocket subscriber gets it as seq 1, the mqtt.js ones as MQTT.
    let published = server.publish("sensors/kitchen", json!({"t": 21.5})).await;
    assert_eq!(published["seq"], 1, "{published}");
    let over_ws = next_message(&mut ws).await;
    assert_eq!(over_ws, (1, json!({"t": 21.5})));
    // mqtt.js publishes at QoS 1 over WebSocket: "published" means its PUBACK came.
    let publisher = run(mqttjs_command(
        &url,
        json!({
            "version": 5,
            "username": "default",
            "password": token,
            "publish": [{"topic": "sensors/kitchen", "payload": "{\"t\":22}", "qos": 1}],
        }),
    ))
    .await
    .ok();
    assert_eq!(
        publisher.events("published").len(),
        1,
        "{}",
        publisher.describe()
    );
    assert_eq!(next_message(&mut ws).await, (2, json!({"t": 22})));
    assert_eq!(
        history(&server, "sensors/kitchen").await,
        [(1, json!({"t": 21.5})), (2, json!({"t": 22}))],
        "the same messages with the same seqs over HTTP"
    );
    for (version, run) in subscribers {
        let (code, events) = run.finish().await;
        assert_eq!(code, Some(0), "v{version}: {events:?}");
        let payloads: Vec<&Value> = events
            .iter()
            .filter(|e| e["event"] == "message")
            .map(|e| &e["payload"])
            .collect();
        assert_eq!(
            payloads,
            [&json!(r#"{"t":21.5}"#), &json!(r#"{"t":22}"#)],
            "v{version}: {events:?}"
        );
    }
}

/// The next message a Herald WebSocket subscriber gets: its seq and data.
async fn next_message(ws: &mut Ws) -> (u64, Value) {
    loop {
        let frame = ws.frame().await;
        if let Some(m) = frame.get("message") {
            return (m["seq"].as_u64().unwrap(), m["data"].clone());
        }
    }
}

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// A raw MQTT client over WebSocket: herald-mqtt's codec, each write one binary message (or
/// as the test splits it).
struct WsMqtt {
    ws: Socket,
    buf: BytesMut,
    version: ProtocolVersion,
    /// How the server closed the WebSocket (its close code), once it did.
    closed: Option<CloseCode>,
}

impl WsMqtt {
    /// Opens `/mqtt` offering `protocols` (a `Sec-WebSocket-Protocol` value); the socket and
    /// the subprotocol the server answered with, or the refusal's status and body.
    async fn open(
        server: &Server,
        protocols: Option<&str>,
    ) -> Result<(Socket, String), (u16, Value)> {
        let mut request = mqtt_url(server).into_client_request().unwrap();
        if let Some(protocols) = protocols {
            request
                .headers_mut()
                .insert("Sec-WebSocket-Protocol", protocols.parse().unwrap());
        }
        match tokio_tungstenite::connect_async(request).await {
            Ok((ws, response)) => {
                let chosen = response
                    .headers()
                    .get("Sec-WebSocket-Protocol")
                    .map(|v| v.to_str().unwrap().to_owned())
                    .unwrap_or_default();
                Ok((ws, chosen))
            }
            Err(WsError::Http(response)) => {
                let body = response.body().clone().unwrap_or_default();
                let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
                Err((response.status().as_u16(), body))
            }
            Err(e) => panic!("unexpected WebSocket error: {e}"),
        }
    }

    /// Opens `/mqtt` with the subprotocol `mqtt`.
    async fn new(server: &Server, version: ProtocolVersion) -> WsMqtt {
        let (ws, chosen) = WsMqtt::open(server, Some("mqtt")).await.unwrap();
        assert_eq!(chosen, "mqtt");
        WsMqtt::over(ws, version)
    }

    fn over(ws: Socket, version: ProtocolVersion) -> WsMqtt {
        WsMqtt {
            ws,
            buf: BytesMut::new(),
            version,
            closed: None,
        }
    }

    fn encode(&self, packet: &Packet) -> Vec<u8> {
        let mut out = BytesMut::new();
        packet::encode(packet, self.version, &mut out).expect("encodes");
        out.to_vec()
    }

    /// Sends `packet` as one binary message.
    async fn send(&mut self, packet: &Packet) {
        let bytes = self.encode(packet);
        self.send_pieces(&[&bytes]).await;
    }

    /// Sends `bytes` as one binary message per piece.
    /// Sends each piece as one binary message. Stops at the first that cannot be sent: the
    /// server may close as soon as a piece tells it enough (a packet's length over the bound),
    /// and what it said then is for [`WsMqtt::next`] to read.
    async fn send_pieces(&mut self, pieces: &[&[u8]]) {
        for piece in pieces {
            if self.ws.send(Message::binary(piece.to_vec())).await.is_err() {
                return;
            }
        }
    }

    /// The next packet; `None` once the server closed.
    async fn next(&mut self) -> Option<Packet> {
        loop {
            match packet::decode(&mut self.buf, Some(self.version), u32::MAX) {
                Ok(Some(p)) => return Some(p),
                Ok(None) => {}
                Err(e) => panic!("the server sent what does not decode: {e}"),
            }
            let next = tokio::time::timeout(Duration::from_secs(10), self.ws.next())
                .await
                .expect("nothing from the server in 10 s");
            match next {
                Some(Ok(Message::Binary(b))) => self.buf.extend_from_slice(&b),
                Some(Ok(Message::Close(frame))) => {
                    self.closed = frame.map(|f| f.code);
                    return None;
                }
                Some(Ok(Message::Text(t))) => panic!("a text message from the server: {t}"),
                Some(Ok(_)) => {}
                None | Some(Err(_)) => return None,
            }
        }
    }
}

fn connect_packet(version: ProtocolVersion, token: &str, client_id: &str) -> Packet {
    Packet::Connect(Box::new(Connect {
        protocol_version: version,
        clean_start: true,
        keep_alive: 60,
        client_id: client_id.into(),
        will: None,
        username: Some("default".to_owned()),
        password: Some(packet::Bytes::copy_from_slice(token.as_bytes())),
        properties: ConnectProperties::default(),
    }))
}

fn publish_packet(topic: &str, id: u16, payload: &'static [u8]) -> Packet {
    Packet::Publish(packet::Publish {
        dup: false,
        qos: QoS::AtLeastOnce,
        retain: false,
        topic: packet::TopicName::new(topic).unwrap(),
        packet_id: NonZeroU16::new(id),
        properties: Default::default(),
        payload: packet::Bytes::from_static(payload),
    })
}

fn connack(packet: Option<Packet>) -> ConnAck {
    match packet {
        Some(Packet::ConnAck(connack)) => *connack,
        other => panic!("expected CONNACK, got {other:?}"),
    }
}

#[tokio::test]
async fn packets_split_across_messages_and_several_in_one_message_are_one_stream() {
    let server = server_with_websocket().await;
    let token = server.token(&["ws/*"], &["ws/*"]);
    let mut client = WsMqtt::new(&server, ProtocolVersion::V5).await;
    // CONNECT in three messages, the first of one byte.
    let connect = client.encode(&connect_packet(ProtocolVersion::V5, &token, "split-1"));
    client
        .send_pieces(&[&connect[..1], &connect[1..6], &connect[6..]])
        .await;
    assert_eq!(
        connack(client.next().await).reason_code,
        ReasonCode::Success
    );
    // SUBSCRIBE and PINGREQ in one message: SUBACK, then PINGRESP.
    let mut both = client.encode(&Packet::Subscribe(Subscribe {
        packet_id: NonZeroU16::new(1).unwrap(),
        properties: SubscribeProperties::default(),
        filters: vec![(
            TopicFilter::new("ws/out").unwrap(),
            SubscriptionOptions {
                qos: QoS::AtLeastOnce,
                ..Default::default()
            },
        )],
    }));
    both.extend(client.encode(&Packet::PingReq));
    client.send_pieces(&[&both]).await;
    match client.next().await {
        Some(Packet::SubAck(ack)) => assert_eq!(ack.reason_codes, [ReasonCode::GrantedQoS1]),
        other => panic!("expected SUBACK, got {other:?}"),
    }
    assert!(matches!(client.next().await, Some(Packet::PingResp)));
    // An HTTP publish comes as a PUBLISH at QoS 1.
    server.publish("ws/out", json!({"n": 1})).await;
    match client.next().await {
        Some(Packet::Publish(p)) => {
            assert_eq!(p.topic.as_str(), "ws/out");
            assert_eq!(&p.payload[..], br#"{"n":1}"#);
            assert_eq!(p.qos, QoS::AtLeastOnce);
        }
        other => panic!("expected PUBLISH, got {other:?}"),
    }
    // Two QoS 1 PUBLISHes, cut across three messages where neither packet ends.
    let mut two = client.encode(&publish_packet("ws/in", 7, br#"{"a":1}"#));
    let first_len = two.len();
    two.extend(client.encode(&publish_packet("ws/in", 8, br#"{"a":2}"#)));
    client
        .send_pieces(&[&two[..3], &two[3..first_len + 2], &two[first_len + 2..]])
        .await;
    for id in [7, 8] {
        match client.next().await {
            Some(Packet::PubAck(ack)) => {
                assert_eq!(ack.packet_id.get(), id);
                assert_eq!(ack.reason_code, ReasonCode::Success);
            }
            other => panic!("expected PUBACK {id}, got {other:?}"),
        }
    }
    assert_eq!(
        history(&server, "ws/in").await,
        [(1, json!({"a": 1})), (2, json!({"a": 2}))]
    );
    // A text message closes the connection [MQTT-6.0.0-1], with 1003.
    client.ws.send(Message::text("{}")).await.unwrap();
    assert!(client.next().await.is_none(), "closed");
    assert_eq!(client.closed, Some(CloseCode::Unsupported));
}

#[tokio::test]
async fn an_idle_connection_over_websocket_parks_answers_pingreq_parked_and_wakes_intact() {
    let server = Server::builder()
        .env("HERALD_MQTT_WEBSOCKET", "true")
        .env("HERALD_PARK_IDLE_AFTER", "100ms")
        .start()
        .await;
    let token = server.token(&["t/*"], &["t/*"]);
    let mut client = WsMqtt::new(&server, ProtocolVersion::V5).await;
    client
        .send(&connect_packet(ProtocolVersion::V5, &token, "parked-ws"))
        .await;
    assert_eq!(
        connack(client.next().await).reason_code,
        ReasonCode::Success
    );
    client
        .send(&subscribe(&[("t/one", QoS::AtLeastOnce)]))
        .await;
    match client.next().await {
        Some(Packet::SubAck(ack)) => assert_eq!(ack.reason_codes, [ReasonCode::GrantedQoS1]),
        other => panic!("expected SUBACK, got {other:?}"),
    }
    // An inbound topic alias set before parking.
    let mut aliased = publish_packet("t/in", 7, b"1");
    if let Packet::Publish(p) = &mut aliased {
        p.properties.topic_alias = NonZeroU16::new(1);
    }
    client.send(&aliased).await;
    assert!(matches!(client.next().await, Some(Packet::PubAck(a)) if a.packet_id.get() == 7));
    wait_parked(&server, 1).await;
    let revived = metric(&server, "herald_connections_revived_total").await;
    // PINGREQ in a binary frame, answered on the parking thread.
    for _ in 0..2 {
        client.send(&Packet::PingReq).await;
        assert!(matches!(client.next().await, Some(Packet::PingResp)));
    }
    assert_eq!(
        metric(&server, "herald_connections_revived_total").await,
        revived,
        "a PINGREQ revived the connection"
    );
    assert_eq!(metric(&server, "herald_connections_parked").await, 1);
    // A message wakes it at once, its subscription intact.
    server.publish("t/one", json!(1)).await;
    let one = match client.next().await {
        Some(Packet::Publish(p)) => p,
        other => panic!("expected PUBLISH, got {other:?}"),
    };
    assert_eq!(
        (one.topic.as_str(), one.qos, one.dup),
        ("t/one", QoS::AtLeastOnce, false)
    );
    assert_eq!(&one.payload[..], b"1");
    // It parks again with the QoS 1 message in flight; its PUBACK (which wakes it) settles
    // it, and the topic alias set before it first parked still names `t/in`.
    wait_parked(&server, 1).await;
    client
        .send(&Packet::PubAck(packet::PubAck::new(one.packet_id.unwrap())))
        .await;
    let mut by_alias = publish_packet("", 8, b"2");
    if let Packet::Publish(p) = &mut by_alias {
        p.properties.topic_alias = NonZeroU16::new(1);
    }
    client.send(&by_alias).await;
    match client.next().await {
        Some(Packet::PubAck(ack)) => {
            assert_eq!(
                (ack.packet_id.get(), ack.reason_code),
                (8, ReasonCode::Success)
            );
        }
        other => panic!("expected PUBACK 8, got {other:?}"),
    }
    assert_eq!(
        history(&server, "t/in").await,
        [(1, json!(1)), (2, json!(2))]
    );
    wait_parked(&server, 1).await;
    server.publish("t/one", json!(2)).await;
    match client.next().await {
        Some(Packet::Publish(two)) => {
            assert_eq!((two.topic.as_str(), two.dup), ("t/one", false));
            assert_eq!(&two.payload[..], b"2");
            assert_ne!(two.packet_id, one.packet_id, "the first was settled");
        }
        other => panic!("expected PUBLISH, got {other:?}"),
    }
}

#[tokio::test]
async fn the_upgrade_needs_an_mqtt_subprotocol_and_answers_the_one_chosen() {
    let server = server_with_websocket().await;
    let token = server.token(&["ws/*"], &[]);
    for offered in [None, Some("wamp"), Some("mqtt5")] {
        let Err((status, body)) = WsMqtt::open(&server, offered).await else {
            panic!("{offered:?}: upgraded without an MQTT subprotocol");
        };
        assert_eq!(status, 400, "{offered:?}: {body}");
        assert_eq!(body["error"]["code"], "bad_request", "{body}");
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("subprotocol mqtt"),
            "{offered:?}: {message}"
        );
    }
    // A plain GET is no upgrade: said as clearly, naming no other endpoint (the shared
    // handshake check once answered "/v1/ws takes a WebSocket upgrade" here).
    let (status, body) = server.get("/mqtt").await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]["message"].as_str().is_some_and(|m| {
            m.contains("/mqtt takes MQTT over WebSocket")
                && m.contains("not a WebSocket upgrade")
                && !m.contains("/v1/ws")
        }),
        "{body}"
    );
    // Paho's JavaScript offers mqttv3.1; the first acceptable offer is the one answered.
    for (offered, answered) in [("mqttv3.1", "mqttv3.1"), ("wamp, mqtt, mqttv3.1", "mqtt")] {
        let (ws, chosen) = WsMqtt::open(&server, Some(offered)).await.unwrap();
        assert_eq!(chosen, answered, "{offered}");
        let mut client = WsMqtt::over(ws, ProtocolVersion::V311);
        let connect = client.encode(&connect_packet(ProtocolVersion::V311, &token, "v311"));
        client.send_pieces(&[&connect]).await;
        assert_eq!(
            connack(client.next().await).reason_code,
            ReasonCode::Success
        );
    }
}

#[tokio::test]
async fn the_mqtt_packet_bound_and_the_websocket_message_bound_both_hold() {
    let server = Server::builder()
        .env("HERALD_MQTT_WEBSOCKET", "true")
        .env("HERALD_MQTT_MAX_PACKET_SIZE", "1024")
        .start()
        .await;
    let token = server.token(&["ws/*"], &["ws/*"]);
    // A packet over mqtt.max_packet_size, begun in one message (its fixed header says its
    // length): DISCONNECT 0x95 before the rest is sent. (Sending the rest would race the
    // close: data arriving after the server closed makes its kernel reset the connection,
    // which may drop the DISCONNECT before the client reads it.)
    let mut client = WsMqtt::new(&server, ProtocolVersion::V5).await;
    let connect = client.encode(&connect_packet(ProtocolVersion::V5, &token, "big-1"));
    client.send_pieces(&[&connect]).await;
    let ack = connack(client.next().await);
    assert_eq!(
        ack.properties.maximum_packet_size.map(|m| m.get()),
        Some(1024)
    );
    let big: &'static [u8] = Box::leak(vec![b'x'; 2000].into_boxed_slice());
    let packet = client.encode(&publish_packet("ws/big", 1, big));
    client.send_pieces(&[&packet[..500]]).await;
    match client.next().await {
        Some(Packet::Disconnect(d)) => assert_eq!(d.reason_code, ReasonCode::PacketTooLarge),
        other => panic!("expected DISCONNECT 0x95, got {other:?}"),
    }
    // One WebSocket message over the larger of the two bounds (max_frame_bytes, 64 KiB): 1009.
    let mut client = WsMqtt::new(&server, ProtocolVersion::V5).await;
    client.send_pieces(&[&vec![0u8; 64 * 1024 + 1]]).await;
    assert!(client.next().await.is_none(), "closed");
    assert_eq!(client.closed, Some(CloseCode::Size));
}

#[tokio::test]
async fn a_websocket_connection_counts_against_the_apps_limit_with_tcp_ones() {
    const ADMIN: &str = "admin-key-0123456789abcdef";
    let server = Server::builder()
        .mqtt()
        .env("HERALD_MQTT_WEBSOCKET", "true")
        .arg("--admin-key")
        .arg(ADMIN)
        .start()
        .await;
    let limited = server
        .http
        .patch(server.url("/v1/apps/default"))
        .bearer_auth(ADMIN)
        .json(&json!({"limits": {"max_connections": 1}}))
        .send()
        .await
        .unwrap();
    assert_eq!(limited.status().as_u16(), 200, "{:?}", limited.text().await);
    let token = server.token(&["ws/*"], &[]);
    // The app's one connection is a TCP one: the WebSocket one is refused as a second TCP
    // one would be.
    let (_tcp, ack) = Raw::connect(server.mqtt_addr(), ProtocolVersion::V5, Some(&token), 0).await;
    assert_eq!(ack.reason_code, ReasonCode::Success);
    let mut client = WsMqtt::new(&server, ProtocolVersion::V5).await;
    let connect = client.encode(&connect_packet(ProtocolVersion::V5, &token, "over-limit"));
    client.send_pieces(&[&connect]).await;
    assert_eq!(
        connack(client.next().await).reason_code,
        ReasonCode::QuotaExceeded
    );
}

#[tokio::test]
async fn mqtt_over_websocket_is_served_only_when_switched_on() {
    let server = server_with_websocket().await;
    assert!(WsMqtt::open(&server, Some("mqtt")).await.is_ok());
    // Neither by default nor with the TCP listener alone; the 404 names the setting that
    // serves it (it once said only "no such endpoint").
    for server in [
        Server::start().await,
        Server::builder().mqtt().start().await,
    ] {
        match WsMqtt::open(&server, Some("mqtt")).await {
            Err((status, body)) => {
                assert_eq!(status, 404, "{body}");
                assert!(
                    body["error"]["message"]
                        .as_str()
                        .is_some_and(|m| m.contains("mqtt.websocket = true")),
                    "{body}"
                );
            }
            Ok(_) => panic!("/mqtt served without mqtt.websocket"),
        }
    }
}
