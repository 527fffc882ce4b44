//! The publishers a scenario times as load: Herald's HTTP API (one request a publish, or
//! `POST /v1/batch` for several), or, against NATS (`--peer nats`), a NATS connection writing the
//! `PUB`s and a `PING` and waiting for its `PONG`, or, when the clients speak MQTT
//! (`--transport mqtt`, `--peer mosquitto`), an MQTT connection publishing at QoS 1 and waiting
//! for the `PUBACK`, or, when the clients speak Pusher (`--transport pusher`, `--peer sockudo`),
//! Pusher's HTTP API (`POST /apps/{app_id}/events`, one signed trigger a message). All wait for
//! the server's answer before the next publish, and all send the same stamped payload
//! (`{"ts":N}`).

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::Ctx;
use crate::client::HttpClient;
use crate::mqtt::{MqttClient, MqttConfig};
use crate::nats::{protocol, NatsClient};
use crate::stats;
use crate::wire::{self, now_ns};

/// What one publisher of a run publishes: messages claimed from a counter shared by all of them.
pub struct Share {
    /// The next message number to claim.
    pub next: Arc<AtomicU64>,
    /// Messages answered or refused so far (the progress bar).
    pub done: Arc<AtomicU64>,
    /// Where to publish.
    pub channel: String,
    /// Messages in total.
    pub messages: u64,
    /// Messages per request (`--batch`).
    pub batch: u64,
    /// Messages per second across publishers, if paced.
    pub rate: Option<f64>,
    /// When the run's clock started (unix nanos).
    pub t0: u64,
    /// When to stop claiming messages.
    pub stop_at: tokio::time::Instant,
    /// Publishes kept unconfirmed (NATS only; 1 waits for every answer).
    pub window: u64,
}

/// What one publisher did.
pub struct Published {
    /// Send times of the accepted publishes.
    pub sent: Vec<u64>,
    /// Messages refused or lost with their connection.
    pub refused: u64,
    /// A sample error.
    pub sample: Option<String>,
    /// Publish round trips (request to answer, or `PUB` to `PONG`).
    pub hist: hdrhistogram::Histogram<u64>,
}

impl Share {
    /// Claims the next `count` messages; `None` once all are claimed or time is up.
    fn claim(&self, count: u64) -> Option<(u64, u64)> {
        let i = self.next.fetch_add(count, Ordering::Relaxed);
        if i >= self.messages || tokio::time::Instant::now() >= self.stop_at {
            return None;
        }
        Some((i, count.min(self.messages - i)))
    }

    /// With `--rate`, when message `i` is due (unix nanos).
    fn due_ns(&self, i: u64) -> Option<u64> {
        let r = self.rate.filter(|r| *r > 0.0)?;
        Some(self.t0 + (i as f64 / r * 1e9) as u64)
    }

    /// With `--rate`, sleeps until message `i` is due.
    async fn pace(&self, i: u64) {
        if let Some(due) = self.due_ns(i) {
            sleep_until_ns(due).await;
        }
    }
}

/// One publisher, connected on its first publish.
pub enum LoadPublisher {
    /// Pusher's HTTP API: one signed `POST /apps/{app_id}/events` a message.
    Pusher {
        /// The keep-alive connection.
        http: HttpClient,
        /// The app's credentials.
        app: crate::pusher_api::PusherApp,
    },
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
    /// An MQTT connection publishing at QoS 1.
    Mqtt {
        /// The server and credentials.
        cfg: MqttConfig,
        /// Its client identifier.
        client_id: String,
        /// The connection, once opened (dropped after an error, reopened on the next publish).
        conn: Option<MqttClient>,
    },
}

impl LoadPublisher {
    /// Publishes the messages it can claim of `share`, each (or each `--batch`) waiting for
    /// the server's answer, or for NATS with a window of several, keeping up to that many
    /// unconfirmed.
    pub async fn run(self, share: Share) -> Published {
        match self {
            LoadPublisher::Nats { addr, .. } if share.window > 1 => windowed(addr, share).await,
            mut publisher => {
                let mut out = Published {
                    sent: Vec::new(),
                    refused: 0,
                    sample: None,
                    hist: stats::histogram(),
                };
                while let Some((i, count)) = share.claim(share.batch) {
                    share.pace(i).await;
                    match publisher.publish_now(&share.channel, count).await {
                        Ok(sent) => {
                            stats::record_ns(&mut out.hist, now_ns() - sent);
                            out.sent.extend(std::iter::repeat_n(sent, count as usize));
                        }
                        Err(e) => {
                            out.refused += count;
                            out.sample.get_or_insert(e);
                        }
                    }
                    share.done.fetch_add(count, Ordering::Relaxed);
                }
                publisher.close().await;
                out
            }
        }
    }

    /// Publishes `count` messages stamped with the current time to `channel` (more than one: in
    /// one request, or one write) and waits for the server's answer; returns the send time.
    pub async fn publish_now(&mut self, channel: &str, count: u64) -> Result<u64, String> {
        match self {
            LoadPublisher::Http { http, key } if count > 1 => {
                http.publish_batch_now(channel, key, count).await
            }
            LoadPublisher::Http { http, key } => http.publish_now(channel, key).await,
            LoadPublisher::Pusher { http, app } if count == 1 => {
                http.trigger_now(app, channel).await
            }
            LoadPublisher::Pusher { .. } => {
                Err("Pusher publishers trigger one event per request (--batch 1)".into())
            }
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
            LoadPublisher::Mqtt {
                cfg,
                client_id,
                conn,
            } => {
                if conn.is_none() {
                    *conn = Some(MqttClient::connect(cfg, client_id, None).await?);
                }
                let client = conn.as_mut().expect("connected above");
                let result = client.publish_many_now(channel, count).await;
                if result.is_err() {
                    *conn = None;
                }
                result
            }
        }
    }

    /// Ends an MQTT publisher's connection with a `DISCONNECT` (so the server does not take
    /// its end for a lost connection); nothing for the others.
    pub async fn close(self) {
        if let LoadPublisher::Mqtt {
            conn: Some(client), ..
        } = self
        {
            client.disconnect().await;
        }
    }
}

impl Ctx {
    /// A publisher timed as load, on node `i % nodes`: NATS for `--peer nats`, MQTT when the
    /// clients speak it, Pusher's HTTP API when they speak Pusher and the app's secret is known,
    /// else Herald's HTTP API (which needs the API key).
    pub fn load_publisher(&self, i: usize) -> anyhow::Result<LoadPublisher> {
        if let Some(app) = self.pusher_app() {
            return Ok(LoadPublisher::Pusher {
                http: self.http_to(i),
                app: app.clone(),
            });
        }
        if self.common.is_nats() {
            return Ok(LoadPublisher::Nats {
                addr: self.target.node(i).addr,
                conn: None,
            });
        }
        if let Some(cfg) = self.mqtt_config(i) {
            return Ok(LoadPublisher::Mqtt {
                cfg,
                client_id: format!("herald-bench-pub-{}-{i}", self.run),
                conn: None,
            });
        }
        Ok(LoadPublisher::Http {
            http: self.http_to(i),
            key: self.target.require_api_key()?,
        })
    }
}

impl Ctx {
    /// The app's Pusher credentials when the clients speak Pusher and the secret is known:
    /// publishes then go through `POST /apps/{app_id}/events`.
    pub fn pusher_app(&self) -> Option<&crate::pusher_api::PusherApp> {
        self.target
            .pusher_app
            .as_ref()
            .filter(|_| self.common.transport == crate::proto::Transport::Pusher)
    }
}

/// Sleeps until the unix time `ns`.
async fn sleep_until_ns(ns: u64) {
    let wait = ns.saturating_sub(now_ns());
    if wait > 0 {
        tokio::time::sleep(Duration::from_nanos(wait)).await;
    }
}

/// A NATS publisher keeping up to `share.window` publishes unconfirmed: it writes a `PUB`+`PING`
/// pair for every message that is due (all at once unpaced; with `--rate`, each at its time)
/// while fewer are unconfirmed, and counts the `PONG`s as they come (each confirms the oldest).
/// An error ends it; what was not confirmed counts as refused.
async fn windowed(addr: SocketAddr, share: Share) -> Published {
    let mut out = Published {
        sent: Vec::new(),
        refused: 0,
        sample: None,
        hist: stats::histogram(),
    };
    let mut client = match NatsClient::connect(addr, None).await {
        Ok(c) => c,
        Err(e) => {
            out.sample = Some(e);
            refuse_the_rest(&share, &mut out, 0);
            return out;
        }
    };
    let subject = protocol::subject(&share.channel);
    let mut unconfirmed: VecDeque<u64> = VecDeque::with_capacity(share.window as usize);
    // A message claimed whose time has not come yet (paced runs).
    let mut held: Option<u64> = None;
    let mut claimed_all = false;
    loop {
        while !claimed_all && (unconfirmed.len() as u64) < share.window {
            let i = match held.take().or_else(|| share.claim(1).map(|(i, _)| i)) {
                Some(i) => i,
                None => {
                    claimed_all = true;
                    break;
                }
            };
            if share.due_ns(i).is_some_and(|due| due > now_ns()) {
                held = Some(i);
                break;
            }
            let sent = now_ns();
            client.queue_publish(&subject, wire::stamp(sent).as_bytes());
            unconfirmed.push_back(sent);
        }
        if unconfirmed.is_empty() && held.is_none() {
            return out;
        }
        let step = async {
            client.send_queued().await?;
            if unconfirmed.is_empty() {
                // Nothing to confirm: only the held message's time to wait for.
                if let Some(due) = held.and_then(|i| share.due_ns(i)) {
                    sleep_until_ns(due).await;
                }
                return Ok(0);
            }
            let wake = held.and_then(|i| share.due_ns(i));
            tokio::select! {
                r = client.read_some() => r?,
                _ = sleep_until_ns(wake.unwrap_or(0)), if wake.is_some() => {}
            }
            client.take_pongs()
        };
        match step.await {
            Ok(n) => {
                let now = now_ns();
                for sent in unconfirmed.drain(..(n as usize).min(unconfirmed.len())) {
                    stats::record_ns(&mut out.hist, now - sent);
                    out.sent.push(sent);
                    share.done.fetch_add(1, Ordering::Relaxed);
                }
            }
            Err(e) => {
                out.sample = Some(e);
                let lost = unconfirmed.len() as u64 + u64::from(held.is_some());
                refuse_the_rest(&share, &mut out, lost);
                return out;
            }
        }
    }
}

/// Counts `lost` messages and every one not claimed yet as refused, so the run ends.
fn refuse_the_rest(share: &Share, out: &mut Published, lost: u64) {
    out.refused += lost;
    share.done.fetch_add(lost, Ordering::Relaxed);
    while let Some((_, count)) = share.claim(1) {
        out.refused += count;
        share.done.fetch_add(count, Ordering::Relaxed);
    }
}
