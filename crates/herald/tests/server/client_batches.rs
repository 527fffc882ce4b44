//! `herald-client`'s subscriber sends a connection's subscribes in batches (docs/protocol.md,
//! "Batches"): a reconnect resubscribes 250 channels in 3 WebSocket messages, seen through a
//! proxy that records the client's messages, and every channel resumes exactly (each message
//! once, in order).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use herald_client::api::{BatchMessage, Publisher};
use herald_client::subscriber::{Event, Subscriber};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::support::{Server, API_KEY};

/// Each proxied connection's text messages from the client, in order.
type Recorded = Arc<Mutex<Vec<Vec<String>>>>;

/// A loopback proxy to `upstream` that records what each client sends after its upgrade.
async fn recording_proxy(upstream: SocketAddr) -> (SocketAddr, Recorded) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let recorded: Recorded = Arc::default();
    let connections = recorded.clone();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let Ok(server) = TcpStream::connect(upstream).await else {
                continue;
            };
            let index = {
                let mut all = connections.lock().unwrap();
                all.push(Vec::new());
                all.len() - 1
            };
            tokio::spawn(relay(client, server, connections.clone(), index));
        }
    });
    (addr, recorded)
}

/// Copies both ways; the client's bytes are also read as WebSocket frames after the request.
async fn relay(client: TcpStream, server: TcpStream, recorded: Recorded, index: usize) {
    let (mut client_rd, mut client_wr) = client.into_split();
    let (mut server_rd, mut server_wr) = server.into_split();
    let down = tokio::spawn(async move {
        let _ = tokio::io::copy(&mut server_rd, &mut client_wr).await;
    });
    let mut buf = vec![0u8; 16 * 1024];
    let mut seen = Vec::new();
    let mut upgraded = false;
    loop {
        let n = match client_rd.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if server_wr.write_all(&buf[..n]).await.is_err() {
            break;
        }
        seen.extend_from_slice(&buf[..n]);
        if !upgraded {
            let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") else {
                continue;
            };
            seen.drain(..end + 4);
            upgraded = true;
        }
        while let Some((text, used)) = client_text_frame(&seen) {
            if let Some(text) = text {
                recorded.lock().unwrap()[index].push(text);
            }
            seen.drain(..used);
        }
    }
    down.abort();
}

/// The first whole client frame in `buf`: its text when it is an unfragmented text frame, and
/// the bytes it takes.
fn client_text_frame(buf: &[u8]) -> Option<(Option<String>, usize)> {
    let (&head, &second) = (buf.first()?, buf.get(1)?);
    let (len, mut at) = match second & 0x7f {
        126 => (u16::from_be_bytes([*buf.get(2)?, *buf.get(3)?]) as usize, 4),
        127 => {
            let bytes: [u8; 8] = buf.get(2..10)?.try_into().ok()?;
            (u64::from_be_bytes(bytes) as usize, 10)
        }
        n => (n as usize, 2),
    };
    let mask: [u8; 4] = buf.get(at..at + 4)?.try_into().ok()?;
    at += 4;
    let payload = buf.get(at..at + len)?;
    let unmasked: Vec<u8> = payload
        .iter()
        .enumerate()
        .map(|(i, b)| b ^ mask[i & 3])
        .collect();
    let text = (head == 0x81).then(|| String::from_utf8_lossy(&unmasked).into_owned());
    Some((text, at + len))
}

/// The subscribe commands in one connection's messages, and how many messages held them.
fn subscribes(messages: &[String]) -> (Vec<Value>, usize) {
    let mut commands = Vec::new();
    let mut carrying = 0;
    for text in messages {
        let parsed: Value = serde_json::from_str(text).unwrap();
        let all = match parsed {
            Value::Array(all) => all,
            one => vec![one],
        };
        let found: Vec<Value> = all
            .into_iter()
            .filter(|c| c.get("subscribe").is_some())
            .collect();
        carrying += usize::from(!found.is_empty());
        commands.extend(found);
    }
    (commands, carrying)
}

async fn within<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(30), f)
        .await
        .expect("timed out")
}

/// Reads `n` messages from `subscriber` into `got` (data by channel); a stop fails the test.
async fn take(subscriber: &mut Subscriber, n: usize, got: &mut HashMap<String, Vec<Value>>) {
    let mut taken = 0;
    while taken < n {
        match within(subscriber.next()).await {
            Ok(Event::Message(m)) => {
                got.entry(m.channel.clone()).or_default().push(m.json());
                taken += 1;
            }
            Ok(Event::ResumeInexact { channel, .. }) => panic!("{channel}: resume not exact"),
            Ok(_) => {}
            Err(stopped) => panic!("the subscriber stopped: {stopped}"),
        }
    }
}

/// Publishes `n` to every channel in one batch, on a publisher of its own (a pooled connection
/// to the server killed a moment ago would fail the request).
async fn publish_round(s: &Server, channels: &[String], n: u64) {
    let messages: Vec<BatchMessage> = channels
        .iter()
        .map(|c| BatchMessage {
            channel: c.clone(),
            data: json!(n),
            id: None,
        })
        .collect();
    let results = Publisher::new(&s.url(""), Some(API_KEY))
        .batch(&messages)
        .await
        .unwrap();
    assert!(results.iter().all(Result::is_ok), "{results:?}");
}

#[tokio::test]
async fn a_reconnect_resubscribes_in_batches_and_every_channel_resumes_exactly() {
    const CHANNELS: usize = 250;
    let mut s = Server::start().await;
    let (proxy, recorded) = recording_proxy(s.addr).await;
    let channels: Vec<String> = (0..CHANNELS).map(|i| format!("batch/c{i}")).collect();
    let mut builder = Subscriber::builder(format!("http://{proxy}"))
        .token(s.token(&["batch/*"], &[]))
        .backoff(Duration::from_millis(10), Duration::from_millis(100));
    for channel in &channels {
        builder = builder.channel(channel);
    }
    let mut subscriber = builder.build().unwrap();
    let mut subscribed = 0;
    while subscribed < CHANNELS {
        match within(subscriber.next()).await {
            Ok(Event::Subscribed(_)) => subscribed += 1,
            Ok(_) => {}
            Err(stopped) => panic!("the subscriber stopped: {stopped}"),
        }
    }
    let mut got = HashMap::new();
    publish_round(&s, &channels, 1).await;
    take(&mut subscriber, CHANNELS, &mut got).await;

    // A crash: rounds 2 and 3 are published before the subscriber (which runs only while
    // polled) notices and reconnects through the proxy to the server back on its port.
    s.restart_same_port().await;
    publish_round(&s, &channels, 2).await;
    publish_round(&s, &channels, 3).await;
    take(&mut subscriber, 2 * CHANNELS, &mut got).await;
    publish_round(&s, &channels, 4).await;
    take(&mut subscriber, CHANNELS, &mut got).await;
    for channel in &channels {
        assert_eq!(
            got[channel],
            [json!(1), json!(2), json!(3), json!(4)],
            "{channel}: every message once, in order"
        );
    }

    let recorded = recorded.lock().unwrap().clone();
    assert_eq!(recorded.len(), 2, "one reconnect");
    for (i, messages) in recorded.iter().enumerate() {
        let (commands, carrying) = subscribes(messages);
        assert_eq!(
            commands.len(),
            CHANNELS,
            "connection {i}: a subscribe per channel"
        );
        assert_eq!(
            carrying, 3,
            "connection {i}: 250 subscribes in batches of at most 100"
        );
        let ids: std::collections::HashSet<u64> =
            commands.iter().map(|c| c["id"].as_u64().unwrap()).collect();
        assert_eq!(ids.len(), CHANNELS, "each command with its own id");
    }
    let (resubscribes, _) = subscribes(&recorded[1]);
    for c in &resubscribes {
        assert_eq!(c["subscribe"]["since"]["seq"], 1, "resumes after 1: {c}");
    }
}
