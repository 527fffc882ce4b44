//! The NATS load client (`--peer nats`): `CONNECT`, a `SUB` per channel of the plan and a `PING`,
//! ready at its `PONG`; at a `subscribe` fire, a `SUB` and a `PING` per channel, all at once or
//! (`--one-at-a-time`) each after the previous one's `PONG`, every `PONG` one acknowledgement;
//! or (`--nats-one-ping`) all the `SUB`s and one `PING` whose `PONG` acknowledges them all;
//! `MSG`s counted with their send time, straight from the read buffer
//! ([`crate::nats::protocol`]). See [`crate::nats`] for how this maps to Herald's protocol.

use std::collections::VecDeque;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;

use super::{action_channels, channel_list, connect, err, lossy, reserve, Fire, Ready, Tally};
use crate::nats::protocol::{self, ServerOp};
use crate::proto::{Action, Plan};
use crate::wire::{find_ts, now_ns};
use crate::worker::Shared;

/// What the `PONG` to each `PING` sent stands for, in the order they were sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Awaiting {
    /// The connection's opening: `CONNECT` and the plan's `SUB`s were processed.
    Ready,
    /// This many subscriptions of a storm were processed.
    Subscribed(u64),
}

pub(super) async fn nats(
    sh: &Shared,
    n: u64,
    plan: &Plan,
    ready: &Ready,
    mut fire: watch::Receiver<Option<Fire>>,
) -> Result<(), String> {
    if matches!(plan, Plan::Inbox { .. }) {
        return Err(
            "NATS has no device inboxes (--peer nats runs fanout, subscribe-storm and connections)"
                .into(),
        );
    }
    let cfg = &sh.cfg;
    let mut stream = connect(cfg.addr, cfg.source_ip, cfg.rcvbuf)
        .await
        .map_err(err("connect"))?;
    let mut buf = Vec::with_capacity(4096);
    // The server speaks first: INFO.
    loop {
        reserve(&mut buf);
        if stream.read_buf(&mut buf).await.map_err(err("read"))? == 0 {
            return Err("connection closed by the NATS server before its INFO".into());
        }
        match protocol::parse(&buf)? {
            Some((ServerOp::Info(_), used)) => {
                buf.drain(..used);
                break;
            }
            Some(_) => {
                return Err(format!(
                    "NATS server spoke before its INFO: {}",
                    lossy(&buf)
                ))
            }
            None => {}
        }
    }
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(protocol::CONNECT);
    let mut next_sid = 1u64;
    for ch in channel_list(plan, n) {
        protocol::sub(&mut out, &protocol::subject(&ch), next_sid);
        next_sid += 1;
    }
    protocol::ping(&mut out);
    let mut awaiting: VecDeque<Awaiting> = VecDeque::from([Awaiting::Ready]);
    let mut written = 0;
    let mut tally = Tally {
        ack_sent_ns: now_ns(),
        ..Default::default()
    };
    // `--one-at-a-time`: the storm's subjects still to subscribe, one per acknowledgement.
    let mut one_by_one: VecDeque<String> = VecDeque::new();
    fire.borrow_and_update();
    let (mut rd, mut wr) = stream.split();
    loop {
        let now = now_ns();
        let mut at = 0;
        let mut acked = 0u64;
        let mut closing = None;
        loop {
            let (op, used) = match protocol::parse(&buf[at..]) {
                Ok(Some(parsed)) => parsed,
                Ok(None) => break,
                Err(e) => {
                    closing = Some(e);
                    break;
                }
            };
            let base = at;
            at += used;
            match op {
                ServerOp::Msg { payload, .. } => {
                    if let Some(ts) = find_ts(&buf[base + payload.start..base + payload.end]) {
                        tally.sent.push(ts);
                    }
                }
                ServerOp::Ping => protocol::pong(&mut out),
                ServerOp::Pong => match awaiting.pop_front() {
                    Some(Awaiting::Ready) => ready.ok(sh),
                    Some(Awaiting::Subscribed(n)) => acked += n,
                    None => tally.errors.push("a PONG to no PING".into()),
                },
                ServerOp::Err(why) => {
                    closing = Some(format!(
                        "NATS server: -ERR {}",
                        lossy(&buf[base + why.start..base + why.end])
                    ));
                    break;
                }
                ServerOp::Info(_) | ServerOp::Ok => {}
            }
        }
        buf.drain(..at);
        tally.acks += acked;
        if !tally.is_empty() {
            sh.apply(now, &mut tally);
        }
        for _ in 0..acked {
            if let Some(subject) = one_by_one.pop_front() {
                subscribe(&mut out, &mut awaiting, &subject, &mut next_sid);
                tally.ack_sent_ns = now_ns();
            }
        }
        if let Some(e) = closing {
            return Err(e);
        }
        reserve(&mut buf);
        tokio::select! {
            r = rd.read_buf(&mut buf) => {
                if r.map_err(err("read"))? == 0 {
                    return Err("connection closed by the NATS server".into());
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
                if let Some(a @ Action::Subscribe { one_at_a_time, one_ping, .. }) = action {
                    tally.ack_sent_ns = now_ns();
                    if one_ping {
                        let subjects = action_channels(&a, n);
                        for subject in &subjects {
                            protocol::sub(&mut out, &protocol::subject(subject), next_sid);
                            next_sid += 1;
                        }
                        protocol::ping(&mut out);
                        awaiting.push_back(Awaiting::Subscribed(subjects.len() as u64));
                        continue;
                    }
                    let mut all = action_channels(&a, n)
                        .into_iter()
                        .map(|c| protocol::subject(&c));
                    let now: Vec<String> = if one_at_a_time {
                        let first = all.next();
                        one_by_one.extend(all);
                        first.into_iter().collect()
                    } else {
                        all.collect()
                    };
                    for subject in now {
                        subscribe(&mut out, &mut awaiting, &subject, &mut next_sid);
                    }
                }
            }
        }
    }
}

/// Queues `SUB subject sid` and the `PING` whose `PONG` acknowledges it.
fn subscribe(out: &mut Vec<u8>, awaiting: &mut VecDeque<Awaiting>, subject: &str, sid: &mut u64) {
    protocol::sub(out, subject, *sid);
    *sid += 1;
    protocol::ping(out);
    awaiting.push_back(Awaiting::Subscribed(1));
}
