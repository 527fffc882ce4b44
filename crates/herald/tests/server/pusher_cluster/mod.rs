//! The Pusher protocol in a cluster (issue 35): two `herald serve` nodes over one testkit
//! PostgreSQL and one Redis, pusher-js clients (`tests/pusher/client.mjs`) on both and Pusher's
//! server SDKs (`tests/pusher/trigger.mjs`, the webhook receivers) against either.
//!
//! [`members`]: presence members on both nodes see each other (one member per user id however
//! many nodes hold its connections, `member_added`/`member_removed` across nodes), the HTTP
//! API's users, counts and channel list answer the cluster's from either node (a channel
//! occupied only on the other node listed, until vacated everywhere), client events reach the
//! other node's members and not their sender, and cache channels answer a subscriber on one
//! node with what was triggered through the other (or `pusher:cache_miss`).
//! [`webhooks`]: Pusher-format webhooks are told once for the cluster (`channel_occupied` when
//! the first subscriber arrives anywhere, `channel_vacated` when the last leaves everywhere,
//! `member_added`/`member_removed` once per user, `client_event` once) with the cluster's
//! `subscription_count`.

mod members;
mod webhooks;

use std::time::Duration;

use serde_json::Value;

use crate::pusher_api::{create, run, trigger, Credentials, Sdk};
use crate::support::cluster::StoreAndBus;
use crate::support::{Server, API_KEY};

/// How long a wait for something the other node does may take.
const WAIT: Duration = Duration::from_secs(30);

/// Two nodes (`a`, `b`) over one PostgreSQL and one Redis, and the default app's Pusher
/// credentials (created through node A).
pub(crate) struct Nodes {
    pub(crate) a: Server,
    pub(crate) b: Server,
    pub(crate) creds: Credentials,
    // Dropped after the nodes (fields drop in order).
    _shared: StoreAndBus,
}

impl Nodes {
    /// Starts PostgreSQL, Redis and the two nodes, which reach loopback webhook receivers with
    /// quick batches and `subscription_count` intervals.
    pub(crate) async fn start() -> Nodes {
        let shared = StoreAndBus::start().await;
        let a = node(&shared).await;
        let b = node(&shared).await;
        let creds = create(&a, "default", API_KEY, None).await;
        Nodes {
            a,
            b,
            creds,
            _shared: shared,
        }
    }

    /// Triggers `event` with `data` (JSON text) on `channel` through `s`'s Pusher HTTP API
    /// with the Node SDK; panics unless answered 200.
    pub(crate) async fn trigger(&self, s: &Server, channel: &str, event: &str, data: &str) {
        let (status, body) = run(Sdk::Node, s, &self.creds, trigger(&[channel], event, data)).await;
        assert_eq!(status, 200, "{body}");
    }

    /// `GET /apps/{id}{path}` with `params` through `s` with the Node SDK: the status and the
    /// JSON body (or the refusal's text as a string).
    pub(crate) async fn get(&self, s: &Server, path: &str, params: Value) -> (u16, Value) {
        let order = serde_json::json!({ "get": { "path": path, "params": params } });
        let (status, body) = run(Sdk::Node, s, &self.creds, order).await;
        (
            status,
            serde_json::from_str(&body).unwrap_or(Value::String(body)),
        )
    }

    /// Shuts the nodes down, then PostgreSQL and Redis (off the runtime: they wait for their
    /// processes).
    pub(crate) async fn shutdown(self) {
        tokio::task::spawn_blocking(move || drop(self))
            .await
            .unwrap();
    }
}

/// A node over the shared store and bus.
async fn node(shared: &StoreAndBus) -> Server {
    Server::builder()
        .config(
            "[hooks]\nbatch_delay = \"100ms\"\nrequest_timeout = \"5s\"\n\
             subscription_count_interval = \"300ms\"\n",
        )
        .arg("--outbound-allow")
        .arg("127.0.0.0/8")
        .in_cluster(shared)
        .start()
        .await
}

/// Polls `check` until it answers `Some` or [`WAIT`] passes (then panics naming `what` and the
/// last answer). The pause between tries is only the polling rate.
pub(crate) async fn eventually<T: std::fmt::Debug, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, T>>,
{
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        match check().await {
            Ok(value) => return value,
            Err(last) if tokio::time::Instant::now() > deadline => {
                panic!("not within {WAIT:?}: {what}; last {last:?}")
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}
