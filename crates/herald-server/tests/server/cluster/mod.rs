//! A 3-node cluster in one test process: one testkit PostgreSQL and one Redis, and N
//! `herald_server::Server`s whose [`herald_server::ClusterSettings`] point at them (each with its
//! own data directory and port, all with the same token secret, credentials key, publisher key
//! and admin key). Tests talk to node `k` with real clients: WebSocket through
//! `herald-client`'s [`WsClient`], SSE, long-poll and HTTP.
//!
//! Submodules: [`fanout`] (publish and resume across nodes, on every transport), [`tenancy`]
//! (apps, keys, limits, presence, usage), [`push`] (device inboxes, tag and app pushes),
//! [`faults`] (Redis restarted, PostgreSQL stopped, a slow node), [`probes`] (`/readyz` and
//! `/healthz` while PostgreSQL or Redis is down), [`start`] (start errors, a
//! node joining late, nodes over TLS to Redis), [`revoke`] (revocations close connections on
//! every node), [`tokens`] (a secret rotated with an overlap, sealed in PostgreSQL),
//! [`audit`] (the audit log on PostgreSQL), [`lifecycle`] (channels vacated once in the
//! cluster, a killed node's departures reported by another), [`presence`] (presence members
//! across nodes, a killed node's members removed by another), [`pusher_users`] (Pusher's
//! `sendToUser`, `terminate_connections` and deleted credentials across nodes).

mod audit;
mod fanout;
mod faults;
mod lifecycle;
mod presence;
mod probes;
mod push;
mod pusher_users;
mod revoke;
mod start;
mod tenancy;
mod tokens;

use std::collections::VecDeque;
use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use herald_client::ws::WsClient;
use herald_server::{RunningServer, Server, ServerSettings};
use herald_testkit::{Postgres, Redis, RedisCluster};
use serde_json::{json, Value};
use tempfile::TempDir;

use crate::support::{token, API_KEY};

/// The admin key every node is configured with.
pub const ADMIN: &str = "cluster-admin-key-0123456789abcdef";
/// The credentials key every node is configured with (64 hex digits).
pub const CREDENTIALS_KEY: &str =
    "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
/// How long a test waits for something another node does (bus events, presence).
pub const DEADLINE: Duration = Duration::from_secs(10);

/// The bus's Redis: one server, one server over TLS (with the CA its certificate chains to),
/// or a Redis Cluster.
enum RedisServers {
    One(Redis),
    Tls { redis: Redis, ca_pem: String },
    Cluster(RedisCluster),
}

/// Which Redis [`Cluster::start_over`] starts.
#[derive(Clone, Copy)]
enum RedisKind {
    One,
    Tls,
    Cluster,
}

/// One PostgreSQL, one Redis (or a Redis Cluster), and the nodes over them.
pub struct Cluster {
    nodes: Vec<Option<RunningServer>>,
    dirs: Vec<TempDir>,
    /// The nodes' shared database.
    pub database: String,
    redis: RedisServers,
    /// The cluster's PostgreSQL (stop and restart it in a fault test).
    pub postgres: Postgres,
}

impl Cluster {
    /// Starts PostgreSQL, Redis and `n` nodes.
    pub async fn start(n: usize) -> Cluster {
        Cluster::start_with(n, |_, _| {}).await
    }

    /// Starts PostgreSQL, Redis and `n` nodes, each with its settings changed by
    /// `adjust(k, settings)` first.
    pub async fn start_with(n: usize, adjust: impl Fn(usize, &mut ServerSettings)) -> Cluster {
        Cluster::start_over(n, RedisKind::One, adjust).await
    }

    /// Starts PostgreSQL, a Redis Cluster of three masters and `n` nodes.
    pub async fn start_over_redis_cluster(n: usize) -> Cluster {
        Cluster::start_over(n, RedisKind::Cluster, |_, _| {}).await
    }

    /// Starts PostgreSQL, a Redis that accepts only TLS (a self-signed certificate for
    /// `localhost`) and `n` nodes reaching it at `rediss://` with its certificate as their CA.
    pub async fn start_over_tls_redis(n: usize) -> Cluster {
        Cluster::start_over(n, RedisKind::Tls, |_, _| {}).await
    }

    async fn start_over(
        n: usize,
        kind: RedisKind,
        adjust: impl Fn(usize, &mut ServerSettings),
    ) -> Cluster {
        let (postgres, redis) = tokio::task::spawn_blocking(move || {
            let postgres = Postgres::start().expect("PostgreSQL starts");
            let redis = match kind {
                RedisKind::One => RedisServers::One(Redis::start().expect("Redis starts")),
                RedisKind::Cluster => {
                    RedisServers::Cluster(RedisCluster::start(3).expect("a Redis Cluster starts"))
                }
                RedisKind::Tls => {
                    let certified =
                        rcgen::generate_simple_self_signed(vec!["localhost".to_string()])
                            .expect("a certificate");
                    let ca_pem = certified.cert.pem();
                    let key_pem = certified.key_pair.serialize_pem();
                    let redis = Redis::start_tls(&ca_pem, &key_pem).expect("Redis with TLS starts");
                    RedisServers::Tls { redis, ca_pem }
                }
            };
            (postgres, redis)
        })
        .await
        .unwrap();
        let database = postgres.create_database("herald").expect("a database");
        let mut cluster = Cluster {
            nodes: Vec::new(),
            dirs: Vec::new(),
            database,
            redis,
            postgres,
        };
        for k in 0..n {
            let dir = tempfile::tempdir().unwrap();
            let mut settings = cluster.settings(dir.path());
            adjust(k, &mut settings);
            let server = bounded("a node starts", Server::builder(settings).start())
                .await
                .expect("a node starts");
            cluster.nodes.push(Some(server));
            cluster.dirs.push(dir);
        }
        cluster
    }

    /// A node's settings: the shared store, bus and secrets, its own data directory.
    pub fn settings(&self, data: &std::path::Path) -> ServerSettings {
        let mut settings = crate::support::settings(data);
        settings.admin_key = Some(ADMIN.into());
        settings.providers.credentials_key = Some(CREDENTIALS_KEY.into());
        settings.cluster.postgres = Some(self.database.clone());
        match &self.redis {
            RedisServers::One(redis) => settings.cluster.redis = vec![redis.url()],
            RedisServers::Tls { redis, ca_pem } => {
                settings.cluster.redis = vec![redis.url()];
                settings.cluster.redis_ca_pem = Some(ca_pem.clone().into_bytes());
            }
            RedisServers::Cluster(cluster) => {
                settings.cluster.redis = cluster.urls();
                settings.cluster.redis_cluster = true;
            }
        }
        settings
    }

    /// The cluster's Redis server, to stop or restart in a fault test (not on a Redis Cluster).
    pub fn redis(&mut self) -> &mut Redis {
        match &mut self.redis {
            RedisServers::One(redis) | RedisServers::Tls { redis, .. } => redis,
            RedisServers::Cluster(_) => panic!("a single Redis server was not started"),
        }
    }

    /// Node `k` (panics if it was stopped).
    pub fn node(&self, k: usize) -> &RunningServer {
        self.nodes[k].as_ref().expect("a running node")
    }

    /// Node `k`'s HTTP address.
    pub fn addr(&self, k: usize) -> SocketAddr {
        self.node(k).http_addr()
    }

    /// Node `k`'s base URL (`http://127.0.0.1:PORT`).
    pub fn base(&self, k: usize) -> String {
        format!("http://{}", self.addr(k))
    }

    /// One request to node `k` with `key`: status and JSON body.
    pub async fn call(
        &self,
        k: usize,
        method: &str,
        path: &str,
        key: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        call(&self.base(k), method, path, key, body).await
    }

    /// Publishes `data` to `channel` on node `k` with the publisher key; panics unless
    /// stored. Answers the publish answer (`seq`, `epoch`, `id`).
    pub async fn publish(&self, k: usize, channel: &str, data: Value) -> Value {
        let path = format!("/v1/channels/{channel}/messages");
        let (status, body) = self
            .call(k, "POST", &path, API_KEY, Some(json!({ "data": data })))
            .await;
        assert_eq!(status, 200, "publish on node {k} failed: {body}");
        body
    }

    /// A WebSocket client on node `k` whose token may subscribe to `channels`.
    pub async fn ws(&self, k: usize, channels: &[&str]) -> Ws {
        Ws::connect(&self.base(k), &token(channels)).await
    }

    /// Stops node `k` (graceful shutdown).
    pub async fn stop_node(&mut self, k: usize) {
        if let Some(node) = self.nodes[k].take() {
            bounded("a node shuts down", node.shutdown())
                .await
                .expect("clean shutdown");
        }
    }

    /// Shuts every node down, then PostgreSQL and Redis (when dropped).
    pub async fn shutdown(mut self) {
        for k in 0..self.nodes.len() {
            self.stop_node(k).await;
        }
        tokio::task::spawn_blocking(move || drop(self))
            .await
            .unwrap();
    }
}

/// `fut`, or a panic naming `what` after 60 s.
pub async fn bounded<T>(what: &str, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(60), fut)
        .await
        .unwrap_or_else(|_| panic!("timed out: {what}"))
}

/// Polls `check` until it answers `Some` or [`DEADLINE`] passes (then panics naming `what`).
/// The pause between tries is only the polling rate, never what the test relies on.
pub async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        if tokio::time::Instant::now() > deadline {
            panic!("not within {DEADLINE:?}: {what}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// One request to the server at `base` with `key`: status and JSON body.
pub async fn call(
    base: &str,
    method: &str,
    path: &str,
    key: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
    let mut request = reqwest::Client::new()
        .request(method, format!("{base}{path}"))
        .bearer_auth(key)
        .timeout(Duration::from_secs(30));
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.expect("an HTTP answer");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// A WebSocket client handing frames to the tests as JSON (over `herald-client`'s
/// [`WsClient`]), with requests by name and id.
pub struct Ws {
    client: WsClient,
    unread: VecDeque<Value>,
}

impl Ws {
    /// Connects to the server at `base` and sends `connect` with `token`.
    pub async fn connect(base: &str, token: &str) -> Ws {
        let client = bounded("ws connect", WsClient::connect(base, Some(token)))
            .await
            .expect("ws connect");
        Ws {
            client,
            unread: VecDeque::new(),
        }
    }

    /// Opens `/v1/ws?token=TOKEN` (a device token opens its inbox at once).
    pub async fn open_with_token(base: &str, token: &str) -> Ws {
        let url = format!("{}/v1/ws?token={token}", base.replace("http://", "ws://"));
        let client = bounded("ws open", WsClient::open_url(&url))
            .await
            .expect("ws open");
        Ws {
            client,
            unread: VecDeque::new(),
        }
    }

    /// The next JSON frame; `None` once the connection closed. Panics after 20 s.
    pub async fn recv(&mut self) -> Option<Value> {
        if let Some(frame) = self.unread.pop_front() {
            return Some(frame);
        }
        self.read().await
    }

    async fn read(&mut self) -> Option<Value> {
        let next = tokio::time::timeout(Duration::from_secs(20), self.client.next_frame())
            .await
            .expect("timed out waiting for a frame");
        next.ok()
            .flatten()
            .map(|frame| serde_json::from_str(frame.text()).unwrap())
    }

    /// Sends `{"id": N, name: body}` and answers the frame with that id (other frames are
    /// kept for [`Ws::recv`]).
    pub async fn request(&mut self, name: &str, body: Value) -> Value {
        let id = self.client.allocate_id();
        let text = json!({ "id": id, name: body }).to_string();
        self.client.send_text(text).await.expect("sent");
        loop {
            let frame = self.read().await.expect("connection closed before reply");
            if frame["id"] == id {
                return frame;
            }
            self.unread.push_back(frame);
        }
    }

    /// Subscribes (resuming after `since`, if given); answers the `subscribe` reply.
    pub async fn subscribe(&mut self, channel: &str, since: Option<Value>) -> Value {
        let mut body = json!({ "channel": channel });
        if let Some(since) = since {
            body["since"] = since;
        }
        let reply = self.request("subscribe", body).await;
        assert!(reply.get("subscribe").is_some(), "{reply}");
        reply["subscribe"].clone()
    }

    /// The next `n` message frames' `message` objects.
    pub async fn messages(&mut self, n: usize) -> Vec<Value> {
        let mut out = Vec::new();
        while out.len() < n {
            let frame = self.recv().await.expect("connection closed");
            if let Some(message) = frame.get("message") {
                out.push(message.clone());
            }
        }
        out
    }

    /// The seqs of the next `n` messages.
    pub async fn message_seqs(&mut self, n: usize) -> Vec<u64> {
        self.messages(n)
            .await
            .iter()
            .map(|m| m["seq"].as_u64().unwrap())
            .collect()
    }
}

/// `1..=n` as a vector, the seqs a subscriber of a fresh channel expects.
pub fn one_to(n: u64) -> Vec<u64> {
    (1..=n).collect()
}
