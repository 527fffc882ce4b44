//! `herald subscribe CHANNEL...`: prints a channel's messages as JSON lines. It runs
//! `herald-client`'s resuming [`Subscriber`] (a WebSocket, `connect` when there is a token, one
//! `subscribe` per channel) and prints what it reports: every message as one JSON line on
//! stdout; replies, reconnects and errors on stderr. An error reply to `connect` or `subscribe`
//! ends the run with code 1.
//!
//! The subscriber keeps each channel's position (epoch and seq of the last message printed), so
//! when the connection is lost or the server shuts down or restarts it reconnects with backoff
//! and resubscribes from those positions: every message is printed once, in order. A resume the
//! server could not make exactly (`recovered: false` for a cursor it was sent) is a warning on
//! stderr naming what may be missing.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use herald_client::proto::reply::ServerFrame;
use herald_client::subscriber::{Event, Lost, Position, Stopped, Subscriber};
use herald_client::url::DEFAULT_URL;
use herald_client::ServerError;

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
    let mut options = Subscriber::builder(args.url)
        .backoff(Duration::from_millis(100), Duration::from_secs(5))
        .ping_every(Duration::from_secs(25))
        .reconnect(!args.no_reconnect);
    if let Some(token) = args.token.filter(|t| !t.is_empty()) {
        options = options.token(token);
    }
    for channel in args.channels {
        options = match args.since {
            Some(seq) => options.channel_after(
                channel,
                Position {
                    epoch: args.epoch.clone(),
                    seq,
                },
            ),
            None if args.last => options.channel_last(channel),
            None => options.channel(channel),
        };
    }
    subscribe(options.build()?, args.count, args.timeout).await
}

/// Exit code when `--timeout` passes before `--count` messages arrived.
pub const TIMED_OUT: u8 = 124;

/// Prints what the subscriber reports until a stop condition; returns the exit code. Only a
/// first connection that cannot be made is an error.
async fn subscribe(
    mut subscriber: Subscriber,
    count: Option<u64>,
    timeout: Option<Duration>,
) -> anyhow::Result<ExitCode> {
    let deadline = async {
        match timeout {
            Some(t) => tokio::time::sleep(t).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(deadline);
    let mut printer = Printer::new(subscriber.url().to_owned(), count);
    let (mut out, mut err) = (std::io::stdout(), std::io::stderr());
    let code = loop {
        let next = tokio::select! {
            next = subscriber.next() => next,
            _ = &mut deadline => break printer.timed_out(&mut err),
            _ = tokio::signal::ctrl_c() => break 0,
        };
        match next {
            Ok(event) => {
                if let Some(code) = printer.event(event, &mut out, &mut err) {
                    subscriber.close().await;
                    break code;
                }
            }
            Err(Stopped::Connect(e)) => return Err(connect_error(subscriber.url(), &e)),
            Err(stopped) => break printer.stopped(stopped, &mut err),
        }
    };
    Ok(ExitCode::from(code))
}

/// Writes events: messages to `out` (one JSON line each, flushed), the rest to `err`; counts
/// messages for `--count`.
struct Printer {
    /// The WebSocket URL, for connection errors.
    url: String,
    count: Option<u64>,
    /// Messages printed so far.
    received: u64,
}

impl Printer {
    fn new(url: String, count: Option<u64>) -> Self {
        Printer {
            url,
            count,
            received: 0,
        }
    }

    /// Prints `event`; `Some(code)` to stop (after `--count` messages, or when `out` cannot be
    /// written, e.g. a closed pipe, which ends the run quietly).
    fn event(&mut self, event: Event, out: &mut impl Write, err: &mut impl Write) -> Option<u8> {
        match event {
            Event::Message(message) => {
                if writeln!(out, "{}", json(&message))
                    .and_then(|()| out.flush())
                    .is_err()
                {
                    return Some(0);
                }
                self.received += 1;
                return match self.count {
                    Some(n) if self.received >= n => Some(0),
                    _ => None,
                };
            }
            Event::Connected(reply) => {
                let _ = writeln!(err, "connected: {}", json(&reply));
            }
            Event::Subscribed(reply) => {
                let _ = writeln!(err, "subscribed: {}", json(&reply));
            }
            Event::ResumeInexact {
                channel,
                after,
                now,
            } => {
                let epoch = after.epoch.as_deref().unwrap_or("current");
                let _ = writeln!(
                    err,
                    "warning: could not resume {channel:?} exactly after seq {} (epoch {epoch}): \
                     the channel is at seq {} of epoch {:?}; messages in between may be missing \
                     (retention removed them, or the channel's log was reset); read them with \
                     GET /v1/channels/{channel}/messages?since={}",
                    after.seq,
                    now.seq,
                    now.epoch.as_deref().unwrap_or_default(),
                    after.seq,
                );
            }
            Event::Reconnecting { after, why, .. } => {
                let why = self.lost(why, err);
                let _ = writeln!(err, "{why}; reconnecting in {} ms", after.as_millis());
            }
            // `herald subscribe` does not ask for presence, so none comes.
            Event::Presence(_) => {}
            Event::Other(frame) => {
                let text = frame.text();
                let _ = match ServerFrame::parse(text) {
                    Ok(_) => writeln!(err, "server: {text}"),
                    Err(_) => writeln!(err, "unexpected frame from server: {text}"),
                };
            }
        }
        None
    }

    /// Prints why the subscriber stopped (other than a first connection that failed); the
    /// exit code, 1.
    fn stopped(&self, stopped: Stopped, err: &mut impl Write) -> u8 {
        let _ = match stopped {
            Stopped::Refused { request, error } => writeln!(
                err,
                "error: {request} failed: {} ({})",
                error.message, error.code
            ),
            Stopped::Disconnected(e) => disconnected(&e, err),
            Stopped::Lost(why) => {
                let why = self.lost(why, err);
                writeln!(err, "{why}")
            }
            other => writeln!(err, "{other}"),
        };
        1
    }

    /// Says why a connection was lost: a `disconnect` is printed as the server said it, and
    /// the line to finish is returned.
    fn lost(&self, why: Lost, err: &mut impl Write) -> String {
        match why {
            Lost::Disconnected(e) => {
                let _ = disconnected(&e, err);
                "the server ended the connection".to_owned()
            }
            Lost::Closed(Some(c)) => {
                format!("connection closed by the server: {} ({})", c.reason, c.code)
            }
            Lost::Closed(None) => "connection closed by the server".to_owned(),
            Lost::Broken(e) => format!("connection lost: {e}"),
            Lost::Connect(e) => connect_error(&self.url, &e).to_string(),
        }
    }

    /// After `--timeout`: 124 if `--count` messages did not all arrive, else 0.
    fn timed_out(&self, err: &mut impl Write) -> u8 {
        match self.count {
            Some(n) if self.received < n => {
                let _ = writeln!(err, "timed out: received {} of {n} messages", self.received);
                TIMED_OUT
            }
            _ => 0,
        }
    }
}

fn disconnected(e: &ServerError, err: &mut impl Write) -> std::io::Result<()> {
    writeln!(
        err,
        "disconnected by the server: {} ({})",
        e.message, e.code
    )
}

/// A typed body's JSON text: exactly the server's bytes (proto's vectors pin that).
fn json(body: &impl serde::Serialize) -> String {
    serde_json::to_string(body).unwrap_or_default()
}

/// Explains a failed WebSocket handshake, using the server's JSON error when it sent one.
fn connect_error(url: &str, e: &herald_client::Error) -> anyhow::Error {
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
    use herald_client::subscriber::Request;
    use herald_client::types::{Connected, Message, Subscribed};

    fn printer(count: Option<u64>) -> Printer {
        Printer::new("ws://127.0.0.1:7070/v1/ws".into(), count)
    }

    fn text(buf: Vec<u8>) -> String {
        String::from_utf8(buf).unwrap()
    }

    fn server_error(code: &str, message: &str) -> ServerError {
        ServerError {
            status: None,
            code: code.into(),
            message: message.into(),
        }
    }

    #[test]
    fn messages_go_to_stdout_and_count_stops() {
        let mut p = printer(Some(2));
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let sub = r#"{"channel":"news","seq":41,"epoch":"e","recovered":true}"#;
        let subscribed: Subscribed = serde_json::from_str(sub).unwrap();
        let connected = Connected {
            sub: "me".into(),
            expires: None,
            unsubscribed: Vec::new(),
        };
        assert_eq!(
            p.event(Event::Connected(connected), &mut out, &mut err),
            None
        );
        assert_eq!(
            p.event(Event::Subscribed(subscribed), &mut out, &mut err),
            None
        );
        let entry =
            r#"{"channel":"news","seq":42,"epoch":"e","id":"e-42","time":7,"data":{"b":1,"a":2}}"#;
        let message = || Event::Message(serde_json::from_str::<Message>(entry).unwrap());
        assert_eq!(p.event(message(), &mut out, &mut err), None);
        assert_eq!(p.event(message(), &mut out, &mut err), Some(0));
        assert_eq!(text(out).lines().next(), Some(entry));
        let err = text(err);
        let mut lines = err.lines();
        assert_eq!(lines.next(), Some(r#"connected: {"sub":"me"}"#));
        assert_eq!(
            lines.next(),
            Some(r#"subscribed: {"channel":"news","seq":41,"epoch":"e","recovered":true}"#)
        );
    }

    #[test]
    fn error_reply_to_subscribe_exits_1() {
        let p = printer(None);
        let mut err = Vec::new();
        let stopped = Stopped::Refused {
            request: Request::Subscribe("chat/1".into()),
            error: server_error("forbidden", "no"),
        };
        assert_eq!(p.stopped(stopped, &mut err), 1);
        assert!(
            text(err).contains("error: subscribe to \"chat/1\" failed: no (forbidden)"),
            "subscribe error not reported"
        );
    }

    #[test]
    fn a_resume_the_server_could_not_make_is_a_warning() {
        let mut p = printer(None);
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let inexact = Event::ResumeInexact {
            channel: "news".into(),
            after: Position {
                epoch: None,
                seq: 41,
            },
            now: Position {
                epoch: Some("e2".into()),
                seq: 90,
            },
        };
        assert_eq!(p.event(inexact, &mut out, &mut err), None);
        let err = text(err);
        assert!(
            err.contains("warning: could not resume \"news\" exactly after seq 41 (epoch current)")
                && err.contains("at seq 90 of epoch \"e2\"")
                && err.contains("messages?since=41"),
            "{err}"
        );
    }

    #[test]
    fn a_disconnect_is_said_before_reconnecting_or_exiting() {
        let mut p = printer(None);
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let reconnecting = Event::Reconnecting {
            attempt: 1,
            after: Duration::from_millis(100),
            why: Lost::Disconnected(server_error("shutdown", "bye")),
        };
        assert_eq!(p.event(reconnecting, &mut out, &mut err), None);
        assert_eq!(
            text(err),
            "disconnected by the server: bye (shutdown)\n\
             the server ended the connection; reconnecting in 100 ms\n"
        );
        let mut err = Vec::new();
        let expired = Stopped::Disconnected(server_error("token_expired", "exp passed"));
        assert_eq!(p.stopped(expired, &mut err), 1);
        assert_eq!(
            text(err),
            "disconnected by the server: exp passed (token_expired)\n"
        );
    }
}
