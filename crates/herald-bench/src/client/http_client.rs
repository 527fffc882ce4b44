//! The keep-alive HTTP/1.1 client the scenarios publish and administer with (Herald's HTTP API,
//! Pusher's `POST /apps/{id}/events`): one connection reused from request to request, as a
//! backend's HTTP client keeps one.
//!
//! A server may end a kept-alive connection at any time: it says so in an answer (`Connection:
//! close`; Sockudo's HTTP API answers every request so), or it closes an idle one (a keep-alive
//! timeout, a limit of requests per connection). The client then behaves as a careful HTTP client
//! does: after an answer saying `close` it opens a fresh connection for the next request; before
//! writing on a reused connection it checks that the server has not closed it meanwhile; and a
//! request sent on a *reused* connection that the server closes before any byte of the answer
//! came is sent once more on a fresh connection (the server dropped the connection with the
//! request on its way). The caller sees one request: answered, or failed. A fresh connection's
//! failure, and a connection closed after part of an answer, are the request's failure.

use std::io;
use std::net::{IpAddr, SocketAddr};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::http::read_answer;
use super::{connect, err, lossy, reserve};
use crate::wire::{self, now_ns};

/// A keep-alive HTTP/1.1 client for the publisher API.
pub struct HttpClient {
    addr: SocketAddr,
    host: String,
    source: Option<IpAddr>,
    stream: Option<TcpStream>,
    buf: Vec<u8>,
}

/// How one attempt at a request failed.
#[derive(Debug)]
enum Failure {
    /// The connection was closed before any byte of the answer: the request can be sent again
    /// on a fresh connection if this one was reused.
    Unanswered(String),
    /// Anything else: a failed connect, a broken or partial answer.
    Failed(String),
}

impl Failure {
    fn message(self) -> String {
        match self {
            Failure::Unanswered(m) | Failure::Failed(m) => m,
        }
    }
}

/// Whether `e` says the peer closed or reset the connection.
fn closed_by_peer(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::BrokenPipe
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::UnexpectedEof
    )
}

impl HttpClient {
    /// A client for `addr` (connects on first use).
    pub fn new(addr: SocketAddr, host: &str, source: Option<IpAddr>) -> Self {
        HttpClient {
            addr,
            host: host.to_string(),
            source,
            stream: None,
            buf: Vec::with_capacity(1024),
        }
    }

    /// POSTs `body` to `path`; returns the status and the response body. A request is sent again
    /// only when a reused connection was closed before any byte of its answer (see the module
    /// doc); any other failure is returned (the request might have been carried out).
    pub async fn post(
        &mut self,
        path: &str,
        key: &str,
        body: &[u8],
    ) -> Result<(u16, Vec<u8>), String> {
        let request = wire::post_json(&self.host, path, key, body);
        self.send(&request).await
    }

    /// POSTs the JSON `body` to `path` with no `Authorization` header (a request whose query
    /// carries its signature, as Pusher's HTTP API's do); returns the status and the body.
    pub async fn post_signed(&mut self, path: &str, body: &[u8]) -> Result<(u16, Vec<u8>), String> {
        let mut request = format!(
            "POST {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\n\r\n",
            self.host,
            body.len()
        )
        .into_bytes();
        request.extend_from_slice(body);
        self.send(&request).await
    }

    /// Triggers one event stamped with the current time on `channel` through Pusher's HTTP API
    /// (`POST /apps/{app_id}/events`, signed with `app`'s secret); returns the send time.
    pub async fn trigger_now(
        &mut self,
        app: &crate::pusher_api::PusherApp,
        channel: &str,
    ) -> Result<u64, String> {
        let sent = now_ns();
        let body = crate::pusher_api::trigger_body(channel, sent);
        let path = app.events_path(body.as_bytes(), crate::pusher_api::unix_seconds());
        let (status, answer) = self.post_signed(&path, body.as_bytes()).await?;
        if status != 200 {
            return Err(format!("trigger failed: HTTP {status} {}", lossy(&answer)));
        }
        Ok(sent)
    }

    /// PUTs the JSON `body` to `path`; returns the status and the response body.
    pub async fn put(
        &mut self,
        path: &str,
        key: &str,
        body: &[u8],
    ) -> Result<(u16, Vec<u8>), String> {
        let request = wire::request_json("PUT", &self.host, path, key, body);
        self.send(&request).await
    }

    /// GETs `path` with the bearer `key`; returns the status and the response body.
    pub async fn get(&mut self, path: &str, key: &str) -> Result<(u16, Vec<u8>), String> {
        let auth = format!("Authorization: Bearer {key}\r\n");
        let request = wire::get_request(&self.host, path, &auth);
        self.send(&request).await
    }

    /// DELETEs `path` with the bearer `key`; returns the status and the response body.
    pub async fn delete(&mut self, path: &str, key: &str) -> Result<(u16, Vec<u8>), String> {
        let request = format!(
            "DELETE {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {key}\r\n\
             Content-Length: 0\r\n\r\n",
            self.host
        );
        self.send(request.as_bytes()).await
    }

    /// Writes one request and reads its answer, connecting first if needed; once more on a
    /// fresh connection when a reused one was closed before any byte of the answer.
    async fn send(&mut self, request: &[u8]) -> Result<(u16, Vec<u8>), String> {
        self.drop_if_closed();
        let reused = self.stream.is_some();
        match self.attempt(request).await {
            Ok(answer) => Ok(answer),
            Err(Failure::Unanswered(_)) if reused => {
                self.attempt(request).await.map_err(Failure::message)
            }
            Err(failure) => Err(failure.message()),
        }
    }

    /// Forgets a kept connection the server has closed since its last answer (a read that
    /// does not wait: end of stream or a reset), so the next request goes on a fresh one.
    fn drop_if_closed(&mut self) {
        let Some(stream) = &self.stream else {
            return;
        };
        reserve(&mut self.buf);
        match stream.try_read_buf(&mut self.buf) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            // Bytes nobody asked for stay in the buffer and are read as the next answer's.
            Ok(n) if n > 0 => {}
            _ => self.stream = None,
        }
    }

    /// One attempt: connects if there is no connection, writes `request` and reads the answer.
    /// The connection is kept only after an answer that does not say `close`.
    async fn attempt(&mut self, request: &[u8]) -> Result<(u16, Vec<u8>), Failure> {
        if self.stream.is_none() {
            let stream = connect(self.addr, self.source, None)
                .await
                .map_err(|e| Failure::Failed(err("connect")(e)))?;
            self.stream = Some(stream);
            self.buf.clear();
        }
        let stream = self.stream.as_mut().expect("connected above");
        let result = exchange(stream, &mut self.buf, request).await;
        if !matches!(&result, Ok((head, _)) if !head.close) {
            self.stream = None;
        }
        result.map(|(head, body)| (head.status, body))
    }

    /// Publishes `count` messages stamped with the current time to `channel` in one
    /// `POST /v1/batch`; every one must be stored.
    pub async fn publish_batch_now(
        &mut self,
        channel: &str,
        key: &str,
        count: u64,
    ) -> Result<u64, String> {
        let sent = now_ns();
        let one = format!(
            "{{\"channel\":\"{channel}\",\"data\":{}}}",
            wire::stamp(sent)
        );
        let mut body = String::with_capacity(16 + count as usize * (one.len() + 1));
        body.push_str("{\"messages\":[");
        for i in 0..count {
            if i > 0 {
                body.push(',');
            }
            body.push_str(&one);
        }
        body.push_str("]}");
        let (status, answer) = self.post("/v1/batch", key, body.as_bytes()).await?;
        if status != 200 || lossy(&answer).contains("\"error\"") {
            return Err(format!(
                "batch publish failed: HTTP {status} {}",
                lossy(&answer)
            ));
        }
        Ok(sent)
    }

    /// Publishes one message stamped with the current time to `channel`.
    pub async fn publish_now(&mut self, channel: &str, key: &str) -> Result<u64, String> {
        let sent = now_ns();
        let body = format!("{{\"data\":{}}}", wire::stamp(sent));
        let (status, answer) = self
            .post(
                &format!("/v1/channels/{channel}/messages"),
                key,
                body.as_bytes(),
            )
            .await?;
        if status != 200 {
            return Err(format!("publish failed: HTTP {status} {}", lossy(&answer)));
        }
        Ok(sent)
    }
}

/// Writes `request` on `stream` and reads its answer; [`Failure::Unanswered`] when the server
/// closed the connection before any byte of the answer.
async fn exchange(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
    request: &[u8],
) -> Result<(wire::ResponseHead, Vec<u8>), Failure> {
    let unanswered = |what: &str, e: io::Error| {
        let message = format!("{what}: {e}");
        if closed_by_peer(&e) {
            Failure::Unanswered(message)
        } else {
            Failure::Failed(message)
        }
    };
    stream
        .write_all(request)
        .await
        .map_err(|e| unanswered("write", e))?;
    if buf.is_empty() {
        reserve(buf);
        match stream.read_buf(buf).await {
            Ok(0) => {
                return Err(Failure::Unanswered(
                    "connection closed by server before answering".into(),
                ))
            }
            Ok(_) => {}
            Err(e) => return Err(unanswered("read", e)),
        }
    }
    read_answer(stream, buf).await.map_err(Failure::Failed)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use tokio::net::TcpListener;

    use super::*;

    /// What the loopback server counts: connections accepted and requests answered.
    #[derive(Default)]
    struct Counts {
        connections: AtomicUsize,
        answered: AtomicUsize,
    }

    /// How the loopback server treats each connection.
    #[derive(Clone, Copy)]
    enum Serve {
        /// Answers `n` requests (keep-alive, nothing said), then closes without reading more.
        CloseAfter(usize),
        /// Answers every request with `Connection: close`, then closes.
        SayClose,
        /// Answers `n` requests on the first connection and then closes it; drops every later
        /// connection at once, unanswered.
        DropLater(usize),
    }

    /// A loopback HTTP/1.1 server answering `200 ok` to each request (head and
    /// `Content-Length` body) as `serve` says; its address and counts.
    async fn server(serve: Serve) -> (SocketAddr, Arc<Counts>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let counts = Arc::new(Counts::default());
        let c = counts.clone();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                let nth = c.connections.fetch_add(1, Ordering::SeqCst);
                let c = c.clone();
                tokio::spawn(async move {
                    let (limit, close_header) = match serve {
                        Serve::CloseAfter(n) => (n, false),
                        Serve::SayClose => (1, true),
                        Serve::DropLater(n) => (if nth == 0 { n } else { 0 }, false),
                    };
                    let mut buf = Vec::new();
                    for _ in 0..limit {
                        if read_request(&mut s, &mut buf).await.is_none() {
                            return;
                        }
                        c.answered.fetch_add(1, Ordering::SeqCst);
                        let connection = if close_header {
                            "Connection: close\r\n"
                        } else {
                            ""
                        };
                        let answer =
                            format!("HTTP/1.1 200 OK\r\n{connection}Content-Length: 2\r\n\r\nok");
                        if s.write_all(answer.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                    // Dropped here: closed, whatever the client sends next is never read.
                });
            }
        });
        (addr, counts)
    }

    /// Reads one request (head and `Content-Length` body) from `s`; `None` at its end.
    async fn read_request(s: &mut TcpStream, buf: &mut Vec<u8>) -> Option<()> {
        loop {
            if let Some(end) = wire::find(buf, b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
                let body = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .map_or(0, |v| v.trim().parse::<usize>().unwrap());
                if buf.len() >= end + 4 + body {
                    buf.drain(..end + 4 + body);
                    return Some(());
                }
            }
            if s.read_buf(buf).await.ok()? == 0 {
                return None;
            }
        }
    }

    fn client(addr: SocketAddr) -> HttpClient {
        HttpClient::new(addr, &addr.to_string(), None)
    }

    /// A server that ends every kept-alive connection after 3 requests without saying so:
    /// each fourth request meets a closed connection and goes again on a fresh one, once;
    /// none fails and none is carried out twice.
    #[tokio::test]
    async fn a_request_on_a_kept_connection_the_server_closed_is_sent_again_on_a_fresh_one() {
        let (addr, counts) = server(Serve::CloseAfter(3)).await;
        let mut http = client(addr);
        for i in 0..12 {
            let answer = http.post_signed("/apps/1/events", b"{}").await;
            assert_eq!(answer, Ok((200, b"ok".to_vec())), "request {i}");
        }
        assert_eq!(counts.answered.load(Ordering::SeqCst), 12);
        assert_eq!(counts.connections.load(Ordering::SeqCst), 4);
    }

    /// An answer saying `Connection: close` ends the connection: the next request opens a
    /// fresh one instead of being written to a closed one.
    #[tokio::test]
    async fn an_answer_saying_close_ends_the_connection() {
        let (addr, counts) = server(Serve::SayClose).await;
        let mut http = client(addr);
        for i in 0..5 {
            let answer = http.get("/up", "k").await;
            assert_eq!(answer, Ok((200, b"ok".to_vec())), "request {i}");
            assert!(http.stream.is_none(), "kept after `close`, request {i}");
        }
        assert_eq!(counts.answered.load(Ordering::SeqCst), 5);
        assert_eq!(counts.connections.load(Ordering::SeqCst), 5);
    }

    /// A fresh connection closed before answering is a failure, not sent again: one connection
    /// for the first request, and after a reused connection was closed, one fresh try only.
    #[tokio::test]
    async fn a_fresh_connections_failure_is_the_requests() {
        let (addr, counts) = server(Serve::DropLater(0)).await;
        let mut http = client(addr);
        assert!(http.post_signed("/x", b"{}").await.is_err());
        assert_eq!(counts.connections.load(Ordering::SeqCst), 1);

        let (addr, counts) = server(Serve::DropLater(2)).await;
        let mut http = client(addr);
        for _ in 0..2 {
            assert_eq!(
                http.post_signed("/x", b"{}").await,
                Ok((200, b"ok".to_vec()))
            );
        }
        let third = http.post_signed("/x", b"{}").await;
        assert!(third.is_err(), "{third:?}");
        assert_eq!(counts.connections.load(Ordering::SeqCst), 2);
        assert_eq!(counts.answered.load(Ordering::SeqCst), 2);
    }
}
