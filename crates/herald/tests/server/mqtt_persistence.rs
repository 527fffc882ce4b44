//! MQTT persistent sessions (herald-mqtt's `session/`) with real clients: `mosquitto_sub -c`
//! (3.1.1 Clean Session 0) getting what was published while it was away, each message once,
//! across a `kill -9` and restart of the server, at QoS 1 and at QoS 2; Paho v5 seeing Session
//! Present, Clean Start discarding the session, the Session Expiry Interval held to
//! `mqtt.max_session_expiry` and a session expiring; and a raw client (herald-mqtt's codec)
//! checking the packets themselves: unacknowledged QoS 1 and 2 messages sent again with DUP and
//! their packet identifiers, a QoS 2 message's identifier and its PUBREL surviving a restart,
//! and a takeover by a second connection with the same identifier.

use std::net::SocketAddr;
use std::num::NonZeroU16;
use std::time::Duration;

use bytes::BytesMut;
use herald_mqtt::packet::{
    self, ConnAck, Connect, ConnectProperties, Packet, ProtocolVersion, PubAck, PubComp, PubRec,
    Publish, QoS, ReasonCode, Subscribe, SubscribeProperties, SubscriptionOptions, TopicFilter,
};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::mqtt::{mosquitto_sub, paho};
use crate::support::Server;

/// `mosquitto_sub` as client `id` of a persistent 3.1.1 session on `topic` at `qos`, printing
/// each message as `QOS RETAIN PAYLOAD`, with `more` arguments.
async fn persistent_sub(
    server: &Server,
    token: &str,
    id: &str,
    topic: &str,
    qos: &str,
    more: &[&str],
) -> Vec<String> {
    let mut args = vec![
        "-V", "mqttv311", "-u", "default", "-P", token, "-c", "-i", id, "-q", qos, "-t", topic,
        "-F", "%q %r %p",
    ];
    args.extend_from_slice(more);
    let out = mosquitto_sub(server.mqtt_addr(), &args).await;
    // `-W` ends a run that got fewer messages than `-C` with 27; anything else is a failure.
    assert!(matches!(out.code, Some(0) | Some(27)), "{}", out.describe());
    out.stdout.lines().map(str::to_owned).collect()
}

async fn publish_numbers(server: &Server, channel: &str, numbers: std::ops::RangeInclusive<u32>) {
    for n in numbers {
        server.publish(channel, json!({ "n": n })).await;
    }
}

fn lines(qos: u8, numbers: std::ops::RangeInclusive<u32>) -> Vec<String> {
    numbers.map(|n| format!("{qos} 0 {{\"n\":{n}}}")).collect()
}

#[tokio::test]
async fn mosquitto_sub_gets_what_it_missed_once_each_across_kill_9_at_qos_1_and_2() {
    let mut server = Server::builder().mqtt().start().await;
    let token = server.token(&["sensors/*"], &[]);
    for (qos, topic) in [("1", "sensors/q1"), ("2", "sensors/q2")] {
        let id = format!("display-q{qos}");
        let level: u8 = qos.parse().unwrap();
        // Subscribe, then go away.
        persistent_sub(&server, &token, &id, topic, qos, &["-E"]).await;
        publish_numbers(&server, topic, 1..=3).await;
        // Back: what was published meanwhile, in order, at the granted QoS, not retained.
        // Read for 3 s rather than exit on the last message (`-C` may leave before its PUBACK
        // goes, which QoS 1 answers by sending the message again).
        let got = persistent_sub(&server, &token, &id, topic, qos, &["-W", "3"]).await;
        assert_eq!(got, lines(level, 1..=3), "QoS {qos}");
        publish_numbers(&server, topic, 4..=5).await;
        // Its session holds what it acknowledged: a connection taking it over (which waits
        // for the last one's end to be stored) says Session Present.
        let (raw, connack) = Raw::connect(
            server.mqtt_addr(),
            ProtocolVersion::V311,
            &token,
            &id,
            false,
            ConnectProperties::default(),
        )
        .await;
        assert!(connack.session_present, "QoS {qos}");
        drop(raw);
    }
    server.restart().await;
    for (qos, topic) in [("1", "sensors/q1"), ("2", "sensors/q2")] {
        let id = format!("display-q{qos}");
        let level: u8 = qos.parse().unwrap();
        let got = persistent_sub(&server, &token, &id, topic, qos, &["-W", "3"]).await;
        assert_eq!(
            got,
            lines(level, 4..=5),
            "QoS {qos}: after kill -9, only what was missed"
        );
        // Nothing again.
        let again = persistent_sub(&server, &token, &id, topic, qos, &["-W", "2"]).await;
        assert_eq!(again, Vec::<String>::new(), "QoS {qos}: delivered once");
    }
    // Clean Session 1 discards the session: nothing of it is resumed afterwards.
    publish_numbers(&server, "sensors/q1", 6..=6).await;
    let (raw, connack) = Raw::connect(
        server.mqtt_addr(),
        ProtocolVersion::V311,
        &token,
        "display-q1",
        true,
        ConnectProperties::default(),
    )
    .await;
    assert!(!connack.session_present);
    drop(raw);
    let (_raw, connack) = Raw::connect(
        server.mqtt_addr(),
        ProtocolVersion::V311,
        &token,
        "display-q1",
        false,
        ConnectProperties::default(),
    )
    .await;
    assert!(!connack.session_present, "discarded by Clean Session 1");
}

#[tokio::test]
async fn paho_v5_sessions_are_present_discarded_by_clean_start_and_expire() {
    let server = Server::builder()
        .mqtt()
        .env("HERALD_MQTT_MAX_SESSION_EXPIRY", "2")
        .start()
        .await;
    let mqtt = server.mqtt_addr();
    let token = server.token(&["**"], &[]);
    let spec = |clean: bool, expiry: u32| {
        json!({
            "version": "5", "client_id": "paho-session", "username": "default",
            "password": token, "clean": clean, "session_expiry": expiry,
        })
    };
    let connack = |out: &crate::support::mqtt::Finished| out.events("connack")[0].clone();
    let mut first = spec(false, 3600);
    first["subscribe"] = json!([{ "topic": "rooms/a", "qos": 1 }]);
    let out = paho(mqtt, first).await.ok();
    let c = connack(&out);
    assert_eq!(c["session_present"], false, "{}", out.describe());
    assert_eq!(
        c["properties"]["SessionExpiryInterval"], 2,
        "held to mqtt.max_session_expiry, and told: {c}"
    );
    server.publish("rooms/a", json!("while away")).await;
    let mut back = spec(false, 3600);
    back["expect"] = json!(1);
    let out = paho(mqtt, back).await.ok();
    assert_eq!(connack(&out)["session_present"], true, "{}", out.describe());
    let messages = out.events("message");
    assert_eq!(messages.len(), 1, "{}", out.describe());
    assert_eq!(messages[0]["payload"], "\"while away\"");
    assert_eq!(
        (messages[0]["qos"].clone(), messages[0]["retain"].clone()),
        (json!(1), json!(false))
    );

    // Clean Start 1 with no expiry: the session is discarded and none kept.
    let out = paho(mqtt, spec(true, 0)).await.ok();
    assert_eq!(connack(&out)["session_present"], false);
    let out = paho(mqtt, spec(false, 60)).await.ok();
    assert_eq!(
        connack(&out)["session_present"],
        false,
        "{}",
        out.describe()
    );
    // That one is kept for 2 s after it ends (a 3.1.1 Clean Session 0 one too)...
    let out = paho(mqtt, spec(false, 60)).await.ok();
    assert_eq!(connack(&out)["session_present"], true);
    let v311 = json!({
        "version": "3.1.1", "client_id": "paho-311", "username": "default",
        "password": token, "clean": false,
    });
    paho(mqtt, v311.clone()).await.ok();
    let out = paho(mqtt, v311.clone()).await.ok();
    assert_eq!(connack(&out)["session_present"], true);
    // ...and no longer.
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let out = paho(mqtt, spec(false, 60)).await.ok();
    assert_eq!(connack(&out)["session_present"], false, "expired");
    let out = paho(mqtt, v311).await.ok();
    assert_eq!(connack(&out)["session_present"], false, "expired");
}

#[tokio::test]
async fn unacknowledged_messages_go_again_with_dup_and_their_ids_and_qos2_ids_survive_kill_9() {
    let mut server = Server::builder().mqtt().start().await;
    let token = server.token(&["**"], &[]);
    let connect =
        |server: &Server| Raw::persistent_v5(server.mqtt_addr(), &token, "raw-session", 3600);
    let (mut first, connack) = connect(&server).await;
    assert!(!connack.session_present);
    first
        .send(&subscribe(&[
            ("t/one", QoS::AtLeastOnce),
            ("t/two", QoS::ExactlyOnce),
        ]))
        .await;
    match first.next().await {
        Some(Packet::SubAck(ack)) => assert_eq!(
            ack.reason_codes,
            [ReasonCode::GrantedQoS1, ReasonCode::GrantedQoS2]
        ),
        other => panic!("{other:?}"),
    }
    server.publish("t/one", json!(1)).await;
    server.publish("t/two", json!(2)).await;
    let one = first.publish().await;
    let two = first.publish().await;
    assert_eq!(
        (one.topic.as_str(), one.qos, one.dup),
        ("t/one", QoS::AtLeastOnce, false)
    );
    assert_eq!(
        (two.topic.as_str(), two.qos, two.dup),
        ("t/two", QoS::ExactlyOnce, false)
    );
    // Neither acknowledged. A second connection with the identifier takes the session over:
    // the first is told 0x8E, the second gets both again, with DUP and the same ids.
    let (mut second, connack) = connect(&server).await;
    assert!(connack.session_present);
    let taken = first.until_closed().await.expect("a DISCONNECT");
    assert_eq!(taken.reason_code, ReasonCode::SessionTakenOver);
    let mut again = [second.publish().await, second.publish().await];
    again.sort_by(|a, b| a.topic.as_str().cmp(b.topic.as_str()));
    assert_eq!(
        again
            .iter()
            .map(|p| (p.topic.as_str(), p.dup, p.packet_id))
            .collect::<Vec<_>>(),
        [
            ("t/one", true, one.packet_id),
            ("t/two", true, two.packet_id)
        ]
    );
    // QoS 1 acknowledged; QoS 2 not.
    second
        .send(&Packet::PubAck(PubAck::new(one.packet_id.unwrap())))
        .await;
    assert_eq!(second.until_ping().await, Vec::<String>::new());
    drop(second);
    let (mut third, connack) = connect(&server).await;
    assert!(connack.session_present);
    let replayed = third.until_ping().await;
    assert_eq!(
        replayed,
        [format!("PUBLISH t/two dup {:?}", two.packet_id)],
        "the acknowledged message is not sent again"
    );
    drop(third);

    // kill -9: the QoS 2 message's id was stored before it was sent, so it goes with the same.
    server.restart().await;
    let (mut fourth, connack) = connect(&server).await;
    assert!(connack.session_present);
    assert_eq!(
        fourth.until_ping().await,
        [format!("PUBLISH t/two dup {:?}", two.packet_id)]
    );
    let id = two.packet_id.unwrap();
    fourth.send(&Packet::PubRec(PubRec::new(id))).await;
    match fourth.next().await {
        Some(Packet::PubRel(rel)) => assert_eq!(rel.packet_id, id),
        other => panic!("{other:?}"),
    }
    drop(fourth);
    // Released, not completed: PUBREL again, not the message, also after a kill -9.
    let (mut fifth, _) = connect(&server).await;
    assert_eq!(fifth.until_ping().await, [format!("PUBREL {id}")]);
    drop(fifth);
    server.restart().await;
    let (mut sixth, connack) = connect(&server).await;
    assert!(connack.session_present);
    assert_eq!(sixth.until_ping().await, [format!("PUBREL {id}")]);
    sixth.send(&Packet::PubComp(PubComp::new(id))).await;
    // Its PINGRESP says the PUBCOMP was read before the socket closes.
    assert_eq!(sixth.until_ping().await, Vec::<String>::new());
    drop(sixth);
    let (mut last, _) = connect(&server).await;
    assert_eq!(last.until_ping().await, Vec::<String>::new(), "completed");
    // Still subscribed: a new message reaches it.
    server.publish("t/two", json!(3)).await;
    let three = last.publish().await;
    assert_eq!((three.topic.as_str(), three.dup), ("t/two", false));
}

pub(crate) fn subscribe(filters: &[(&str, QoS)]) -> Packet {
    Packet::Subscribe(Subscribe {
        packet_id: NonZeroU16::new(1).unwrap(),
        properties: SubscribeProperties::default(),
        filters: filters
            .iter()
            .map(|(topic, qos)| {
                (
                    TopicFilter::new(*topic).unwrap(),
                    SubscriptionOptions {
                        qos: *qos,
                        ..Default::default()
                    },
                )
            })
            .collect(),
    })
}

/// The CONNECT of a client of the default app with `token` as its password: Clean Start 0, a
/// keep-alive of 60 s.
pub(crate) fn default_app_connect(
    version: ProtocolVersion,
    token: &str,
    client_id: &str,
    properties: ConnectProperties,
) -> Connect {
    Connect {
        protocol_version: version,
        clean_start: false,
        keep_alive: 60,
        client_id: client_id.into(),
        will: None,
        username: Some("default".into()),
        password: Some(packet::Bytes::copy_from_slice(token.as_bytes())),
        properties,
    }
}

/// A raw MQTT client of a session: herald-mqtt's codec over a TCP socket (also used by
/// `mqtt_cluster.rs`).
pub(crate) struct Raw {
    stream: TcpStream,
    buf: BytesMut,
    version: ProtocolVersion,
}

impl Raw {
    /// Connects as `client_id` with `clean_start` and `properties`; the client and CONNACK.
    pub(crate) async fn connect(
        addr: SocketAddr,
        version: ProtocolVersion,
        token: &str,
        client_id: &str,
        clean_start: bool,
        properties: ConnectProperties,
    ) -> (Raw, ConnAck) {
        Raw::connect_keeping_alive(addr, version, token, client_id, clean_start, properties, 60)
            .await
    }

    /// A v5 client `client_id` with a persistent session (Clean Start 0) that outlives its
    /// connection by `expiry` seconds (Session Expiry Interval); the client and CONNACK.
    pub(crate) async fn persistent_v5(
        addr: SocketAddr,
        token: &str,
        client_id: &str,
        expiry: u32,
    ) -> (Raw, ConnAck) {
        let properties = ConnectProperties {
            session_expiry_interval: expiry,
            ..ConnectProperties::default()
        };
        Raw::connect(
            addr,
            ProtocolVersion::V5,
            token,
            client_id,
            false,
            properties,
        )
        .await
    }

    /// As [`Raw::connect`], with a keep-alive of `keep_alive` seconds.
    pub(crate) async fn connect_keeping_alive(
        addr: SocketAddr,
        version: ProtocolVersion,
        token: &str,
        client_id: &str,
        clean_start: bool,
        properties: ConnectProperties,
        keep_alive: u16,
    ) -> (Raw, ConnAck) {
        let connect = Connect {
            clean_start,
            keep_alive,
            ..default_app_connect(version, token, client_id, properties)
        };
        Raw::connect_sending(addr, connect, &[]).await
    }

    /// As [`Raw::connect`] for a persistent session (Clean Start 0), with `then` sent in the
    /// same write as the CONNECT: the server reads them together, so it handles them before
    /// it writes anything its resumed session queued (its replay).
    pub(crate) async fn connect_then(
        addr: SocketAddr,
        version: ProtocolVersion,
        token: &str,
        client_id: &str,
        properties: ConnectProperties,
        then: &[Packet],
    ) -> (Raw, ConnAck) {
        let connect = default_app_connect(version, token, client_id, properties);
        Raw::connect_sending(addr, connect, then).await
    }

    /// Sends `connect` and `then` in one write over a new connection to `addr`: the client
    /// and the CONNACK, which must accept.
    async fn connect_sending(
        addr: SocketAddr,
        connect: Connect,
        then: &[Packet],
    ) -> (Raw, ConnAck) {
        let stream = TcpStream::connect(addr).await.expect("connect");
        let version = connect.protocol_version;
        let mut raw = Raw {
            stream,
            buf: BytesMut::new(),
            version,
        };
        let mut out = BytesMut::new();
        let connect = Packet::Connect(Box::new(connect));
        for packet in std::iter::once(&connect).chain(then) {
            packet::encode(packet, version, &mut out).expect("encodes");
        }
        raw.stream.write_all(&out).await.expect("write");
        match raw.next().await {
            Some(Packet::ConnAck(connack)) => {
                assert_eq!(connack.reason_code, ReasonCode::Success, "{connack:?}");
                (raw, *connack)
            }
            other => panic!("expected CONNACK, got {other:?}"),
        }
    }

    /// Sends `connect` over a new connection to `addr`: the client and the server's first
    /// answer (a CONNACK, accepting or refusing; `None` if it closed without one).
    pub(crate) async fn connect_with(addr: SocketAddr, connect: Connect) -> (Raw, Option<Packet>) {
        let stream = TcpStream::connect(addr).await.expect("connect");
        let mut raw = Raw {
            stream,
            buf: BytesMut::new(),
            version: connect.protocol_version,
        };
        raw.send(&Packet::Connect(Box::new(connect))).await;
        let answer = raw.next().await;
        (raw, answer)
    }

    pub(crate) async fn send(&mut self, packet: &Packet) {
        let mut out = BytesMut::new();
        packet::encode(packet, self.version, &mut out).expect("encodes");
        self.stream.write_all(&out).await.expect("write");
    }

    /// The next packet; `None` once the server closed. Panics after 10 s without either.
    pub(crate) async fn next(&mut self) -> Option<Packet> {
        loop {
            match packet::decode(&mut self.buf, Some(self.version), u32::MAX) {
                Ok(Some(p)) => return Some(p),
                Ok(None) => {}
                Err(e) => panic!("the server sent what does not decode: {e}"),
            }
            let mut chunk = [0u8; 4096];
            let read = tokio::time::timeout(Duration::from_secs(10), self.stream.read(&mut chunk))
                .await
                .expect("nothing from the server in 10 s");
            match read {
                Ok(0) | Err(_) => return None,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
            }
        }
    }

    /// The next packet, which must be a PUBLISH.
    pub(crate) async fn publish(&mut self) -> Publish {
        match self.next().await {
            Some(Packet::Publish(p)) => p,
            other => panic!("expected PUBLISH, got {other:?}"),
        }
    }

    /// Sends PINGREQ and returns what came before its PINGRESP (PUBLISH and PUBREL packets,
    /// described): a resumed session's replay is queued before its CONNACK is sent.
    pub(crate) async fn until_ping(&mut self) -> Vec<String> {
        self.send(&Packet::PingReq).await;
        let mut seen = Vec::new();
        loop {
            match self.next().await {
                Some(Packet::PingResp) => return seen,
                Some(Packet::Publish(p)) => seen.push(format!(
                    "PUBLISH {}{} {:?}",
                    p.topic.as_str(),
                    if p.dup { " dup" } else { "" },
                    p.packet_id
                )),
                Some(Packet::PubRel(r)) => seen.push(format!("PUBREL {}", r.packet_id)),
                other => panic!("unexpected {other:?} before PINGRESP; {seen:?}"),
            }
        }
    }

    /// Reads until the server closes: the DISCONNECT it sent, if any.
    pub(crate) async fn until_closed(&mut self) -> Option<packet::Disconnect> {
        let mut disconnect = None;
        while let Some(p) = self.next().await {
            if let Packet::Disconnect(d) = p {
                disconnect = Some(d);
            }
        }
        disconnect
    }
}
