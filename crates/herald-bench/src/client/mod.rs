//! Client connections of a worker process: one task per WebSocket (`ws`), SSE (`sse`),
//! long-poll (`poll`), NATS (`nats`, `--peer nats`), MQTT (`mqtt`, also `--peer mosquitto`) or
//! Pusher (`pusher`) subscriber, and a keep-alive HTTP client for publishing (`http_client`).
//! Every connection reads into one buffer, counts what it receives and records latencies in
//! batches (one lock per socket read). This module holds what they share: connecting, the
//! readiness handshake with the worker, device inbox counting, the channels of a plan.
//!
//! They are hand-written over raw sockets rather than built on `herald-client` so that one
//! worker process can hold 15,000 connections with a few KiB each (see [`crate::wire`]).

pub mod failover;
mod http;
mod http_client;
mod mqtt;
mod nats;
mod poll;
mod pusher;
mod sse;
mod ws;

use http::{open_http, query, read_head, read_response, HttpOpening};
pub use http_client::HttpClient;

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::{mpsc, watch, OwnedSemaphorePermit};

use crate::proto::{Action, Plan, Transport};
use crate::wire::now_ns;
use crate::worker::Shared;

/// A fire as connections see it: a sequence number (so repeats are seen) and the action.
#[derive(Debug, Clone)]
pub struct Fire {
    /// Increases with every fire.
    pub seq: u64,
    /// What to do.
    pub action: Action,
}

/// Opens a TCP connection, bound to `source` first when given (and of the right family), with a
/// receive buffer of `rcvbuf` bytes when given (`--rcvbuf`; the kernel's autotuning otherwise).
pub async fn connect(
    addr: SocketAddr,
    source: Option<IpAddr>,
    rcvbuf: Option<u32>,
) -> io::Result<TcpStream> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    if let Some(bytes) = rcvbuf {
        // Set before connecting, so the window offered in the handshake already fits it.
        socket.set_recv_buffer_size(bytes)?;
    }
    if let Some(ip) = source {
        if ip.is_ipv4() == addr.is_ipv4() {
            socket.bind(SocketAddr::new(ip, 0))?;
        }
    }
    let stream = socket.connect(addr).await?;
    stream.set_nodelay(true)?;
    // Close with a reset: no TIME_WAIT left behind. Tens of thousands of TIME_WAIT sockets
    // from one run make the kernel's search for a free port slow in the next run, which would
    // show up as a slow server.
    stream.set_zero_linger()?;
    Ok(stream)
}

/// What a connection received since its last report, applied to the round under one lock.
#[derive(Debug, Default)]
pub struct Tally {
    /// Send times of delivered messages.
    pub sent: Vec<u64>,
    /// Acknowledged subscriptions (for a device connection: 1 once its inbox is caught up).
    pub acks: u64,
    /// When the acknowledged subscriptions were sent.
    pub ack_sent_ns: u64,
    /// Acknowledged publishes.
    pub published: u64,
    /// Error replies.
    pub errors: Vec<String>,
}

impl Tally {
    /// Whether nothing was received.
    pub fn is_empty(&self) -> bool {
        self.sent.is_empty() && self.acks == 0 && self.published == 0 && self.errors.is_empty()
    }
}

/// What a device connection ([`Plan::Inbox`]) has received of its inbox.
struct Inbox {
    /// Messages waiting for the device.
    pending: u64,
    /// Messages received so far.
    got: u64,
    /// When the connection asked for its inbox (unix nanos).
    since_ns: u64,
    /// Whether it acknowledges every message (see [`Plan::Inbox`]).
    ack: bool,
    /// Logs of the inbox opened so far (`$app`, `$device`).
    opened: u8,
    /// Send time of the last message acknowledged (unix nanos), to time the `ack` answers.
    acked_sent_ns: u64,
}

impl Inbox {
    /// The inbox count of a connection opened with `plan`, if it is a device connection.
    fn of(plan: &Plan) -> Option<Inbox> {
        match plan {
            Plan::Inbox { pending, ack, .. } => Some(Inbox {
                pending: *pending,
                got: 0,
                since_ns: 0,
                ack: *ack,
                opened: 0,
                acked_sent_ns: 0,
            }),
            _ => None,
        }
    }

    /// Counts one inbox message; the one that completes the pending ones counts as an
    /// acknowledgement, timed from the inbox request (not when the connection acks).
    fn count(&mut self, tally: &mut Tally) {
        self.got += 1;
        if !self.ack && self.got == self.pending {
            tally.acks += 1;
            tally.ack_sent_ns = self.since_ns;
        }
    }

    /// Counts one opened log; with `ack`, both open count as one acknowledgement.
    fn opened(&mut self, tally: &mut Tally) {
        self.opened += 1;
        if self.ack && self.opened == 2 {
            tally.acks += 1;
            tally.ack_sent_ns = self.since_ns;
        }
    }

    /// Counts the server's answer to an `ack`, timed from the acknowledged message's send time.
    fn acked(&mut self, tally: &mut Tally) {
        if self.ack {
            tally.acks += 1;
            tally.ack_sent_ns = self.acked_sent_ns;
        }
    }
}

/// For a device connection: it is ready once connected; waits for the next fire, then notes
/// the time the inbox is asked for. Other connections go on at once.
async fn inbox_start(
    sh: &Shared,
    ready: &Ready,
    fire: &mut watch::Receiver<Option<Fire>>,
    inbox: &mut Option<Inbox>,
) -> Result<(), String> {
    if let Some(i) = inbox {
        ready.ok(sh);
        fire.changed()
            .await
            .map_err(|_| "worker stopping".to_string())?;
        fire.borrow_and_update();
        i.since_ns = now_ns();
    }
    Ok(())
}

/// The token connection `n` presents: a device token minted for `{prefix}{n}` with the token
/// secret for [`Plan::Inbox`], the worker's client token otherwise.
fn connection_token(sh: &Shared, n: u64, plan: &Plan) -> Result<Option<String>, String> {
    let Plan::Inbox { prefix, .. } = plan else {
        return Ok(sh.cfg.token.clone());
    };
    let secret = sh
        .cfg
        .token_secret
        .as_ref()
        .ok_or("device connections need the server's token secret (--token-secret)")?;
    let device = format!("{prefix}{n}");
    let claims = herald_proto::token::ClientClaims {
        sub: device.clone(),
        exp: None,
        channels: Vec::new(),
        publish: Vec::new(),
        device: Some(device),
        ..Default::default()
    };
    Ok(Some(herald_proto::token::mint(secret.as_bytes(), &claims)))
}

/// Where a connection reports that it is ready (or why not), and the handshake slot it holds.
type ReadySlot = (
    mpsc::UnboundedSender<Result<(), String>>,
    OwnedSemaphorePermit,
);

/// Tells the `open` that started a connection whether it became ready, exactly once.
pub struct Ready {
    inner: std::sync::Mutex<Option<ReadySlot>>,
}

impl Ready {
    /// Wraps the sender and the handshake permit.
    pub fn new(
        tx: mpsc::UnboundedSender<Result<(), String>>,
        permit: OwnedSemaphorePermit,
    ) -> Self {
        Ready {
            inner: std::sync::Mutex::new(Some((tx, permit))),
        }
    }

    fn take(&self) -> Option<ReadySlot> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    fn pending(&self) -> bool {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
    }

    /// Reports the connection ready (once).
    pub fn ok(&self, sh: &Shared) {
        if let Some((tx, _permit)) = self.take() {
            sh.alive.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let _ = tx.send(Ok(()));
        }
    }

    fn fail(&self, e: String) {
        if let Some((tx, _permit)) = self.take() {
            let _ = tx.send(Err(e));
        }
    }
}

/// Longest a connection may take to become ready.
const OPEN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(20);

/// Runs connection number `n` until it fails or the worker exits.
pub async fn run(sh: Arc<Shared>, n: u64, plan: Plan, ready: Ready) {
    let fire = sh.fire.subscribe();
    let conn = async {
        if let Plan::Failover { .. } = plan {
            return failover::failover(&sh, n, &plan, &ready, fire).await;
        }
        match sh.cfg.transport {
            Transport::Ws => ws::ws(&sh, n, &plan, &ready, fire).await,
            Transport::Sse => sse::sse(&sh, n, &plan, &ready, fire).await,
            Transport::Poll => poll::poll(&sh, n, &plan, &ready, fire).await,
            Transport::Meteor => crate::meteor::deacon(&sh, n, &plan, &ready).await,
            Transport::Nats => nats::nats(&sh, n, &plan, &ready, fire).await,
            Transport::Mqtt => mqtt::mqtt(&sh, n, &plan, &ready, fire).await,
            Transport::Pusher => pusher::pusher(&sh, n, &plan, &ready, fire).await,
        }
    };
    tokio::pin!(conn);
    let deadline = tokio::time::sleep(OPEN_TIMEOUT);
    tokio::pin!(deadline);
    let result = loop {
        tokio::select! {
            r = &mut conn => break r,
            _ = &mut deadline, if ready.pending() => {
                if ready.pending() {
                    break Err("timed out before it was ready".to_string());
                }
            }
        }
    };
    let why = match result {
        Ok(()) => return,
        Err(e) => e,
    };
    if ready.pending() {
        ready.fail(why);
    } else {
        sh.lost(why);
    }
}

/// The channels connection `n` subscribes to under `plan`.
pub fn channel_list(plan: &Plan, n: u64) -> Vec<String> {
    match plan {
        Plan::Shared { channel } => vec![channel.clone()],
        Plan::Own { prefix } => vec![format!("{prefix}{n}")],
        Plan::Set { prefix, count } => (0..*count).map(|j| format!("{prefix}{j}")).collect(),
        Plan::Connect | Plan::Inbox { .. } | Plan::Failover { .. } => Vec::new(),
    }
}

fn action_channels(action: &Action, n: u64) -> Vec<String> {
    match action {
        Action::Subscribe {
            prefix,
            subjects,
            distinct: true,
            ..
        } => (0..*subjects).map(|j| format!("{prefix}{n}/{j}")).collect(),
        Action::Subscribe {
            prefix, subjects, ..
        } => (0..*subjects).map(|j| format!("{prefix}{j}")).collect(),
        _ => Vec::new(),
    }
}

fn err(what: &str) -> impl Fn(io::Error) -> String + '_ {
    move |e| format!("{what}: {e}")
}

fn reserve(buf: &mut Vec<u8>) {
    if buf.capacity() - buf.len() < 4096 {
        buf.reserve(16 * 1024);
    }
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(&b[..b.len().min(300)]).into_owned()
}

/// Waits for a `subscribe` fire; returns its channels for connection `n`.
async fn wait_subscribe(
    fire: &mut watch::Receiver<Option<Fire>>,
    n: u64,
) -> Result<(Vec<String>, u64), String> {
    loop {
        fire.changed()
            .await
            .map_err(|_| "worker stopping".to_string())?;
        let action = fire.borrow_and_update().clone().map(|f| f.action);
        if let Some(a @ Action::Subscribe { .. }) = action {
            return Ok((action_channels(&a, n), now_ns()));
        }
    }
}
