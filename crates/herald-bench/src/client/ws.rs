//! The WebSocket load client: upgrade, `connect`/`subscribe` frames written by hand, server
//! frames classified by [`crate::wire::classify_ws_text`] straight from the read buffer.

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;

use super::{
    action_channels, channel_list, connect, connection_token, err, inbox_start, lossy, read_head,
    reserve, Fire, Inbox, Ready, Tally,
};
use crate::proto::{Action, Plan};
use crate::wire::{self, find_ts, now_ns, ServerText};
use crate::worker::Shared;
use herald_client::url::encode_query;

pub(super) async fn ws(
    sh: &Shared,
    n: u64,
    plan: &Plan,
    ready: &Ready,
    mut fire: watch::Receiver<Option<Fire>>,
) -> Result<(), String> {
    let cfg = &sh.cfg;
    let token = connection_token(sh, n, plan)?;
    let mut inbox = Inbox::of(plan);
    let mut stream = connect(cfg.addr, cfg.source_ip, cfg.rcvbuf)
        .await
        .map_err(err("connect"))?;
    inbox_start(sh, ready, &mut fire, &mut inbox).await?;
    let path = match &token {
        Some(t) => format!("/v1/ws?token={}", encode_query(t)),
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
    // `--one-at-a-time`: the storm's channels still to subscribe, one per acknowledgement.
    let mut one_by_one: std::collections::VecDeque<String> = Default::default();
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
        let acks_before = tally.acks;
        while let Some(f) = wire::ws_parse(&mut buf[at..]) {
            let payload = &buf[at + f.start..at + f.end];
            match f.opcode {
                1 | 0 => {
                    let acking = Acking {
                        out: &mut out,
                        next_id: &mut next_id,
                    };
                    if let Err(e) = ws_text(payload, &mut tally, &mut pending, &mut inbox, acking) {
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
        let acked = tally.acks.saturating_sub(acks_before);
        if !tally.is_empty() {
            sh.apply(now, &mut tally);
        }
        for _ in 0..acked {
            if let Some(ch) = one_by_one.pop_front() {
                push_subscribe(&mut out, next_id, &ch);
                next_id += 1;
                tally.ack_sent_ns = now_ns();
            }
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
                    Some(a @ Action::Subscribe { one_at_a_time, batch, .. }) => {
                        tally.ack_sent_ns = now_ns();
                        let mut all = action_channels(&a, n).into_iter();
                        let now: Vec<String> = if one_at_a_time {
                            let first = all.next();
                            one_by_one.extend(all);
                            first.into_iter().collect()
                        } else {
                            all.collect()
                        };
                        for chunk in now.chunks(batch.max(1) as usize) {
                            push_subscribes(&mut out, &mut next_id, chunk);
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

/// One WebSocket message subscribing to `channels`: a single command, or a batch (a JSON array
/// of commands) when there are several; ids count on from `next_id`.
fn push_subscribes(out: &mut Vec<u8>, next_id: &mut u64, channels: &[String]) {
    if let [channel] = channels {
        push_subscribe(out, *next_id, channel);
        *next_id += 1;
        return;
    }
    let mut body = String::with_capacity(channels.len() * 48 + 2);
    for (i, channel) in channels.iter().enumerate() {
        body.push(if i == 0 { '[' } else { ',' });
        body.push_str(&format!(
            "{{\"id\":{},\"subscribe\":{{\"channel\":\"{channel}\"}}}}",
            *next_id
        ));
        *next_id += 1;
    }
    body.push(']');
    wire::ws_frame(1, body.as_bytes(), out);
}

/// Where a device connection that acknowledges its inbox writes its `ack` commands.
struct Acking<'a> {
    out: &'a mut Vec<u8>,
    next_id: &'a mut u64,
}

/// Handles one server text frame; an `Err` closes the connection.
fn ws_text(
    p: &[u8],
    tally: &mut Tally,
    pending: &mut u64,
    inbox: &mut Option<Inbox>,
    acking: Acking<'_>,
) -> Result<(), String> {
    match wire::classify_ws_text(p) {
        ServerText::Message => {
            let ts = find_ts(p);
            if let Some(ts) = ts {
                tally.sent.push(ts);
            }
            if let Some(i) = inbox {
                i.count(tally);
                if i.ack {
                    let (log, seq) = wire::inbox_position(p)
                        .ok_or_else(|| format!("an inbox message without its log: {}", lossy(p)))?;
                    let body = format!(
                        "{{\"id\":{},\"ack\":{{\"channel\":\"{log}\",\"seq\":{seq}}}}}",
                        acking.next_id
                    );
                    *acking.next_id += 1;
                    wire::ws_frame(1, body.as_bytes(), acking.out);
                    i.acked_sent_ns = ts.unwrap_or_else(now_ns);
                }
            }
        }
        ServerText::InboxOpened => {
            if let Some(i) = inbox {
                i.opened(tally);
            }
        }
        ServerText::Acked => {
            if let Some(i) = inbox {
                i.acked(tally);
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
