//! A Deacon client for `--transport meteor`: it subscribes to one channel on the server's Meteor
//! port (`GET /push/<hostid>/<mode>/<channel>`), reads Deacon's lines (`Channel("name".id)`,
//! `m.p.<id>."channel"."{[text]}"`, `m.p` pings, `m.sd` shutdown) and, whenever the server
//! closes the connection (long-poll: after every message), reconnects with `.r<next id>` as
//! Deacon does, so a message published meanwhile is replayed, never lost. Latencies come from
//! the send time inside each message's text, like every other transport of the bench. Every
//! header received counts as an acknowledged subscription.

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::client::{channel_list, connect, Ready, Tally};
use crate::proto::Plan;
use crate::wire::{find, find_ts, now_ns};
use crate::worker::Shared;

/// A channel name as Meteor spells it in a URL: bytes outside `[A-Za-z0-9_-]` as `%XX`.
fn meteor_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 8);
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || b == b'_' || b == b'-' {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The number right after `prefix` in `line`.
fn number_after(line: &[u8], prefix: &[u8]) -> Option<u64> {
    let at = find(line, prefix)? + prefix.len();
    let digits: Vec<u8> = line[at..]
        .iter()
        .copied()
        .take_while(u8::is_ascii_digit)
        .collect();
    std::str::from_utf8(&digits).ok()?.parse().ok()
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(&b[..b.len().min(200)]).into_owned()
}

/// Runs connection `n` until it fails or the worker exits.
pub async fn deacon(sh: &Shared, n: u64, plan: &Plan, ready: &Ready) -> Result<(), String> {
    let cfg = &sh.cfg;
    let addr = cfg.meteor_addr.ok_or(
        "--transport meteor needs the server's Meteor port: --spawn starts one, with --target \
         give --meteor-target IP:PORT",
    )?;
    let channels = channel_list(plan, n);
    let [channel] = channels.as_slice() else {
        return Err("--transport meteor subscribes one channel per connection: \
                    use the subscribers or channels scenario"
            .into());
    };
    let path = format!(
        "/push/bench{n}/{}/{}",
        cfg.meteor_mode,
        meteor_name(channel)
    );
    let mut next_id: Option<u64> = None;
    let mut buf: Vec<u8> = Vec::with_capacity(1024);
    loop {
        let mut stream = connect(addr, cfg.source_ip, cfg.rcvbuf)
            .await
            .map_err(|e| format!("connect: {e}"))?;
        let sent_ns = now_ns();
        let suffix = next_id.map(|id| format!(".r{id}")).unwrap_or_default();
        let request = format!("GET {path}{suffix} HTTP/1.1\r\nHost: {}\r\n\r\n", cfg.host);
        stream
            .write_all(request.as_bytes())
            .await
            .map_err(|e| format!("write: {e}"))?;
        buf.clear();
        let mut saw_status = false;
        loop {
            let now = now_ns();
            let mut tally = Tally::default();
            let mut at = 0;
            while let Some(end) = find(&buf[at..], b"\r\n") {
                let line = &buf[at..at + end];
                if !saw_status {
                    if !line.starts_with(b"HTTP/1.1 200") {
                        return Err(format!("meteor refused: {}", lossy(line)));
                    }
                    saw_status = true;
                    // Each (re)subscription counts as acknowledged, so a round can wait for
                    // long-poll clients to be back before the next message.
                    tally.acks += 1;
                    tally.ack_sent_ns = sent_ns;
                    ready.ok(sh);
                } else if line.starts_with(b"Channel(") {
                    if next_id.is_none() {
                        next_id = number_after(line, b"\".").map(|last| last + 1);
                    }
                } else if line.starts_with(b"m.p.<") {
                    if let Some(id) = number_after(line, b"m.p.<") {
                        next_id = Some(id + 1);
                    }
                    if let Some(ts) = find_ts(line) {
                        tally.sent.push(ts);
                    }
                } else if line == b"m.sd" {
                    return Err("the server sent m.sd (shutting down)".into());
                }
                at += end + 2;
            }
            buf.drain(..at);
            if !tally.is_empty() {
                sh.apply(now, &mut tally);
            }
            if buf.capacity() - buf.len() < 512 {
                buf.reserve(4096);
            }
            match stream.read_buf(&mut buf).await {
                Ok(0) if saw_status => break,
                Ok(0) => return Err("connection closed before the header".into()),
                Ok(_) => {}
                Err(e) => return Err(format!("read: {e}")),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_deacon_lines() {
        assert_eq!(meteor_name("bench/ab/ch/7"), "bench%2Fab%2Fch%2F7");
        assert_eq!(number_after(b"Channel(\"a%2Fb\".42)", b"\"."), Some(42));
        assert_eq!(
            number_after(b"m.p.<17>.\"a\".\"{[{\"ts\":5}]}\"", b"m.p.<"),
            Some(17)
        );
        assert_eq!(number_after(b"m.p", b"m.p.<"), None);
    }
}
