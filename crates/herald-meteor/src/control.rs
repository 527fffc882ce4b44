//! One connection to the controller port: lines in, replies out, as many commands as the
//! controller sends. `ADDMESSAGE` publishes through the engine (the text stored as a JSON
//! string) and answers `OK\t<id>` with the message's seq; `COUNTSUBSCRIBERS` answers `OK <n>`
//! (live subscribers of the channel on this node, whatever their transport); `LISTCHANNELS`
//! and `SHOWSTATS` answer `OK`, lines, `--EOT--`; `QUIT` answers `OK` and closes. A syntax
//! error answers `ERR Invalid command syntax`; a channel name Herald cannot use or a store
//! failure answers `ERR <reason>`. When a password is configured, the first line must be
//! `AUTH <password>` (answered `OK`), else `ERR Authentication failed` and the connection closes.
//! Lines longer than the frame limit close the connection after `ERR Line too long`. A
//! connection that sends no complete line for `meteor_control_idle` is closed.

use std::sync::Arc;

use herald_core::telemetry::telemetry;
use herald_core::tenant::AppId;
use herald_core::ChannelName;
use herald_edge::conn::Conn;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::command::{self, Command};
use super::{Meteor, Stats};

const CRLF: &str = "\r\n";
/// Channels read per page for LISTCHANNELS and the channel count.
const LIST_PAGE: usize = 1000;

/// Reads lines from a connection, bounded in length.
struct Lines {
    buf: Vec<u8>,
    max: usize,
}

enum Line {
    Text(String),
    TooLong,
    Closed,
}

impl Lines {
    async fn next(&mut self, tcp: &mut Conn) -> Line {
        loop {
            if let Some(end) = self.buf.iter().position(|&b| b == b'\n') {
                if end > self.max {
                    return Line::TooLong;
                }
                let mut line: Vec<u8> = self.buf.drain(..=end).collect();
                line.pop();
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                return Line::Text(String::from_utf8_lossy(&line).into_owned());
            }
            if self.buf.len() > self.max {
                return Line::TooLong;
            }
            // At most 4 KiB per read, so the buffer never grows far past the line limit.
            match (&mut *tcp).take(4096).read_buf(&mut self.buf).await {
                Ok(0) | Err(_) => return Line::Closed,
                Ok(_) => {}
            }
        }
    }
}

/// Compares without stopping at the first difference.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Serves one controller connection to its end.
pub async fn run(m: Arc<Meteor>, mut tcp: Conn) {
    Stats::add(&m.stats.controller_connections_accepted, 1);
    Stats::add(&m.stats.current_controllers, 1);
    telemetry().connections_meteor_control.increment(1.0);
    serve(&m, &mut tcp).await;
    let _ = tcp.shutdown().await;
    Stats::sub(&m.stats.current_controllers);
    telemetry().connections_meteor_control.decrement(1.0);
}

async fn serve(m: &Meteor, tcp: &mut Conn) {
    let mut lines = Lines {
        buf: Vec::new(),
        max: m.edge.settings.max_frame_bytes,
    };
    let shutdown = m.edge.shutdown.clone();
    let mut authenticated = m.control_password.is_none();
    let idle = m.edge.settings.deadlines.meteor_control_idle;
    loop {
        let line = tokio::select! {
            line = tokio::time::timeout(idle, lines.next(tcp)) => match line {
                Ok(line) => line,
                Err(_) => {
                    tracing::debug!("meteor controller idle past its deadline; closing");
                    return;
                }
            },
            _ = shutdown.cancelled() => {
                if !m.conf.controller_shutdown.is_empty() {
                    let _ = tcp.write_all(&m.conf.controller_shutdown).await;
                }
                return;
            }
        };
        let line = match line {
            Line::Text(line) => line,
            Line::TooLong => {
                let _ = tcp.write_all(b"ERR Line too long\r\n").await;
                return super::close_after_error(tcp).await;
            }
            Line::Closed => return,
        };
        if !authenticated {
            let password = m.control_password.as_deref().unwrap_or_default();
            let given = line.strip_prefix("AUTH ").unwrap_or_default();
            if !same_secret(given.as_bytes(), password.as_bytes()) {
                let _ = tcp.write_all(b"ERR Authentication failed\r\n").await;
                return;
            }
            authenticated = true;
            if tcp.write_all(b"OK\r\n").await.is_err() {
                return;
            }
            continue;
        }
        let (reply, quit) = execute(m, command::parse(&line)).await;
        if tcp.write_all(reply.as_bytes()).await.is_err() || quit {
            return;
        }
    }
}

/// The reply to one command, and whether to close afterwards.
async fn execute(m: &Meteor, cmd: Command<'_>) -> (String, bool) {
    let reply = match cmd {
        Command::AddMessage { channel, text } => add_message(m, channel, text).await,
        Command::CountSubscribers { channel } => match ChannelName::parse(channel) {
            Ok(name) => format!("OK {}{CRLF}", m.edge.engine.subscriber_count(&name)),
            Err(e) => format!("ERR {}{CRLF}", e.message),
        },
        Command::ListChannels => list_channels(m).await,
        Command::ShowStats => show_stats(m).await,
        Command::Quit => return (format!("OK{CRLF}"), true),
        Command::Invalid => format!("ERR Invalid command syntax{CRLF}"),
    };
    (reply, false)
}

async fn add_message(m: &Meteor, channel: &str, text: &str) -> String {
    let name = match ChannelName::parse(channel) {
        Ok(name) => name,
        Err(e) => return format!("ERR {}{CRLF}", e.message),
    };
    let data = match serde_json::to_vec(text) {
        Ok(data) => data,
        Err(e) => return format!("ERR {e}{CRLF}"),
    };
    // Meteor's controller publishes for the default app, under the same rule as its HTTP
    // publisher (size limit, usage count).
    let app = AppId::default_app();
    let publisher = &m.edge.publisher;
    let stored = match publisher.message(&app, None, &data) {
        Ok(message) => publisher.publish(&app, &name, vec![message]).await,
        Err(e) => Err(e),
    };
    match stored {
        Ok(appended) => {
            Stats::add(&m.stats.unique_messages, 1);
            let seq = appended.first().map_or(0, |a| a.message.seq);
            format!("OK\t{seq}{CRLF}")
        }
        Err(e) => format!("ERR {}{CRLF}", e.message),
    }
}

/// Whether a stored channel is one Meteor clients can name: a channel of the default app
/// (plain name), not another app's (`app~name`) nor a push log.
fn is_default_app_channel(name: &ChannelName) -> bool {
    !name.as_str().contains('~')
}

/// `name(stored/subscribers)` per channel of the default app, in name order.
async fn list_channels(m: &Meteor) -> String {
    let mut out = format!("OK{CRLF}");
    let mut after: Option<String> = None;
    loop {
        let page = match m.edge.engine.list(after.as_deref(), LIST_PAGE).await {
            Ok(page) => page,
            Err(e) => return format!("ERR {}{CRLF}", e.message),
        };
        for state in page.iter().filter(|s| is_default_app_channel(&s.name)) {
            let stored = (state.last_seq + 1).saturating_sub(state.first_seq);
            let subscribers = m.edge.engine.subscriber_count(&state.name);
            out.push_str(&format!("{}({stored}/{subscribers}){CRLF}", state.name));
        }
        match page.last() {
            Some(last) if page.len() == LIST_PAGE => after = Some(last.name.to_string()),
            _ => break,
        }
    }
    out.push_str(&format!("--EOT--{CRLF}"));
    out
}

async fn show_stats(m: &Meteor) -> String {
    let mut channels = 0usize;
    let mut after: Option<String> = None;
    loop {
        let Ok(page) = m.edge.engine.list(after.as_deref(), LIST_PAGE).await else {
            break;
        };
        channels += page
            .iter()
            .filter(|s| is_default_app_channel(&s.name))
            .count();
        match page.last() {
            Some(last) if page.len() == LIST_PAGE => after = Some(last.name.to_string()),
            _ => break,
        }
    }
    let mut out = format!("OK{CRLF}uptime: {}{CRLF}", m.uptime());
    out.push_str(&format!("channel_count: {channels}{CRLF}"));
    for (name, value) in m.stats.lines() {
        out.push_str(&format!("{name}: {value}{CRLF}"));
    }
    out.push_str(&format!("--EOT--{CRLF}"));
    out
}
