//! A minimal NATS client over one TCP connection: the handshake (`INFO`, then `CONNECT` and a
//! `PING` whose `PONG` says the server took it), publishes and subscriptions each confirmed by a
//! `PING`/`PONG` round trip (NATS answers neither on its own without verbose mode; a `PONG`
//! comes after everything sent before its `PING` was processed), the server's `PING`s answered,
//! and messages kept in arrival order. The fan-out publishers and the control plane of a NATS run
//! use it; the worker's subscriber connections ([`crate::client`]) parse the same protocol
//! themselves, with one buffer per connection.

use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::protocol::{self, ServerOp};
use crate::wire::{self, now_ns};

/// Longest wait for the server's `INFO` and its `PONG` to our first `PING`.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// A message received on one of the client's subscriptions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// Its subject.
    pub subject: String,
    /// The subscription it came for.
    pub sid: u64,
    /// Its payload.
    pub payload: Vec<u8>,
}

/// One connection to a NATS server.
pub struct NatsClient {
    stream: TcpStream,
    /// Bytes read and not parsed yet.
    buf: Vec<u8>,
    /// Operations to write.
    out: Vec<u8>,
    /// Messages that arrived while waiting for a `PONG`.
    messages: VecDeque<Message>,
    /// The server's `INFO` JSON.
    info: serde_json::Value,
    next_sid: u64,
}

impl NatsClient {
    /// Connects to `addr` (from `source` when given), reads `INFO`, sends `CONNECT` and waits for
    /// the `PONG` that says the server accepted it.
    pub async fn connect(addr: SocketAddr, source: Option<IpAddr>) -> Result<NatsClient, String> {
        let stream = crate::client::connect(addr, source, None)
            .await
            .map_err(|e| format!("NATS connect to {addr}: {e}"))?;
        let mut client = NatsClient {
            stream,
            buf: Vec::with_capacity(4096),
            out: Vec::with_capacity(1024),
            messages: VecDeque::new(),
            info: serde_json::Value::Null,
            next_sid: 1,
        };
        tokio::time::timeout(HANDSHAKE_TIMEOUT, client.handshake())
            .await
            .map_err(|_| format!("NATS server {addr} sent no INFO and PONG within 10 s"))??;
        Ok(client)
    }

    async fn handshake(&mut self) -> Result<(), String> {
        loop {
            if let Some((op, used)) = protocol::parse(&self.buf)? {
                let ServerOp::Info(json) = op else {
                    return Err(format!(
                        "NATS server spoke before its INFO: {}",
                        lossy(&self.buf[..used])
                    ));
                };
                self.info = serde_json::from_slice(&self.buf[json])
                    .map_err(|e| format!("NATS INFO is not JSON: {e}"))?;
                self.buf.drain(..used);
                break;
            }
            self.read().await?;
        }
        self.out.extend_from_slice(protocol::CONNECT);
        self.round_trip().await
    }

    /// The server's `INFO` (`server_id`, `version`, `max_payload`, ...).
    pub fn info(&self) -> &serde_json::Value {
        &self.info
    }

    /// Publishes one message stamped with the current time to `subject` and waits until the
    /// server has processed it (a `PING`/`PONG` round trip, as a NATS client's flush does).
    /// Returns the send time.
    pub async fn publish_now(&mut self, subject: &str) -> Result<u64, String> {
        self.publish_many_now(subject, 1).await
    }

    /// Publishes `count` messages stamped with the current time to `subject` in one write and
    /// waits until the server has processed them. Returns the send time.
    pub async fn publish_many_now(&mut self, subject: &str, count: u64) -> Result<u64, String> {
        let sent = now_ns();
        let payload = wire::stamp(sent);
        for _ in 0..count {
            protocol::publish(&mut self.out, subject, payload.as_bytes());
        }
        self.round_trip().await?;
        Ok(sent)
    }

    /// Queues a `PUB` of `payload` to `subject` and the `PING` whose `PONG` will confirm it,
    /// without writing or waiting: [`send_queued`](Self::send_queued) writes, and
    /// [`take_pongs`](Self::take_pongs) counts the confirmations. For publishers that keep several
    /// publishes unconfirmed.
    pub fn queue_publish(&mut self, subject: &str, payload: &[u8]) {
        protocol::publish(&mut self.out, subject, payload);
        protocol::ping(&mut self.out);
    }

    /// Writes what is queued.
    pub async fn send_queued(&mut self) -> Result<(), String> {
        if self.out.is_empty() {
            return Ok(());
        }
        self.flush().await
    }

    /// Handles every whole operation read so far (messages are kept, `PING`s get a `PONG`
    /// queued for the next write); returns how many `PONG`s were among them.
    pub fn take_pongs(&mut self) -> Result<u64, String> {
        self.handle_buffered(false)
    }

    /// Reads what the server sent (at least one byte). Cancel-safe: nothing read is lost if
    /// the future is dropped, so it can race a timer.
    pub async fn read_some(&mut self) -> Result<(), String> {
        self.read().await
    }

    /// Publishes `payload` to `subject` and waits until the server has processed it.
    pub async fn publish(&mut self, subject: &str, payload: &[u8]) -> Result<(), String> {
        protocol::publish(&mut self.out, subject, payload);
        self.round_trip().await
    }

    /// Subscribes to `subject` and waits until the server has the subscription; returns its sid.
    pub async fn subscribe(&mut self, subject: &str) -> Result<u64, String> {
        let sid = self.next_sid;
        self.next_sid += 1;
        protocol::sub(&mut self.out, subject, sid);
        self.round_trip().await?;
        Ok(sid)
    }

    /// Ends subscription `sid` and waits until the server has processed it.
    pub async fn unsubscribe(&mut self, sid: u64) -> Result<(), String> {
        protocol::unsub(&mut self.out, sid);
        self.round_trip().await
    }

    /// The next message on any subscription, waiting up to `timeout` for it.
    pub async fn next_message(&mut self, timeout: Duration) -> Result<Message, String> {
        tokio::time::timeout(timeout, async {
            loop {
                if let Some(m) = self.messages.pop_front() {
                    return Ok(m);
                }
                self.read_ops(false).await?;
            }
        })
        .await
        .map_err(|_| format!("no NATS message within {timeout:?}"))?
    }

    /// Writes what is queued and a `PING`, and reads until its `PONG`.
    async fn round_trip(&mut self) -> Result<(), String> {
        protocol::ping(&mut self.out);
        self.flush().await?;
        while !self.read_ops(true).await? {}
        Ok(())
    }

    async fn flush(&mut self) -> Result<(), String> {
        self.stream
            .write_all(&self.out)
            .await
            .map_err(|e| format!("NATS write: {e}"))?;
        self.out.clear();
        Ok(())
    }

    /// Reads once and handles every whole operation: `MSG`s are queued, `PING`s answered.
    /// Returns whether a `PONG` was among them (with `until_pong`, it stops there and leaves the
    /// rest in the buffer).
    async fn read_ops(&mut self, until_pong: bool) -> Result<bool, String> {
        Ok(self.read_ops_until(until_pong).await? > 0)
    }

    /// [`read_ops`](Self::read_ops), giving the number of `PONG`s handled.
    async fn read_ops_until(&mut self, until_pong: bool) -> Result<u64, String> {
        if protocol::parse(&self.buf)?.is_none() {
            self.read().await?;
        }
        let ponged = self.handle_buffered(until_pong)?;
        if !self.out.is_empty() {
            self.flush().await?;
        }
        Ok(ponged)
    }

    /// Handles the whole operations in the buffer (with `until_pong`, up to the first `PONG`);
    /// returns the `PONG`s among them.
    fn handle_buffered(&mut self, until_pong: bool) -> Result<u64, String> {
        let mut at = 0;
        let mut ponged = 0u64;
        while let Some((op, used)) = protocol::parse(&self.buf[at..])? {
            let base = at;
            at += used;
            match op {
                ServerOp::Msg {
                    subject,
                    sid,
                    payload,
                } => self.messages.push_back(Message {
                    subject: lossy(&self.buf[base + subject.start..base + subject.end]),
                    sid,
                    payload: self.buf[base + payload.start..base + payload.end].to_vec(),
                }),
                ServerOp::Ping => protocol::pong(&mut self.out),
                ServerOp::Pong => {
                    ponged += 1;
                    if until_pong {
                        break;
                    }
                }
                ServerOp::Err(why) => {
                    return Err(format!(
                        "NATS server: -ERR {}",
                        lossy(&self.buf[base + why.start..base + why.end])
                    ))
                }
                ServerOp::Info(_) | ServerOp::Ok => {}
            }
        }
        self.buf.drain(..at);
        Ok(ponged)
    }

    async fn read(&mut self) -> Result<(), String> {
        self.buf.reserve(4096);
        let n = self
            .stream
            .read_buf(&mut self.buf)
            .await
            .map_err(|e| format!("NATS read: {e}"))?;
        if n == 0 {
            return Err("the NATS server closed the connection".into());
        }
        Ok(())
    }
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(&b[..b.len().min(300)]).into_owned()
}

#[cfg(test)]
mod tests {
    //! Against a scripted NATS server in the test process: a listener that reads what the client
    //! writes and answers as nats-server 2.9 does.
    use super::*;
    use tokio::io::{AsyncBufReadExt, BufReader};
    use tokio::net::TcpListener;

    const INFO: &str = "INFO {\"server_id\":\"SCRIPTED\",\"version\":\"2.9.10\",\"proto\":1,\
        \"max_payload\":1048576}\r\n";

    /// Starts a one-connection server running `script` on the accepted socket.
    async fn scripted<F, Fut>(script: F) -> SocketAddr
    where
        F: FnOnce(BufReader<TcpStream>) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = ()> + Send,
    {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (socket, _) = listener.accept().await.unwrap();
            script(BufReader::new(socket)).await;
        });
        addr
    }

    async fn line(r: &mut BufReader<TcpStream>) -> String {
        let mut s = String::new();
        r.read_line(&mut s).await.unwrap();
        s
    }

    async fn send(r: &mut BufReader<TcpStream>, what: &str) {
        r.get_mut().write_all(what.as_bytes()).await.unwrap();
    }

    /// The server's side of the handshake: INFO, then CONNECT and PING read, PONG sent.
    async fn accept_handshake(r: &mut BufReader<TcpStream>) {
        send(r, INFO).await;
        let connect = line(r).await;
        assert!(connect.starts_with("CONNECT {"), "{connect:?}");
        let json: serde_json::Value = serde_json::from_str(&connect[8..]).unwrap();
        assert_eq!(json["verbose"], false);
        assert_eq!(json["pedantic"], false);
        assert_eq!(line(r).await, "PING\r\n");
        send(r, "PONG\r\n").await;
    }

    #[tokio::test]
    async fn handshakes_publishes_and_waits_for_the_pong() {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let addr = scripted(|mut r| async move {
            accept_handshake(&mut r).await;
            let head = line(&mut r).await;
            let body = line(&mut r).await;
            assert_eq!(line(&mut r).await, "PING\r\n");
            // The server pings too, before its PONG: the client must answer it.
            send(&mut r, "PING\r\nPONG\r\n").await;
            assert_eq!(line(&mut r).await, "PONG\r\n");
            tx.send((head, body)).unwrap();
        })
        .await;
        let mut c = NatsClient::connect(addr, None).await.unwrap();
        assert_eq!(c.info()["server_id"], "SCRIPTED");
        let sent = c.publish_now("bench.x.fanout").await.unwrap();
        let (head, body) = rx.await.unwrap();
        let stamp = wire::stamp(sent);
        assert_eq!(head, format!("PUB bench.x.fanout {}\r\n", stamp.len()));
        assert_eq!(body, format!("{stamp}\r\n"));
    }

    #[tokio::test]
    async fn subscribes_and_receives_messages_split_over_reads() {
        let addr = scripted(|mut r| async move {
            accept_handshake(&mut r).await;
            assert_eq!(line(&mut r).await, "SUB bench.a 1\r\n");
            assert_eq!(line(&mut r).await, "PING\r\n");
            send(&mut r, "PONG\r\nMSG bench.a 1 12\r\n{\"ts\":").await;
            tokio::time::sleep(Duration::from_millis(20)).await;
            send(&mut r, "12345}\r\nMSG bench.a 1 reply.to 2\r\nhi\r\n").await;
            assert_eq!(line(&mut r).await, "UNSUB 1\r\n");
            assert_eq!(line(&mut r).await, "PING\r\n");
            send(&mut r, "PONG\r\n").await;
        })
        .await;
        let mut c = NatsClient::connect(addr, None).await.unwrap();
        let sid = c.subscribe("bench.a").await.unwrap();
        assert_eq!(sid, 1);
        let first = c.next_message(Duration::from_secs(5)).await.unwrap();
        assert_eq!(first.subject, "bench.a");
        assert_eq!(wire::find_ts(&first.payload), Some(12345));
        let second = c.next_message(Duration::from_secs(5)).await.unwrap();
        assert_eq!(second.payload, b"hi");
        c.unsubscribe(sid).await.unwrap();
    }

    #[tokio::test]
    async fn a_server_error_is_reported() {
        let addr = scripted(|mut r| async move {
            accept_handshake(&mut r).await;
            let _ = line(&mut r).await;
            send(&mut r, "-ERR 'Maximum Subscriptions Exceeded'\r\n").await;
        })
        .await;
        let mut c = NatsClient::connect(addr, None).await.unwrap();
        let e = c.subscribe("bench.b").await.unwrap_err();
        assert!(e.contains("Maximum Subscriptions Exceeded"), "{e}");
    }

    #[tokio::test]
    async fn a_peer_that_is_not_nats_is_refused() {
        let addr = scripted(|mut r| async move {
            send(&mut r, "HTTP/1.1 400 Bad Request\r\n\r\n").await;
            tokio::time::sleep(Duration::from_millis(200)).await;
        })
        .await;
        let e = NatsClient::connect(addr, None).await.err().unwrap();
        assert!(e.contains("unknown NATS operation"), "{e}");
    }
}
