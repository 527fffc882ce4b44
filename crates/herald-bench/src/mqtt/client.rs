//! A minimal MQTT client over one TCP connection, for the publishers of an MQTT run: `CONNECT`
//! (Clean Start) and its `CONNACK`, then publishes at QoS 1, each confirmed by its `PUBACK`. The worker's
//! subscriber connections ([`crate::client`]) parse the same packets themselves, with one buffer
//! per connection.

use std::net::IpAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::packet::{self, Connect, ServerPacket};
use super::{MqttConfig, KEEP_ALIVE_SECS};
use crate::wire::{self, now_ns};

/// Longest wait for the server's `CONNACK`.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// One MQTT connection that publishes.
pub struct MqttClient {
    stream: TcpStream,
    version: packet::Version,
    /// Bytes read and not parsed yet.
    buf: Vec<u8>,
    /// Packets to write.
    out: Vec<u8>,
    /// The last packet identifier used.
    last_id: u16,
}

impl MqttClient {
    /// Connects to `cfg.addr` (from `source` when given) as `client_id` and waits for the
    /// `CONNACK` that accepts it.
    pub async fn connect(
        cfg: &MqttConfig,
        client_id: &str,
        source: Option<IpAddr>,
    ) -> Result<MqttClient, String> {
        let addr = cfg.addr;
        let stream = crate::client::connect(addr, source, None)
            .await
            .map_err(|e| format!("MQTT connect to {addr}: {e}"))?;
        let mut client = MqttClient {
            stream,
            version: cfg.version,
            buf: Vec::with_capacity(4096),
            out: Vec::with_capacity(1024),
            last_id: 0,
        };
        packet::connect(
            &mut client.out,
            cfg.version,
            &Connect {
                client_id,
                username: cfg.username.as_deref(),
                password: cfg.password.as_deref(),
                keep_alive: KEEP_ALIVE_SECS,
                session_expiry: None,
            },
        );
        client.flush().await?;
        let code = tokio::time::timeout(HANDSHAKE_TIMEOUT, async {
            loop {
                if let Some(ServerPacket::ConnAck { code }) = client.next_packet().await? {
                    return Ok::<u8, String>(code);
                }
            }
        })
        .await
        .map_err(|_| format!("MQTT server {addr} sent no CONNACK within 10 s"))??;
        if code != 0 {
            return Err(format!(
                "MQTT server {addr} refused the connection: CONNACK {code:#04x} ({})",
                packet::code_name(code)
            ));
        }
        Ok(client)
    }

    /// Publishes `count` messages stamped with the current time to `topic` at QoS 1 in one
    /// write and waits for every `PUBACK`. Returns the send time.
    pub async fn publish_many_now(&mut self, topic: &str, count: u64) -> Result<u64, String> {
        let sent = now_ns();
        let payload = wire::stamp(sent);
        for _ in 0..count {
            self.last_id = self.last_id.checked_add(1).unwrap_or(1);
            packet::publish(
                &mut self.out,
                self.version,
                topic,
                1,
                self.last_id,
                payload.as_bytes(),
            );
        }
        self.flush().await?;
        let mut acked = 0;
        while acked < count {
            match self.next_packet().await? {
                // 0x10: no matching subscribers, still accepted.
                Some(ServerPacket::PubAck { code: 0 | 0x10, .. }) => acked += 1,
                Some(ServerPacket::PubAck { code, .. }) => {
                    return Err(format!(
                        "PUBACK {code:#04x} ({}): the publish was refused",
                        packet::code_name(code)
                    ))
                }
                Some(ServerPacket::Disconnect { code }) => {
                    return Err(format!(
                        "MQTT server disconnected the publisher: {code:#04x} ({})",
                        packet::code_name(code)
                    ))
                }
                _ => {}
            }
        }
        Ok(sent)
    }

    /// Sends a `DISCONNECT` (errors ignored: the connection is being dropped).
    pub async fn disconnect(mut self) {
        packet::disconnect(&mut self.out);
        let _ = self.flush().await;
    }

    async fn flush(&mut self) -> Result<(), String> {
        self.stream
            .write_all(&self.out)
            .await
            .map_err(|e| format!("MQTT write: {e}"))?;
        self.out.clear();
        Ok(())
    }

    /// The next whole packet, reading as needed; `None` for a packet the publisher ignores.
    async fn next_packet(&mut self) -> Result<Option<ServerPacket>, String> {
        loop {
            if let Some((p, used)) = packet::parse(&self.buf, self.version)? {
                self.buf.drain(..used);
                return Ok(match p {
                    ServerPacket::Publish { .. } | ServerPacket::Other(_) => None,
                    p => Some(p),
                });
            }
            if self.buf.capacity() - self.buf.len() < 1024 {
                self.buf.reserve(4096);
            }
            let n = self
                .stream
                .read_buf(&mut self.buf)
                .await
                .map_err(|e| format!("MQTT read: {e}"))?;
            if n == 0 {
                return Err("connection closed by the MQTT server".into());
            }
        }
    }
}
