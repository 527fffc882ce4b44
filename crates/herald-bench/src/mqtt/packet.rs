//! MQTT 3.1.1 and 5.0 packets, client side, as far as the bench speaks them: the client's
//! (`CONNECT`, `SUBSCRIBE`, `PUBLISH` at QoS 0 or 1, `PUBACK`, `PINGREQ`) written into an output
//! buffer, and the server's (`CONNACK`, `SUBACK`, `PUBLISH`, `PUBACK`, `PINGRESP`, `DISCONNECT`)
//! parsed straight from a read buffer. v5 properties are written empty and skipped when read.

use std::ops::Range;

/// The largest packet accepted from a server (the bench's payloads are a few dozen bytes).
pub const MAX_PACKET: usize = 1 << 20;

/// The protocol level a connection speaks.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, clap::ValueEnum,
)]
pub enum Version {
    /// MQTT 3.1.1 (protocol level 4).
    #[serde(rename = "3.1.1")]
    #[value(name = "3.1.1")]
    V311,
    /// MQTT 5.0 (protocol level 5).
    #[serde(rename = "5")]
    #[value(name = "5")]
    V5,
}

impl Version {
    fn level(self) -> u8 {
        match self {
            Version::V311 => 4,
            Version::V5 => 5,
        }
    }

    /// The version as `--mqtt-version` names it.
    pub fn as_str(self) -> &'static str {
        match self {
            Version::V311 => "3.1.1",
            Version::V5 => "5",
        }
    }
}

/// What a `CONNECT` carries besides the protocol level.
#[derive(Debug, Clone, Copy)]
pub struct Connect<'a> {
    /// The client identifier.
    pub client_id: &'a str,
    /// The user name, if any.
    pub username: Option<&'a str>,
    /// The password, if any.
    pub password: Option<&'a str>,
    /// Keep-alive in seconds.
    pub keep_alive: u16,
    /// A persistent session: Clean Start 0 and, in v5, this Session Expiry Interval in seconds
    /// (3.1.1: Clean Session 0, a session with no expiry). `None`: Clean Start 1.
    pub session_expiry: Option<u32>,
}

/// One packet from the server. Ranges index the buffer it was parsed from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerPacket {
    /// `CONNACK`: 0 accepted, anything else refused (3.1.1 return code or v5 reason code).
    ConnAck {
        /// The return or reason code.
        code: u8,
    },
    /// `SUBACK`: the granted QoS (or a failure code from 0x80) of each filter.
    SubAck {
        /// The packet identifier of the `SUBSCRIBE`.
        id: u16,
        /// The first filter's code (the bench names one filter per `SUBSCRIBE`).
        code: u8,
    },
    /// `PUBLISH`.
    Publish {
        /// The QoS it was sent at.
        qos: u8,
        /// Its packet identifier (QoS 1 and 2), to acknowledge.
        id: u16,
        /// Its topic.
        topic: Range<usize>,
        /// Its payload.
        payload: Range<usize>,
    },
    /// `PUBACK` to one of our QoS 1 publishes: reason 0 (or, in v5, 0x10 no subscribers) is
    /// success.
    PubAck {
        /// The packet identifier of the `PUBLISH`.
        id: u16,
        /// The v5 reason code (0 for 3.1.1).
        code: u8,
    },
    /// `PINGRESP`.
    PingResp,
    /// `DISCONNECT` (v5: its reason code; 0 when it has none).
    Disconnect {
        /// The reason code.
        code: u8,
    },
    /// Any other packet (`PUBREC`, `UNSUBACK`, `AUTH`...), of this type.
    Other(u8),
}

/// Writes the variable byte integer `n` (at most 268,435,455).
fn put_varint(out: &mut Vec<u8>, mut n: usize) {
    loop {
        let mut byte = (n % 128) as u8;
        n /= 128;
        if n > 0 {
            byte |= 0x80;
        }
        out.push(byte);
        if n == 0 {
            return;
        }
    }
}

/// Reads a variable byte integer: `Ok(None)` if incomplete, else its value and length.
fn get_varint(buf: &[u8]) -> Result<Option<(usize, usize)>, String> {
    let mut n = 0usize;
    for (i, b) in buf.iter().enumerate().take(4) {
        n |= usize::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Ok(Some((n, i + 1)));
        }
    }
    if buf.len() >= 4 {
        return Err("an MQTT length of more than four bytes".into());
    }
    Ok(None)
}

fn put_str(out: &mut Vec<u8>, s: &[u8]) {
    out.extend_from_slice(&(s.len() as u16).to_be_bytes());
    out.extend_from_slice(s);
}

/// Writes a packet: its first byte, remaining length and `body`.
fn put_packet(out: &mut Vec<u8>, first: u8, body: &[u8]) {
    out.push(first);
    put_varint(out, body.len());
    out.extend_from_slice(body);
}

/// Writes a `CONNECT` with no will: Clean Session (3.1.1) or Clean Start (5), or for a
/// persistent session ([`Connect::session_expiry`]) neither, with v5's Session Expiry Interval.
pub fn connect(out: &mut Vec<u8>, version: Version, c: &Connect<'_>) {
    let mut body = Vec::with_capacity(64);
    put_str(&mut body, b"MQTT");
    body.push(version.level());
    let mut flags = if c.session_expiry.is_some() { 0 } else { 0x02 };
    if c.username.is_some() {
        flags |= 0x80;
    }
    if c.password.is_some() {
        flags |= 0x40;
    }
    body.push(flags);
    body.extend_from_slice(&c.keep_alive.to_be_bytes());
    if version == Version::V5 {
        match c.session_expiry {
            // Property 0x11, Session Expiry Interval, a four-byte integer.
            Some(secs) => {
                body.extend_from_slice(&[5, 0x11]);
                body.extend_from_slice(&secs.to_be_bytes());
            }
            None => body.push(0), // no properties
        }
    }
    put_str(&mut body, c.client_id.as_bytes());
    if let Some(u) = c.username {
        put_str(&mut body, u.as_bytes());
    }
    if let Some(p) = c.password {
        put_str(&mut body, p.as_bytes());
    }
    put_packet(out, 0x10, &body);
}

/// Writes a `SUBSCRIBE` of one topic filter at `qos`, with packet identifier `id`.
pub fn subscribe(out: &mut Vec<u8>, version: Version, id: u16, filter: &str, qos: u8) {
    let mut body = Vec::with_capacity(filter.len() + 8);
    body.extend_from_slice(&id.to_be_bytes());
    if version == Version::V5 {
        body.push(0);
    }
    put_str(&mut body, filter.as_bytes());
    body.push(qos & 0x03);
    put_packet(out, 0x82, &body);
}

/// Writes a `PUBLISH` of `payload` to `topic` at `qos` (0 or 1; `id` is used at 1).
pub fn publish(out: &mut Vec<u8>, version: Version, topic: &str, qos: u8, id: u16, payload: &[u8]) {
    let mut len = 2 + topic.len() + payload.len();
    if qos > 0 {
        len += 2;
    }
    if version == Version::V5 {
        len += 1;
    }
    out.push(0x30 | ((qos & 0x03) << 1));
    put_varint(out, len);
    put_str(out, topic.as_bytes());
    if qos > 0 {
        out.extend_from_slice(&id.to_be_bytes());
    }
    if version == Version::V5 {
        out.push(0);
    }
    out.extend_from_slice(payload);
}

/// Writes a `PUBACK` for packet identifier `id` (success; v5 allows leaving the reason out).
pub fn puback(out: &mut Vec<u8>, id: u16) {
    out.extend_from_slice(&[0x40, 0x02]);
    out.extend_from_slice(&id.to_be_bytes());
}

/// Writes a `PINGREQ`.
pub fn pingreq(out: &mut Vec<u8>) {
    out.extend_from_slice(&[0xc0, 0x00]);
}

/// Writes a `DISCONNECT` (normal disconnection).
pub fn disconnect(out: &mut Vec<u8>) {
    out.extend_from_slice(&[0xe0, 0x00]);
}

fn u16_at(b: &[u8], at: usize) -> Result<u16, String> {
    b.get(at..at + 2)
        .map(|s| u16::from_be_bytes([s[0], s[1]]))
        .ok_or_else(|| "a truncated MQTT packet".to_string())
}

/// Skips v5 properties at `at` of `body`: the offset after them.
fn skip_properties(body: &[u8], at: usize) -> Result<usize, String> {
    let (len, used) =
        get_varint(body.get(at..).unwrap_or_default())?.ok_or("truncated MQTT properties")?;
    let end = at + used + len;
    if end > body.len() {
        return Err("MQTT properties longer than their packet".into());
    }
    Ok(end)
}

/// Parses the first packet in `buf`: `Ok(None)` when it is not complete yet, else the packet and
/// how many bytes it took.
pub fn parse(buf: &[u8], version: Version) -> Result<Option<(ServerPacket, usize)>, String> {
    let Some(&first) = buf.first() else {
        return Ok(None);
    };
    let Some((len, used)) = get_varint(&buf[1..])? else {
        return Ok(None);
    };
    if len > MAX_PACKET {
        return Err(format!("an MQTT packet of {len} bytes from the server"));
    }
    let start = 1 + used;
    let total = start + len;
    if buf.len() < total {
        return Ok(None);
    }
    let body = &buf[start..total];
    let v5 = version == Version::V5;
    let packet = match first >> 4 {
        2 => ServerPacket::ConnAck {
            code: *body.get(1).ok_or("a truncated CONNACK")?,
        },
        9 => {
            let id = u16_at(body, 0)?;
            let at = if v5 { skip_properties(body, 2)? } else { 2 };
            ServerPacket::SubAck {
                id,
                code: *body.get(at).ok_or("a SUBACK with no return code")?,
            }
        }
        3 => {
            let qos = (first >> 1) & 0x03;
            let topic_len = usize::from(u16_at(body, 0)?);
            let topic = 2..2 + topic_len;
            let mut at = topic.end;
            let mut id = 0;
            if qos > 0 {
                id = u16_at(body, at)?;
                at += 2;
            }
            if v5 {
                at = skip_properties(body, at)?;
            }
            if at > body.len() {
                return Err("a truncated PUBLISH".into());
            }
            ServerPacket::Publish {
                qos,
                id,
                topic: start + topic.start..start + topic.end,
                payload: start + at..total,
            }
        }
        4 => ServerPacket::PubAck {
            id: u16_at(body, 0)?,
            code: body.get(2).copied().unwrap_or(0),
        },
        13 => ServerPacket::PingResp,
        14 => ServerPacket::Disconnect {
            code: body.first().copied().unwrap_or(0),
        },
        other => ServerPacket::Other(other),
    };
    Ok(Some((packet, total)))
}

/// A v5 reason code or 3.1.1 return code in words, for error messages.
pub fn code_name(code: u8) -> &'static str {
    match code {
        0x00 => "success",
        0x01 => "unacceptable protocol version (3.1.1) / granted QoS 1",
        0x02 => "identifier rejected (3.1.1) / granted QoS 2",
        0x03 => "server unavailable (3.1.1)",
        0x04 => "bad user name or password (3.1.1)",
        0x05 => "not authorized (3.1.1)",
        0x80 => "failure / unspecified error",
        0x81 => "malformed packet",
        0x82 => "protocol error",
        0x84 => "unsupported protocol version",
        0x86 => "bad user name or password",
        0x87 => "not authorized",
        0x8e => "session taken over",
        0x8f => "topic filter invalid",
        0x93 => "receive maximum exceeded",
        0x95 => "packet too large",
        0x96 => "message rate too high",
        0x97 => "quota exceeded",
        _ => "see the MQTT standard",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connect_packets_are_the_standards_bytes() {
        let mut out = Vec::new();
        let c = Connect {
            client_id: "c",
            username: Some("default"),
            password: Some("pw"),
            keep_alive: 60,
            session_expiry: None,
        };
        connect(&mut out, Version::V311, &c);
        let mut want = vec![
            0x10, 26, 0, 4, b'M', b'Q', b'T', b'T', 4, 0xc2, 0, 60, 0, 1, b'c',
        ];
        want.extend_from_slice(&[0, 7]);
        want.extend_from_slice(b"default");
        want.extend_from_slice(&[0, 2, b'p', b'w']);
        assert_eq!(out, want);
        out.clear();
        let anonymous = Connect {
            client_id: "",
            username: None,
            password: None,
            keep_alive: 60,
            session_expiry: None,
        };
        connect(&mut out, Version::V5, &anonymous);
        assert_eq!(
            out,
            [0x10, 13, 0, 4, b'M', b'Q', b'T', b'T', 5, 0x02, 0, 60, 0, 0, 0]
        );
    }

    #[test]
    fn persistent_sessions_clear_clean_start_and_v5_names_the_expiry() {
        let mut out = Vec::new();
        let c = Connect {
            client_id: "c",
            username: None,
            password: None,
            keep_alive: 60,
            session_expiry: Some(3600),
        };
        connect(&mut out, Version::V5, &c);
        assert_eq!(
            out,
            [
                0x10, 19, 0, 4, b'M', b'Q', b'T', b'T', 5, 0x00, 0, 60, 5, 0x11, 0, 0, 0x0e, 0x10,
                0, 1, b'c'
            ]
        );
        out.clear();
        connect(&mut out, Version::V311, &c);
        assert_eq!(
            out,
            [0x10, 13, 0, 4, b'M', b'Q', b'T', b'T', 4, 0x00, 0, 60, 0, 1, b'c']
        );
    }

    #[test]
    fn subscribe_and_publish_round_trip_through_the_parser() {
        for version in [Version::V311, Version::V5] {
            let mut out = Vec::new();
            publish(&mut out, version, "a/b", 1, 7, b"{\"ts\":1}");
            // A server's PUBLISH has the same shape as a client's.
            let (p, used) = parse(&out, version).unwrap().unwrap();
            assert_eq!(used, out.len());
            let ServerPacket::Publish {
                qos,
                id,
                topic,
                payload,
            } = p
            else {
                panic!("{p:?}");
            };
            assert_eq!((qos, id), (1, 7));
            assert_eq!(&out[topic], b"a/b");
            assert_eq!(&out[payload], b"{\"ts\":1}");
            // Incomplete: nothing yet.
            assert_eq!(parse(&out[..used - 1], version).unwrap(), None);

            out.clear();
            publish(&mut out, version, "t", 0, 0, b"x");
            let (p, _) = parse(&out, version).unwrap().unwrap();
            assert!(matches!(p, ServerPacket::Publish { qos: 0, id: 0, .. }));

            out.clear();
            subscribe(&mut out, version, 3, "a/#", 1);
            assert_eq!(out[0], 0x82);
        }
    }

    #[test]
    fn acknowledgements_are_read_in_both_versions() {
        let v5_suback = [0x90, 4, 0, 9, 0, 0x01];
        assert_eq!(
            parse(&v5_suback, Version::V5).unwrap(),
            Some((ServerPacket::SubAck { id: 9, code: 1 }, 6))
        );
        let v311_suback = [0x90, 3, 0, 9, 0x80];
        assert_eq!(
            parse(&v311_suback, Version::V311).unwrap(),
            Some((ServerPacket::SubAck { id: 9, code: 0x80 }, 5))
        );
        assert_eq!(
            parse(&[0x20, 2, 0, 0], Version::V311).unwrap(),
            Some((ServerPacket::ConnAck { code: 0 }, 4))
        );
        assert_eq!(
            parse(&[0x20, 3, 0, 0x86, 0], Version::V5).unwrap(),
            Some((ServerPacket::ConnAck { code: 0x86 }, 5))
        );
        assert_eq!(
            parse(&[0x40, 2, 1, 2], Version::V5).unwrap(),
            Some((ServerPacket::PubAck { id: 258, code: 0 }, 4))
        );
        assert_eq!(
            parse(&[0xd0, 0], Version::V5).unwrap(),
            Some((ServerPacket::PingResp, 2))
        );
        assert_eq!(
            parse(&[0xe0, 1, 0x8e], Version::V5).unwrap(),
            Some((ServerPacket::Disconnect { code: 0x8e }, 3))
        );
    }

    #[test]
    fn long_lengths_and_bad_lengths() {
        let payload = vec![b'x'; 300];
        let mut out = Vec::new();
        publish(&mut out, Version::V311, "t", 0, 0, &payload);
        assert_eq!(&out[1..3], &[0x80 | (303 % 128) as u8, 2]);
        let (p, used) = parse(&out, Version::V311).unwrap().unwrap();
        assert_eq!(used, out.len());
        let ServerPacket::Publish { payload: r, .. } = p else {
            panic!()
        };
        assert_eq!(r.len(), 300);
        assert!(parse(&[0x30, 0xff, 0xff, 0xff, 0xff], Version::V311).is_err());
        assert!(parse(&[0x30, 0xff, 0xff, 0xff, 0x7f], Version::V311).is_err());
    }
}
