//! `herald subscribe CHANNEL...`: prints a channel's messages as JSON lines. It opens a
//! WebSocket with `herald-client`, sends `connect` (when there is a token) and one `subscribe`
//! per channel, then prints every pushed message as one JSON line on stdout; replies and errors
//! go to stderr, and an error reply to `connect` or `subscribe` ends the run with code 1.

use std::collections::HashMap;
use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use herald_client::proto::command::{self, ClientFrame, Command};
use herald_client::proto::reply::{ServerBody, ServerFrame};
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
replies and errors go to stderr. Exit codes: 0 after Ctrl-C, --count messages or --timeout;
1 if the server rejects the token or a subscription or closes the connection; 124 if
--timeout passes before --count messages arrived.";

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
    #[arg(long, env = "HERALD_URL", default_value = DEFAULT_URL, value_name = "URL")]
    pub url: String,
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
}

/// Exit code when `--timeout` passes before `--count` messages arrived.
pub const TIMED_OUT: u8 = 124;

/// The frames sent after the WebSocket opens, with what each request id was for.
pub fn opening_frames(opts: &SubscribeOptions) -> (Vec<ClientFrame>, HashMap<u64, String>) {
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
    for channel in &opts.channels {
        id += 1;
        frames.push(ClientFrame {
            id: Some(id),
            command: Command::Subscribe(command::Subscribe {
                channel: channel.clone(),
                since: opts.since.map(|seq| command::Since {
                    seq,
                    epoch: opts.epoch.clone(),
                }),
                last: opts.last.then_some(true),
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
}

/// Handles one server text frame: messages to `out` (one JSON line, flushed), the rest to `err`.
pub struct FrameHandler {
    pending: HashMap<u64, String>,
    count: Option<u64>,
    /// Messages printed so far.
    pub received: u64,
}

impl FrameHandler {
    /// A handler expecting replies to `pending` and stopping after `count` messages.
    pub fn new(pending: HashMap<u64, String>, count: Option<u64>) -> Self {
        FrameHandler {
            pending,
            count,
            received: 0,
        }
    }

    /// Handles `text`; a write error on `out` (e.g. a closed pipe) ends the run quietly.
    pub fn handle(&mut self, text: &str, out: &mut impl Write, err: &mut impl Write) -> Step {
        let Ok(frame) = ServerFrame::parse(text) else {
            let _ = writeln!(err, "unexpected frame from server: {text}");
            return Step::Continue;
        };
        if let ServerBody::Message(message) = &frame.body {
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
                Step::Exit(1)
            }
            ServerBody::Subscribe(reply) => {
                let _ = writeln!(err, "subscribed: {}", json(reply));
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

/// Connects, subscribes and prints messages until a stop condition; returns the exit code.
pub async fn subscribe(opts: &SubscribeOptions) -> anyhow::Result<ExitCode> {
    let url = ws_url(&opts.url)?;
    let mut ws = WsClient::open_url(&url)
        .await
        .map_err(|e| connect_error(&url, e))?;
    let (frames, pending) = opening_frames(opts);
    for frame in &frames {
        ws.send(frame).await.context("sending to the server")?;
    }
    let mut handler = FrameHandler::new(pending, opts.count);
    let deadline = async {
        match opts.timeout {
            Some(t) => tokio::time::sleep(t).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(deadline);
    let start = tokio::time::Instant::now() + opts.ping_every;
    let mut ping = tokio::time::interval_at(start, opts.ping_every);
    let (mut stdout, mut stderr) = (std::io::stdout(), std::io::stderr());
    let code = loop {
        tokio::select! {
            frame = ws.next_frame() => match frame {
                Ok(Some(frame)) => {
                    if let Step::Exit(code) = handler.handle(frame.text(), &mut stdout, &mut stderr) {
                        break code;
                    }
                }
                Ok(None) | Err(herald_client::Error::Closed) => {
                    match ws.closed() {
                        Some(c) => eprintln!("connection closed by the server: {} ({})", c.reason, c.code),
                        None => eprintln!("connection closed by the server"),
                    }
                    break 1;
                }
                Err(herald_client::Error::WebSocket { source, .. }) => {
                    anyhow::bail!("connection to {url} failed: {source}")
                }
                Err(e) => anyhow::bail!("connection to {url} failed: {e}"),
            },
            _ = ping.tick() => {
                ws.send_ping().await.context("sending ping")?;
            }
            _ = &mut deadline => {
                break match opts.count {
                    Some(n) if handler.received < n => {
                        eprintln!("timed out: received {} of {n} messages", handler.received);
                        TIMED_OUT
                    }
                    _ => 0,
                };
            }
            _ = tokio::signal::ctrl_c() => break 0,
        }
    };
    ws.close().await;
    Ok(ExitCode::from(code))
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
        }
    }

    fn json_of(frame: &ClientFrame) -> Value {
        serde_json::to_value(frame).unwrap()
    }

    #[test]
    fn opening_frames_follow_the_protocol() {
        let (frames, pending) = opening_frames(&opts());
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
        let (frames, _) = opening_frames(&anon);
        assert_eq!(
            json_of(&frames[0]),
            json!({"id":1,"subscribe":{"channel":"news","last":true}})
        );
    }

    #[test]
    fn messages_go_to_stdout_and_count_stops() {
        let (_, pending) = opening_frames(&opts());
        let mut h = FrameHandler::new(pending, Some(2));
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
        let out = String::from_utf8(out).unwrap();
        assert_eq!(out.lines().next(), Some(entry));
        let err = String::from_utf8(err).unwrap();
        assert_eq!(
            err.lines().next(),
            Some(r#"subscribed: {"channel":"news","seq":41,"epoch":"e","recovered":true}"#)
        );
    }

    #[test]
    fn error_reply_to_subscribe_exits_1() {
        let (_, pending) = opening_frames(&opts());
        let mut h = FrameHandler::new(pending, None);
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let e = r#"{"id":3,"error":{"code":"forbidden","message":"no"}}"#;
        assert_eq!(h.handle(e, &mut out, &mut err), Step::Exit(1));
        let err = String::from_utf8(err).unwrap();
        assert!(
            err.contains("subscribe to \"chat/1\" failed: no (forbidden)"),
            "{err}"
        );
    }
}
