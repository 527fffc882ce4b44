//! The churn of `herald bench hooks`: N clients, each with a token of its own (`sub` =
//! `{user_prefix}{i}`), each round connect over WebSocket, subscribe to their own channel, wait
//! for the acknowledgement and disconnect with a close frame. Every client's round runs before
//! the next round starts, at most `concurrency` clients at a time, from several 127.0.0.x source
//! addresses. The clients run in the bench process: each holds one socket only while its cycle
//! runs, so the process holds at most `concurrency` of them (well under its 20,000 files).
//! What each client did is counted, to compute the events the server must send.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use hdrhistogram::Histogram;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::stats;
use crate::wire::{self, now_ns, ServerText};

/// Source addresses the clients spread over (127.0.2.2 ...), for loopback targets.
const SOURCES: usize = 16;

/// Longest one cycle (connect, subscribe, close) may take.
const CYCLE_TIMEOUT: Duration = Duration::from_secs(30);

/// How the clients connect.
#[derive(Clone)]
pub struct Plan {
    /// The server.
    pub addr: SocketAddr,
    /// Its `Host` header.
    pub host: String,
    /// Client `i`'s token (minted per client).
    pub tokens: Arc<Vec<String>>,
    /// Client `i` subscribes to `{channel_prefix}{i}`.
    pub channel_prefix: String,
    /// Clients at a time.
    pub concurrency: usize,
}

/// What the clients did.
#[derive(Debug)]
pub struct Done {
    /// How long each cycle took (connect to close), failed ones included.
    pub cycle_time: Histogram<u64>,
    /// Per client: connections the server accepted (WebSocket upgrades answered 101).
    pub connected: Vec<u64>,
    /// Per client: subscriptions the server acknowledged.
    pub subscribed: Vec<u64>,
    /// Cycles that failed somewhere.
    pub failed: u64,
    /// A few of their errors.
    pub errors: Vec<String>,
    /// Rounds completed before the time limit.
    pub rounds: u64,
}

impl Default for Done {
    fn default() -> Self {
        Done {
            cycle_time: stats::histogram(),
            connected: Vec::new(),
            subscribed: Vec::new(),
            failed: 0,
            errors: Vec::new(),
            rounds: 0,
        }
    }
}

/// How far one cycle got.
#[derive(Debug, Default, Clone, Copy)]
struct Reached {
    upgraded: bool,
    subscribed: bool,
}

/// Runs `rounds` rounds of every client's cycle, stopping between rounds when `until` passed;
/// `progress` counts finished cycles.
pub async fn run(
    plan: &Plan,
    rounds: u64,
    until: tokio::time::Instant,
    progress: Arc<AtomicU64>,
) -> Done {
    let clients = plan.tokens.len();
    let mut done = Done {
        connected: vec![0; clients],
        subscribed: vec![0; clients],
        ..Default::default()
    };
    for _ in 0..rounds {
        if tokio::time::Instant::now() >= until {
            break;
        }
        let cycles = futures_util::stream::iter(0..clients)
            .map(|i| {
                let progress = progress.clone();
                async move {
                    let started = now_ns();
                    let outcome = tokio::time::timeout(CYCLE_TIMEOUT, cycle(plan, i)).await;
                    progress.fetch_add(1, Ordering::Relaxed);
                    let outcome = outcome.unwrap_or_else(|_| {
                        (Reached::default(), Err("cycle timed out after 30 s".into()))
                    });
                    (i, outcome, now_ns().saturating_sub(started))
                }
            })
            .buffer_unordered(plan.concurrency.max(1));
        tokio::pin!(cycles);
        while let Some((i, (reached, result), took)) = cycles.next().await {
            stats::record_ns(&mut done.cycle_time, took);
            done.connected[i] += u64::from(reached.upgraded);
            done.subscribed[i] += u64::from(reached.subscribed);
            if let Err(e) = result {
                done.failed += 1;
                if done.errors.len() < 5 && !done.errors.contains(&e) {
                    done.errors.push(e);
                }
            }
        }
        done.rounds += 1;
    }
    done
}

/// The source address of client `i` for a target at `target`.
fn source(i: usize, target: IpAddr) -> Option<IpAddr> {
    crate::pool::source_ip(i % SOURCES, target)
}

/// One cycle of client `i`: connect, subscribe, wait for the acknowledgement, close. What it
/// reached is told even when it failed later (the server's events follow what happened).
async fn cycle(plan: &Plan, i: usize) -> (Reached, Result<(), String>) {
    let mut reached = Reached::default();
    let result = cycle_steps(plan, i, &mut reached).await;
    (reached, result)
}

async fn cycle_steps(plan: &Plan, i: usize, reached: &mut Reached) -> Result<(), String> {
    let mut stream = crate::client::connect(plan.addr, source(i, plan.addr.ip()), None)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let token = &plan.tokens[i];
    let path = format!("/v1/ws?token={}", herald_client::url::encode_query(token));
    stream
        .write_all(&wire::ws_upgrade(&plan.host, &path))
        .await
        .map_err(|e| format!("write: {e}"))?;
    let mut buf = Vec::with_capacity(4096);
    let head = loop {
        if let Some(head) = wire::parse_response_head(&buf)? {
            break head;
        }
        read_more(&mut stream, &mut buf).await?;
    };
    if head.status != 101 {
        return Err(format!("WebSocket upgrade refused: HTTP {}", head.status));
    }
    reached.upgraded = true;
    buf.drain(..head.len);
    let mut out = Vec::new();
    let subscribe = format!(
        "{{\"id\":1,\"subscribe\":{{\"channel\":\"{}{i}\"}}}}",
        plan.channel_prefix
    );
    wire::ws_frame(1, subscribe.as_bytes(), &mut out);
    stream
        .write_all(&out)
        .await
        .map_err(|e| format!("write: {e}"))?;
    // Until the subscription is acknowledged, then until the server answers the close frame
    // (or closes the connection).
    let mut closing = false;
    loop {
        let mut at = 0;
        while let Some(f) = wire::ws_parse(&mut buf[at..]) {
            let payload = &buf[at + f.start..at + f.end];
            match f.opcode {
                1 | 0 if !closing => match wire::classify_ws_text(payload) {
                    ServerText::Subscribed => {
                        reached.subscribed = true;
                        closing = true;
                        out.clear();
                        wire::ws_frame(8, &1000u16.to_be_bytes(), &mut out);
                        stream
                            .write_all(&out)
                            .await
                            .map_err(|e| format!("write: {e}"))?;
                    }
                    ServerText::Error { .. } | ServerText::Disconnect => {
                        return Err(String::from_utf8_lossy(payload).into_owned());
                    }
                    _ => {}
                },
                8 if closing => return Ok(()),
                8 => return Err("the server closed the WebSocket before subscribing".into()),
                _ => {}
            }
            at += f.end;
        }
        buf.drain(..at);
        match read_more(&mut stream, &mut buf).await {
            Ok(()) => {}
            // The server closed the connection after our close frame: done.
            Err(_) if closing => return Ok(()),
            Err(e) => return Err(e),
        }
    }
}

/// Reads more bytes into `buf`; an error when the connection ended.
async fn read_more(stream: &mut tokio::net::TcpStream, buf: &mut Vec<u8>) -> Result<(), String> {
    if buf.capacity() - buf.len() < 4096 {
        buf.reserve(16 * 1024);
    }
    match stream.read_buf(buf).await {
        Ok(0) => Err("connection closed by server".into()),
        Ok(_) => Ok(()),
        Err(e) => Err(format!("read: {e}")),
    }
}
