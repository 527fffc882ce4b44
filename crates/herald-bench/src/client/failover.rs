//! The resuming subscriber of `herald bench failover` ([`Plan::Failover`]): a WebSocket client
//! that subscribes to channels of its own and keeps, per channel, the position of the last
//! message it received and a [`Ledger`] of every arrival. When its connection is lost (its node
//! was killed) it waits for the parent's [`Action::Resume`], then reconnects to another node,
//! round-robin over the nodes other than the one it lost (the next one, with the SDK's backoff,
//! when a node refuses), and resubscribes every channel with `since` its position, as Herald's
//! SDKs do. The worker's [`Book`] holds every client's [`Record`] so that
//! [`crate::proto::Command::Account`] can report what they received.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use herald_client::subscriber::Backoff;
use herald_client::url::encode_query;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;

use super::{connect, err, lossy, read_head, reserve, Fire, Ready};
use crate::ledger::{Ledger, Tally};
use crate::proto::{Action, Plan};
use crate::wire::{self, now_ns, ServerText};
use crate::worker::Shared;

/// What one client received and how its resumes went.
#[derive(Debug)]
pub struct Record {
    /// Its channels' common prefix (`{prefix}{n}/`); channel `j` is this and `j`.
    own: String,
    /// One ledger per channel.
    ledgers: Vec<Ledger>,
    /// Connected and subscribed now (after the opening, or after a resume was answered).
    subscribed: bool,
    /// Connections lost.
    losses: u64,
    /// First loss (unix nanos; 0 when none).
    first_loss_ns: u64,
    /// Last loss (unix nanos; 0 when none).
    last_loss_ns: u64,
    /// Resumes answered on every channel, and when the last was (unix nanos).
    resumes: u64,
    resumed_ns: u64,
    /// The node the last resume was answered by.
    resumed_on: Option<SocketAddr>,
    /// When the client was last allowed to reconnect (unix nanos), and how long from then its
    /// last resume took to be answered.
    resume_from_ns: u64,
    resume_took_ns: Option<u64>,
    /// Resume replies that said `recovered: false`.
    not_recovered: u64,
    /// Messages the resume replies said were pending, and whether any was.
    pending_at_resume: u64,
    reconnect_attempts: u64,
    reconnect_failures: u64,
    errors: Vec<String>,
}

impl Record {
    fn new(own: String, channels: u64) -> Record {
        Record {
            own,
            ledgers: vec![Ledger::default(); channels as usize],
            subscribed: false,
            losses: 0,
            first_loss_ns: 0,
            last_loss_ns: 0,
            resumes: 0,
            resumed_ns: 0,
            resumed_on: None,
            resume_from_ns: 0,
            resume_took_ns: None,
            not_recovered: 0,
            pending_at_resume: 0,
            reconnect_attempts: 0,
            reconnect_failures: 0,
            errors: Vec::new(),
        }
    }

    fn error(&mut self, e: String) {
        if self.errors.len() < 3 {
            self.errors.push(e);
        }
    }

    fn lost(&mut self, at: u64, why: String) {
        self.subscribed = false;
        self.losses += 1;
        if self.first_loss_ns == 0 {
            self.first_loss_ns = at;
        }
        self.last_loss_ns = at;
        self.error(format!("connection lost: {why}"));
    }

    /// Whether it is subscribed and holds seqs 1 to `expected` of every channel.
    fn caught_up(&self, expected: u64) -> bool {
        self.subscribed && self.ledgers.iter().all(|l| l.complete(expected))
    }

    /// Adds this client to `t`.
    fn account(&self, expected: u64, t: &mut Tally) {
        t.clients += 1;
        for (j, ledger) in self.ledgers.iter().enumerate() {
            ledger.account(&format!("{}{j}", self.own), expected, t);
        }
        if self.caught_up(expected) {
            t.caught_up += 1;
            let done = self.ledgers.iter().filter_map(|l| l.completed_ns(expected));
            t.last_caught_up_ns = t.last_caught_up_ns.max(done.max().unwrap_or(0));
        }
        if self.losses > 0 {
            t.disconnected += 1;
            t.first_loss_ns = match t.first_loss_ns {
                0 => self.first_loss_ns,
                x => x.min(self.first_loss_ns),
            };
            t.last_loss_ns = t.last_loss_ns.max(self.last_loss_ns);
        }
        if self.resumes > 0 {
            t.resumed += 1;
            t.last_resumed_ns = t.last_resumed_ns.max(self.resumed_ns);
            if let Some(node) = self.resumed_on {
                t.count_resumed_on(&node.to_string(), 1);
            }
        }
        t.not_recovered += self.not_recovered;
        t.pending_at_resume += self.pending_at_resume;
        t.with_pending += u64::from(self.pending_at_resume > 0);
        t.reconnect_attempts += self.reconnect_attempts;
        t.reconnect_failures += self.reconnect_failures;
        // A loss is expected of the killed node's clients: name only what else went wrong.
        for e in self
            .errors
            .iter()
            .filter(|e| !e.starts_with("connection lost"))
        {
            t.error(e.clone());
        }
    }
}

/// A client's record, shared by its task and the worker's `account`.
type Shared1 = Arc<Mutex<Record>>;

fn lock(r: &Mutex<Record>) -> MutexGuard<'_, Record> {
    r.lock().unwrap_or_else(|p| p.into_inner())
}

/// Every failover client of a worker.
#[derive(Debug, Default)]
pub struct Book(Mutex<Vec<Shared1>>);

impl Book {
    fn register(&self, own: String, channels: u64) -> Shared1 {
        let record = Arc::new(Mutex::new(Record::new(own, channels)));
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(record.clone());
        record
    }

    fn records(&self) -> Vec<Shared1> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Clients registered, and of them those subscribed with seqs 1 to `expected` of every
    /// channel.
    pub fn caught_up(&self, expected: u64) -> (u64, u64) {
        let records = self.records();
        let done = records
            .iter()
            .filter(|r| lock(r).caught_up(expected))
            .count();
        (records.len() as u64, done as u64)
    }

    /// Every client's figures against `expected` messages per channel.
    pub fn account(&self, expected: u64) -> Tally {
        let mut t = Tally::default();
        let mut resume_times = crate::stats::histogram();
        for r in self.records() {
            let r = lock(&r);
            r.account(expected, &mut t);
            if let Some(ns) = r.resume_took_ns {
                crate::stats::record_ns(&mut resume_times, ns);
            }
        }
        if !resume_times.is_empty() {
            t.resume_hist = crate::stats::encode(&resume_times);
        }
        t
    }
}

/// How a connection of a client ended.
enum Ended {
    /// Before every subscription was answered: could not connect, upgrade or subscribe.
    Refused(String),
    /// After: the connection was lost.
    Lost(String),
}

/// Runs client `n` until the worker exits (an error only if its first connection fails).
pub(super) async fn failover(
    sh: &Shared,
    n: u64,
    plan: &Plan,
    ready: &Ready,
    mut fire: watch::Receiver<Option<Fire>>,
) -> Result<(), String> {
    let Plan::Failover { prefix, channels } = plan else {
        return Err("a failover client needs Plan::Failover".into());
    };
    let record = sh.book.register(format!("{prefix}{n}/"), *channels);
    let nodes = if sh.cfg.nodes.is_empty() {
        vec![sh.cfg.addr]
    } else {
        sh.cfg.nodes.clone()
    };
    let mut node = sh.cfg.addr;
    let mut lost_from = node;
    let mut opening = true;
    let mut failures = 0u32;
    loop {
        let (ready, resuming) = if opening {
            (Some(ready), false)
        } else {
            (None, true)
        };
        match session(sh, node, &record, ready, resuming).await {
            Ended::Refused(e) if opening => return Err(e),
            Ended::Refused(e) => {
                {
                    let mut r = lock(&record);
                    r.reconnect_failures += 1;
                    r.error(format!("reconnect to {node}: {e}"));
                }
                failures += 1;
                tokio::time::sleep(Backoff::default().delay(failures - 1)).await;
                node = next_node(&nodes, lost_from, n, failures);
            }
            Ended::Lost(e) => {
                opening = false;
                lock(&record).lost(now_ns(), e);
                lost_from = node;
                failures = 0;
                if wait_resume(&mut fire).await.is_err() {
                    return Ok(());
                }
                lock(&record).resume_from_ns = now_ns();
                node = next_node(&nodes, lost_from, n, 0);
            }
        }
    }
}

/// The node client `n` tries after losing `lost` and failing `failures` times since:
/// round-robin over the other nodes, from `n`.
pub fn next_node(nodes: &[SocketAddr], lost: SocketAddr, n: u64, failures: u32) -> SocketAddr {
    let others: Vec<SocketAddr> = nodes.iter().copied().filter(|a| *a != lost).collect();
    if others.is_empty() {
        return lost;
    }
    others[((n + u64::from(failures)) % others.len() as u64) as usize]
}

/// Waits until the parent allows reconnects ([`Action::Resume`]); an error when the worker
/// stops.
async fn wait_resume(fire: &mut watch::Receiver<Option<Fire>>) -> Result<(), ()> {
    fire.wait_for(|f| {
        matches!(
            f,
            Some(Fire {
                action: Action::Resume,
                ..
            })
        )
    })
    .await
    .map(|_| ())
    .map_err(|_| ())
}

/// The head of a message frame: what the ledger needs.
#[derive(serde::Deserialize)]
struct MessageFrame<'a> {
    #[serde(borrow)]
    message: MessageHead<'a>,
}

#[derive(serde::Deserialize)]
struct MessageHead<'a> {
    channel: &'a str,
    seq: u64,
    #[serde(default)]
    epoch: &'a str,
}

/// A `subscribe` reply.
#[derive(serde::Deserialize)]
struct SubscribeReply {
    id: u64,
    subscribe: SubscribeAnswer,
}

#[derive(serde::Deserialize)]
struct SubscribeAnswer {
    seq: u64,
    #[serde(default)]
    recovered: bool,
}

/// One connection of a client to `node`: upgrade, subscribe every channel (from its position
/// when `resuming`), then receive until the connection ends. `ready` is told once every
/// subscription of the first connection is answered.
async fn session(
    sh: &Shared,
    node: SocketAddr,
    record: &Mutex<Record>,
    ready: Option<&Ready>,
    resuming: bool,
) -> Ended {
    if resuming {
        lock(record).reconnect_attempts += 1;
    }
    let mut stream = match connect(node, sh.cfg.source_ip, sh.cfg.rcvbuf).await {
        Ok(s) => s,
        Err(e) => return Ended::Refused(format!("connect: {e}")),
    };
    let path = match &sh.cfg.token {
        Some(t) => format!("/v1/ws?token={}", encode_query(t)),
        None => "/v1/ws".to_string(),
    };
    if let Err(e) = stream
        .write_all(&wire::ws_upgrade(&node.to_string(), &path))
        .await
    {
        return Ended::Refused(format!("write: {e}"));
    }
    let mut buf = Vec::with_capacity(4096);
    match read_head(&mut stream, &mut buf).await {
        Ok(head) if head.status == 101 => {}
        Ok(head) => {
            return Ended::Refused(format!("WebSocket upgrade refused: HTTP {}", head.status))
        }
        Err(e) => return Ended::Refused(e),
    }
    let mut out = Vec::new();
    let (own, cursors) = {
        let r = lock(record);
        let mut cursors = Vec::with_capacity(r.ledgers.len());
        for (j, ledger) in r.ledgers.iter().enumerate() {
            let (epoch, seq) = ledger.position();
            let since = if resuming {
                format!(",\"since\":{{\"seq\":{seq},\"epoch\":\"{epoch}\"}}")
            } else {
                String::new()
            };
            let body = format!(
                "{{\"id\":{},\"subscribe\":{{\"channel\":\"{}{j}\"{since}}}}}",
                j + 1,
                r.own
            );
            wire::ws_frame(1, body.as_bytes(), &mut out);
            cursors.push(seq);
        }
        (r.own.clone(), cursors)
    };
    let mut unanswered = cursors.len();
    let mut written = 0;
    let ended = |unanswered: usize, why: String| {
        if unanswered > 0 {
            Ended::Refused(why)
        } else {
            Ended::Lost(why)
        }
    };
    let (mut rd, mut wr) = stream.split();
    loop {
        let now = now_ns();
        let mut at = 0;
        let mut closing = None;
        while let Some(f) = wire::ws_parse(&mut buf[at..]) {
            let payload = &buf[at + f.start..at + f.end];
            match f.opcode {
                1 | 0 => match wire::classify_ws_text(payload) {
                    ServerText::Message => deliver(record, &own, payload, now),
                    ServerText::Subscribed => {
                        answered(record, payload, &cursors, resuming);
                        unanswered = unanswered.saturating_sub(1);
                        if unanswered == 0 {
                            match ready {
                                Some(ready) => {
                                    lock(record).subscribed = true;
                                    ready.ok(sh);
                                }
                                None => {
                                    let mut r = lock(record);
                                    r.subscribed = true;
                                    r.resumes += 1;
                                    r.resumed_ns = now;
                                    r.resumed_on = Some(node);
                                    r.resume_took_ns = Some(now.saturating_sub(r.resume_from_ns));
                                }
                            }
                        }
                    }
                    ServerText::Error { answers: true } | ServerText::Disconnect => {
                        closing = Some(lossy(payload));
                    }
                    ServerText::Error { answers: false } => lock(record).error(lossy(payload)),
                    _ => {}
                },
                8 => closing = Some(format!("server closed the WebSocket {}", lossy(payload))),
                9 => wire::ws_frame(10, payload, &mut out),
                _ => {}
            }
            at += f.end;
        }
        buf.drain(..at);
        if let Some(why) = closing {
            return ended(unanswered, why);
        }
        reserve(&mut buf);
        tokio::select! {
            r = rd.read_buf(&mut buf) => match r.map_err(err("read")) {
                Ok(0) => return ended(unanswered, "connection closed by server".into()),
                Ok(_) => {}
                Err(e) => return ended(unanswered, e),
            },
            r = wr.write(&out[written..]), if written < out.len() => match r.map_err(err("write")) {
                Ok(w) => {
                    written += w;
                    if written == out.len() {
                        out.clear();
                        written = 0;
                    }
                }
                Err(e) => return ended(unanswered, e),
            },
        }
    }
}

/// Records a message frame in its channel's ledger.
fn deliver(record: &Mutex<Record>, own: &str, payload: &[u8], now: u64) {
    let mut r = lock(record);
    let Ok(frame) = serde_json::from_slice::<MessageFrame>(payload) else {
        r.error(format!("unreadable message {}", lossy(payload)));
        return;
    };
    let m = frame.message;
    let channel = m
        .channel
        .strip_prefix(own)
        .and_then(|j| j.parse::<usize>().ok());
    match channel.and_then(|j| r.ledgers.get_mut(j)) {
        Some(ledger) => {
            ledger.record(m.seq, m.epoch, now);
        }
        None => r.error(format!("a message of another channel: {}", m.channel)),
    }
}

/// Records a subscribe reply: when `resuming`, whether the resume was exact and how many
/// messages were pending after the cursor sent (`cursors[j]` for the reply to id `j + 1`).
fn answered(record: &Mutex<Record>, payload: &[u8], cursors: &[u64], resuming: bool) {
    let mut r = lock(record);
    let Ok(reply) = serde_json::from_slice::<SubscribeReply>(payload) else {
        r.error(format!("unreadable subscribe reply {}", lossy(payload)));
        return;
    };
    if !resuming {
        return;
    }
    let cursor = cursors
        .get((reply.id as usize).wrapping_sub(1))
        .copied()
        .unwrap_or(0);
    r.pending_at_resume += reply.subscribe.seq.saturating_sub(cursor);
    if !reply.subscribe.recovered {
        r.not_recovered += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    #[test]
    fn a_lost_node_is_left_out_and_the_others_taken_in_turn() {
        let nodes = [addr(1), addr(2), addr(3)];
        // Clients of node 3 alternate between nodes 1 and 2.
        assert_eq!(next_node(&nodes, addr(3), 10, 0), addr(1));
        assert_eq!(next_node(&nodes, addr(3), 11, 0), addr(2));
        // A refusal moves a client on to the next node.
        assert_eq!(next_node(&nodes, addr(3), 10, 1), addr(2));
        assert_eq!(next_node(&nodes, addr(2), 10, 0), addr(1));
        assert_eq!(next_node(&[addr(1)], addr(1), 3, 0), addr(1));
    }

    #[test]
    fn a_resumed_client_counts_its_pending_messages_and_inexact_resumes() {
        let record = Mutex::new(Record::new("f/7/".into(), 2));
        let msg = |ch: u32, seq: u64| {
            format!(
                r#"{{"message":{{"channel":"f/7/{ch}","seq":{seq},"epoch":"e1","id":"x","time":1,"data":{{"ts":5}}}}}}"#
            )
        };
        for seq in 1..=2 {
            deliver(&record, "f/7/", msg(0, seq).as_bytes(), 10);
            deliver(&record, "f/7/", msg(1, seq).as_bytes(), 10);
        }
        lock(&record).subscribed = true;
        lock(&record).lost(20, "closed".into());
        // Channel 0 resumed exactly with 3 pending, channel 1 not recovered.
        let cursors = [2, 2];
        answered(
            &record,
            br#"{"id":1,"subscribe":{"channel":"f/7/0","seq":5,"epoch":"e1","recovered":true}}"#,
            &cursors,
            true,
        );
        answered(
            &record,
            br#"{"id":2,"subscribe":{"channel":"f/7/1","seq":2,"epoch":"e1","recovered":false}}"#,
            &cursors,
            true,
        );
        for seq in 3..=5 {
            deliver(&record, "f/7/", msg(0, seq).as_bytes(), 30);
        }
        {
            let mut r = lock(&record);
            r.subscribed = true;
            r.resumes = 1;
            r.resumed_ns = 25;
            r.resumed_on = Some(addr(2));
        }
        let mut t = Tally::default();
        lock(&record).account(5, &mut t);
        assert_eq!(
            (t.clients, t.channels, t.disconnected, t.resumed),
            (1, 2, 1, 1)
        );
        assert_eq!(
            (t.pending_at_resume, t.with_pending, t.not_recovered),
            (3, 1, 1)
        );
        // Channel 1 never got 3 to 5.
        assert_eq!(t.lost, 3);
        assert_eq!(t.lost_samples, vec!["f/7/1#3", "f/7/1#4", "f/7/1#5"]);
        assert_eq!(t.caught_up, 0);
        assert_eq!(t.resumed_on, vec![("127.0.0.1:2".to_string(), 1)]);
        let mut t = Tally::default();
        lock(&record).account(2, &mut t);
        assert_eq!((t.lost, t.caught_up, t.unexpected), (0, 1, 3));
    }
}
