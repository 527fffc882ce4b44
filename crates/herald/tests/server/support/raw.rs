//! An HTTP/1.1 client on one raw connection, for tests that must control which requests share a
//! connection (and so which of the server's paths serves them): plain, close-delimited and
//! chunked bodies, and SSE events.

use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::Server;

/// A response's status and headers (names in lower case).
pub struct Head {
    pub status: u16,
    pub headers: Vec<(String, String)>,
}

impl Head {
    pub fn get(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// An HTTP/1.1 client on one raw connection, reading plain, close-delimited or chunked bodies.
pub struct Raw {
    pub tcp: TcpStream,
    /// Bytes read and not yet taken.
    pub buf: Vec<u8>,
    /// The current response's body is chunked.
    chunked: bool,
    /// Decoded body bytes not yet taken as events.
    body: Vec<u8>,
}

impl Raw {
    pub async fn connect(server: &Server) -> Raw {
        Raw::on(TcpStream::connect(server.addr).await.unwrap())
    }

    pub fn on(tcp: TcpStream) -> Raw {
        Raw {
            tcp,
            buf: Vec::new(),
            chunked: false,
            body: Vec::new(),
        }
    }

    pub async fn send(&mut self, bytes: &[u8]) {
        self.tcp.write_all(bytes).await.unwrap();
    }

    /// Reads more from the socket; false at the end of the stream. Panics after 10 s.
    pub async fn fill(&mut self) -> bool {
        let mut chunk = [0u8; 16 * 1024];
        let n = tokio::time::timeout(Duration::from_secs(10), self.tcp.read(&mut chunk))
            .await
            .expect("timed out waiting for the server")
            .unwrap_or(0);
        self.buf.extend_from_slice(&chunk[..n]);
        n > 0
    }

    pub async fn head(&mut self) -> Head {
        let end = loop {
            if let Some(at) = find(&self.buf, b"\r\n\r\n") {
                break at;
            }
            assert!(
                self.fill().await,
                "connection closed before a response head"
            );
        };
        let text = String::from_utf8(self.buf.drain(..end + 4).collect()).unwrap();
        let mut lines = text.split("\r\n");
        let status = lines.next().unwrap().split(' ').nth(1).unwrap();
        let headers: Vec<(String, String)> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        let head = Head {
            status: status.parse().unwrap(),
            headers,
        };
        self.chunked = head.get("transfer-encoding") == Some("chunked");
        self.body.clear();
        head
    }

    /// The body of a response with a `content-length`.
    pub async fn body(&mut self, head: &Head) -> Value {
        let len: usize = head.get("content-length").unwrap().parse().unwrap();
        while self.buf.len() < len {
            assert!(self.fill().await, "connection closed inside a body");
        }
        serde_json::from_slice(&self.buf.drain(..len).collect::<Vec<_>>()).unwrap()
    }

    /// Moves whole chunks (or, unchunked, everything) from `buf` to `body`.
    pub fn decode(&mut self) {
        if !self.chunked {
            self.body.append(&mut self.buf);
            return;
        }
        while let Some(line) = find(&self.buf, b"\r\n") {
            let size = std::str::from_utf8(&self.buf[..line]).unwrap();
            let size = usize::from_str_radix(size.trim(), 16).unwrap();
            if self.buf.len() < line + 2 + size + 2 {
                return;
            }
            self.body
                .extend_from_slice(&self.buf[line + 2..line + 2 + size]);
            self.buf.drain(..line + 2 + size + 2);
        }
    }

    /// The next event block, comments included (without its blank line); None at the end.
    pub async fn event(&mut self) -> Option<String> {
        loop {
            self.decode();
            if let Some(end) = find(&self.body, b"\n\n") {
                let block: Vec<u8> = self.body.drain(..end + 2).collect();
                return Some(String::from_utf8(block[..end].to_vec()).unwrap());
            }
            if !self.fill().await {
                return None;
            }
        }
    }

    /// Reads events until one named `name`; returns its data.
    pub async fn until(&mut self, name: &str) -> Value {
        loop {
            let block = self.event().await.expect("stream ended");
            if event_name(&block) == name {
                return data(&block);
            }
        }
    }
}

pub fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The event's name: `event:`, else `message` for an event with data; `:` for a comment, `""`
/// for a block without data (`retry:`).
pub fn event_name(block: &str) -> &str {
    if block.starts_with(':') {
        return ":";
    }
    let named = block.lines().find_map(|l| l.strip_prefix("event: "));
    match (named, block.lines().any(|l| l.starts_with("data: "))) {
        (Some(name), _) => name,
        (None, true) => "message",
        (None, false) => "",
    }
}

pub fn data(block: &str) -> Value {
    let lines: Vec<&str> = block
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .collect();
    serde_json::from_str(&lines.join("\n")).unwrap_or(Value::Null)
}
