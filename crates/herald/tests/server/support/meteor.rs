//! Raw-socket clients of the Meteor ports: a subscriber that sends one request line and reads
//! what the server writes, and a line-based controller.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// How long a read may wait before the test fails.
const WAIT: Duration = Duration::from_secs(10);

/// A subscriber-port connection.
pub struct Subscriber {
    stream: TcpStream,
    /// Everything received and not yet consumed by [`Subscriber::until`].
    pub buf: Vec<u8>,
}

impl Subscriber {
    /// Connects and sends `GET <path> HTTP/1.1` with a Host header.
    pub async fn get(addr: SocketAddr, path: &str) -> Subscriber {
        Self::raw(
            addr,
            format!("GET {path} HTTP/1.1\r\nHost: test\r\n\r\n").as_bytes(),
        )
        .await
    }

    /// Connects and sends `bytes` as they are.
    pub async fn raw(addr: SocketAddr, bytes: &[u8]) -> Subscriber {
        let mut stream = TcpStream::connect(addr).await.expect("connect meteor");
        stream.write_all(bytes).await.unwrap();
        Subscriber {
            stream,
            buf: Vec::new(),
        }
    }

    /// Reads until `needle` has arrived; returns everything up to and including it.
    pub async fn until(&mut self, needle: &str) -> String {
        let needle = needle.as_bytes();
        loop {
            if let Some(at) = self.buf.windows(needle.len()).position(|w| w == needle) {
                let got: Vec<u8> = self.buf.drain(..at + needle.len()).collect();
                return String::from_utf8_lossy(&got).into_owned();
            }
            let mut chunk = [0u8; 4096];
            let n = tokio::time::timeout(WAIT, self.stream.read(&mut chunk))
                .await
                .unwrap_or_else(|_| {
                    panic!(
                        "timed out waiting for {:?}; have {:?}",
                        String::from_utf8_lossy(needle),
                        String::from_utf8_lossy(&self.buf)
                    )
                })
                .unwrap_or(0);
            if n == 0 {
                panic!(
                    "connection closed before {:?}; have {:?}",
                    String::from_utf8_lossy(needle),
                    String::from_utf8_lossy(&self.buf)
                );
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// Reads until the server closes the connection; returns what was not consumed yet.
    pub async fn read_to_close(&mut self) -> String {
        let mut rest = std::mem::take(&mut self.buf);
        tokio::time::timeout(WAIT, self.stream.read_to_end(&mut rest))
            .await
            .expect("the server did not close the connection")
            .ok();
        String::from_utf8_lossy(&rest).into_owned()
    }
}

/// A controller-port connection.
pub struct Controller {
    reader: BufReader<tokio::net::tcp::OwnedReadHalf>,
    writer: tokio::net::tcp::OwnedWriteHalf,
}

impl Controller {
    pub async fn connect(addr: SocketAddr) -> Controller {
        let (r, w) = TcpStream::connect(addr)
            .await
            .expect("connect meteor-control")
            .into_split();
        Controller {
            reader: BufReader::new(r),
            writer: w,
        }
    }

    pub async fn send(&mut self, line: &str) {
        self.writer
            .write_all(format!("{line}\r\n").as_bytes())
            .await
            .unwrap();
    }

    /// The next reply line without its line ending; `None` when the connection closed.
    pub async fn line(&mut self) -> Option<String> {
        let mut line = String::new();
        let n = tokio::time::timeout(WAIT, self.reader.read_line(&mut line))
            .await
            .expect("timed out waiting for a controller reply")
            .ok()?;
        (n > 0).then(|| line.trim_end_matches(['\r', '\n']).to_string())
    }

    /// Sends `line` and returns the first reply line.
    pub async fn command(&mut self, line: &str) -> String {
        self.send(line).await;
        self.line()
            .await
            .expect("connection closed before the reply")
    }

    /// Sends a command answered `OK`, lines, `--EOT--`; returns the lines between.
    pub async fn listing(&mut self, line: &str) -> Vec<String> {
        assert_eq!(self.command(line).await, "OK");
        let mut out = Vec::new();
        loop {
            let l = self.line().await.expect("closed inside a listing");
            if l == "--EOT--" {
                return out;
            }
            out.push(l);
        }
    }
}
