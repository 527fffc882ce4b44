//! NATS's text protocol, client side, as far as the bench speaks it: the server's operations
//! (`INFO`, `MSG`, `PING`, `PONG`, `+OK`, `-ERR`) parsed straight from a read buffer, and the
//! client's (`CONNECT`, `SUB`, `UNSUB`, `PUB`, `PING`, `PONG`) written into an output buffer.
//! Headers (`HMSG`) are never asked for (`"headers":false`), so never parsed.

use std::ops::Range;

/// The longest control line accepted before its end (the server's own `max_control_line`
/// default is 4 KiB; an `INFO` line is a few hundred bytes).
pub const MAX_CONTROL_LINE: usize = 64 * 1024;

/// The `CONNECT` the bench sends: no `+OK` after every command, no subject checks, no headers.
pub const CONNECT: &[u8] = b"CONNECT {\"verbose\":false,\"pedantic\":false,\"tls_required\":false,\
\"name\":\"herald-bench\",\"lang\":\"rust\",\"version\":\"0\",\"protocol\":1,\"headers\":false}\r\n";

/// One operation from the server. Ranges index the buffer it was parsed from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerOp {
    /// `INFO {json}`: the server's description (also sent again later in a cluster).
    Info(Range<usize>),
    /// `MSG <subject> <sid> [reply-to] <#bytes>` and its payload.
    Msg {
        /// The subject the message was published to.
        subject: Range<usize>,
        /// The subscription it was delivered for.
        sid: u64,
        /// The payload.
        payload: Range<usize>,
    },
    /// `PING`: the server wants a `PONG`.
    Ping,
    /// `PONG`: the answer to one of our `PING`s, in the order they were sent.
    Pong,
    /// `+OK` (only in verbose mode).
    Ok,
    /// `-ERR '<message>'`: most errors close the connection after it.
    Err(Range<usize>),
}

/// Parses the first operation in `buf`: `Ok(None)` when it is not complete yet, else the
/// operation and how many bytes it took.
pub fn parse(buf: &[u8]) -> Result<Option<(ServerOp, usize)>, String> {
    let Some(nl) = memchr::memchr(b'\n', buf) else {
        if buf.len() > MAX_CONTROL_LINE {
            return Err(format!(
                "a NATS control line longer than {MAX_CONTROL_LINE} bytes"
            ));
        }
        return Ok(None);
    };
    let line_end = if nl > 0 && buf[nl - 1] == b'\r' {
        nl - 1
    } else {
        nl
    };
    let line = &buf[..line_end];
    let after = nl + 1;
    let (op, args_at) = match memchr::memchr2(b' ', b'\t', line) {
        Some(i) => (&line[..i], i + 1),
        None => (line, line.len()),
    };
    let args = Range {
        start: skip_blanks(line, args_at),
        end: line_end,
    };
    let parsed = if op.eq_ignore_ascii_case(b"MSG") {
        return msg(buf, args, after);
    } else if op.eq_ignore_ascii_case(b"PING") {
        ServerOp::Ping
    } else if op.eq_ignore_ascii_case(b"PONG") {
        ServerOp::Pong
    } else if op.eq_ignore_ascii_case(b"+OK") {
        ServerOp::Ok
    } else if op.eq_ignore_ascii_case(b"-ERR") {
        ServerOp::Err(args)
    } else if op.eq_ignore_ascii_case(b"INFO") {
        ServerOp::Info(args)
    } else {
        return Err(format!(
            "unknown NATS operation {:?}",
            String::from_utf8_lossy(&line[..line.len().min(80)])
        ));
    };
    Ok(Some((parsed, after)))
}

fn skip_blanks(line: &[u8], mut at: usize) -> usize {
    while at < line.len() && (line[at] == b' ' || line[at] == b'\t') {
        at += 1;
    }
    at
}

/// `MSG <subject> <sid> [reply-to] <#bytes>\r\n<payload>\r\n`, its arguments at `args`, its
/// payload from `after`.
fn msg(buf: &[u8], args: Range<usize>, after: usize) -> Result<Option<(ServerOp, usize)>, String> {
    let mut fields: [Range<usize>; 4] = Default::default();
    let mut count = 0;
    let mut at = args.start;
    while at < args.end {
        let end = memchr::memchr2(b' ', b'\t', &buf[at..args.end]).map_or(args.end, |i| at + i);
        if count == fields.len() {
            return Err(bad_msg(buf, &args));
        }
        fields[count] = at..end;
        count += 1;
        at = skip_blanks(&buf[..args.end], end);
    }
    if !(3..=4).contains(&count) {
        return Err(bad_msg(buf, &args));
    }
    let sid = number(&buf[fields[1].clone()]).ok_or_else(|| bad_msg(buf, &args))?;
    let len = number(&buf[fields[count - 1].clone()]).ok_or_else(|| bad_msg(buf, &args))? as usize;
    let end = after + len;
    if buf.len() < end + 2 {
        return Ok(None);
    }
    if &buf[end..end + 2] != b"\r\n" {
        return Err(format!(
            "a NATS MSG payload not followed by CRLF ({})",
            String::from_utf8_lossy(&buf[args.clone()])
        ));
    }
    let op = ServerOp::Msg {
        subject: fields[0].clone(),
        sid,
        payload: after..end,
    };
    Ok(Some((op, end + 2)))
}

fn bad_msg(buf: &[u8], args: &Range<usize>) -> String {
    format!(
        "a malformed NATS MSG line: {:?}",
        String::from_utf8_lossy(&buf[args.start..args.end.min(args.start + 120)])
    )
}

fn number(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || digits.len() > 19 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(
        digits
            .iter()
            .fold(0u64, |n, d| n * 10 + u64::from(d - b'0')),
    )
}

/// The NATS subject of a Herald channel name: `/` separates tokens in Herald's names, `.` in
/// NATS's (`bench/abc/fanout` is `bench.abc.fanout`).
pub fn subject(channel: &str) -> String {
    channel.replace('/', ".")
}

/// Appends `SUB <subject> <sid>`.
pub fn sub(out: &mut Vec<u8>, subject: &str, sid: u64) {
    out.extend_from_slice(b"SUB ");
    out.extend_from_slice(subject.as_bytes());
    out.push(b' ');
    push_number(out, sid);
    out.extend_from_slice(b"\r\n");
}

/// Appends `UNSUB <sid>`.
pub fn unsub(out: &mut Vec<u8>, sid: u64) {
    out.extend_from_slice(b"UNSUB ");
    push_number(out, sid);
    out.extend_from_slice(b"\r\n");
}

/// Appends `PUB <subject> <#bytes>` and the payload.
pub fn publish(out: &mut Vec<u8>, subject: &str, payload: &[u8]) {
    out.extend_from_slice(b"PUB ");
    out.extend_from_slice(subject.as_bytes());
    out.push(b' ');
    push_number(out, payload.len() as u64);
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(payload);
    out.extend_from_slice(b"\r\n");
}

/// Appends `PING`.
pub fn ping(out: &mut Vec<u8>) {
    out.extend_from_slice(b"PING\r\n");
}

/// Appends `PONG`.
pub fn pong(out: &mut Vec<u8>) {
    out.extend_from_slice(b"PONG\r\n");
}

fn push_number(out: &mut Vec<u8>, n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    let mut n = n;
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(mut buf: &[u8]) -> Vec<(ServerOp, Vec<u8>)> {
        let mut ops = Vec::new();
        while let Some((op, used)) = parse(buf).unwrap() {
            let text = match &op {
                ServerOp::Info(r) | ServerOp::Err(r) => buf[r.clone()].to_vec(),
                ServerOp::Msg { payload, .. } => buf[payload.clone()].to_vec(),
                _ => Vec::new(),
            };
            ops.push((op, text));
            buf = &buf[used..];
        }
        ops
    }

    #[test]
    fn parses_every_server_operation() {
        let wire = b"INFO {\"server_id\":\"x\",\"max_payload\":1048576}\r\nPING\r\npong\r\n+OK\r\n\
            MSG bench.a 7 5\r\nhello\r\nMSG bench.a 7 inbox.1 0\r\n\r\n-ERR 'Unknown Protocol Operation'\r\n";
        let ops = all(wire);
        assert_eq!(ops.len(), 7, "{ops:?}");
        assert!(matches!(ops[0].0, ServerOp::Info(_)));
        assert_eq!(ops[0].1, b"{\"server_id\":\"x\",\"max_payload\":1048576}");
        assert_eq!(ops[1].0, ServerOp::Ping);
        assert_eq!(ops[2].0, ServerOp::Pong);
        assert_eq!(ops[3].0, ServerOp::Ok);
        assert!(matches!(ops[4].0, ServerOp::Msg { sid: 7, .. }));
        assert_eq!(ops[4].1, b"hello");
        assert!(matches!(ops[5].0, ServerOp::Msg { sid: 7, .. }));
        assert_eq!(ops[5].1, b"");
        assert_eq!(ops[6].1, b"'Unknown Protocol Operation'");
    }

    #[test]
    fn a_message_split_anywhere_waits_for_the_rest() {
        let payload = crate::wire::stamp(1763772000123456789);
        let wire = format!(
            "MSG bench.abc.fanout 1 {}\r\n{payload}\r\nPING\r\n",
            payload.len()
        );
        let wire = wire.as_bytes();
        for cut in 0..wire.len() - 6 {
            assert_eq!(parse(&wire[..cut]).unwrap(), None, "cut at {cut}");
        }
        let (op, used) = parse(wire).unwrap().unwrap();
        let ServerOp::Msg {
            subject,
            sid,
            payload,
        } = op
        else {
            panic!("{op:?}");
        };
        assert_eq!(&wire[subject], b"bench.abc.fanout");
        assert_eq!(sid, 1);
        assert_eq!(
            crate::wire::find_ts(&wire[payload]),
            Some(1763772000123456789)
        );
        assert_eq!(parse(&wire[used..]).unwrap(), Some((ServerOp::Ping, 6)));
    }

    #[test]
    fn refuses_what_is_not_nats() {
        assert!(parse(b"HTTP/1.1 400 Bad Request\r\n").is_err());
        assert!(
            parse(b"MSG a b 3\r\nabc\r\n").is_err(),
            "a sid that is no number"
        );
        assert!(parse(b"MSG a 1\r\n").is_err(), "too few fields");
        assert!(
            parse(b"MSG a 1 3\r\nabcd\r\n").is_err(),
            "payload longer than said"
        );
        assert!(parse(&vec![b'x'; MAX_CONTROL_LINE + 1]).is_err());
    }

    #[test]
    fn writes_client_operations() {
        let mut out = Vec::new();
        sub(&mut out, &subject("bench/x/0"), 12);
        publish(&mut out, "bench.x.0", b"{\"ts\":5}");
        unsub(&mut out, 12);
        ping(&mut out);
        pong(&mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "SUB bench.x.0 12\r\nPUB bench.x.0 8\r\n{\"ts\":5}\r\nUNSUB 12\r\nPING\r\nPONG\r\n"
        );
        assert!(CONNECT.starts_with(b"CONNECT {\"verbose\":false,\"pedantic\":false"));
        assert!(CONNECT.ends_with(b"}\r\n"));
        let json = &CONNECT[8..CONNECT.len() - 2];
        let v: serde_json::Value = serde_json::from_slice(json).unwrap();
        assert_eq!(v["headers"], false);
    }
}
