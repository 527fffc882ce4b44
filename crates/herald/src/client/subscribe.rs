//! Subscribing over WebSocket (`/v1/ws`): sends `connect` (when there is a token) and one
//! `subscribe` per channel, then prints every pushed message as one JSON line. Replies and
//! errors go to stderr; an error reply to `connect` or `subscribe` ends the run with code 1.

use std::collections::HashMap;
use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use futures_util::{SinkExt, StreamExt};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::{self, Message};

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

/// The WebSocket URL for a server base URL: `http` becomes `ws`, `https` becomes `wss`.
pub fn ws_url(base: &str) -> anyhow::Result<String> {
    let url = super::join_url(base, "/v1/ws");
    for (from, to) in [("http://", "ws://"), ("https://", "wss://")] {
        if let Some(rest) = url.strip_prefix(from) {
            return Ok(format!("{to}{rest}"));
        }
    }
    if url.starts_with("ws://") || url.starts_with("wss://") {
        return Ok(url);
    }
    bail!("server URL {base:?} must start with http://, https://, ws:// or wss://")
}

/// The frames sent after the WebSocket opens, with what each request id was for.
pub fn opening_frames(opts: &SubscribeOptions) -> (Vec<String>, HashMap<u64, String>) {
    let mut frames = Vec::new();
    let mut pending = HashMap::new();
    let mut id = 0;
    if let Some(token) = &opts.token {
        id += 1;
        frames.push(json!({"id": id, "connect": {"token": token}}).to_string());
        pending.insert(id, "connect".to_owned());
    }
    for channel in &opts.channels {
        id += 1;
        let mut body = json!({ "channel": channel });
        if let Some(seq) = opts.since {
            body["since"] = json!({ "seq": seq });
            if let Some(epoch) = &opts.epoch {
                body["since"]["epoch"] = json!(epoch);
            }
        }
        if opts.last {
            body["last"] = json!(true);
        }
        frames.push(json!({"id": id, "subscribe": body}).to_string());
        pending.insert(id, format!("subscribe to {channel:?}"));
    }
    (frames, pending)
}

#[derive(Deserialize)]
struct ServerFrame<'a> {
    id: Option<u64>,
    #[serde(borrow)]
    message: Option<&'a RawValue>,
    error: Option<ErrorBody>,
    disconnect: Option<ErrorBody>,
    #[serde(borrow)]
    subscribe: Option<&'a RawValue>,
    #[serde(borrow)]
    connect: Option<&'a RawValue>,
    pong: Option<serde::de::IgnoredAny>,
}

#[derive(Deserialize)]
struct ErrorBody {
    #[serde(default)]
    code: String,
    #[serde(default)]
    message: String,
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
        let Ok(frame) = serde_json::from_str::<ServerFrame>(text) else {
            let _ = writeln!(err, "unexpected frame from server: {text}");
            return Step::Continue;
        };
        if let Some(message) = frame.message {
            if writeln!(out, "{}", message.get())
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
        if let Some(e) = frame.error {
            let what = what.unwrap_or_else(|| "request".to_owned());
            let _ = writeln!(err, "error: {what} failed: {} ({})", e.message, e.code);
            return Step::Exit(1);
        }
        if let Some(e) = frame.disconnect {
            let _ = writeln!(
                err,
                "disconnected by the server: {} ({})",
                e.message, e.code
            );
            return Step::Exit(1);
        }
        if let Some(reply) = frame.subscribe {
            let _ = writeln!(err, "subscribed: {}", reply.get());
        } else if let Some(reply) = frame.connect {
            let _ = writeln!(err, "connected: {}", reply.get());
        } else if frame.pong.is_none() {
            let _ = writeln!(err, "server: {text}");
        }
        Step::Continue
    }
}

/// Connects, subscribes and prints messages until a stop condition; returns the exit code.
pub async fn subscribe(opts: &SubscribeOptions) -> anyhow::Result<ExitCode> {
    let url = ws_url(&opts.url)?;
    let (mut ws, _) = tokio_tungstenite::connect_async(url.as_str())
        .await
        .map_err(|e| connect_error(&url, e))?;
    let (frames, pending) = opening_frames(opts);
    for frame in frames {
        ws.send(Message::text(frame))
            .await
            .context("sending to the server")?;
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
            frame = ws.next() => match frame {
                Some(Ok(Message::Text(text))) => {
                    if let Step::Exit(code) = handler.handle(text.as_str(), &mut stdout, &mut stderr) {
                        break code;
                    }
                }
                Some(Ok(Message::Close(close))) => {
                    match close {
                        Some(c) => eprintln!("connection closed by the server: {} ({})", c.reason, c.code),
                        None => eprintln!("connection closed by the server"),
                    }
                    break 1;
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => bail!("connection to {url} failed: {e}"),
                None => {
                    eprintln!("connection closed by the server");
                    break 1;
                }
            },
            _ = ping.tick() => {
                ws.send(Message::text(r#"{"ping":{}}"#)).await.context("sending ping")?;
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
    let _ = tokio::time::timeout(Duration::from_secs(1), ws.close(None)).await;
    Ok(ExitCode::from(code))
}

/// Explains a failed WebSocket handshake, using the server's JSON error when it sent one.
fn connect_error(url: &str, e: tungstenite::Error) -> anyhow::Error {
    if let tungstenite::Error::Http(response) = &e {
        let status = response.status();
        let body = response.body().as_deref().unwrap_or_default();
        let message = serde_json::from_slice::<Value>(body)
            .ok()
            .and_then(|v| v["error"]["message"].as_str().map(str::to_owned))
            .unwrap_or_else(|| String::from_utf8_lossy(body).trim().to_owned());
        return anyhow::anyhow!("{url} refused the WebSocket (HTTP {status}): {message}");
    }
    anyhow::anyhow!("cannot connect to {url}: {e}")
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn urls_become_websocket_urls() {
        assert_eq!(ws_url("http://h:1/").unwrap(), "ws://h:1/v1/ws");
        assert_eq!(ws_url("https://h/x").unwrap(), "wss://h/x/v1/ws");
        assert_eq!(ws_url("ws://h").unwrap(), "ws://h/v1/ws");
        assert!(ws_url("h:1").is_err());
    }

    #[test]
    fn opening_frames_follow_the_protocol() {
        let (frames, pending) = opening_frames(&opts());
        assert_eq!(frames[0], r#"{"connect":{"token":"t"},"id":1}"#);
        let sub: Value = serde_json::from_str(&frames[2]).unwrap();
        assert_eq!(
            sub,
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
        let sub: Value = serde_json::from_str(&frames[0]).unwrap();
        assert_eq!(
            sub,
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
        let msg = r#"{"message":{"channel":"news","seq":42,"data":{"b":1,"a":2}}}"#;
        assert_eq!(h.handle(msg, &mut out, &mut err), Step::Continue);
        assert_eq!(
            h.handle(r#"{"pong":{}}"#, &mut out, &mut err),
            Step::Continue
        );
        assert_eq!(h.handle(msg, &mut out, &mut err), Step::Exit(0));
        let out = String::from_utf8(out).unwrap();
        assert_eq!(
            out.lines().next(),
            Some(r#"{"channel":"news","seq":42,"data":{"b":1,"a":2}}"#)
        );
        assert!(String::from_utf8(err).unwrap().starts_with("subscribed: "));
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
