//! `herald subscribe CHANNEL...`: prints a channel's messages as JSON lines. It opens a
//! WebSocket with `herald-client`, sends `connect` (when there is a token) and one `subscribe`
//! per channel, then prints every pushed message as one JSON line on stdout; replies and errors
//! go to stderr, and an error reply to `connect` or `subscribe` ends the run with code 1.
//!
//! It keeps each channel's cursor (epoch and seq of the last message printed), so when the
//! connection is lost or the server shuts down or restarts it reconnects with backoff and
//! resubscribes from those cursors: every message is printed once, in order. A resume the
//! server could not make exactly (`recovered: false` for a cursor it was sent) is a warning
//! on stderr naming what may be missing.

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use herald_client::proto::command::{self, ClientFrame, Command};
use herald_client::proto::reply::{ServerBody, ServerFrame, SubscribeReply};
use herald_client::url::{ws_url, DEFAULT_URL};
use herald_client::ws::WsClient;

pub const EXAMPLES: &str = "\
Examples:
  herald subscribe news
  herald subscribe news 'chat/room-42' --token \"$(herald token --sub me --channel '**')\"
  herald subscribe news --since 41           # resume after seq 41
  herald subscribe prices/EURUSD --last      # start with the newest message
  herald subscribe news --count 1 --timeout 10s | jq .data

Each message is printed on stdout as one JSON line ({\"channel\",\"seq\",\"id\",\"time\",\"data\"});
replies and errors go to stderr. When the connection drops or the server shuts down or
restarts, it reconnects (backoff up to 5 s) and resumes each channel after the last message
printed, so nothing is printed twice or skipped; a resume the server cannot make exactly is a
warning on stderr. Exit codes: 0 after Ctrl-C, --count messages or --timeout; 1 if the first
connection fails, or the server rejects the token or a subscription, or disconnects for a
reason a reconnect cannot fix (an expired token), or the connection is lost with
--no-reconnect; 124 if --timeout passes before --count messages arrived.";

/// Flags of `herald subscribe`.
#[derive(Debug, clap::Args)]
pub struct SubscribeArgs {
    /// Channels to subscribe to
    #[arg(required = true, value_name = "CHANNEL")]
    pub channels: Vec<String>,
    /// Resume after this seq (messages with a greater seq are replayed first)
    #[arg(long, value_name = "SEQ", conflicts_with = "last")]
    pub since: Option<u64>,
    /// Epoch that --since refers to (default: the channel's current epoch)
    #[arg(long, value_name = "EPOCH", requires = "since")]
    pub epoch: Option<String>,
    /// Start with each channel's last message
    #[arg(long)]
    pub last: bool,
    /// Exit after this many messages
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub count: Option<u64>,
    /// Exit after this long, e.g. 30s or 5m
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub timeout: Option<Duration>,
    /// Client token (if none, subscribe anonymously)
    #[arg(
        long,
        env = "HERALD_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    pub token: Option<String>,
    /// Server URL
    #[arg(long, env = "HERALD_URL", default_value = DEFAULT_URL, value_name = "URL", value_parser = super::args::server_url)]
    pub url: String,
    /// Exit with 1 when the connection is lost instead of reconnecting and resuming
    #[arg(long)]
    pub no_reconnect: bool,
}

/// Subscribes until a stop condition.
pub async fn run(args: SubscribeArgs) -> anyhow::Result<ExitCode> {
    let opts = SubscribeOptions {
        url: args.url,
        token: args.token.filter(|t| !t.is_empty()),
        channels: args.channels,
        since: args.since,
        epoch: args.epoch,
        last: args.last,
        count: args.count,
        timeout: args.timeout,
        ping_every: Duration::from_secs(25),
        reconnect: !args.no_reconnect,
    };
    subscribe(&opts).await
}

/// What to subscribe to and when to stop.
#[derive(Debug, Clone)]
pub struct SubscribeOptions {
    /// Server base URL (`http://`, `https://`, `ws://` or `wss://`).
    pub url: String,
    /// Client token; `None` subscribes anonymously.
    pub token: Option<String>,
    /// Channels to subscribe to.
    pub channels: Vec<String>,
    /// Resume after this seq.
    pub since: Option<u64>,
    /// Epoch of `since` (omitted: the channel's current epoch).
    pub epoch: Option<String>,
    /// Ask for each channel's last message first.
    pub last: bool,
    /// Stop after this many messages.
    pub count: Option<u64>,
    /// Stop after this long.
    pub timeout: Option<Duration>,
    /// How often to send `ping`.
    pub ping_every: Duration,
    /// Reconnect and resume when the connection is lost (else exit 1).
    pub reconnect: bool,
}

/// Exit code when `--timeout` passes before `--count` messages arrived.
pub const TIMED_OUT: u8 = 124;

/// Where a channel's stream stands: the epoch and seq of the last message printed (or the
/// subscribe reply's newest seq, before any message), or the user's `--since`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Position {
    /// The epoch; `None` means the channel's current one (a `--since` without `--epoch`).
    pub epoch: Option<String>,
    /// The seq.
    pub seq: u64,
}

/// Each channel's position, in the order the channels were named.
pub fn initial_positions(opts: &SubscribeOptions) -> Vec<(String, Option<Position>)> {
    opts.channels
        .iter()
        .map(|c| {
            let at = opts.since.map(|seq| Position {
                epoch: opts.epoch.clone(),
                seq,
            });
            (c.clone(), at)
        })
        .collect()
}

/// The frames sent after the WebSocket opens, with what each request id was for: `connect`
/// (with a token), then one `subscribe` per channel, resuming from its position if it has one.
pub fn opening_frames(
    opts: &SubscribeOptions,
    positions: &[(String, Option<Position>)],
) -> (Vec<ClientFrame>, HashMap<u64, String>) {
    let mut frames = Vec::new();
    let mut pending = HashMap::new();
    let mut id = 0;
    if let Some(token) = &opts.token {
        id += 1;
        frames.push(ClientFrame {
            id: Some(id),
            command: Command::Connect(command::Connect {
                token: Some(token.clone()),
            }),
        });
        pending.insert(id, "connect".to_owned());
    }
    for (channel, at) in positions {
        id += 1;
        frames.push(ClientFrame {
            id: Some(id),
            command: Command::Subscribe(command::Subscribe {
                channel: channel.clone(),
                since: at.as_ref().map(|p| command::Since {
                    seq: p.seq,
                    epoch: p.epoch.clone(),
                }),
                last: (opts.last && at.is_none()).then_some(true),
            }),
        });
        pending.insert(id, format!("subscribe to {channel:?}"));
    }
    (frames, pending)
}

/// Whether to keep reading after a frame.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// Keep going.
    Continue,
    /// Stop with this exit code.
    Exit(u8),
    /// The server ended the connection for a reason a reconnect fixes (`shutdown`,
    /// `slow_consumer`): reconnect and resume.
    Reconnect,
}

/// `disconnect` codes after which reconnecting and resuming is the documented remedy.
const RESUMABLE_DISCONNECTS: [&str; 2] = ["shutdown", "slow_consumer"];

/// Handles one server text frame: messages to `out` (one JSON line, flushed), the rest to `err`;
/// keeps every channel's position for the next connection.
pub struct FrameHandler {
    pending: HashMap<u64, String>,
    count: Option<u64>,
    /// Messages printed so far.
    pub received: u64,
    /// Each channel's position, in the order named.
    pub positions: Vec<(String, Option<Position>)>,
    /// Channels whose subscribe on this connection named a position.
    resuming: HashSet<String>,
}

impl FrameHandler {
    /// A handler starting from `positions` and stopping after `count` messages.
    pub fn new(positions: Vec<(String, Option<Position>)>, count: Option<u64>) -> Self {
        FrameHandler {
            pending: HashMap::new(),
            count,
            received: 0,
            positions,
            resuming: HashSet::new(),
        }
    }

    /// The frames to send on a new connection, remembering what each request id is for.
    pub fn opening(&mut self, opts: &SubscribeOptions) -> Vec<ClientFrame> {
        let (frames, pending) = opening_frames(opts, &self.positions);
        self.pending = pending;
        self.resuming = self
            .positions
            .iter()
            .filter(|(_, at)| at.is_some())
            .map(|(c, _)| c.clone())
            .collect();
        frames
    }

    fn position_mut(&mut self, channel: &str) -> Option<&mut Option<Position>> {
        self.positions
            .iter_mut()
            .find(|(c, _)| c == channel)
            .map(|(_, at)| at)
    }

    /// Notes a subscribe reply: a plain subscribe starts from the reply's newest seq; a resume
    /// the server could not make exactly is warned about, and continues from there too.
    fn subscribed(&mut self, reply: &SubscribeReply<'_>, err: &mut impl Write) {
        let resumed = self.resuming.remove(reply.channel.as_ref());
        let Some(at) = self.position_mut(&reply.channel) else {
            return;
        };
        if resumed && reply.recovered {
            return;
        }
        if resumed {
            if let Some(from) = at.as_ref() {
                let epoch = from.epoch.as_deref().unwrap_or("current");
                let _ = writeln!(
                    err,
                    "warning: could not resume {:?} exactly after seq {} (epoch {epoch}): the \
                     channel is at seq {} of epoch {:?}; messages in between may be missing \
                     (retention removed them, or the channel's log was reset); read them with \
                     GET /v1/channels/{}/messages?since={}",
                    reply.channel, from.seq, reply.seq, reply.epoch, reply.channel, from.seq,
                );
            }
        }
        *at = Some(Position {
            epoch: Some(reply.epoch.to_string()),
            seq: reply.seq,
        });
    }

    /// Handles `text`; a write error on `out` (e.g. a closed pipe) ends the run quietly.
    pub fn handle(&mut self, text: &str, out: &mut impl Write, err: &mut impl Write) -> Step {
        let Ok(frame) = ServerFrame::parse(text) else {
            let _ = writeln!(err, "unexpected frame from server: {text}");
            return Step::Continue;
        };
        if let ServerBody::Message(message) = &frame.body {
            if let Some(at) = self.position_mut(&message.channel) {
                *at = Some(Position {
                    epoch: Some(message.epoch.to_string()),
                    seq: message.seq,
                });
            }
            if writeln!(out, "{}", json(message))
                .and_then(|()| out.flush())
                .is_err()
            {
                return Step::Exit(0);
            }
            self.received += 1;
            return match self.count {
                Some(n) if self.received >= n => Step::Exit(0),
                _ => Step::Continue,
            };
        }
        let what = frame.id.and_then(|id| self.pending.remove(&id));
        match &frame.body {
            ServerBody::Error(e) => {
                let what = what.unwrap_or_else(|| "request".to_owned());
                let _ = writeln!(err, "error: {what} failed: {} ({})", e.message, e.code);
                Step::Exit(1)
            }
            ServerBody::Disconnect(e) => {
                let _ = writeln!(
                    err,
                    "disconnected by the server: {} ({})",
                    e.message, e.code
                );
                if RESUMABLE_DISCONNECTS.contains(&e.code.as_ref()) {
                    Step::Reconnect
                } else {
                    Step::Exit(1)
                }
            }
            ServerBody::Subscribe(reply) => {
                let _ = writeln!(err, "subscribed: {}", json(reply));
                self.subscribed(reply, err);
                Step::Continue
            }
            ServerBody::Connect(reply) => {
                let _ = writeln!(err, "connected: {}", json(reply));
                Step::Continue
            }
            ServerBody::Pong(_) => Step::Continue,
            _ => {
                let _ = writeln!(err, "server: {text}");
                Step::Continue
            }
        }
    }
}

/// A typed body's JSON text: exactly the server's bytes (proto's vectors pin that).
fn json(body: &impl serde::Serialize) -> String {
    serde_json::to_string(body).unwrap_or_default()
}

/// How one connection ended.
enum Ended {
    /// Stop with this exit code.
    Exit(u8),
    /// The connection is gone (or the server said to come back): reconnect if allowed.
    Lost(String),
}

/// Shortest and longest wait before a reconnect; the wait doubles per failed attempt, with
/// full jitter.
const BACKOFF_MIN: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(5);

/// The wait before reconnect attempt `attempt` (0-based): uniform in `[BACKOFF_MIN, cap]`,
/// the cap doubling per attempt up to `BACKOFF_MAX`.
fn backoff(attempt: u32) -> Duration {
    let cap = BACKOFF_MIN
        .saturating_mul(1u32 << attempt.min(10))
        .min(BACKOFF_MAX);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let spread = cap.saturating_sub(BACKOFF_MIN);
    BACKOFF_MIN + spread.mul_f64(f64::from(nanos % 1000) / 1000.0)
}

/// Connects, subscribes and prints messages until a stop condition; returns the exit code.
/// A lost connection is reopened (with backoff) and every channel resumed from its position,
/// unless `opts.reconnect` is off.
pub async fn subscribe(opts: &SubscribeOptions) -> anyhow::Result<ExitCode> {
    let url = ws_url(&opts.url)?;
    let mut handler = FrameHandler::new(initial_positions(opts), opts.count);
    let deadline = async {
        match opts.timeout {
            Some(t) => tokio::time::sleep(t).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(deadline);
    let timed_out = |handler: &FrameHandler| match opts.count {
        Some(n) if handler.received < n => {
            eprintln!("timed out: received {} of {n} messages", handler.received);
            TIMED_OUT
        }
        _ => 0,
    };
    let mut connected_once = false;
    let mut attempt = 0u32;
    let code = loop {
        let opened = tokio::select! {
            opened = WsClient::open_url(&url) => opened,
            _ = &mut deadline => break timed_out(&handler),
            _ = tokio::signal::ctrl_c() => break 0,
        };
        let ended = match opened {
            Ok(ws) => {
                connected_once = true;
                attempt = 0;
                tokio::select! {
                    ended = read(ws, opts, &mut handler) => ended?,
                    _ = &mut deadline => break timed_out(&handler),
                    _ = tokio::signal::ctrl_c() => break 0,
                }
            }
            Err(e) if !connected_once => return Err(connect_error(&url, e)),
            Err(e) => Ended::Lost(connect_error(&url, e).to_string()),
        };
        match ended {
            Ended::Exit(code) => break code,
            Ended::Lost(why) if !opts.reconnect => {
                eprintln!("{why}");
                break 1;
            }
            Ended::Lost(why) => {
                let wait = backoff(attempt);
                attempt = attempt.saturating_add(1);
                eprintln!("{why}; reconnecting in {} ms", wait.as_millis());
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = &mut deadline => break timed_out(&handler),
                    _ = tokio::signal::ctrl_c() => break 0,
                }
            }
        }
    };
    Ok(ExitCode::from(code))
}

/// Subscribes on an open connection and prints until a stop condition or the connection ends.
async fn read(
    mut ws: WsClient,
    opts: &SubscribeOptions,
    handler: &mut FrameHandler,
) -> anyhow::Result<Ended> {
    let lost = |e: herald_client::Error| Ended::Lost(format!("connection lost: {e}"));
    for frame in handler.opening(opts) {
        if let Err(e) = ws.send(&frame).await {
            return Ok(lost(e));
        }
    }
    let start = tokio::time::Instant::now() + opts.ping_every;
    let mut ping = tokio::time::interval_at(start, opts.ping_every);
    let (mut stdout, mut stderr) = (std::io::stdout(), std::io::stderr());
    let ended = loop {
        tokio::select! {
            frame = ws.next_frame() => match frame {
                Ok(Some(frame)) => match handler.handle(frame.text(), &mut stdout, &mut stderr) {
                    Step::Continue => {}
                    Step::Exit(code) => break Ended::Exit(code),
                    Step::Reconnect => break Ended::Lost("the server ended the connection".into()),
                },
                Ok(None) | Err(herald_client::Error::Closed) => {
                    break Ended::Lost(match ws.closed() {
                        Some(c) => format!("connection closed by the server: {} ({})", c.reason, c.code),
                        None => "connection closed by the server".to_owned(),
                    });
                }
                Err(e) => break lost(e),
            },
            _ = ping.tick() => {
                if let Err(e) = ws.send_ping().await {
                    break lost(e);
                }
            }
        }
    };
    if matches!(ended, Ended::Exit(_)) {
        ws.close().await;
    }
    Ok(ended)
}

/// Explains a failed WebSocket handshake, using the server's JSON error when it sent one.
fn connect_error(url: &str, e: herald_client::Error) -> anyhow::Error {
    match e {
        herald_client::Error::Server(e) => {
            let status = e.status.unwrap_or_default();
            let status = reqwest::StatusCode::from_u16(status)
                .map_or_else(|_| status.to_string(), |s| s.to_string());
            anyhow::anyhow!("{url} refused the WebSocket (HTTP {status}): {}", e.message)
        }
        herald_client::Error::WebSocket { source, .. } => {
            anyhow::anyhow!("cannot connect to {url}: {source}")
        }
        e => anyhow::anyhow!("cannot connect to {url}: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn opts() -> SubscribeOptions {
        SubscribeOptions {
            url: "http://127.0.0.1:7070".into(),
            token: Some("t".into()),
            channels: vec!["news".into(), "chat/1".into()],
            since: Some(41),
            epoch: None,
            last: false,
            count: Some(2),
            timeout: None,
            ping_every: Duration::from_secs(25),
            reconnect: true,
        }
    }

    fn json_of(frame: &ClientFrame) -> Value {
        serde_json::to_value(frame).unwrap()
    }

    fn text(buf: Vec<u8>) -> String {
        String::from_utf8(buf).unwrap()
    }

    #[test]
    fn opening_frames_follow_the_protocol() {
        let (frames, pending) = opening_frames(&opts(), &initial_positions(&opts()));
        assert_eq!(json_of(&frames[0]), json!({"connect":{"token":"t"},"id":1}));
        assert_eq!(
            json_of(&frames[2]),
            json!({"id":3,"subscribe":{"channel":"chat/1","since":{"seq":41}}})
        );
        assert_eq!(pending.len(), 3);
        let anon = SubscribeOptions {
            token: None,
            since: None,
            last: true,
            ..opts()
        };
        let (frames, _) = opening_frames(&anon, &initial_positions(&anon));
        assert_eq!(
            json_of(&frames[0]),
            json!({"id":1,"subscribe":{"channel":"news","last":true}})
        );
    }

    #[test]
    fn messages_go_to_stdout_and_count_stops() {
        let mut h = FrameHandler::new(initial_positions(&opts()), Some(2));
        h.opening(&opts());
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let sub =
            r#"{"id":2,"subscribe":{"channel":"news","seq":41,"epoch":"e","recovered":true}}"#;
        assert_eq!(h.handle(sub, &mut out, &mut err), Step::Continue);
        let entry =
            r#"{"channel":"news","seq":42,"epoch":"e","id":"e-42","time":7,"data":{"b":1,"a":2}}"#;
        let msg = format!(r#"{{"message":{entry}}}"#);
        assert_eq!(h.handle(&msg, &mut out, &mut err), Step::Continue);
        assert_eq!(
            h.handle(r#"{"pong":{}}"#, &mut out, &mut err),
            Step::Continue
        );
        assert_eq!(h.handle(&msg, &mut out, &mut err), Step::Exit(0));
        assert_eq!(text(out).lines().next(), Some(entry));
        assert_eq!(
            text(err).lines().next(),
            Some(r#"subscribed: {"channel":"news","seq":41,"epoch":"e","recovered":true}"#)
        );
    }

    #[test]
    fn error_reply_to_subscribe_exits_1() {
        let mut h = FrameHandler::new(initial_positions(&opts()), None);
        h.opening(&opts());
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let e = r#"{"id":3,"error":{"code":"forbidden","message":"no"}}"#;
        assert_eq!(h.handle(e, &mut out, &mut err), Step::Exit(1));
        assert!(
            text(err).contains("subscribe to \"chat/1\" failed: no (forbidden)"),
            "subscribe error not reported"
        );
    }

    #[test]
    fn the_next_connection_resumes_after_the_last_message_printed() {
        let plain = SubscribeOptions {
            since: None,
            token: None,
            last: true,
            ..opts()
        };
        let mut h = FrameHandler::new(initial_positions(&plain), None);
        h.opening(&plain);
        let (mut out, mut err) = (Vec::new(), Vec::new());
        for frame in [
            r#"{"id":1,"subscribe":{"channel":"news","seq":7,"epoch":"e1","recovered":false}}"#,
            r#"{"id":2,"subscribe":{"channel":"chat/1","seq":0,"epoch":"","recovered":false}}"#,
            r#"{"message":{"channel":"news","seq":8,"epoch":"e1","id":"a","time":1,"data":1}}"#,
        ] {
            assert_eq!(h.handle(frame, &mut out, &mut err), Step::Continue);
        }
        assert!(
            !text(err).contains("warning"),
            "a plain subscribe is not a resume"
        );
        let again = h.opening(&plain);
        assert_eq!(
            json_of(&again[0]),
            json!({"id":1,"subscribe":{"channel":"news","since":{"seq":8,"epoch":"e1"}}})
        );
        assert_eq!(
            json_of(&again[1]),
            json!({"id":2,"subscribe":{"channel":"chat/1","since":{"seq":0,"epoch":""}}})
        );
    }

    #[test]
    fn a_resume_the_server_could_not_make_is_a_warning_and_moves_on() {
        let mut h = FrameHandler::new(initial_positions(&opts()), None);
        h.opening(&opts());
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let reply =
            r#"{"id":2,"subscribe":{"channel":"news","seq":90,"epoch":"e2","recovered":false}}"#;
        assert_eq!(h.handle(reply, &mut out, &mut err), Step::Continue);
        let err = text(err);
        assert!(
            err.contains("warning: could not resume \"news\" exactly after seq 41")
                && err.contains("messages?since=41"),
            "{err}"
        );
        let again = h.opening(&opts());
        assert_eq!(
            json_of(&again[1]),
            json!({"id":2,"subscribe":{"channel":"news","since":{"seq":90,"epoch":"e2"}}})
        );
    }

    #[test]
    fn shutdown_and_slow_consumer_reconnect_other_disconnects_exit() {
        let mut h = FrameHandler::new(initial_positions(&opts()), None);
        let (mut out, mut err) = (Vec::new(), Vec::new());
        for (code, step) in [
            ("shutdown", Step::Reconnect),
            ("slow_consumer", Step::Reconnect),
            ("token_expired", Step::Exit(1)),
        ] {
            let frame = format!(r#"{{"disconnect":{{"code":"{code}","message":"m"}}}}"#);
            assert_eq!(h.handle(&frame, &mut out, &mut err), step, "{code}");
        }
    }

    #[test]
    fn backoff_grows_to_its_cap() {
        for attempt in 0..20 {
            let wait = backoff(attempt);
            assert!(wait >= BACKOFF_MIN && wait <= BACKOFF_MAX, "{wait:?}");
        }
    }
}
