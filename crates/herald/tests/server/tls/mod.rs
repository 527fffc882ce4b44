//! TLS on every listener, against the real binary with certificates made by rcgen and real
//! clients: curl over https (publish, history, an SSE stream), a WebSocket over wss with a
//! rustls client, the Meteor ports and the MQTT listener over TLS (`mosquitto_pub --cafile`),
//! MQTT over wss at `/mqtt`,
//! openssl's protocol versions, plain HTTP sent to a TLS port, and SIGHUP reloading the
//! certificate without dropping open connections.

mod harness;

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio_tungstenite::tungstenite::Message;

use crate::support::API_KEY;
use harness::{connect, curl, s_client, served_certificate, CurlStream, Pki, TlsServer, WAIT};

/// The next JSON text frame of a WebSocket.
async fn next_frame<S>(ws: &mut tokio_tungstenite::WebSocketStream<S>) -> Value
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    loop {
        match tokio::time::timeout(WAIT, ws.next())
            .await
            .expect("no frame")
        {
            Some(Ok(Message::Text(t))) => return serde_json::from_str(&t).unwrap(),
            Some(Ok(_)) => continue,
            other => panic!("connection ended: {other:?}"),
        }
    }
}

const DEACON_CONF: &str = include_str!("../../../../../docs/examples/meteord-deacon.conf");

fn bearer() -> String {
    format!("Authorization: Bearer {API_KEY}")
}

#[tokio::test]
async fn curl_publishes_reads_history_and_streams_sse_over_https() {
    let pki = Pki::new();
    pki.issue("herald.test", 1);
    let server = TlsServer::start(&pki, &[], &[]).await;
    let ca = pki.ca_file();
    let token = server.token(&["news"]);
    let mut stream = CurlStream::open(
        &ca,
        &server.url(&format!("/v1/sse?channel=news&token={token}")),
    );
    stream.until("event: subscribed").await;

    let (status, body) = curl(
        &ca,
        &[
            "-H",
            &bearer(),
            "-d",
            r#"{"data":{"t":"over tls"}}"#,
            &server.url("/v1/channels/news/messages"),
        ],
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let line = stream.until("over tls").await;
    assert!(line.starts_with("data: "), "{line}");

    let (status, body) = curl(
        &ca,
        &[
            "-H",
            &bearer(),
            &server.url("/v1/channels/news/messages?since=0&limit=10"),
        ],
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let history: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(history["messages"][0]["data"]["t"], "over tls", "{history}");
    // Two requests on one kept-alive connection (the second on hyper's path).
    let channel = server.url("/v1/channels/news");
    let (status, body) = curl(&ca, &["-H", &bearer(), &channel, &channel]).await;
    assert_eq!(status, 200, "{body}");
}

#[tokio::test]
async fn a_websocket_over_wss_with_a_rustls_client() {
    let pki = Pki::new();
    pki.issue("herald.test", 1);
    let server = TlsServer::start(&pki, &[], &[]).await;
    let tls = connect(&pki, server.addr, &[b"http/1.1"]).await;
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"http/1.1"[..]));
    let url = format!(
        "wss://localhost:{}/v1/ws?token={}",
        server.addr.port(),
        server.token(&["news"])
    );
    let (mut ws, _) = tokio_tungstenite::client_async(url, tls)
        .await
        .expect("wss upgrade");
    ws.send(Message::text(
        json!({"id": 1, "subscribe": {"channel": "news"}}).to_string(),
    ))
    .await
    .unwrap();
    let reply = next_frame(&mut ws).await;
    assert_eq!(reply["subscribe"]["channel"], "news", "{reply}");
    let (status, _) = curl(
        &pki.ca_file(),
        &[
            "-H",
            &bearer(),
            "-d",
            r#"{"data":"hello wss"}"#,
            &server.url("/v1/channels/news/messages"),
        ],
    )
    .await;
    assert_eq!(status, 200);
    let message = next_frame(&mut ws).await;
    assert_eq!(message["message"]["data"], "hello wss", "{message}");
}

#[tokio::test]
async fn mqtt_listener_over_tls_with_the_servers_certificate() {
    let pki = Pki::new();
    let issued = pki.issue("herald.test", 7);
    let server = TlsServer::start(&pki, &["--mqtt", "127.0.0.1:0", "--mqtt-tls"], &[]).await;
    let mqtt = server.mqtt.expect("herald mqtt listening on ...");
    // The handshake shows the server's certificate, with no ALPN needed.
    assert_eq!(served_certificate(&pki, mqtt).await, issued);
    // mosquitto_pub over TLS, trusting the CA: its QoS 1 PUBACK means the message is stored.
    let token = herald_proto::token::mint(
        crate::support::SECRET.as_bytes(),
        &herald_proto::token::ClientClaims {
            sub: "mqtt-tls".into(),
            channels: vec!["sensors/*".into()],
            publish: vec!["sensors/*".into()],
            ..Default::default()
        },
    );
    let ca = pki.ca_file();
    crate::support::mqtt::mosquitto_pub(
        mqtt,
        &[
            "--cafile",
            ca.to_str().unwrap(),
            // The chain is checked against the CA; the name check is left out (mosquitto_pub
            // is given 127.0.0.1, which OpenSSL's host check does not match to an IP name).
            "--insecure",
            "-V",
            "mqttv5",
            "-u",
            "default",
            "-P",
            &token,
            "-q",
            "1",
            "-t",
            "sensors/tls",
            "-m",
            r#"{"over":"tls"}"#,
        ],
    )
    .await
    .ok();
    let (status, body) = curl(
        &ca,
        &[
            "-H",
            &bearer(),
            &server.url("/v1/channels/sensors/tls/messages"),
        ],
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let history: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        history["messages"][0]["data"],
        json!({"over": "tls"}),
        "{history}"
    );
}

#[tokio::test]
async fn mqtt_over_wss_on_the_https_listener() {
    use herald_mqtt::packet::{self, Connect, Packet, ProtocolVersion, QoS, ReasonCode};
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;

    let pki = Pki::new();
    pki.issue("herald.test", 1);
    let server = TlsServer::start(&pki, &[], &[("HERALD_MQTT_WEBSOCKET", "true")]).await;
    let tls = connect(&pki, server.addr, &[b"http/1.1"]).await;
    let url = format!("wss://localhost:{}/mqtt", server.addr.port());
    let mut request = url.into_client_request().unwrap();
    request
        .headers_mut()
        .insert("Sec-WebSocket-Protocol", "mqtt".parse().unwrap());
    let (mut ws, response) = tokio_tungstenite::client_async(request, tls)
        .await
        .expect("wss upgrade at /mqtt");
    assert_eq!(response.headers()["Sec-WebSocket-Protocol"], "mqtt");
    let v5 = ProtocolVersion::V5;
    let encode = |p: &Packet| {
        let mut out = bytes::BytesMut::new();
        packet::encode(p, v5, &mut out).unwrap();
        Message::binary(out.to_vec())
    };
    let token = herald_proto::token::mint(
        crate::support::SECRET.as_bytes(),
        &herald_proto::token::ClientClaims {
            sub: "mqtt-wss".into(),
            publish: vec!["sensors/*".into()],
            ..Default::default()
        },
    );
    ws.send(encode(&Packet::Connect(Box::new(Connect {
        protocol_version: v5,
        clean_start: true,
        keep_alive: 60,
        client_id: "wss-1".into(),
        will: None,
        username: Some("default".into()),
        password: Some(packet::Bytes::copy_from_slice(token.as_bytes())),
        properties: Default::default(),
    }))))
    .await
    .unwrap();
    ws.send(encode(&Packet::Publish(packet::Publish {
        dup: false,
        qos: QoS::AtLeastOnce,
        retain: false,
        topic: packet::TopicName::new("sensors/wss").unwrap(),
        packet_id: std::num::NonZeroU16::new(1),
        properties: Default::default(),
        payload: packet::Bytes::from_static(br#"{"over":"wss"}"#),
    })))
    .await
    .unwrap();
    // CONNACK, then the PUBACK that says the message is stored.
    let mut buf = bytes::BytesMut::new();
    let mut packets = Vec::new();
    while packets.len() < 2 {
        match packet::decode(&mut buf, Some(v5), u32::MAX).unwrap() {
            Some(p) => packets.push(p),
            None => match tokio::time::timeout(WAIT, ws.next())
                .await
                .expect("no message")
            {
                Some(Ok(Message::Binary(b))) => buf.extend_from_slice(&b),
                Some(Ok(_)) => {}
                other => panic!("connection ended: {other:?} after {packets:?}"),
            },
        }
    }
    match &packets[..] {
        [Packet::ConnAck(connack), Packet::PubAck(puback)] => {
            assert_eq!(connack.reason_code, ReasonCode::Success);
            assert_eq!(puback.reason_code, ReasonCode::Success);
        }
        other => panic!("expected CONNACK and PUBACK, got {other:?}"),
    }
    let (status, body) = curl(
        &pki.ca_file(),
        &[
            "-H",
            &bearer(),
            &server.url("/v1/channels/sensors/wss/messages"),
        ],
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let history: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(history["messages"][0]["data"], json!({"over": "wss"}));
}

#[tokio::test]
async fn meteor_subscriber_and_controller_ports_over_tls() {
    let pki = Pki::new();
    pki.issue("herald.test", 1);
    let conf = pki.dir.path().join("meteord.conf");
    std::fs::write(&conf, DEACON_CONF).unwrap();
    let server = TlsServer::start(
        &pki,
        &[
            "--meteor-conf",
            conf.to_str().unwrap(),
            "--meteor",
            "127.0.0.1:0",
            "--meteor-control",
            "127.0.0.1:0",
            "--meteor-tls",
        ],
        &[],
    )
    .await;
    let ctl = connect(&pki, server.meteor_control.unwrap(), &[]).await;
    let mut ctl = BufReader::new(ctl);
    let mut sub = connect(&pki, server.meteor.unwrap(), &[]).await;
    sub.write_all(b"GET /push/dev1/longpoll/news HTTP/1.1\r\nHost: test\r\n\r\n")
        .await
        .unwrap();
    let mut got = Vec::new();
    let mut chunk = [0u8; 1024];
    while !String::from_utf8_lossy(&got).contains("Channel(\"news\".0)") {
        let n = tokio::time::timeout(WAIT, sub.read(&mut chunk))
            .await
            .unwrap()
            .unwrap();
        assert!(n > 0, "closed early: {}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&chunk[..n]);
    }
    ctl.write_all(b"ADDMESSAGE news hello deacon over tls\r\n")
        .await
        .unwrap();
    let mut line = String::new();
    tokio::time::timeout(WAIT, ctl.read_line(&mut line))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(line.trim_end(), "OK\t1");
    tokio::time::timeout(WAIT, sub.read_to_end(&mut got))
        .await
        .unwrap()
        .ok();
    let got = String::from_utf8_lossy(&got);
    assert!(
        got.ends_with("m.p.<1>.\"news\".\"{[hello deacon over tls]}\"\r\n"),
        "{got}"
    );
}

#[tokio::test]
async fn only_tls_1_2_and_1_3_are_spoken() {
    let pki = Pki::new();
    pki.issue("herald.test", 1);
    let server = TlsServer::start(&pki, &[], &[]).await;
    let (ok, out) = s_client(server.addr, &["-tls1_3", "-alpn", "http/1.1"]).await;
    assert!(ok && out.contains("TLSv1.3"), "{out}");
    assert!(out.contains("ALPN protocol: http/1.1"), "{out}");
    let (ok, out) = s_client(server.addr, &["-tls1_2"]).await;
    assert!(ok && out.contains("TLSv1.2"), "{out}");
    // The client is allowed the old protocol (security level 0); the server refuses it.
    for old in ["-tls1_1", "-tls1"] {
        let (ok, out) = s_client(server.addr, &[old, "-cipher", "DEFAULT@SECLEVEL=0"]).await;
        assert!(!ok, "{old} was accepted: {out}");
    }
}

#[tokio::test]
async fn plain_http_or_silence_on_a_tls_port_is_closed_within_the_first_byte_deadline() {
    let pki = Pki::new();
    pki.issue("herald.test", 1);
    let server = TlsServer::start(&pki, &[], &[("HERALD_FIRST_BYTE_TIMEOUT", "1s")]).await;
    // Plain HTTP: not a TLS record, so the handshake fails and the connection closes.
    let mut plain = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    plain
        .write_all(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut sink = Vec::new();
    tokio::time::timeout(WAIT, plain.read_to_end(&mut sink))
        .await
        .expect("a plain request to a TLS port hung")
        .ok();
    assert!(
        !String::from_utf8_lossy(&sink).contains("200"),
        "answered in plain text"
    );
    // A client that opens TCP and never starts (or finishes) its handshake.
    for start in [&b""[..], b"\x16\x03\x01\x00"] {
        let mut silent = tokio::net::TcpStream::connect(server.addr).await.unwrap();
        silent.write_all(start).await.unwrap();
        let closed = tokio::time::timeout(WAIT, silent.read_to_end(&mut sink)).await;
        assert!(
            closed.is_ok(),
            "a silent TLS client was not closed by the deadline"
        );
    }
}

#[tokio::test]
async fn sighup_swaps_the_certificate_for_new_connections_and_keeps_open_ones() {
    let pki = Pki::new();
    let first = pki.issue("first.herald.test", 1001);
    let mut server = TlsServer::start(&pki, &[], &[]).await;
    assert_eq!(served_certificate(&pki, server.addr).await, first);
    let ca = pki.ca_file();
    let token = server.token(&["news"]);
    let mut stream = CurlStream::open(
        &ca,
        &server.url(&format!("/v1/sse?channel=news&token={token}")),
    );
    stream.until("event: subscribed").await;

    let second = pki.issue("second.herald.test", 2002);
    server.signal("HUP");
    let logged = server.log_line("TLS certificate reloaded").await;
    assert!(logged.contains("CN=second.herald.test"), "{logged}");
    assert_eq!(served_certificate(&pki, server.addr).await, second);

    // The stream opened before the reload still receives.
    let (status, _) = curl(
        &ca,
        &[
            "-H",
            &bearer(),
            "-d",
            r#"{"data":"after reload"}"#,
            &server.url("/v1/channels/news/messages"),
        ],
    )
    .await;
    assert_eq!(status, 200);
    stream.until("after reload").await;

    // A reload that fails keeps the certificate being served.
    std::fs::write(pki.cert_file(), "not a certificate").unwrap();
    server.signal("HUP");
    let logged = server.log_line("TLS reload failed").await;
    assert!(logged.contains("cert.pem"), "names the file: {logged}");
    assert!(logged.contains("ERROR"), "{logged}");
    assert_eq!(served_certificate(&pki, server.addr).await, second);
}

#[tokio::test]
async fn the_cli_and_herald_client_trust_a_private_ca_given_with_cacert() {
    let pki = Pki::new();
    pki.issue("herald.test", 1);
    let server = TlsServer::start(&pki, &[], &[]).await;
    let publish = |cacert: Option<&std::path::Path>| {
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_herald"));
        cmd.args(["publish", "news", r#"{"via":"cli"}"#, "--url"])
            .arg(server.url(""))
            .args(["--api-key", API_KEY])
            .env_remove("HERALD_CACERT");
        if let Some(ca) = cacert {
            cmd.arg("--cacert").arg(ca);
        }
        cmd.output()
    };
    let refused = tokio::time::timeout(WAIT, publish(None))
        .await
        .unwrap()
        .unwrap();
    assert!(!refused.status.success(), "an unknown CA was trusted");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("error"), "{stderr}");
    let done = tokio::time::timeout(WAIT, publish(Some(&pki.ca_file())))
        .await
        .unwrap()
        .unwrap();
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );

    herald_client::tls::trust_ca_file(&pki.ca_file()).unwrap();
    let token = server.token(&["news"]);
    let mut ws = herald_client::ws::WsClient::connect(&server.url(""), Some(&token))
        .await
        .expect("wss with herald-client");
    let subscribed = ws.subscribe("news", None).await.unwrap();
    assert_eq!(subscribed.seq, 1, "the CLI's message is there");
    let history = herald_client::api::Publisher::new(&server.url(""), Some(API_KEY))
        .history("news", 0, Some(10))
        .await;
    assert_eq!(history.expect("https with herald-client").messages.len(), 1);
}
