//! Connection deadlines against the real binary, every deadline set to 1 s: a connection that
//! says nothing, a head or body that stops, an idle keep-alive connection, a silent Meteor
//! controller and a Meteor subscriber that stops mid-request-line are all closed (within a
//! generous bound: nothing here asserts how long it took); a declared body over the limit is
//! refused with 413 before it is read; WebSocket, SSE, long-poll and Meteor streams outlive the
//! deadlines. Each test is bounded by [`CLOSED_WITHIN`].

use std::net::SocketAddr;
use std::time::Duration;

use crate::support;

use serde_json::{json, Value};
use support::meteor::{Controller, Subscriber};
use support::{Server, Sse, Ws, API_KEY};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The bound within which a connection past its (1 s) deadline must have been closed.
const CLOSED_WITHIN: Duration = Duration::from_secs(15);
/// Longer than every deadline, for the streams that must outlive them.
const PAST_THE_DEADLINES: Duration = Duration::from_secs(3);

/// A server with every deadline at 1 s, and both Meteor ports.
async fn short_deadlines() -> Server {
    Server::builder()
        .arg("--meteor")
        .arg("127.0.0.1:0")
        .arg("--meteor-control")
        .arg("127.0.0.1:0")
        .env("HERALD_FIRST_BYTE_TIMEOUT", "1s")
        .env("HERALD_HEAD_TIMEOUT", "1s")
        .env("HERALD_BODY_TIMEOUT", "1s")
        .env("HERALD_KEEPALIVE_TIMEOUT", "1s")
        .env("HERALD_METEOR_CONTROL_IDLE_TIMEOUT", "1s")
        .start()
        .await
}

/// Connects to `addr` and sends `bytes` (if any).
async fn send(addr: SocketAddr, bytes: &[u8]) -> TcpStream {
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    tcp.write_all(bytes).await.unwrap();
    tcp
}

/// Everything the server sends until it closes the connection (panics if it does not within
/// [`CLOSED_WITHIN`]).
async fn until_closed(tcp: &mut (impl AsyncRead + Unpin)) -> String {
    let mut got = Vec::new();
    let read = async {
        let mut chunk = [0u8; 4096];
        loop {
            match tcp.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&chunk[..n]),
            }
        }
    };
    let closed = tokio::time::timeout(CLOSED_WITHIN, read).await.is_ok();
    let got = String::from_utf8_lossy(&got).into_owned();
    assert!(
        closed,
        "the server did not close the connection; it sent {got:?}"
    );
    got
}

/// One complete response (head and `content-length` body) off a kept-alive connection.
async fn one_response(tcp: &mut TcpStream) -> String {
    let mut got = Vec::new();
    let read = async {
        let mut byte = [0u8; 1];
        while !got.ends_with(b"\r\n\r\n") {
            assert_eq!(tcp.read(&mut byte).await.unwrap(), 1, "closed mid-head");
            got.push(byte[0]);
        }
        let head = String::from_utf8_lossy(&got).to_lowercase();
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length: "))
            .map_or(0, |n| n.trim().parse().unwrap());
        let mut body = vec![0u8; length];
        tcp.read_exact(&mut body).await.unwrap();
        got.extend_from_slice(&body);
    };
    tokio::time::timeout(CLOSED_WITHIN, read)
        .await
        .expect("no response");
    String::from_utf8_lossy(&got).into_owned()
}

/// The status code and JSON body of a whole answer.
fn status_and_body(answer: &str) -> (u16, Value) {
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP answer: {answer:?}"));
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

/// Asserts `answer` is `408 request_timeout` with the JSON error body.
fn assert_request_timeout(answer: &str) {
    let (status, body) = status_and_body(answer);
    assert_eq!(status, 408, "{answer}");
    assert_eq!(body["error"]["code"], "request_timeout", "{answer}");
    assert!(body["error"]["message"].is_string(), "{answer}");
}

#[tokio::test]
async fn a_connection_that_sends_nothing_is_closed_without_an_answer() {
    let server = short_deadlines().await;
    for addr in [server.addr, server.meteor.unwrap()] {
        let mut tcp = send(addr, b"").await;
        assert_eq!(until_closed(&mut tcp).await, "", "{addr}");
    }
}

#[tokio::test]
async fn a_head_that_stops_is_answered_408_and_closed() {
    let server = short_deadlines().await;
    // Hyper's path, the direct SSE path, and the second request of a kept-alive connection.
    for partial in [
        &b"POST /v1/channels/a/messages HTTP/1.1\r\nHost: test\r\nContent-Le"[..],
        b"GET /v1/sse?channel=a HTTP/1.1\r\nHost: te",
        b"GET /v1/channels/a HTT",
    ] {
        let mut tcp = send(server.addr, partial).await;
        assert_request_timeout(&until_closed(&mut tcp).await);
    }
    let mut tcp = send(server.addr, b"GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n").await;
    let first = one_response(&mut tcp).await;
    assert!(first.starts_with("HTTP/1.1 200"), "{first}");
    tcp.write_all(b"GET /healthz HTTP/1.1\r\nHo").await.unwrap();
    assert_request_timeout(&until_closed(&mut tcp).await);
}

#[tokio::test]
async fn a_body_that_stops_is_answered_408_and_closed() {
    let server = short_deadlines().await;
    let head = format!(
        "POST /v1/channels/a/messages HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer {API_KEY}\r\n\
         Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"data\":"
    );
    let mut tcp = send(server.addr, head.as_bytes()).await;
    assert_request_timeout(&until_closed(&mut tcp).await);
    // Chunked, stopping mid-chunk.
    let head = format!(
        "POST /v1/channels/a/messages HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer {API_KEY}\r\n\
         Transfer-Encoding: chunked\r\n\r\n20\r\n{{\"data\":"
    );
    let mut tcp = send(server.addr, head.as_bytes()).await;
    assert_request_timeout(&until_closed(&mut tcp).await);
    let (_, info) = server.get("/v1/channels/a").await;
    assert_eq!(info["seq"], 0, "nothing was stored");
}

#[tokio::test]
async fn an_idle_kept_alive_connection_is_closed_after_its_answer() {
    let server = short_deadlines().await;
    let mut tcp = send(server.addr, b"GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n").await;
    let answer = until_closed(&mut tcp).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert_eq!(answer.matches("HTTP/1.1").count(), 1, "{answer}");
}

#[tokio::test]
async fn a_declared_body_over_the_limit_is_refused_before_it_is_read() {
    let server = short_deadlines().await;
    // Nothing of the body is sent: an answer other than 413 (such as the body deadline's 408)
    // would mean the server waited for it.
    for path in ["/v1/channels/a/messages", "/v1/batch"] {
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer {API_KEY}\r\n\
             Content-Type: application/json\r\nContent-Length: 99999999999\r\n\r\n"
        );
        let mut tcp = send(server.addr, head.as_bytes()).await;
        let (status, body) = status_and_body(&until_closed(&mut tcp).await);
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (413, Some("too_large")),
            "{path}: {body}"
        );
    }
    // A chunked body that grows past the limit while it is read.
    let chunks =
        futures_util::stream::iter((0..40).map(|_| Ok::<_, std::io::Error>(vec![b' '; 4096])));
    let sent = server
        .http
        .post(server.url("/v1/channels/a/messages"))
        .bearer_auth(API_KEY)
        .body(reqwest::Body::wrap_stream(chunks))
        .send()
        .await;
    match sent {
        Ok(r) => {
            assert_eq!(r.status(), 413);
            let body: Value = r.json().await.unwrap();
            assert_eq!(body["error"]["code"], "too_large", "{body}");
        }
        // The server answers 413 and closes as soon as the body passes the limit; a client
        // still sending then may see the connection reset before it reads the answer (HTTP
        // without a lingering close). The body was refused either way: nothing is stored.
        Err(e) => assert!(e.is_request() || e.is_body(), "{e:?}"),
    }
    // A new client: the pooled connection of the refused request may be one the server has
    // just closed, and reusing it would fail the read with an incomplete message.
    let history: Value = reqwest::Client::new()
        .get(server.url("/v1/channels/a/messages"))
        .bearer_auth(API_KEY)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        history["messages"],
        serde_json::json!([]),
        "a refused body was stored"
    );
}

#[tokio::test]
async fn a_silent_meteor_controller_is_closed() {
    let server = short_deadlines().await;
    let mut ctl = Controller::connect(server.meteor_control.unwrap()).await;
    assert_eq!(ctl.line().await, None, "closed without a reply");
    // One that answered a command and then went quiet is closed too.
    let mut ctl = Controller::connect(server.meteor_control.unwrap()).await;
    assert_eq!(ctl.command("COUNTSUBSCRIBERS news").await, "OK 0");
    assert_eq!(ctl.line().await, None);
}

#[tokio::test]
async fn a_meteor_subscriber_that_stops_mid_request_line_is_closed() {
    let server = short_deadlines().await;
    let mut sub = Subscriber::raw(server.meteor.unwrap(), b"GET /push/host1/longpo").await;
    assert_eq!(sub.read_to_close().await, "");
}

#[tokio::test]
async fn streams_and_waiting_requests_outlive_the_deadlines() {
    let server = short_deadlines().await;
    let token = server.token(&["s/*"], &[]);
    let mut ws = Ws::connect(&server.ws_url(&format!("?token={token}"))).await;
    let r = ws.request("subscribe", json!({ "channel": "s/ws" })).await;
    assert!(r.get("error").is_none(), "{r}");
    let mut sse = Sse::open(&server, &format!("?channel=s/sse&token={token}"), None)
        .await
        .unwrap();
    assert_eq!(sse.next().await.unwrap().event, "subscribed");
    let poll = {
        let url = server.url(&format!("/v1/poll?channel=s/poll&timeout=20&token={token}"));
        let http = server.http.clone();
        tokio::spawn(async move { http.get(url).send().await.unwrap().json::<Value>().await })
    };
    let mut meteor = Subscriber::get(
        server.meteor.unwrap(),
        "/push/host1/xhrinteractive/meteorch?nc=1",
    )
    .await;
    meteor.until("ch(\"meteorch\", 0);</script>\r\n").await;

    tokio::time::sleep(PAST_THE_DEADLINES).await;
    for channel in ["s/ws", "s/sse", "s/poll", "meteorch"] {
        server.publish(channel, json!(channel)).await;
    }
    let got = ws.recv().await.expect("the WebSocket is open");
    assert_eq!(got["message"]["data"], "s/ws", "{got}");
    let got = sse.next().await.expect("the SSE stream is open");
    assert_eq!(got.json()["data"], "s/sse");
    let got = tokio::time::timeout(CLOSED_WITHIN, poll)
        .await
        .expect("the long-poll answered")
        .unwrap()
        .unwrap();
    assert_eq!(got["messages"][0]["data"], "s/poll", "{got}");
    meteor.until("p(1,\"meteorch\"").await;
    // The WebSocket is still usable afterwards.
    let r = ws
        .request("subscribe", json!({ "channel": "s/more" }))
        .await;
    assert!(r.get("error").is_none(), "{r}");
}

/// The answers hyper's parser writes before any handler runs (issue 13, defect 5) carry the JSON
/// error body too.
#[tokio::test]
async fn requests_the_parser_refuses_are_answered_with_the_json_error_body() {
    let server = Server::builder().start().await;
    // Over the head limit of 64 KiB, which applies whatever size the reads that bring the head
    // are: before the request line ends (414), after it (431).
    let long_uri = format!("GET /{} HTTP/1.1\r\nHost: test\r\n\r\n", "a".repeat(70_000));
    let big_headers = format!(
        "GET /healthz HTTP/1.1\r\nHost: test\r\nX-Big: {}\r\n\r\n",
        "a".repeat(500_000)
    );
    let two_lengths = "POST /v1/channels/a/messages HTTP/1.1\r\nHost: test\r\n\
                       Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}";
    for (request, status, code) in [
        (long_uri.as_str(), 414, "too_large"),
        (big_headers.as_str(), 431, "too_large"),
        (two_lengths, 400, "bad_request"),
        ("NOT HTTP AT ALL\r\n\r\n", 400, "bad_request"),
    ] {
        // The server stops reading an overlong head, so the request is written beside the
        // read (a write the server cut short fails; the answer is what matters).
        let (mut read, mut write) = TcpStream::connect(server.addr).await.unwrap().into_split();
        let request = request.as_bytes().to_vec();
        let writer = tokio::spawn(async move {
            let _ = write.write_all(&request).await;
            write
        });
        let answer = until_closed(&mut read).await;
        drop(writer.await.unwrap());
        let (got, body) = status_and_body(&answer);
        assert_eq!(
            (got, body["error"]["code"].as_str()),
            (status, Some(code)),
            "{answer}"
        );
        assert!(
            answer.contains("content-type: application/json\r\n"),
            "{answer}"
        );
        assert!(
            body["error"]["message"].as_str().unwrap().len() > 20,
            "{answer}"
        );
    }
    // Nothing was published by the refused requests.
    let (_, history) = server.get("/v1/channels/a/messages").await;
    assert_eq!(history["messages"], serde_json::json!([]));
}

/// The head limit counts each request's head on its own: a kept-alive connection carries many
/// heads that add up to more than the limit, and a head just under it; one just over it is
/// refused.
#[tokio::test]
async fn the_head_limit_counts_each_request_on_its_own() {
    let server = Server::builder().start().await;
    let mut tcp = TcpStream::connect(server.addr).await.unwrap();
    let with_header = |bytes: usize| {
        format!(
            "GET /healthz HTTP/1.1\r\nHost: test\r\nX-Big: {}\r\n\r\n",
            "a".repeat(bytes)
        )
    };
    for _ in 0..40 {
        tcp.write_all(with_header(4_000).as_bytes()).await.unwrap();
        let answer = one_response(&mut tcp).await;
        assert!(answer.starts_with("HTTP/1.1 200 "), "{answer}");
    }
    tcp.write_all(with_header(65_000).as_bytes()).await.unwrap();
    let answer = one_response(&mut tcp).await;
    assert!(
        answer.starts_with("HTTP/1.1 200 "),
        "just under the limit: {answer}"
    );

    let (mut read, mut write) = tcp.into_split();
    let over = with_header(66_000);
    let writer = tokio::spawn(async move {
        let _ = write.write_all(over.as_bytes()).await;
        write
    });
    let answer = until_closed(&mut read).await;
    drop(writer.await.unwrap());
    let (status, body) = status_and_body(&answer);
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (431, Some("too_large")),
        "{answer}"
    );
}
