//! Client connections of a worker process: one task per WebSocket, SSE or long-poll subscriber,
//! and a keep-alive HTTP client for publishing. Every connection reads into one buffer, counts
//! what it receives and records latencies in batches (one lock per socket read).

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::{mpsc, watch, OwnedSemaphorePermit};

use crate::proto::{Action, Plan, Transport};
use crate::wire::{self, find, find_ts, now_ns, query_escape, ServerText};
use crate::worker::Shared;

/// A fire as connections see it: a sequence number (so repeats are seen) and the action.
#[derive(Debug, Clone)]
pub struct Fire {
    /// Increases with every fire.
    pub seq: u64,
    /// What to do.
    pub action: Action,
}

/// Opens a TCP connection, bound to `source` first when given (and of the right family).
pub async fn connect(addr: SocketAddr, source: Option<IpAddr>) -> io::Result<TcpStream> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
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
}

impl Inbox {
    /// The inbox count of a connection opened with `plan`, if it is a device connection.
    fn of(plan: &Plan) -> Option<Inbox> {
        match plan {
            Plan::Inbox { pending, .. } => Some(Inbox {
                pending: *pending,
                got: 0,
                since_ns: 0,
            }),
            _ => None,
        }
    }

    /// Counts one inbox message; the one that completes the pending ones counts as an
    /// acknowledgement, timed from the inbox request.
    fn count(&mut self, tally: &mut Tally) {
        self.got += 1;
        if self.got == self.pending {
            tally.acks += 1;
            tally.ack_sent_ns = self.since_ns;
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
        match sh.cfg.transport {
            Transport::Ws => ws(&sh, n, &plan, &ready, fire).await,
            Transport::Sse => sse(&sh, n, &plan, &ready, fire).await,
            Transport::Poll => poll(&sh, n, &plan, &ready, fire).await,
            Transport::Meteor => crate::meteor::deacon(&sh, n, &plan, &ready).await,
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
        Plan::Connect | Plan::Inbox { .. } => Vec::new(),
    }
}

fn action_channels(action: &Action, n: u64) -> Vec<String> {
    match action {
        Action::Subscribe {
            prefix,
            subjects,
            distinct: true,
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

/// Reads until a complete response head is in `buf`; removes it and returns it.
async fn read_head(s: &mut TcpStream, buf: &mut Vec<u8>) -> Result<wire::ResponseHead, String> {
    loop {
        if let Some(head) = wire::parse_response_head(buf)? {
            buf.drain(..head.len);
            return Ok(head);
        }
        reserve(buf);
        if s.read_buf(buf).await.map_err(err("read"))? == 0 {
            return Err("connection closed by server".into());
        }
    }
}

/// Reads a whole response (head and body) to a request already written.
async fn read_response(s: &mut TcpStream, buf: &mut Vec<u8>) -> Result<(u16, Vec<u8>), String> {
    let head = read_head(s, buf).await?;
    if head.chunked {
        let mut d = wire::Dechunker::default();
        let mut body = Vec::new();
        loop {
            d.feed(buf, &mut body)?;
            if d.done {
                // Drop the trailer's blank line.
                if buf.starts_with(b"\r\n") {
                    buf.drain(..2);
                }
                return Ok((head.status, body));
            }
            reserve(buf);
            if s.read_buf(buf).await.map_err(err("read"))? == 0 {
                return Err("connection closed mid-response".into());
            }
        }
    }
    let len = head
        .content_length
        .ok_or("response has neither Content-Length nor chunked encoding")?;
    while buf.len() < len {
        reserve(buf);
        if s.read_buf(buf).await.map_err(err("read"))? == 0 {
            return Err("connection closed mid-response".into());
        }
    }
    let body: Vec<u8> = buf.drain(..len).collect();
    Ok((head.status, body))
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(&b[..b.len().min(300)]).into_owned()
}

async fn ws(
    sh: &Shared,
    n: u64,
    plan: &Plan,
    ready: &Ready,
    mut fire: watch::Receiver<Option<Fire>>,
) -> Result<(), String> {
    let cfg = &sh.cfg;
    let token = connection_token(sh, n, plan)?;
    let mut inbox = Inbox::of(plan);
    let mut stream = connect(cfg.addr, cfg.source_ip)
        .await
        .map_err(err("connect"))?;
    inbox_start(sh, ready, &mut fire, &mut inbox).await?;
    let path = match &token {
        Some(t) => format!("/v1/ws?token={}", query_escape(t)),
        None => "/v1/ws".to_string(),
    };
    stream
        .write_all(&wire::ws_upgrade(&cfg.host, &path))
        .await
        .map_err(err("write"))?;
    let mut buf = Vec::with_capacity(4096);
    let head = read_head(&mut stream, &mut buf).await?;
    if head.status != 101 {
        return Err(format!("WebSocket upgrade refused: HTTP {}", head.status));
    }
    let mut out = Vec::new();
    let mut written = 0;
    let channels = channel_list(plan, n);
    let mut pending = channels.len() as u64;
    let mut tally = Tally {
        ack_sent_ns: now_ns(),
        ..Default::default()
    };
    let mut next_id = 1u64;
    for ch in &channels {
        push_subscribe(&mut out, next_id, ch);
        next_id += 1;
    }
    fire.borrow_and_update();
    let (mut rd, mut wr) = stream.split();
    loop {
        let now = now_ns();
        let mut at = 0;
        let mut closing = None;
        while let Some(f) = wire::ws_parse(&mut buf[at..]) {
            let payload = &buf[at + f.start..at + f.end];
            match f.opcode {
                1 | 0 => {
                    if let Err(e) = ws_text(payload, &mut tally, &mut pending, &mut inbox) {
                        closing = Some(e);
                    }
                }
                8 => closing = Some(format!("server closed the WebSocket {}", lossy(payload))),
                9 => wire::ws_frame(10, payload, &mut out),
                _ => {}
            }
            at += f.end;
        }
        buf.drain(..at);
        if !tally.is_empty() {
            sh.apply(now, &mut tally);
        }
        if let Some(e) = closing {
            return Err(e);
        }
        if pending == 0 && ready.pending() {
            ready.ok(sh);
        }
        reserve(&mut buf);
        tokio::select! {
            r = rd.read_buf(&mut buf) => {
                if r.map_err(err("read"))? == 0 {
                    return Err("connection closed by server".into());
                }
            }
            r = wr.write(&out[written..]), if written < out.len() => {
                written += r.map_err(err("write"))?;
                if written == out.len() {
                    out.clear();
                    written = 0;
                }
            }
            changed = fire.changed() => {
                if changed.is_err() {
                    return Ok(());
                }
                let action = fire.borrow_and_update().clone().map(|f| f.action);
                match action {
                    Some(Action::PublishOnce { channel }) => {
                        let body = format!(
                            "{{\"id\":{next_id},\"publish\":{{\"channel\":\"{channel}\",\"data\":{}}}}}",
                            wire::stamp(now_ns())
                        );
                        next_id += 1;
                        wire::ws_frame(1, body.as_bytes(), &mut out);
                    }
                    Some(a @ Action::Subscribe { .. }) => {
                        tally.ack_sent_ns = now_ns();
                        for ch in action_channels(&a, n) {
                            push_subscribe(&mut out, next_id, &ch);
                            next_id += 1;
                        }
                    }
                    _ => {}
                }
            }
        }
    }
}

fn push_subscribe(out: &mut Vec<u8>, id: u64, channel: &str) {
    let body = format!("{{\"id\":{id},\"subscribe\":{{\"channel\":\"{channel}\"}}}}");
    wire::ws_frame(1, body.as_bytes(), out);
}

/// Handles one server text frame; an `Err` closes the connection.
fn ws_text(
    p: &[u8],
    tally: &mut Tally,
    pending: &mut u64,
    inbox: &mut Option<Inbox>,
) -> Result<(), String> {
    match wire::classify_ws_text(p) {
        ServerText::Message => {
            if let Some(ts) = find_ts(p) {
                tally.sent.push(ts);
            }
            if let Some(i) = inbox {
                i.count(tally);
            }
        }
        ServerText::Subscribed => {
            tally.acks += 1;
            *pending = pending.saturating_sub(1);
        }
        ServerText::Published => tally.published += 1,
        ServerText::Error { answers: true } if *pending > 0 => return Err(lossy(p)),
        ServerText::Error { .. } => tally.errors.push(lossy(p)),
        ServerText::Disconnect => return Err(lossy(p)),
        ServerText::Other => {}
    }
    Ok(())
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

fn query(channels: &[String], token: &Option<String>, extra: &str) -> String {
    let mut q = String::with_capacity(channels.len() * 20 + 64);
    for (i, c) in channels.iter().enumerate() {
        q.push(if i == 0 { '?' } else { '&' });
        q.push_str("channel=");
        q.push_str(&query_escape(c));
    }
    if let Some(t) = token {
        q.push_str("&token=");
        q.push_str(&query_escape(t));
    }
    q.push_str(extra);
    if q.starts_with('&') {
        q.replace_range(..1, "?");
    }
    q
}

/// What an SSE or long-poll connection starts with: its token, its inbox (device plans), the
/// TCP connection, the channels to name, and when the request counts as sent.
struct HttpOpening {
    token: Option<String>,
    inbox: Option<Inbox>,
    stream: TcpStream,
    channels: Vec<String>,
    sent: u64,
}

/// Connects, takes part in the inbox start, and, for a storm, waits for the moment to subscribe.
async fn open_http(
    sh: &Shared,
    n: u64,
    plan: &Plan,
    ready: &Ready,
    fire: &mut watch::Receiver<Option<Fire>>,
) -> Result<HttpOpening, String> {
    let cfg = &sh.cfg;
    let token = connection_token(sh, n, plan)?;
    let mut inbox = Inbox::of(plan);
    let stream = connect(cfg.addr, cfg.source_ip)
        .await
        .map_err(err("connect"))?;
    fire.borrow_and_update();
    inbox_start(sh, ready, fire, &mut inbox).await?;
    let (channels, sent) = if matches!(plan, Plan::Connect) {
        ready.ok(sh);
        wait_subscribe(fire, n).await?
    } else {
        (channel_list(plan, n), now_ns())
    };
    Ok(HttpOpening {
        token,
        inbox,
        stream,
        channels,
        sent,
    })
}

async fn sse(
    sh: &Shared,
    n: u64,
    plan: &Plan,
    ready: &Ready,
    mut fire: watch::Receiver<Option<Fire>>,
) -> Result<(), String> {
    let cfg = &sh.cfg;
    let HttpOpening {
        token,
        mut inbox,
        mut stream,
        channels,
        sent,
    } = open_http(sh, n, plan, ready, &mut fire).await?;
    let path = format!("/v1/sse{}", query(&channels, &token, ""));
    stream
        .write_all(&wire::get_request(
            &cfg.host,
            &path,
            "Accept: text/event-stream\r\n",
        ))
        .await
        .map_err(err("write"))?;
    let mut raw = Vec::with_capacity(4096);
    let head = read_head(&mut stream, &mut raw).await?;
    if head.status != 200 {
        let _ = tokio::time::timeout(
            std::time::Duration::from_millis(200),
            stream.read_buf(&mut raw),
        )
        .await;
        return Err(format!("SSE refused: HTTP {} {}", head.status, lossy(&raw)));
    }
    let mut pending = channels.len() as u64;
    let mut tally = Tally {
        ack_sent_ns: sent,
        ..Default::default()
    };
    let mut dechunk = wire::Dechunker::default();
    let mut body = Vec::with_capacity(4096);
    loop {
        if head.chunked {
            dechunk.feed(&mut raw, &mut body)?;
        } else {
            body.append(&mut raw);
        }
        let now = now_ns();
        let mut at = 0;
        while let Some(end) = find(&body[at..], b"\n\n") {
            match wire::sse_classify(&body[at..at + end]) {
                // A device's inbox opens with `subscribed` events too; they are not counted.
                wire::SseEvent::Subscribed if inbox.is_none() => {
                    tally.acks += 1;
                    pending = pending.saturating_sub(1);
                }
                wire::SseEvent::Message(d) => {
                    if let Some(ts) = find_ts(d) {
                        tally.sent.push(ts);
                    }
                    if let Some(i) = &mut inbox {
                        i.count(&mut tally);
                    }
                }
                wire::SseEvent::Disconnect(d) => return Err(lossy(d)),
                wire::SseEvent::Subscribed | wire::SseEvent::Other => {}
            }
            at += end + 2;
        }
        body.drain(..at);
        if !tally.is_empty() {
            sh.apply(now, &mut tally);
        }
        if pending == 0 && ready.pending() {
            ready.ok(sh);
        }
        if dechunk.done {
            return Err("SSE stream ended".into());
        }
        reserve(&mut raw);
        if stream.read_buf(&mut raw).await.map_err(err("read"))? == 0 {
            return Err("connection closed by server".into());
        }
    }
}

async fn poll(
    sh: &Shared,
    n: u64,
    plan: &Plan,
    ready: &Ready,
    mut fire: watch::Receiver<Option<Fire>>,
) -> Result<(), String> {
    let cfg = &sh.cfg;
    let storm = matches!(plan, Plan::Connect);
    let HttpOpening {
        token,
        mut inbox,
        mut stream,
        channels,
        sent,
    } = open_http(sh, n, plan, ready, &mut fire).await?;
    let mut buf = Vec::with_capacity(4096);
    let mut tally = Tally {
        ack_sent_ns: sent,
        ..Default::default()
    };
    let mut since: Option<String> = None;
    loop {
        let extra = match &since {
            None => "&timeout=0".to_string(),
            Some(c) => format!("&since={}&timeout=30", query_escape(c)),
        };
        let path = format!("/v1/poll{}", query(&channels, &token, &extra));
        stream
            .write_all(&wire::get_request(&cfg.host, &path, ""))
            .await
            .map_err(err("write"))?;
        let (status, body) = read_response(&mut stream, &mut buf).await?;
        let now = now_ns();
        if status != 200 {
            return Err(format!("poll refused: HTTP {status} {}", lossy(&body)));
        }
        let answer: wire::PollAnswer =
            serde_json::from_slice(&body).map_err(|e| format!("bad poll answer: {e}"))?;
        for m in &answer.messages {
            if let Some(ts) = find_ts(m.data.get().as_bytes()) {
                tally.sent.push(ts);
            }
            if let Some(i) = &mut inbox {
                i.count(&mut tally);
            }
        }
        if since.is_none() && inbox.is_none() {
            tally.acks += answer.channels.len() as u64;
        }
        since = Some(answer.cursor.clone());
        if !tally.is_empty() {
            sh.apply(now, &mut tally);
        }
        if ready.pending() {
            ready.ok(sh);
        }
        let caught_up = inbox.as_ref().is_some_and(|i| i.got >= i.pending);
        if storm || caught_up {
            // The storm measures subscribing only, a device its catch-up: keep the
            // connection, poll no more.
            loop {
                if fire.changed().await.is_err() {
                    return Ok(());
                }
            }
        }
    }
}

/// A keep-alive HTTP/1.1 client for the publisher API.
pub struct HttpClient {
    addr: SocketAddr,
    host: String,
    source: Option<IpAddr>,
    stream: Option<TcpStream>,
    buf: Vec<u8>,
}

impl HttpClient {
    /// A client for `addr` (connects on first use).
    pub fn new(addr: SocketAddr, host: &str, source: Option<IpAddr>) -> Self {
        HttpClient {
            addr,
            host: host.to_string(),
            source,
            stream: None,
            buf: Vec::with_capacity(1024),
        }
    }

    /// POSTs `body` to `path`; returns the status and the response body. A failed request is not
    /// retried (it might have been carried out).
    pub async fn post(
        &mut self,
        path: &str,
        key: &str,
        body: &[u8],
    ) -> Result<(u16, Vec<u8>), String> {
        let request = wire::post_json(&self.host, path, key, body);
        self.send(&request).await
    }

    /// GETs `path` with the bearer `key`; returns the status and the response body.
    pub async fn get(&mut self, path: &str, key: &str) -> Result<(u16, Vec<u8>), String> {
        let auth = format!("Authorization: Bearer {key}\r\n");
        let request = wire::get_request(&self.host, path, &auth);
        self.send(&request).await
    }

    /// Writes one request and reads its response, connecting first if needed.
    async fn send(&mut self, request: &[u8]) -> Result<(u16, Vec<u8>), String> {
        if self.stream.is_none() {
            self.stream = Some(
                connect(self.addr, self.source)
                    .await
                    .map_err(err("connect"))?,
            );
            self.buf.clear();
        }
        let stream = self.stream.as_mut().expect("connected above");
        let result = async {
            stream.write_all(request).await.map_err(err("write"))?;
            read_response(stream, &mut self.buf).await
        }
        .await;
        if result.is_err() {
            self.stream = None;
        }
        result
    }

    /// Publishes `count` messages stamped with the current time to `channel` in one
    /// `POST /v1/batch`; every one must be stored.
    pub async fn publish_batch_now(
        &mut self,
        channel: &str,
        key: &str,
        count: u64,
    ) -> Result<u64, String> {
        let sent = now_ns();
        let one = format!(
            "{{\"channel\":\"{channel}\",\"data\":{}}}",
            wire::stamp(sent)
        );
        let mut body = String::with_capacity(16 + count as usize * (one.len() + 1));
        body.push_str("{\"messages\":[");
        for i in 0..count {
            if i > 0 {
                body.push(',');
            }
            body.push_str(&one);
        }
        body.push_str("]}");
        let (status, answer) = self.post("/v1/batch", key, body.as_bytes()).await?;
        if status != 200 || lossy(&answer).contains("\"error\"") {
            return Err(format!(
                "batch publish failed: HTTP {status} {}",
                lossy(&answer)
            ));
        }
        Ok(sent)
    }

    /// Publishes one message stamped with the current time to `channel`.
    pub async fn publish_now(&mut self, channel: &str, key: &str) -> Result<u64, String> {
        let sent = now_ns();
        let body = format!("{{\"data\":{}}}", wire::stamp(sent));
        let (status, answer) = self
            .post(
                &format!("/v1/channels/{channel}/messages"),
                key,
                body.as_bytes(),
            )
            .await?;
        if status != 200 {
            return Err(format!("publish failed: HTTP {status} {}", lossy(&answer)));
        }
        Ok(sent)
    }
}
