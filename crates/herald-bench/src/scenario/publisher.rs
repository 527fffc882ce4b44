//! The publishers a scenario times as load: Herald's HTTP API (one request a publish, or
//! `POST /v1/batch` for several), or, against NATS (`--peer nats`), a NATS connection writing the
//! `PUB`s and a `PING` and waiting for its `PONG`. Both wait for the server's answer before the
//! next publish, and both send the same stamped payload (`{"ts":N}`).

use std::net::SocketAddr;

use super::Ctx;
use crate::client::HttpClient;
use crate::nats::{protocol, NatsClient};

/// One publisher, connected on its first publish.
pub enum LoadPublisher {
    /// Herald's publisher API with its key.
    Http {
        /// The keep-alive connection.
        http: HttpClient,
        /// The publisher API key.
        key: String,
    },
    /// A NATS connection.
    Nats {
        /// The server.
        addr: SocketAddr,
        /// The connection, once opened (dropped after an error, reopened on the next publish).
        conn: Option<NatsClient>,
    },
}

impl LoadPublisher {
    /// Publishes `count` messages stamped with the current time to `channel` (more than one: in
    /// one request, or one write) and waits for the server's answer; returns the send time.
    pub async fn publish_now(&mut self, channel: &str, count: u64) -> Result<u64, String> {
        match self {
            LoadPublisher::Http { http, key } if count > 1 => {
                http.publish_batch_now(channel, key, count).await
            }
            LoadPublisher::Http { http, key } => http.publish_now(channel, key).await,
            LoadPublisher::Nats { addr, conn } => {
                if conn.is_none() {
                    *conn = Some(NatsClient::connect(*addr, None).await?);
                }
                let client = conn.as_mut().expect("connected above");
                let result = client
                    .publish_many_now(&protocol::subject(channel), count)
                    .await;
                if result.is_err() {
                    *conn = None;
                }
                result
            }
        }
    }
}

impl Ctx {
    /// A publisher timed as load, on node `i % nodes`: NATS for `--peer nats`, else Herald's
    /// HTTP API (which needs the API key).
    pub fn load_publisher(&self, i: usize) -> anyhow::Result<LoadPublisher> {
        if self.common.is_nats() {
            return Ok(LoadPublisher::Nats {
                addr: self.target.node(i).addr,
                conn: None,
            });
        }
        Ok(LoadPublisher::Http {
            http: self.http_to(i),
            key: self.target.require_api_key()?,
        })
    }
}
