//! The soak's steady load: publishers at a fixed rate over HTTP, WebSocket subscribers that
//! disconnect and reconnect (resuming after the last message they got), and device pushes at a
//! fixed rate. Every task adds what it did to the current interval's [`Tally`], which the
//! sampler takes every interval.

use std::sync::Arc;
use std::time::Duration;

use hdrhistogram::Histogram;
use herald_client::ws::WsClient;
use herald_proto::command::Since;
use rand::Rng;
use shared::Shared;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;

use crate::client::HttpClient;
use crate::stats;
use crate::wire::{self, find_ts, now_ns};

/// What the load did during one interval.
pub struct Tally {
    /// Publishes the server stored.
    pub publishes: u64,
    /// Publish request to answer.
    pub publish_latency: Histogram<u64>,
    /// Messages subscribers received.
    pub deliveries: u64,
    /// Publish (send time) to a subscriber's receipt.
    pub delivery_latency: Histogram<u64>,
    /// Subscriber connections opened again after their planned disconnect.
    pub reconnects: u64,
    /// Device pushes the server accepted.
    pub pushes: u64,
    /// Failed publishes, pushes and subscriber connections.
    pub errors: u64,
    /// The first error of the interval, for the report.
    pub sample: Option<String>,
}

impl Default for Tally {
    fn default() -> Self {
        Tally {
            publishes: 0,
            publish_latency: stats::histogram(),
            deliveries: 0,
            delivery_latency: stats::histogram(),
            reconnects: 0,
            pushes: 0,
            errors: 0,
            sample: None,
        }
    }
}

impl Tally {
    fn error(&mut self, what: String) {
        self.errors += 1;
        if self.sample.is_none() {
            self.sample = Some(what);
        }
    }
}

/// The interval's tally, shared by the load tasks and the sampler.
mod shared {
    use std::sync::Mutex;

    use super::Tally;

    /// A [`Tally`] behind a lock held only to add a figure or to take the whole.
    #[derive(Default)]
    pub struct Shared(Mutex<Tally>);

    impl Shared {
        /// Adds to the current tally.
        pub fn add(&self, change: impl FnOnce(&mut Tally)) {
            change(&mut self.0.lock().unwrap_or_else(|e| e.into_inner()));
        }

        /// Takes the current tally, leaving an empty one.
        pub fn take(&self) -> Tally {
            std::mem::take(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()))
        }
    }
}

/// Where the load goes and how much of it.
pub struct Plan {
    /// The server's base URL (`http://HOST:PORT`), for WebSocket subscribers.
    pub url: String,
    /// Address and `Host` of the server, for the HTTP clients.
    pub addr: std::net::SocketAddr,
    /// `Host` header value.
    pub host: String,
    /// Publisher API key.
    pub api_key: String,
    /// A client token that may subscribe to every channel.
    pub token: String,
    /// Channel names.
    pub channels: Vec<String>,
    /// Publishing connections and their total rate.
    pub publishers: u64,
    /// Messages per second, all publishers together.
    pub rate: f64,
    /// Subscribers.
    pub subscribers: u64,
    /// Mean connection life of a subscriber.
    pub churn: Duration,
    /// Device ids that receive pushes.
    pub devices: Vec<String>,
    /// Pushes per second.
    pub push_rate: f64,
}

/// The running load; stopped by [`Load::stop`] (or when dropped).
pub struct Load {
    /// The current interval's figures.
    pub tally: Arc<Shared>,
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl Load {
    /// Starts every task of `plan`.
    pub fn start(plan: Plan) -> Load {
        let plan = Arc::new(plan);
        let tally = Arc::new(Shared::default());
        let (stop, stopped) = watch::channel(false);
        let mut tasks = Vec::new();
        let publishers = plan.publishers.max(1);
        for p in 0..publishers {
            let period = Duration::from_secs_f64(publishers as f64 / plan.rate.max(0.001));
            let (plan, tally, stopped) = (plan.clone(), tally.clone(), stopped.clone());
            tasks.push(tokio::spawn(publisher(plan, tally, p, period, stopped)));
        }
        for s in 0..plan.subscribers {
            let (plan, tally, stopped) = (plan.clone(), tally.clone(), stopped.clone());
            tasks.push(tokio::spawn(subscriber(plan, tally, s, stopped)));
        }
        if plan.push_rate > 0.0 && !plan.devices.is_empty() {
            let period = Duration::from_secs_f64(1.0 / plan.push_rate);
            tasks.push(tokio::spawn(pusher(plan, tally.clone(), period, stopped)));
        }
        Load { tally, stop, tasks }
    }

    /// Stops every task and waits for them.
    pub async fn stop(mut self) {
        let _ = self.stop.send(true);
        for task in std::mem::take(&mut self.tasks) {
            let _ = tokio::time::timeout(Duration::from_secs(5), task).await;
        }
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// A ticker at `period` that skips ticks it missed (a slow answer delays, never bursts).
fn ticker(period: Duration) -> tokio::time::Interval {
    let mut ticks = tokio::time::interval(period.max(Duration::from_micros(100)));
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    ticks
}

/// Publishes one stamped message every `period`, to the channels in turn.
async fn publisher(
    plan: Arc<Plan>,
    tally: Arc<Shared>,
    index: u64,
    period: Duration,
    mut stopped: watch::Receiver<bool>,
) {
    let mut http = HttpClient::new(plan.addr, &plan.host, None);
    let mut ticks = ticker(period);
    let channels = plan.channels.len().max(1) as u64;
    for n in index.. {
        tokio::select! {
            _ = ticks.tick() => {}
            _ = stopped.changed() => return,
        }
        let channel = &plan.channels[((n * plan.publishers.max(1) + index) % channels) as usize];
        let started = now_ns();
        let result = http.publish_now(channel, &plan.api_key).await;
        let took = now_ns().saturating_sub(started);
        tally.add(|t| match result {
            Ok(_) => {
                t.publishes += 1;
                stats::record_ns(&mut t.publish_latency, took);
            }
            Err(e) => t.error(format!("publish: {e}")),
        });
    }
}

/// Sends one push to a device every `period`, to the devices in turn.
async fn pusher(
    plan: Arc<Plan>,
    tally: Arc<Shared>,
    period: Duration,
    mut stopped: watch::Receiver<bool>,
) {
    let mut http = HttpClient::new(plan.addr, &plan.host, None);
    let mut ticks = ticker(period);
    for n in 0.. {
        tokio::select! {
            _ = ticks.tick() => {}
            _ = stopped.changed() => return,
        }
        let device = &plan.devices[n % plan.devices.len()];
        let body = format!(
            "{{\"target\":{{\"device\":\"{device}\"}},\"data\":{},\"ttl\":3600}}",
            wire::stamp(now_ns())
        );
        let result = http.post("/v1/push", &plan.api_key, body.as_bytes()).await;
        tally.add(|t| match result {
            Ok((202, _)) => t.pushes += 1,
            Ok((status, answer)) => t.error(format!(
                "push: HTTP {status} {}",
                String::from_utf8_lossy(&answer[..answer.len().min(200)])
            )),
            Err(e) => t.error(format!("push: {e}")),
        });
    }
}

/// One subscriber: connects, subscribes (resuming after the last message it got), receives for
/// a random part of the churn period, disconnects, and again, until stopped.
async fn subscriber(
    plan: Arc<Plan>,
    tally: Arc<Shared>,
    index: u64,
    mut stopped: watch::Receiver<bool>,
) {
    let channel = plan.channels[(index % plan.channels.len().max(1) as u64) as usize].clone();
    let mut since: Option<Since> = None;
    let mut first = true;
    loop {
        let life = plan.churn.mul_f64(rand::thread_rng().gen_range(0.5..1.5));
        let session = session(&plan, &tally, &channel, &mut since, life);
        tokio::select! {
            result = session => {
                if let Err(e) = result {
                    tally.add(|t| t.error(format!("subscriber: {e}")));
                    // Do not hammer a server that refuses: wait a moment before trying again.
                    tokio::time::sleep(Duration::from_millis(500)).await;
                } else if !first {
                    tally.add(|t| t.reconnects += 1);
                }
            }
            _ = stopped.changed() => return,
        }
        first = false;
    }
}

/// One connection of a subscriber, for `life`; `since` follows the messages received.
async fn session(
    plan: &Plan,
    tally: &Shared,
    channel: &str,
    since: &mut Option<Since>,
    life: Duration,
) -> Result<(), String> {
    let mut ws = WsClient::connect(&plan.url, Some(&plan.token))
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let subscribed = ws
        .subscribe(channel, since.clone())
        .await
        .map_err(|e| format!("subscribe: {e}"))?;
    if since.is_none() {
        *since = Some(Since {
            seq: subscribed.seq,
            epoch: Some(subscribed.epoch.clone()),
        });
    }
    let until = tokio::time::Instant::now() + life;
    loop {
        let next = tokio::time::timeout_at(until, ws.next_message()).await;
        let message = match next {
            Err(_) => break,
            Ok(Ok(Some(message))) => message,
            Ok(Ok(None)) => return Err("the server closed the connection".into()),
            Ok(Err(e)) => return Err(e.to_string()),
        };
        let received = now_ns();
        *since = Some(Since {
            seq: message.seq,
            epoch: Some(message.epoch.clone()),
        });
        let sent = find_ts(message.data.get().as_bytes());
        tally.add(|t| {
            t.deliveries += 1;
            if let Some(sent) = sent {
                stats::record_ns(&mut t.delivery_latency, received.saturating_sub(sent));
            }
        });
    }
    ws.close().await;
    Ok(())
}
