//! Lifecycle events on one node, as each transport reports them: every transport names itself
//! in its connections' events, and a connection says why it ended (its token expired, the
//! server shut down, the client went away).

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use herald_client::proto::token::{mint, ClientClaims};
use herald_client::ws::WsClient;
use herald_core::lifecycle::{Connection, DisconnectReason, LifecycleEvent, Recorded, Transport};
use herald_server::{RunningServer, Server};

use crate::support::{self, Ws, SECRET};

/// A node with a listener recording its lifecycle events.
async fn listened(dir: &std::path::Path) -> (RunningServer, Arc<Recorded>) {
    let recorded = Recorded::new();
    let server = Server::builder(support::settings(dir))
        .lifecycle_listener(recorded.clone())
        .start()
        .await
        .expect("server starts");
    (server, recorded)
}

/// A connection that left, and why.
type Departure = (Arc<Connection>, DisconnectReason);

/// The connections that connected, and those that disconnected with their reasons.
fn connections(recorded: &Recorded) -> (Vec<Arc<Connection>>, Vec<Departure>) {
    let (mut connected, mut disconnected) = (Vec::new(), Vec::new());
    for event in recorded.events() {
        match event {
            LifecycleEvent::Connected { connection } => connected.push(connection),
            LifecycleEvent::Disconnected { connection, reason } => {
                disconnected.push((connection, reason))
            }
            _ => {}
        }
    }
    (connected, disconnected)
}

/// Waits (with a generous deadline) until `check` holds of what `recorded` heard.
async fn wait_for(recorded: &Recorded, what: &str, check: impl Fn(&Recorded) -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !check(recorded) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}: {:?}",
            recorded.summary()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// How a transport's connection ended, once it has.
fn ended(recorded: &Recorded, transport: Transport) -> Option<DisconnectReason> {
    let (_, disconnected) = connections(recorded);
    disconnected
        .iter()
        .find(|(c, _)| c.transport == transport)
        .map(|(_, reason)| *reason)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_transport_names_itself_and_says_why_its_connection_ended() {
    let dir = tempfile::tempdir().unwrap();
    let (server, recorded) = listened(dir.path()).await;
    let base = format!("http://{}", server.http_addr());
    let token = support::token(&["news"]);
    let http = reqwest::Client::new();

    // Long-poll: one connection per request, closed when the answer is sent.
    let poll = http
        .get(format!(
            "{base}/v1/poll?channel=news&timeout=0&token={token}"
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(poll.status(), 200);
    wait_for(&recorded, "the poll's departure", |r| {
        ended(r, Transport::LongPoll).is_some()
    })
    .await;
    assert_eq!(
        ended(&recorded, Transport::LongPoll),
        Some(DisconnectReason::Closed)
    );

    // SSE: connected while the stream is open, closed when the client drops it.
    let mut sse = http
        .get(format!("{base}/v1/sse?channel=news&token={token}"))
        .send()
        .await
        .unwrap();
    assert_eq!(sse.status(), 200);
    let first = sse
        .chunk()
        .await
        .unwrap()
        .expect("the stream's first event");
    assert!(!first.is_empty());
    wait_for(&recorded, "the stream's arrival", |r| {
        connections(r)
            .0
            .iter()
            .any(|c| c.transport == Transport::Sse)
    })
    .await;
    drop(sse);
    wait_for(&recorded, "the stream's departure", |r| {
        ended(r, Transport::Sse).is_some()
    })
    .await;
    assert_eq!(
        ended(&recorded, Transport::Sse),
        Some(DisconnectReason::Closed)
    );

    // WebSocket, with a token that expires in two seconds: the server ends it.
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let short = mint(
        SECRET.as_bytes(),
        &ClientClaims {
            sub: "brief".into(),
            exp: Some(now + 2),
            channels: vec!["news".into()],
            ..Default::default()
        },
    );
    let mut brief = WsClient::connect(&base, Some(&short))
        .await
        .expect("ws connect");
    let mut last = None;
    while let Ok(Some(frame)) = tokio::time::timeout(Duration::from_secs(30), brief.next_frame())
        .await
        .expect("the expiry")
    {
        last = Some(frame.text().to_owned());
    }
    let last = last.expect("a frame before the close");
    assert!(last.contains("token_expired"), "{last}");
    wait_for(&recorded, "the expired connection's departure", |r| {
        ended(r, Transport::WebSocket).is_some()
    })
    .await;
    assert_eq!(
        ended(&recorded, Transport::WebSocket),
        Some(DisconnectReason::TokenExpired)
    );

    // A WebSocket open when the server stops is told, and leaves, as a shutdown.
    let mut ws = Ws::connect(&server, &["news"]).await;
    ws.subscribe("news", None).await;
    server.shutdown().await.unwrap();
    while ws.recv().await.is_some() {}
    let (connected, disconnected) = connections(&recorded);
    let shut: Vec<_> = disconnected
        .iter()
        .filter(|(c, _)| c.transport == Transport::WebSocket && c.sub.as_deref() == Some("tester"))
        .map(|(_, reason)| *reason)
        .collect();
    assert_eq!(
        shut,
        [DisconnectReason::Shutdown],
        "{:?}",
        recorded.summary()
    );
    let mut transports: Vec<_> = connected.iter().map(|c| c.transport.as_str()).collect();
    transports.sort_unstable();
    assert_eq!(transports, ["long_poll", "sse", "websocket", "websocket"]);
}

/// MQTT: a connection names itself `mqtt`, a client that sends DISCONNECT leaves as closed and
/// one that falls silent past one and a half keep-alives as timed out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mqtt_connection_names_itself_and_a_silent_one_times_out() {
    use bytes::BytesMut;
    use herald_mqtt::packet::{self, Connect, ConnectProperties, Packet, ProtocolVersion};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let dir = tempfile::tempdir().unwrap();
    let recorded = Recorded::new();
    let mut settings = support::settings(dir.path());
    settings.mqtt.listen = Some(std::net::SocketAddr::from(([127, 0, 0, 1], 0)));
    let server = Server::builder(settings)
        .lifecycle_listener(recorded.clone())
        .start()
        .await
        .expect("server starts");
    let mqtt = server.addresses().mqtt.expect("the MQTT listener");
    let token = support::token(&["news"]);
    // Connects (v5, keep-alive `keep_alive` seconds) and reads the CONNACK.
    let connect = |keep_alive: u16, id: &'static str| {
        let token = token.clone();
        async move {
            let mut stream = tokio::net::TcpStream::connect(mqtt).await.unwrap();
            let mut out = BytesMut::new();
            let connect = Connect {
                protocol_version: ProtocolVersion::V5,
                clean_start: true,
                keep_alive,
                client_id: id.into(),
                will: None,
                username: Some("default".into()),
                password: Some(packet::Bytes::from(token.into_bytes())),
                properties: ConnectProperties::default(),
            };
            packet::encode(
                &Packet::Connect(Box::new(connect)),
                ProtocolVersion::V5,
                &mut out,
            )
            .unwrap();
            stream.write_all(&out).await.unwrap();
            let mut buf = [0u8; 256];
            let n = stream.read(&mut buf).await.unwrap();
            assert!(
                n >= 4 && buf[0] == 0x20 && buf[3] == 0,
                "CONNACK Success: {:?}",
                &buf[..n]
            );
            stream
        }
    };
    let mut polite = connect(0, "polite").await;
    wait_for(&recorded, "the MQTT connection's arrival", |r| {
        connections(r)
            .0
            .iter()
            .any(|c| c.transport == Transport::Mqtt)
    })
    .await;
    polite.write_all(&[0xE0, 0x00]).await.unwrap();
    wait_for(&recorded, "the MQTT connection's departure", |r| {
        ended(r, Transport::Mqtt).is_some()
    })
    .await;
    assert_eq!(
        ended(&recorded, Transport::Mqtt),
        Some(DisconnectReason::Closed)
    );
    let mut silent = connect(1, "silent").await;
    let mut rest = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(30), silent.read_to_end(&mut rest)).await;
    assert_eq!(
        rest.first(),
        Some(&0xE0),
        "a DISCONNECT before the close: {rest:?}"
    );
    wait_for(&recorded, "the silent connection's departure", |r| {
        connections(r).1.len() == 2
    })
    .await;
    let (connected, disconnected) = connections(&recorded);
    assert!(connected.iter().all(|c| c.transport.as_str() == "mqtt"));
    assert_eq!(
        disconnected[1].1,
        DisconnectReason::TimedOut,
        "{:?}",
        recorded.summary()
    );
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mqtt_over_websocket_is_an_mqtt_connection() {
    use bytes::BytesMut;
    use herald_mqtt::packet::{self, Connect, ConnectProperties, Packet, ProtocolVersion};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A masked client frame (a payload under 64 KiB).
    fn client_frame(opcode: u8, payload: &[u8]) -> Vec<u8> {
        let mask = [7, 1, 8, 2];
        let mut out = vec![0x80 | opcode];
        match u8::try_from(payload.len()) {
            Ok(len) if len < 126 => out.push(0x80 | len),
            _ => {
                out.push(0x80 | 126);
                out.extend_from_slice(&u16::try_from(payload.len()).unwrap().to_be_bytes());
            }
        }
        out.extend_from_slice(&mask);
        out.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i & 3]));
        out
    }

    let dir = tempfile::tempdir().unwrap();
    let recorded = Recorded::new();
    let mut settings = support::settings(dir.path());
    settings.mqtt.websocket = true;
    let server = Server::builder(settings)
        .lifecycle_listener(recorded.clone())
        .start()
        .await
        .expect("server starts");
    assert_eq!(server.addresses().mqtt, None, "no TCP listener");
    let mut stream = tokio::net::TcpStream::connect(server.addresses().http)
        .await
        .unwrap();
    stream
        .write_all(
            b"GET /mqtt HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\n\
              Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
              Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: mqtt\r\n\r\n",
        )
        .await
        .unwrap();
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut byte = [0u8; 1];
        stream.read_exact(&mut byte).await.unwrap();
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
    assert!(
        head.starts_with("http/1.1 101") && head.contains("sec-websocket-protocol: mqtt"),
        "{head}"
    );
    let mut out = BytesMut::new();
    let connect = Connect {
        protocol_version: ProtocolVersion::V5,
        clean_start: true,
        keep_alive: 60,
        client_id: "over-ws".into(),
        will: None,
        username: Some("default".into()),
        password: Some(packet::Bytes::from(support::token(&["news"]).into_bytes())),
        properties: ConnectProperties::default(),
    };
    packet::encode(
        &Packet::Connect(Box::new(connect)),
        ProtocolVersion::V5,
        &mut out,
    )
    .unwrap();
    stream.write_all(&client_frame(0x2, &out)).await.unwrap();
    // A binary message holding the CONNACK, Success.
    let mut buf = [0u8; 256];
    let n = stream.read(&mut buf).await.unwrap();
    assert!(
        n >= 6 && buf[0] == 0x82 && buf[2] == 0x20 && buf[5] == 0,
        "a binary message with CONNACK Success: {:?}",
        &buf[..n]
    );
    wait_for(&recorded, "the connection's arrival", |r| {
        connections(r)
            .0
            .iter()
            .any(|c| c.transport == Transport::Mqtt)
    })
    .await;
    // The client closes the WebSocket: the connection ends, closed by the client.
    stream
        .write_all(&client_frame(0x8, &1000u16.to_be_bytes()))
        .await
        .unwrap();
    wait_for(&recorded, "the connection's departure", |r| {
        ended(r, Transport::Mqtt).is_some()
    })
    .await;
    assert_eq!(
        ended(&recorded, Transport::Mqtt),
        Some(DisconnectReason::Closed)
    );
    let (connected, _) = connections(&recorded);
    assert!(connected.iter().all(|c| c.transport.as_str() == "mqtt"));
    server.shutdown().await.unwrap();
}
