//! Server URLs: joining a base URL with a path, escaping channel names in paths and queries,
//! and turning an `http(s)://` base into the `ws(s)://` address of `/v1/ws`.

use crate::Error;

/// Default server address (`HERALD_URL`'s default in the CLI).
pub const DEFAULT_URL: &str = "http://127.0.0.1:7070";

/// `base` without trailing slashes, joined with `path` (which starts with `/`).
pub fn join(base: &str, path: &str) -> String {
    format!("{}{path}", base.trim_end_matches('/'))
}

/// Percent-encodes a channel name for a URL path. The characters of valid channel names
/// (`A-Z a-z 0-9 _ - . : @ = /`) stay as they are, since the API routes `/v1/channels/{name...}`
/// with literal slashes; anything else is escaped so it reaches the server's validation intact.
pub fn encode_path(s: &str) -> String {
    encode(s, |b| {
        b.is_ascii_alphanumeric()
            || matches!(b, b'-' | b'.' | b'_' | b'~' | b':' | b'@' | b'=' | b'/')
    })
}

/// Percent-encodes a query parameter value (everything but unreserved characters).
pub fn encode_query(s: &str) -> String {
    encode(s, |b| {
        b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
    })
}

fn encode(s: &str, keep: impl Fn(u8) -> bool) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if keep(b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The WebSocket URL for a server base URL: `http` becomes `ws`, `https` becomes `wss`.
pub fn ws_url(base: &str) -> Result<String, Error> {
    let url = join(base, "/v1/ws");
    for (from, to) in [("http://", "ws://"), ("https://", "wss://")] {
        if let Some(rest) = url.strip_prefix(from) {
            return Ok(format!("{to}{rest}"));
        }
    }
    if url.starts_with("ws://") || url.starts_with("wss://") {
        return Ok(url);
    }
    Err(Error::Url(format!(
        "server URL {base:?} must start with http://, https://, ws:// or wss://"
    )))
}

/// `?channel=a&channel=b[&token=T]` for SSE and long-poll, followed by `extra` (`&k=v` pairs).
pub fn channel_query(channels: &[&str], token: Option<&str>, extra: &str) -> String {
    let mut q = String::new();
    for c in channels {
        q.push(if q.is_empty() { '?' } else { '&' });
        q.push_str("channel=");
        q.push_str(&encode_query(c));
    }
    if let Some(t) = token {
        q.push(if q.is_empty() { '?' } else { '&' });
        q.push_str("token=");
        q.push_str(&encode_query(t));
    }
    if !extra.is_empty() {
        if q.is_empty() {
            q.push('?');
            q.push_str(extra.trim_start_matches('&'));
        } else {
            q.push_str(extra);
        }
    }
    q
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        assert_eq!(join("http://h:1/", "/v1/ws"), "http://h:1/v1/ws");
        assert_eq!(join("http://h/base", "/v1/ws"), "http://h/base/v1/ws");
        assert_eq!(encode_path("chat/room-1:a@b=c"), "chat/room-1:a@b=c");
        assert_eq!(encode_path("a b?#%"), "a%20b%3F%23%25");
        assert_eq!(ws_url("http://h:1/").unwrap(), "ws://h:1/v1/ws");
        assert_eq!(ws_url("https://h/x").unwrap(), "wss://h/x/v1/ws");
        assert_eq!(ws_url("ws://h").unwrap(), "ws://h/v1/ws");
        assert!(ws_url("h:1").is_err());
        assert_eq!(
            channel_query(&["a/b", "c"], Some("t"), "&since=x"),
            "?channel=a%2Fb&channel=c&token=t&since=x"
        );
        assert_eq!(channel_query(&[], None, "&since=x"), "?since=x");
    }
}
