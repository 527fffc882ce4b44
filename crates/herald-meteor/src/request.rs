//! The request line of Meteor's subscriber port:
//! `GET /push/<hostid>/<mode>/<chan>[.r<id>|.b<n>|.h][/<chan2>...] HTTP/1.1` subscribes,
//! `GET /disconnect/<hostid>` closes that host's connection, any other `GET` asks for a file of
//! the document root. Everything else is [`Request::Invalid`], answered with the protocol's
//! error (a `404 Not Found` header).
//!
//! Meteor channel names are `[A-Za-z0-9_-]` and `%XX` escapes; the escapes are decoded, so
//! `chat%2Froom-1` is Herald's `chat/room-1`. The decoded name must be a valid Herald channel
//! name. [`meteor_name`] is the reverse, for `~channel~`.

use herald_core::ChannelName;

/// Longest hostid accepted.
const MAX_HOSTID: usize = 128;

/// Where a subscription starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// No suffix: live messages only.
    Live,
    /// `.r<id>`: from message `id` on (Meteor ids are Herald seqs), so `.r<last seen + 1>`
    /// resumes exactly.
    FromId(u64),
    /// `.b<n>`: the newest `n` stored messages, then live.
    Last(u64),
    /// `.h` (or `.r`/`.b` without a number): every stored message, then live.
    All,
}

/// One channel of a subscribe request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelSpec {
    /// The Herald channel.
    pub name: ChannelName,
    /// Where to start.
    pub start: Start,
}

/// A subscribe request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subscribe {
    /// The client's host id; a newer persistent connection with the same id replaces an older.
    pub hostid: String,
    /// The mode (a section of the configuration).
    pub mode: String,
    /// Channels, de-duplicated, in request order.
    pub channels: Vec<ChannelSpec>,
}

/// What a request line asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// Subscribe.
    Subscribe(Subscribe),
    /// Close the connection of this host id.
    Disconnect(String),
    /// A file of the document root (the path as requested, query removed).
    File(String),
    /// Not understood; why, for the log.
    Invalid(String),
}

fn is_word(s: &str) -> bool {
    !s.is_empty() && s.len() <= MAX_HOSTID && s.bytes().all(|b| b.is_ascii_alphanumeric())
}

/// Parses a request line. `push_prefix` is where subscriptions live (`/push`).
pub fn parse(line: &str, push_prefix: &str) -> Request {
    let mut parts = line.split(' ').filter(|p| !p.is_empty());
    let (Some(method), Some(target)) = (parts.next(), parts.next()) else {
        return Request::Invalid("not a request line".into());
    };
    if method != "GET" {
        return Request::Invalid(format!("method {:?} is not GET", truncate(method)));
    }
    if let Some(version) = parts.next() {
        if !version.starts_with("HTTP/") || parts.next().is_some() {
            return Request::Invalid("not an HTTP request line".into());
        }
    }
    let path = target.split(['?', '#']).next().unwrap_or("");
    if let Some(rest) = path
        .strip_prefix(push_prefix)
        .and_then(|r| r.strip_prefix('/'))
    {
        return parse_subscribe(rest).unwrap_or_else(Request::Invalid);
    }
    if let Some(hostid) = path.strip_prefix("/disconnect/") {
        return if is_word(hostid) {
            Request::Disconnect(hostid.to_owned())
        } else {
            Request::Invalid("bad host id".into())
        };
    }
    if path.starts_with('/') {
        Request::File(path.to_owned())
    } else {
        Request::Invalid("the path must start with /".into())
    }
}

fn truncate(s: &str) -> String {
    s.chars().take(40).collect()
}

fn parse_subscribe(rest: &str) -> Result<Request, String> {
    let mut segments = rest.split('/');
    let hostid = segments
        .next()
        .filter(|h| is_word(h))
        .ok_or("bad host id")?;
    let mode = segments.next().filter(|m| is_word(m)).ok_or("bad mode")?;
    let mut channels: Vec<ChannelSpec> = Vec::new();
    for def in segments.filter(|s| !s.is_empty()) {
        let spec = parse_channel(def)?;
        if !channels.iter().any(|c| c.name == spec.name) {
            channels.push(spec);
        }
    }
    if channels.is_empty() {
        return Err("no channel named".into());
    }
    Ok(Request::Subscribe(Subscribe {
        hostid: hostid.to_owned(),
        mode: mode.to_owned(),
        channels,
    }))
}

fn parse_channel(def: &str) -> Result<ChannelSpec, String> {
    let (raw, suffix) = match def.split_once('.') {
        Some((n, s)) => (n, Some(s)),
        None => (def, None),
    };
    let start = match suffix {
        None => Start::Live,
        Some(s) => parse_start(s).ok_or_else(|| format!("bad suffix .{}", truncate(s)))?,
    };
    let decoded = decode_name(raw).ok_or("bad channel name")?;
    let name = ChannelName::parse(&decoded).map_err(|e| e.message)?;
    Ok(ChannelSpec { name, start })
}

fn parse_start(s: &str) -> Option<Start> {
    let (kind, digits) = s.split_at_checked(1)?;
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n = if digits.is_empty() {
        None
    } else {
        Some(digits.parse::<u64>().ok()?)
    };
    match (kind, n) {
        ("r", Some(id)) => Some(Start::FromId(id)),
        ("b", Some(n)) => Some(Start::Last(n)),
        ("h", None) | ("r", None) | ("b", None) => Some(Start::All),
        _ => None,
    }
}

/// Decodes a Meteor channel name: `[A-Za-z0-9_-]` and `%XX`.
fn decode_name(raw: &str) -> Option<String> {
    let b = raw.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            c if c.is_ascii_alphanumeric() || c == b'_' || c == b'-' => {
                out.push(c);
                i += 1;
            }
            _ => return None,
        }
    }
    String::from_utf8(out).ok()
}

/// A Herald channel's Meteor name: bytes outside `[A-Za-z0-9_-]` as `%XX` (upper-case hex).
pub fn meteor_name(name: &ChannelName) -> String {
    let mut out = String::with_capacity(name.as_str().len());
    for b in name.as_str().bytes() {
        if b.is_ascii_alphanumeric() || b == b'_' || b == b'-' {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sub(line: &str) -> Subscribe {
        match parse(line, "/push") {
            Request::Subscribe(s) => s,
            other => panic!("{line}: {other:?}"),
        }
    }

    #[test]
    fn subscribe_lines() {
        let s = sub("GET /push/host1/longpoll/news.r5/chat%2Froom-1.b3/x.h/y HTTP/1.1");
        assert_eq!((s.hostid.as_str(), s.mode.as_str()), ("host1", "longpoll"));
        let got: Vec<(&str, Start)> = s
            .channels
            .iter()
            .map(|c| (c.name.as_str(), c.start))
            .collect();
        assert_eq!(
            got,
            vec![
                ("news", Start::FromId(5)),
                ("chat/room-1", Start::Last(3)),
                ("x", Start::All),
                ("y", Start::Live),
            ]
        );
        let s = sub("GET /push/1234/stream/a/a.r2/?nc=99 HTTP/1.0");
        assert_eq!(s.channels.len(), 1, "duplicates and empty segments dropped");
    }

    #[test]
    fn other_requests() {
        assert_eq!(
            parse("GET /disconnect/abc HTTP/1.1", "/push"),
            Request::Disconnect("abc".into())
        );
        assert_eq!(
            parse("GET /meteor.js?v=1 HTTP/1.1", "/push"),
            Request::File("/meteor.js".into())
        );
        for bad in [
            "",
            "GET",
            "POST /push/a/b/c HTTP/1.1",
            "GET /push/a/b HTTP/1.1",
            "GET /push/a/b/ HTTP/1.1",
            "GET /push/a!/b/c HTTP/1.1",
            "GET /push/a/b/c.q HTTP/1.1",
            "GET /push/a/b/c.r99999999999999999999999 HTTP/1.1",
            "GET /push/a/b/c%2 HTTP/1.1",
            "GET /push/a/b/%2Fc HTTP/1.1",
            "GET /push/a/b/c%FF HTTP/1.1",
            "GET /push/a/b/c HTTP/1.1 extra",
            "GET /disconnect/ HTTP/1.1",
            "GET nope HTTP/1.1",
        ] {
            assert!(
                matches!(parse(bad, "/push"), Request::Invalid(_)),
                "{bad:?} should be invalid"
            );
        }
    }

    #[test]
    fn names_round_trip() {
        let n = ChannelName::parse("chat/room.1:a@b=c").unwrap();
        let m = meteor_name(&n);
        assert_eq!(m, "chat%2Froom%2E1%3Aa%40b%3Dc");
        assert_eq!(decode_name(&m).as_deref(), Some(n.as_str()));
    }

    proptest! {
        #[test]
        fn never_panics(line in "\\PC{0,200}") {
            let _ = parse(&line, "/push");
        }

        #[test]
        fn never_panics_on_push_like_lines(
            rest in "[a-zA-Z0-9_%./-]{0,80}",
            prefix in "(/push|/p|)",
        ) {
            let _ = parse(&format!("GET /push/{rest} HTTP/1.1"), &prefix);
        }

        #[test]
        fn encoded_names_decode_to_themselves(name in "[a-z0-9][a-z0-9/_.:@=-]{0,40}[a-z0-9]") {
            if let Ok(n) = ChannelName::parse(&name) {
                let s = sub(&format!("GET /push/h/stream/{}.r7 HTTP/1.1", meteor_name(&n)));
                prop_assert_eq!(&s.channels[0].name, &n);
                prop_assert_eq!(s.channels[0].start, Start::FromId(7));
            }
        }
    }
}
