//! Small clients of a running server, used by `herald publish` and `herald subscribe`: an HTTP
//! publisher ([`publish`]) and a WebSocket subscriber ([`subscribe`]).

pub mod publish;
pub mod subscribe;

/// Default server address for the clients (`HERALD_URL`).
pub const DEFAULT_URL: &str = "http://127.0.0.1:7070";

/// `base` without trailing slashes, joined with `path` (which starts with `/`).
pub fn join_url(base: &str, path: &str) -> String {
    format!("{}{path}", base.trim_end_matches('/'))
}

/// Percent-encodes a channel name for a URL path. The characters of valid channel names
/// (`A-Z a-z 0-9 _ - . : @ = /`) stay as they are, since the API routes `/v1/channels/{name...}`
/// with literal slashes; anything else is escaped so it reaches the server's validation intact.
pub fn encode_path(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric()
            || matches!(b, b'-' | b'.' | b'_' | b'~' | b':' | b'@' | b'=' | b'/')
        {
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

    #[test]
    fn urls() {
        assert_eq!(join_url("http://h:1/", "/v1/ws"), "http://h:1/v1/ws");
        assert_eq!(join_url("http://h/base", "/v1/ws"), "http://h/base/v1/ws");
        assert_eq!(encode_path("chat/room-1:a@b=c"), "chat/room-1:a@b=c");
        assert_eq!(encode_path("a b?#%"), "a%20b%3F%23%25");
    }
}
