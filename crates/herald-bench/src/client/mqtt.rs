//! The MQTT load client (`--transport mqtt`, `--peer mosquitto`): `CONNECT` and a `SUBSCRIBE` per
//! channel of the plan written together, ready once the `CONNACK` accepted it and every `SUBACK`
//! granted its filter; `PUBLISH`es counted with their send time straight from the read buffer
//! (and acknowledged with a `PUBACK` when they come at QoS 1); a `PINGREQ` every keep-alive.
//! See [`crate::mqtt`] for how this maps to Herald's protocol.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;

use super::{channel_list, connect, err, lossy, reserve, Fire, Ready, Tally};
use crate::mqtt::packet::{self, Connect, ServerPacket};
use crate::mqtt::KEEP_ALIVE_SECS;
use crate::proto::Plan;
use crate::wire::{find_ts, now_ns};
use crate::worker::Shared;

pub(super) async fn mqtt(
    sh: &Shared,
    n: u64,
    plan: &Plan,
    ready: &Ready,
    mut fire: watch::Receiver<Option<Fire>>,
) -> Result<(), String> {
    if !matches!(
        plan,
        Plan::Shared { .. } | Plan::Own { .. } | Plan::Set { .. }
    ) {
        return Err(
            "the MQTT client subscribes when it connects (--transport mqtt and --peer mosquitto \
             run fanout and connections)"
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
        },
    );
    let channels = channel_list(plan, n);
    let mut pending = channels.len() as u64;
    for (i, ch) in channels.iter().enumerate() {
        packet::subscribe(&mut out, version, (i + 1) as u16, ch, cfg.qos);
    }
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
                    closing = Some(format!(
                        "MQTT server refused a subscription: SUBACK {code:#04x} ({})",
                        packet::code_name(code)
                    ));
                    break;
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
        if !tally.is_empty() {
            sh.apply(now, &mut tally);
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
                fire.borrow_and_update();
            }
        }
    }
}
