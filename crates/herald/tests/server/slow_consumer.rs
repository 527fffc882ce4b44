//! A slow consumer whose kernel buffers are full (a 4 KiB receive buffer, a client that stops
//! reading) still gets its `slow_consumer` disconnect frame and its close code when it reads
//! again within the grace (issue 13, defect 6), on WebSocket and on SSE.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::net::{TcpSocket, TcpStream};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

use crate::support::Server;

/// A TCP connection to `server` whose receive buffer is 4 KiB.
async fn tiny_buffer_tcp(server: &Server) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    socket.connect(server.addr).await.unwrap()
}

/// `herald_slow_consumer_disconnects_total` as `/metrics` shows it.
async fn slow_consumer_disconnects(server: &Server) -> u64 {
    server
        .metrics()
        .await
        .lines()
        .find_map(|l| l.strip_prefix("herald_slow_consumer_disconnects_total "))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map_or(0, |v| v as u64)
}

/// Publishes 16 KiB messages to `firehose` one at a time until the server has cut a slow
/// consumer: the first fill the kernel's buffers (the server's writes stop going through), the
/// next the connection's outbox, until it overflows.
async fn trickle_until_cut(server: &Server) {
    let pad = "p".repeat(16 * 1024);
    tokio::time::timeout(Duration::from_secs(60), async {
        for n in 1.. {
            server.publish("firehose", json!({ "pad": pad })).await;
            if n % 8 == 0 && slow_consumer_disconnects(server).await > 0 {
                return;
            }
        }
    })
    .await
    .expect("the server disconnects the slow consumer");
}

/// What a WebSocket client read to the end: the last message seq, the `disconnect` code and
/// the close code, if any.
#[derive(Debug)]
struct Read {
    last_seq: u64,
    disconnect: Option<Value>,
    close: Option<CloseCode>,
}

/// Reads every frame until the connection ends, each within 10 s.
async fn read_to_end(ws: &mut WebSocketStream<TcpStream>) -> Read {
    let mut read = Read {
        last_seq: 0,
        disconnect: None,
        close: None,
    };
    loop {
        let next = tokio::time::timeout(Duration::from_secs(10), ws.next())
            .await
            .expect("a frame, or the end, within 10 s");
        match next {
            Some(Ok(Message::Text(t))) => {
                let v: Value = serde_json::from_str(&t).unwrap();
                if let Some(seq) = v["message"]["seq"].as_u64() {
                    assert_eq!(
                        seq,
                        read.last_seq + 1,
                        "in order, no gap before the disconnect"
                    );
                    read.last_seq = seq;
                }
                if let Some(d) = v.get("disconnect") {
                    read.disconnect = Some(d["code"].clone());
                }
            }
            Some(Ok(Message::Close(frame))) => {
                read.close = frame.map(|f| f.code);
                return read;
            }
            Some(Ok(_)) => {}
            Some(Err(_)) | None => return read,
        }
    }
}

async fn server() -> Server {
    Server::builder()
        .env("HERALD_OUTBOX_BYTES", "65536")
        .config("[history]\nsize = 5000\n")
        .start()
        .await
}

/// A client that stops reading once subscribed, is cut while its buffers are full, waits
/// `pause` and then reads everything.
async fn ws_reads_after(pause: Duration) -> Read {
    let server = server().await;
    let token = server.token(&["firehose"], &[]);
    let url = server.ws_url(&format!("?token={token}"));
    let tcp = tiny_buffer_tcp(&server).await;
    let (mut ws, _) = tokio_tungstenite::client_async(url.as_str(), tcp)
        .await
        .unwrap();
    let subscribe = json!({"id": 1, "subscribe": {"channel": "firehose"}});
    ws.send(Message::text(subscribe.to_string())).await.unwrap();
    loop {
        let next = tokio::time::timeout(Duration::from_secs(10), ws.next()).await;
        let Ok(Some(Ok(Message::Text(t)))) = next else {
            panic!("no subscribe reply: {next:?}");
        };
        if serde_json::from_str::<Value>(&t).unwrap()["id"] == 1 {
            break;
        }
    }
    trickle_until_cut(&server).await;
    tokio::time::sleep(pause).await;
    read_to_end(&mut ws).await
}

#[tokio::test]
async fn a_websocket_client_cut_while_its_buffers_are_full_reads_its_slow_consumer_frame() {
    let read = ws_reads_after(Duration::from_secs(2)).await;
    assert!(
        read.last_seq > 0,
        "messages went out before the cut: {read:?}"
    );
    assert_eq!(read.disconnect, Some(json!("slow_consumer")), "{read:?}");
    assert_eq!(read.close, Some(CloseCode::Library(4008)), "{read:?}");
}

#[tokio::test]
async fn a_websocket_client_that_reads_again_long_after_the_cut_reads_its_slow_consumer_frame() {
    // Longer than the 30 s a write may wait for a full socket: what the grace is for.
    let read = ws_reads_after(Duration::from_secs(35)).await;
    assert!(
        read.last_seq > 0,
        "messages went out before the cut: {read:?}"
    );
    assert_eq!(read.disconnect, Some(json!("slow_consumer")), "{read:?}");
    assert_eq!(read.close, Some(CloseCode::Library(4008)), "{read:?}");
}

/// An SSE stream on a fresh connection (served by the transport itself) that stops reading
/// once subscribed, is cut while its buffers are full, waits `pause`, then reads to the end:
/// everything it read after the response head.
async fn sse_reads_after(pause: Duration) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let server = server().await;
    let token = server.token(&["firehose"], &[]);
    let mut tcp = tiny_buffer_tcp(&server).await;
    let request = format!(
        "GET /v1/sse?channel=firehose&token={token} HTTP/1.1\r\nHost: herald\r\n\
         Accept: text/event-stream\r\n\r\n"
    );
    tcp.write_all(request.as_bytes()).await.unwrap();
    let mut read = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    while !String::from_utf8_lossy(&read).contains("event: subscribed") {
        let n = tokio::time::timeout(Duration::from_secs(10), tcp.read(&mut chunk))
            .await
            .expect("subscribed within 10 s")
            .unwrap();
        assert!(n > 0, "the stream ended before subscribing");
        read.extend_from_slice(&chunk[..n]);
    }
    trickle_until_cut(&server).await;
    tokio::time::sleep(pause).await;
    loop {
        let n = tokio::time::timeout(Duration::from_secs(10), tcp.read(&mut chunk))
            .await
            .expect("bytes, or the end, within 10 s")
            .unwrap_or(0);
        if n == 0 {
            return String::from_utf8_lossy(&read).into_owned();
        }
        read.extend_from_slice(&chunk[..n]);
    }
}

/// The last event of an SSE stream's text.
fn last_event(stream: &str) -> &str {
    stream.trim_end().rsplit("\n\n").next().unwrap_or_default()
}

#[tokio::test]
async fn an_sse_client_that_reads_again_long_after_the_cut_reads_its_disconnect_event() {
    // Longer than the 30 s a write may wait for a full socket: what the grace is for.
    let stream = sse_reads_after(Duration::from_secs(35)).await;
    assert!(
        stream.contains("\nid: "),
        "messages went out before the cut"
    );
    let last = last_event(&stream);
    assert!(
        last.starts_with("event: disconnect\n") && last.contains("\"slow_consumer\""),
        "the stream ends with its disconnect event: {last:?}"
    );
}
