//! One connection to the subscriber port. It reads the request head (bounded in size and time),
//! then: a subscribe writes the mode's header with one channel-info entry per channel, the
//! messages the `.r`/`.b`/`.h` suffixes ask for, then (persistent modes) live messages and pings
//! until `MaxMessages` or `MaxTime` is reached, the client goes away, a newer connection with the
//! same host id replaces it, `/disconnect/<hostid>` asks, or the server shuts down; the last
//! three write the mode's shutdown line first. Non-persistent modes (the polls) answer with what
//! is stored and close. Subscribing and catching up go through the engine, like every transport,
//! so `.r<id>` resumes with no gap and no duplicate.

use std::sync::Arc;
use std::time::Duration;

use herald_core::auth::Client;
use herald_core::lifecycle::Transport;
use herald_core::outbox::{OutFrame, Outbox};
use herald_core::telemetry::telemetry;
use herald_core::{ChannelName, Cursor, Epoch, HeraldError, StoredMessage};
use herald_edge::conn::Conn;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;

use super::conf::Mode;
use super::request::{self, meteor_name, Request, Start, Subscribe};
use super::template::{put_number, OtherVar, Var};
use super::{files, text, Meteor, Stats};
use herald_edge::channels::{StreamRequest, Subscriptions};
use herald_edge::deadlines::Deadlines;
use herald_edge::driver::drain;
use herald_edge::session::{check_limit, Wanted};

/// What `~server~` says.
pub const SERVER_NAME: &str = "Herald";
/// Largest request head read.
const MAX_HEAD_BYTES: usize = 8 * 1024;
/// Longest a single write may block on a client that does not read.
const WRITE_TIMEOUT: Duration = Duration::from_secs(60);

/// Counts the connection in Meteor's statistics and the connections gauge while it lives.
struct Counted<'a>(&'a Stats);

impl<'a> Counted<'a> {
    fn new(stats: &'a Stats) -> Self {
        Stats::add(&stats.subscriber_connections_accepted, 1);
        Stats::add(&stats.current_subscribers, 1);
        telemetry().connections_meteor.increment(1.0);
        Counted(stats)
    }
}

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        Stats::sub(&self.0.current_subscribers);
        telemetry().connections_meteor.decrement(1.0);
    }
}

/// Serves one subscriber-port connection to its end.
pub async fn run(m: Arc<Meteor>, mut tcp: Conn) {
    let _counted = Counted::new(&m.stats);
    // The setup steps are boxed: a connection's task then keeps only what its long idle life
    // needs, not room for the largest step it went through.
    let line = match Box::pin(read_request_line(&mut tcp, &m.edge.settings.deadlines)).await {
        Ok(line) => line,
        Err(Some(why)) => {
            tracing::debug!(why, "meteor: bad request head");
            error(&m, &mut tcp, &m.conf.global).await;
            return super::close_after_error(&mut tcp).await;
        }
        Err(None) => return,
    };
    let request = request::parse(&line, &m.conf.push_prefix);
    drop(line);
    match request {
        Request::Subscribe(s) => subscribe(&m, tcp, s).await,
        Request::Disconnect(hostid) => {
            // Answered the same whether or not it closed anything: the answer tells a stranger
            // nothing about which host ids are connected.
            let from = tcp.tcp().peer_addr().ok().map(|a| a.ip());
            if !m.hosts.kick(&hostid, from) {
                tracing::debug!("meteor: /disconnect for no connection of that host and address");
            }
            let head = header(&m.conf.global, "200 OK", b"");
            let _ = write(&mut tcp, &head).await;
        }
        Request::File(path) => Box::pin(serve_file(&m, &mut tcp, &path)).await,
        Request::Invalid(why) => {
            tracing::debug!(why, "meteor: request not understood");
            error(&m, &mut tcp, &m.conf.global).await;
        }
    }
}

/// The request line, once the whole head has arrived. `Err(Some(why))` for a head that is too
/// large or not text, `Err(None)` when the client went away or was too slow: its first byte
/// must arrive within the `first_byte` deadline and the rest of the head within `head`.
async fn read_request_line(
    tcp: &mut Conn,
    deadlines: &Deadlines,
) -> Result<String, Option<&'static str>> {
    let mut head = Vec::with_capacity(512);
    let mut deadline = Instant::now() + deadlines.first_byte;
    loop {
        if head.windows(2).any(|w| w == b"\n\n") || head.windows(3).any(|w| w == b"\n\r\n") {
            break;
        }
        if head.len() > MAX_HEAD_BYTES {
            return Err(Some("request head larger than 8 KiB"));
        }
        let first = head.is_empty();
        let mut chunk = (&mut *tcp).take(1024);
        match tokio::time::timeout_at(deadline, chunk.read_buf(&mut head)).await {
            Ok(Ok(0)) | Ok(Err(_)) | Err(_) => return Err(None),
            Ok(Ok(_)) if first => deadline = Instant::now() + deadlines.head,
            Ok(Ok(_)) => {}
        }
    }
    let first = head.split(|&b| b == b'\n').next().unwrap_or_default();
    let first = first.strip_suffix(b"\r").unwrap_or(first);
    String::from_utf8(first.to_vec()).map_err(|_| Some("request line is not UTF-8"))
}

async fn write(tcp: &mut Conn, bytes: &[u8]) -> std::io::Result<()> {
    match tokio::time::timeout(WRITE_TIMEOUT, tcp.write_all(bytes)).await {
        Ok(result) => result,
        Err(_) => Err(std::io::ErrorKind::TimedOut.into()),
    }
}

/// The mode's header with `status` and `channel_info`.
fn header(mode: &Mode, status: &str, channel_info: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(256 + channel_info.len());
    mode.header.render(&mut out, |v, out| match v {
        Var::Status => out.extend_from_slice(status.as_bytes()),
        Var::Server => out.extend_from_slice(SERVER_NAME.as_bytes()),
        Var::ServerTime => put_number(out, herald_core::message::now_millis() / 1000),
        Var::ChannelInfo => out.extend_from_slice(channel_info),
        _ => {}
    });
    out
}

/// The protocol's error: the header with `404 Not Found`, then close.
async fn error(m: &Meteor, tcp: &mut Conn, mode: &Mode) {
    Stats::add(&m.stats.errors_served, 1);
    let _ = write(tcp, &header(mode, "404 Not Found", b"")).await;
}

async fn serve_file(m: &Meteor, tcp: &mut Conn, path: &str) {
    let doc = match &m.docs {
        Some(docs) => docs.get(path).await,
        None => None,
    };
    let reply = match doc {
        Some(doc) => {
            Stats::add(&m.stats.documents_served, 1);
            let mut out = files::head("200 OK", doc.content_type, doc.body.len());
            out.extend_from_slice(&doc.body);
            out
        }
        None => {
            Stats::add(&m.stats.documents_not_found, 1);
            files::head("404 Not Found", "text/html", 0)
        }
    };
    let _ = write(tcp, &reply).await;
}

/// Where each channel resumes: `.r<id>` from id (the cursor is the message before it), `.b<n>`
/// and `.h` from the channel's state.
async fn cursors(m: &Meteor, s: &Subscribe) -> Result<Vec<Option<Cursor>>, HeraldError> {
    let mut out = Vec::with_capacity(s.channels.len());
    for spec in &s.channels {
        let cursor = match spec.start {
            Start::Live => None,
            Start::FromId(id) => Some(Cursor {
                epoch: Epoch::default(),
                seq: id.saturating_sub(1),
            }),
            Start::Last(_) | Start::All => {
                let state = m.edge.engine.state(&spec.name).await?;
                let oldest = state.first_seq.saturating_sub(1);
                let seq = match spec.start {
                    Start::Last(n) => state.last_seq.saturating_sub(n).max(oldest),
                    _ => oldest,
                };
                Some(Cursor {
                    epoch: state.epoch,
                    seq,
                })
            }
        };
        out.push(cursor);
    }
    Ok(out)
}

async fn subscribe(m: &Meteor, mut tcp: Conn, s: Subscribe) {
    let Some(mode) = m.conf.mode(&s.mode).cloned() else {
        tracing::debug!(mode = s.mode, "meteor: unknown mode");
        return error(m, &mut tcp, &m.conf.global).await;
    };
    if let Some(refused) = s.channels.iter().find(|c| !m.allows(c.name.as_str())) {
        tracing::debug!(
            channel = refused.name.as_str(),
            "meteor: channel outside meteor_channels"
        );
        return error(m, &mut tcp, &mode).await;
    }
    if check_limit(&m.edge, Wanted::Named(s.channels.len())).is_err() {
        return error(m, &mut tcp, &mode).await;
    }
    let peer = tcp.tcp().peer_addr().ok().map(|a| a.ip());
    let claim = mode.persist.then(|| m.hosts.claim(&s.hostid, peer));
    let outbox = Outbox::new(m.edge.settings.outbox_bytes);
    let opened = async {
        // Meteor has no apps and no tokens: its subscribers are anonymous clients of the
        // default app, whose channels keep their plain names.
        let request = StreamRequest {
            pairs: Vec::new(),
            client: Client::anonymous(),
            names: s.channels.iter().map(|c| c.name.clone()).collect(),
            cursors: cursors(m, &s).await?,
            last: Some(false),
            inbox: false,
            // As in Meteor, `.r<id>` older than what is stored starts at the oldest stored.
            replay_retained_if_lost: true,
            // Anonymous: a presence channel refuses its subscribers (no user id).
            presence: false,
            member: None,
        };
        Subscriptions::open(Transport::Meteor, &m.edge, &request, &outbox, |_, _| None).await
    };
    let (subs, outcomes) = match Box::pin(opened).await {
        Ok(opened) => opened,
        Err(e) => {
            tracing::debug!(error = %e, "meteor: subscribe failed");
            if let Some((id, _)) = &claim {
                m.hosts.release(&s.hostid, *id);
            }
            return error(m, &mut tcp, &mode).await;
        }
    };
    let mut info = Vec::new();
    for (name, outcome) in &outcomes {
        mode.channel_info.render(&mut info, |v, out| match v {
            Var::Name | Var::Channel => out.extend_from_slice(meteor_name(name).as_bytes()),
            Var::LastMsgId => put_number(out, outcome.seq),
            Var::Other(OtherVar::SubscriberCount) => {
                put_number(out, m.edge.engine.subscriber_count(name))
            }
            _ => {}
        });
    }
    let mut session = Session {
        m,
        mode: &mode,
        tcp,
        sent: 0,
        names: outcomes
            .iter()
            .map(|(n, _)| (n.clone(), meteor_name(n)))
            .collect(),
    };
    let head = header(&mode, "200 OK", &info);
    drop(info);
    let end = session.stream(head, &outbox, claim.as_ref()).await;
    if matches!(end, End::Shutdown) && !mode.shutdown.is_empty() {
        let mut out = Vec::new();
        mode.shutdown.render(&mut out, |_, _| {});
        let _ = write(&mut session.tcp, &out).await;
    }
    let _ = session.tcp.shutdown().await;
    drop(subs);
    if let Some((id, _)) = &claim {
        m.hosts.release(&s.hostid, *id);
    }
}

/// Why a subscriber connection ends.
enum End {
    /// Say nothing more (MaxMessages, MaxTime, poll answered, slow consumer, client gone).
    Quiet,
    /// Write the shutdown line (server shutdown, replaced, disconnect requested).
    Shutdown,
}

/// What woke a persistent connection.
enum Wake {
    Frames(std::collections::VecDeque<OutFrame>, bool),
    Ping,
    Ended(End),
    Readable,
}

struct Session<'a> {
    m: &'a Meteor,
    mode: &'a Mode,
    tcp: Conn,
    sent: u64,
    /// The subscribed channels with their Meteor names, encoded once.
    names: Vec<(ChannelName, String)>,
}

impl Session<'_> {
    /// Writes the header and then messages until the connection should end.
    async fn stream(
        &mut self,
        head: Vec<u8>,
        outbox: &Outbox,
        claim: Option<&(u64, tokio_util::sync::CancellationToken)>,
    ) -> End {
        {
            // Scoped so that neither the header nor the replay stays with an idle connection.
            let (frames, _) = outbox.take();
            let mut out = head;
            self.render(&frames, &mut out);
            if write(&mut self.tcp, &out).await.is_err() {
                return End::Quiet;
            }
        }
        if !self.mode.persist || self.done() {
            return End::Quiet;
        }
        let shutdown = self.m.edge.shutdown.clone();
        let kicked = claim.map(|(_, t)| t.clone()).unwrap_or_default();
        let deadline = (!self.mode.max_time.is_zero())
            .then(|| tokio::time::Instant::now() + self.mode.max_time);
        let mut pings = self.m.pings.as_ref().map(|p| p.subscribe());
        loop {
            let wake = tokio::select! {
                (frames, closed) = outbox.next_batch() => Wake::Frames(frames, closed.is_some()),
                _ = next_ping(&mut pings) => Wake::Ping,
                _ = until(deadline) => Wake::Ended(End::Quiet),
                _ = kicked.cancelled() => Wake::Ended(End::Shutdown),
                _ = shutdown.cancelled() => Wake::Ended(End::Shutdown),
                _ = self.tcp.readable() => Wake::Readable,
            };
            match wake {
                Wake::Frames(frames, closed) => {
                    let mut out = Vec::new();
                    self.render(&frames, &mut out);
                    if write(&mut self.tcp, &out).await.is_err() || closed || self.done() {
                        return End::Quiet;
                    }
                }
                Wake::Ping => {
                    let mut out = Vec::new();
                    self.mode.ping.render(&mut out, |_, _| {});
                    if write(&mut self.tcp, &out).await.is_err() {
                        return End::Quiet;
                    }
                }
                Wake::Ended(end) => return end,
                Wake::Readable => {
                    // Meteor ignores what a subscriber sends after its request; only notice
                    // the end of the connection.
                    let mut discard = [0u8; 256];
                    match self.tcp.try_read(&mut discard) {
                        Ok(0) => return End::Quiet,
                        Ok(_) => {}
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                        Err(_) => return End::Quiet,
                    }
                }
            }
        }
    }

    fn done(&self) -> bool {
        self.mode.max_messages > 0 && self.sent >= self.mode.max_messages
    }

    /// Renders every message of `frames` through the mode's message template.
    fn render(&mut self, frames: &std::collections::VecDeque<OutFrame>, out: &mut Vec<u8>) {
        drain::record_lag(frames);
        let mut n = 0u64;
        for msg in drain::messages(frames) {
            let name = match self.names.iter().find(|(n, _)| *n == msg.channel) {
                Some((_, name)) => std::borrow::Cow::Borrowed(name.as_str()),
                None => std::borrow::Cow::Owned(meteor_name(&msg.channel)),
            };
            render_message(self.mode, msg, &name, out);
            n += 1;
        }
        self.sent += n;
        Stats::add(&self.m.stats.messages_served, n);
        telemetry().written_meteor.increment(n);
    }
}

fn render_message(mode: &Mode, msg: &StoredMessage, name: &str, out: &mut Vec<u8>) {
    mode.message.render(out, |v, out| match v {
        Var::Id => put_number(out, msg.seq),
        Var::Channel => out.extend_from_slice(name.as_bytes()),
        Var::Text => text::write_escaped(mode.text_escape, &text::of(msg), out),
        Var::Timestamp => put_number(out, msg.time / 1000),
        _ => {}
    });
}

async fn next_ping(pings: &mut Option<tokio::sync::watch::Receiver<u64>>) {
    if let Some(rx) = pings {
        if rx.changed().await.is_ok() {
            return;
        }
    }
    std::future::pending().await
}

async fn until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    /// Every idle subscriber holds its connection's task: keep it small. (A 4 KiB read buffer
    /// held across an await once made it 4.5 KiB.)
    #[test]
    fn a_connection_task_stays_small() {
        fn future_size<A, B, F>(_: fn(A, B) -> F) -> usize {
            std::mem::size_of::<F>()
        }
        let size = future_size(super::run);
        assert!(size <= 2048, "session::run's future is {size} bytes");
    }
}
