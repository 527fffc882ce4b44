//! The MQTT load client (`--transport mqtt`, `--peer mosquitto`): `CONNECT` (Clean Start, or a
//! persistent session) and a `SUBSCRIBE` per channel of the plan written together, ready once the
//! `CONNACK` accepted it and every `SUBACK` granted its filter; at a `subscribe` fire (the storm),
//! a `SUBSCRIBE` per channel, all at once or (`--one-at-a-time`) each after the previous one's
//! `SUBACK`, every granted `SUBACK` one acknowledgement; `PUBLISH`es counted with their send time
//! straight from the read buffer (and acknowledged with a `PUBACK` when they come at QoS 1); a
//! `PINGREQ` every keep-alive. See [`crate::mqtt`] for how this maps to Herald's protocol.

use std::collections::VecDeque;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;

use super::{action_channels, channel_list, connect, err, lossy, reserve, Fire, Ready, Tally};
use crate::mqtt::packet::{self, Connect, ServerPacket, Version};
use crate::mqtt::KEEP_ALIVE_SECS;
use crate::proto::{Action, Plan};
use crate::wire::{find_ts, now_ns};
use crate::worker::Shared;

pub(super) async fn mqtt(
    sh: &Shared,
    n: u64,
    plan: &Plan,
    ready: &Ready,
    mut fire: watch::Receiver<Option<Fire>>,
) -> Result<(), String> {
    if matches!(plan, Plan::Inbox { .. } | Plan::Failover { .. }) {
        return Err(
            "the MQTT client has no device inbox or failover (--transport mqtt and --peer \
             mosquitto run fanout, subscribe-storm and connections)"
                .into(),
        );
    }
    let cfg = sh
        .cfg
        .mqtt
        .as_ref()
        .ok_or("no MQTT address: the server has no MQTT listener (--mqtt-target)")?;
    let version = cfg.version;
    let mut stream = connect(cfg.addr, sh.cfg.source_ip, sh.cfg.rcvbuf)
        .await
        .map_err(err("connect"))?;
    let mut out = Vec::with_capacity(256);
    // Unique in the run (connection numbers are global across workers), so no connection
    // takes another's session over.
    let client_id = format!("herald-bench-{}-{n}", std::process::id());
    packet::connect(
        &mut out,
        version,
        &Connect {
            client_id: &client_id,
            username: cfg.username.as_deref(),
            password: cfg.password.as_deref(),
            keep_alive: KEEP_ALIVE_SECS,
            session_expiry: cfg.session_expiry,
        },
    );
    let channels = channel_list(plan, n);
    let mut pending = channels.len() as u64;
    let mut ids = PacketIds::default();
    for ch in &channels {
        packet::subscribe(&mut out, version, ids.next(), ch, cfg.qos);
    }
    // `--one-at-a-time`: the storm's topics still to subscribe, one per `SUBACK`.
    let mut one_by_one: VecDeque<String> = VecDeque::new();
    stream.write_all(&out).await.map_err(err("write"))?;
    out.clear();
    let mut connected = false;
    let mut buf = Vec::with_capacity(4096);
    let mut written = 0;
    let mut tally = Tally {
        ack_sent_ns: now_ns(),
        ..Default::default()
    };
    let keep_alive = Duration::from_secs(u64::from(KEEP_ALIVE_SECS));
    let mut ping = tokio::time::interval_at(tokio::time::Instant::now() + keep_alive, keep_alive);
    fire.borrow_and_update();
    let (mut rd, mut wr) = stream.split();
    loop {
        let now = now_ns();
        let mut at = 0;
        let mut closing = None;
        let acks_before = tally.acks;
        loop {
            let (p, used) = match packet::parse(&buf[at..], version) {
                Ok(Some(parsed)) => parsed,
                Ok(None) => break,
                Err(e) => {
                    closing = Some(e);
                    break;
                }
            };
            let base = at;
            at += used;
            match p {
                ServerPacket::Publish {
                    qos, id, payload, ..
                } => {
                    if let Some(ts) = find_ts(&buf[base + payload.start..base + payload.end]) {
                        tally.sent.push(ts);
                    }
                    if qos == 1 {
                        packet::puback(&mut out, id);
                    } else if qos > 1 {
                        closing = Some(format!("a PUBLISH at QoS {qos}, above the one asked"));
                        break;
                    }
                }
                ServerPacket::ConnAck { code: 0 } => connected = true,
                ServerPacket::ConnAck { code } => {
                    closing = Some(format!(
                        "MQTT server refused the connection: CONNACK {code:#04x} ({})",
                        packet::code_name(code)
                    ));
                    break;
                }
                ServerPacket::SubAck { code, .. } if code < 0x80 => {
                    tally.acks += 1;
                    pending = pending.saturating_sub(1);
                }
                ServerPacket::SubAck { code, .. } => {
                    let why = format!(
                        "MQTT server refused a subscription: SUBACK {code:#04x} ({})",
                        packet::code_name(code)
                    );
                    if pending > 0 {
                        // Opening: the connection cannot become ready.
                        closing = Some(why);
                        break;
                    }
                    // A storm's refusal is counted, and the user goes on with the next one.
                    tally.errors.push(why);
                    if let Some(topic) = one_by_one.pop_front() {
                        packet::subscribe(&mut out, version, ids.next(), &topic, cfg.qos);
                    }
                }
                ServerPacket::Disconnect { code } => {
                    closing = Some(format!(
                        "MQTT server sent DISCONNECT {code:#04x} ({})",
                        packet::code_name(code)
                    ));
                    break;
                }
                ServerPacket::PubAck { .. } | ServerPacket::PingResp => {}
                ServerPacket::Other(kind) => {
                    closing = Some(format!(
                        "an unexpected MQTT packet of type {kind}: {}",
                        lossy(&buf[base..at])
                    ));
                    break;
                }
            }
        }
        buf.drain(..at);
        let acked = tally.acks.saturating_sub(acks_before);
        if !tally.is_empty() {
            sh.apply(now, &mut tally);
        }
        for _ in 0..acked {
            if let Some(topic) = one_by_one.pop_front() {
                packet::subscribe(&mut out, version, ids.next(), &topic, cfg.qos);
                tally.ack_sent_ns = now_ns();
            }
        }
        if let Some(e) = closing {
            return Err(e);
        }
        if connected && pending == 0 && ready.pending() {
            ready.ok(sh);
        }
        reserve(&mut buf);
        tokio::select! {
            r = rd.read_buf(&mut buf) => {
                if r.map_err(err("read"))? == 0 {
                    return Err("connection closed by the MQTT server".into());
                }
            }
            r = wr.write(&out[written..]), if written < out.len() => {
                written += r.map_err(err("write"))?;
                if written == out.len() {
                    out.clear();
                    written = 0;
                }
            }
            _ = ping.tick() => packet::pingreq(&mut out),
            changed = fire.changed() => {
                if changed.is_err() {
                    return Ok(());
                }
                let action = fire.borrow_and_update().clone().map(|f| f.action);
                if let Some(a @ Action::Subscribe { one_at_a_time, .. }) = action {
                    tally.ack_sent_ns = now_ns();
                    storm(&mut out, version, cfg.qos, &mut ids, action_channels(&a, n), one_at_a_time, &mut one_by_one);
                }
            }
        }
    }
}

/// Writes a storm's `SUBSCRIBE`s: all of `topics`, or with `one_at_a_time` the first, the rest
/// queued in `one_by_one` for the `SUBACK`s to come.
fn storm(
    out: &mut Vec<u8>,
    version: Version,
    qos: u8,
    ids: &mut PacketIds,
    topics: Vec<String>,
    one_at_a_time: bool,
    one_by_one: &mut VecDeque<String>,
) {
    let mut all = topics.into_iter();
    if one_at_a_time {
        if let Some(first) = all.next() {
            packet::subscribe(out, version, ids.next(), &first, qos);
        }
        one_by_one.extend(all);
    } else {
        for topic in all {
            packet::subscribe(out, version, ids.next(), &topic, qos);
        }
    }
}

/// The connection's `SUBSCRIBE` packet identifiers: 1, 2, ... 65,535, then 1 again (the storm
/// takes at most 65,535 topics per user, so none is reused while its `SUBACK` may be due; the
/// bench counts `SUBACK`s rather than matching their identifiers).
#[derive(Debug, Default)]
struct PacketIds(u16);

impl PacketIds {
    fn next(&mut self) -> u16 {
        self.0 = self.0.checked_add(1).unwrap_or(1);
        self.0
    }
}
