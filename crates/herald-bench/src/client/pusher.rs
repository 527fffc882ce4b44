//! The Pusher protocol load client (`--transport pusher`, `--peer sockudo`): a WebSocket to
//! `/app/{key}?protocol=7` as pusher-js opens it, a `pusher:subscribe` per channel of the plan
//! once `pusher:connection_established` came, ready once every channel answered
//! `pusher_internal:subscription_succeeded` (a storm's connection, [`Plan::Connect`], is ready
//! once established and subscribes to the fire's channels, each acknowledgement counted); the
//! server's `pusher:ping` answered with `pusher:pong`; events counted with the send time found in
//! their data, which Pusher frames carry as a JSON-encoded string (`"data":"{\"ts\":N}"`),
//! straight from the read buffer.

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;

use super::{
    action_channels, channel_list, connect, err, lossy, read_head, reserve, Fire, Ready, Tally,
};
use crate::proto::{Action, Plan};
use crate::wire::{self, now_ns};
use crate::worker::Shared;

pub(super) async fn pusher(
    sh: &Shared,
    n: u64,
    plan: &Plan,
    ready: &Ready,
    mut fire: watch::Receiver<Option<Fire>>,
) -> Result<(), String> {
    if !matches!(
        plan,
        Plan::Shared { .. } | Plan::Own { .. } | Plan::Set { .. } | Plan::Connect
    ) {
        return Err(
            "the Pusher client subscribes when it connects or when a storm fires \
             (--transport pusher runs fanout, subscribers, subscribe-storm and connections)"
                .into(),
        );
    }
    let cfg = &sh.cfg;
    let key = cfg
        .pusher_key
        .as_deref()
        .ok_or("no Pusher key: give --pusher-key (the app's Pusher credentials)")?;
    let mut stream = connect(cfg.addr, cfg.source_ip, cfg.rcvbuf)
        .await
        .map_err(err("connect"))?;
    let path = format!("/app/{key}?protocol=7&client=herald-bench&version=1");
    stream
        .write_all(&wire::ws_upgrade(&cfg.host, &path))
        .await
        .map_err(err("write"))?;
    let mut buf = Vec::with_capacity(4096);
    let head = read_head(&mut stream, &mut buf).await?;
    if head.status != 101 {
        return Err(format!(
            "Pusher WebSocket upgrade refused: HTTP {}",
            head.status
        ));
    }
    let channels = channel_list(plan, n);
    let mut pending = channels.len() as u64;
    let mut established = false;
    let mut out = Vec::new();
    let mut written = 0;
    let mut tally = Tally {
        ack_sent_ns: now_ns(),
        ..Default::default()
    };
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
                    // A message may hold several frames, one per line.
                    for frame in payload.split(|b| *b == b'\n') {
                        match event(frame) {
                            Event::Established if !established => {
                                established = true;
                                subscribe(&channels, &mut out);
                            }
                            Event::Established => {}
                            Event::Subscribed => {
                                tally.acks += 1;
                                pending = pending.saturating_sub(1);
                            }
                            Event::Ping => wire::ws_frame(
                                1,
                                b"{\"event\":\"pusher:pong\",\"data\":{}}",
                                &mut out,
                            ),
                            Event::Error => closing = Some(format!("Pusher: {}", lossy(frame))),
                            Event::Internal => {}
                            Event::Channel => {
                                if let Some(ts) = find_escaped_ts(frame) {
                                    tally.sent.push(ts);
                                }
                            }
                        }
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
        if established && pending == 0 && ready.pending() {
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
                // A storm (Plan::Connect): every channel of the fire subscribed at once, each
                // acknowledgement timed from now.
                if let (Plan::Connect, Some(a @ Action::Subscribe { .. })) = (plan, action) {
                    let channels = pusher_names(action_channels(&a, n));
                    pending += channels.len() as u64;
                    tally.ack_sent_ns = now_ns();
                    subscribe(&channels, &mut out);
                }
            }
        }
    }
}

/// Appends a `pusher:subscribe` frame for each of `channels` to `out`.
fn subscribe(channels: &[String], out: &mut Vec<u8>) {
    for ch in channels {
        let body = format!("{{\"event\":\"pusher:subscribe\",\"data\":{{\"channel\":\"{ch}\"}}}}");
        wire::ws_frame(1, body.as_bytes(), out);
    }
}

/// Channel names a Pusher server takes: the storm's `{prefix}{user}/{j}` with every `/` written
/// `-` (Pusher names are `A-Z a-z 0-9 _ - = @ , . ;`).
fn pusher_names(mut channels: Vec<String>) -> Vec<String> {
    for c in &mut channels {
        if c.contains('/') {
            *c = c.replace('/', "-");
        }
    }
    channels
}

/// What a server frame is, by its `event`.
#[derive(Debug, PartialEq, Eq)]
enum Event {
    /// `pusher:connection_established`.
    Established,
    /// `pusher_internal:subscription_succeeded`.
    Subscribed,
    /// `pusher:ping`.
    Ping,
    /// `pusher:error` or `pusher:subscription_error`: the run cannot go on with it.
    Error,
    /// Another `pusher:` or `pusher_internal:` event (`pusher:pong`, `pusher:cache_miss`...).
    Internal,
    /// An event on a channel (a trigger's, or `message` for any other publish).
    Channel,
}

const EVENT_KEY: &[u8] = b"\"event\":\"";

/// Classifies a frame by its `event` (the first `"event":"`: in a frame's data, which is a
/// JSON-encoded string, quotes are escaped, so it cannot be there).
fn event(frame: &[u8]) -> Event {
    let Some(at) = memchr::memmem::find(frame, EVENT_KEY) else {
        return Event::Internal;
    };
    let name = &frame[at + EVENT_KEY.len()..];
    let name = &name[..memchr::memchr(b'"', name).unwrap_or(name.len())];
    match name {
        b"pusher:connection_established" => Event::Established,
        b"pusher_internal:subscription_succeeded" => Event::Subscribed,
        b"pusher:ping" => Event::Ping,
        b"pusher:error" | b"pusher:subscription_error" => Event::Error,
        n if n.starts_with(b"pusher:") || n.starts_with(b"pusher_internal:") => Event::Internal,
        _ => Event::Channel,
    }
}

const ESCAPED_TS_KEY: &[u8] = b"\\\"ts\\\":";

/// The send time in a Pusher event whose data string holds the bench's stamp
/// (`"data":"{\"ts\":N}"`); `None` if it holds none.
fn find_escaped_ts(frame: &[u8]) -> Option<u64> {
    let at = memchr::memmem::rfind(frame, ESCAPED_TS_KEY)? + ESCAPED_TS_KEY.len();
    let digits = &frame[at..];
    let len = digits.iter().take_while(|b| b.is_ascii_digit()).count();
    if len == 0 || len > 20 {
        return None;
    }
    std::str::from_utf8(&digits[..len]).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storm_channels_are_named_as_pusher_takes_them() {
        let a = Action::Subscribe {
            prefix: "bench-abc-s-".into(),
            subjects: 2,
            distinct: true,
            one_at_a_time: false,
            one_ping: false,
            batch: 1,
        };
        assert_eq!(
            pusher_names(action_channels(&a, 7)),
            ["bench-abc-s-7-0", "bench-abc-s-7-1"]
        );
        let mut out = Vec::new();
        subscribe(&["bench-abc-s-7-0".to_string()], &mut out);
        let frame = wire::ws_parse(&mut out).expect("a whole frame");
        let v: serde_json::Value = serde_json::from_slice(&out[frame.start..frame.end]).unwrap();
        assert_eq!(v["event"], "pusher:subscribe");
        assert_eq!(v["data"]["channel"], "bench-abc-s-7-0");
    }

    #[test]
    fn frames_are_told_apart_by_their_event() {
        assert_eq!(
            event(br#"{"event":"pusher:connection_established","data":"{\"socket_id\":\"1.2\",\"activity_timeout\":120}"}"#),
            Event::Established
        );
        // serde_json's maps sort their keys: the event may come last.
        assert_eq!(
            event(
                br#"{"channel":"a","data":"{}","event":"pusher_internal:subscription_succeeded"}"#
            ),
            Event::Subscribed
        );
        assert_eq!(event(br#"{"event":"pusher:ping","data":{}}"#), Event::Ping);
        assert_eq!(
            event(br#"{"event":"pusher:error","data":{"code":4001,"message":"no"}}"#),
            Event::Error
        );
        assert_eq!(
            event(br#"{"event":"pusher:cache_miss","channel":"cache-a"}"#),
            Event::Internal
        );
        let message = br#"{"event":"message","channel":"bench-x-fanout","data":"{\"ts\":1763772000123456789}"}"#;
        assert_eq!(event(message), Event::Channel);
        assert_eq!(find_escaped_ts(message), Some(1763772000123456789));
        // An event name in the data string is escaped, so never taken for the frame's.
        let tricky = br#"{"data":"{\"event\":\"pusher:ping\"}","event":"order"}"#;
        assert_eq!(event(tricky), Event::Channel);
        assert_eq!(find_escaped_ts(br#"{"event":"a","data":"{}"}"#), None);
    }
}
