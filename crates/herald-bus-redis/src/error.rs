//! The crate's errors: connecting to Redis ([`BusError`]) and parsing what arrives from it
//! ([`DecodeError`]); and the Redis client's errors in words ([`in_words`]) for the log.

/// Why the bus could not start.
#[derive(Debug, thiserror::Error)]
pub enum BusError {
    /// No Redis URL was given.
    #[error("no Redis URL given for the bus")]
    NoUrl,
    /// A URL could not be understood.
    #[error("the bus's Redis URL {url:?} is not valid: {reason}")]
    Url {
        /// The URL, without its password.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Redis did not answer at start.
    #[error("cannot connect the bus to Redis at {url}: {reason}")]
    Connect {
        /// The URL, without its password.
        url: String,
        /// What the client said.
        reason: String,
    },
    /// The TLS configuration for `rediss://` URLs cannot be built (a bad CA file).
    #[error("cannot set up TLS to Redis: {0}")]
    Tls(String),
    /// A Redis command failed (presence reads).
    #[error("Redis did not answer the bus: {0}")]
    Redis(String),
}

/// Why a payload from Redis was not understood (it is dropped and counted; a gap it leaves is
/// repaired from the log).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// An encoding version this node does not know.
    #[error("unknown encoding version")]
    Version,
    /// The payload ends early.
    #[error("truncated payload")]
    Truncated,
    /// The channel name is not a valid full channel name.
    #[error("invalid channel name")]
    Channel,
    /// The app id is not valid.
    #[error("invalid app id")]
    App,
    /// Some other field is wrong.
    #[error("malformed payload: {0}")]
    Malformed(&'static str),
}

/// A URL with any password replaced, for messages.
pub(crate) fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            format!("{}://***@{}", &url[..scheme], &url[at + 1..])
        }
        _ => url.to_owned(),
    }
}

/// What a Redis client error says, in words an operator reads: the client writes I/O errors in
/// their debug form (`Os { code: 111, kind: ConnectionRefused, message: "Connection refused" }`),
/// which becomes `connection refused`; its own messages lose their final period (`Connection
/// closed.` becomes `connection closed`). A certificate that did not verify keeps its details,
/// with what to check.
pub(crate) fn in_words(error: &fred::error::Error) -> String {
    details_in_words(error.details())
}

fn details_in_words(details: &str) -> String {
    if details.contains("InvalidCertificate") {
        return crate::tls::explain(details);
    }
    let quoted_after = |key: &str| {
        let start = details.find(key)? + key.len();
        let end = details[start..].find('"')?;
        Some(details[start..start + end].to_owned())
    };
    let name_after = |key: &str| {
        let start = details.find(key)? + key.len();
        let name: String = details[start..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect();
        (!name.is_empty()).then(|| words_of_name(&name))
    };
    let text = quoted_after("message: \"")
        .or_else(|| quoted_after("error: \""))
        .or_else(|| name_after("kind: "))
        .or_else(|| {
            details
                .strip_prefix("Kind(")
                .map(|rest| words_of_name(rest.trim_end_matches(')')))
        })
        .unwrap_or_else(|| details.trim().trim_end_matches('.').to_owned());
    lowercase_first(&text)
}

/// `ConnectionRefused` as `connection refused`.
fn words_of_name(name: &str) -> String {
    let mut words = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_uppercase() && i > 0 {
            words.push(' ');
        }
        words.extend(c.to_lowercase());
    }
    words
}

fn lowercase_first(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        // Keep acronyms (`TLS handshake`) as they are.
        Some(first) if !chars.next().is_some_and(char::is_uppercase) => first
            .to_lowercase()
            .chain(text[first.len_utf8()..].chars())
            .collect(),
        _ => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_errors_read_as_words() {
        for (details, words) in [
            (
                r#"Os { code: 111, kind: ConnectionRefused, message: "Connection refused" }"#,
                "connection refused",
            ),
            (
                r#"Custom { kind: Other, error: "Connection reset by peer" }"#,
                "connection reset by peer",
            ),
            ("Kind(TimedOut)", "timed out"),
            ("Connection closed.", "connection closed"),
            ("Request timed out.", "request timed out"),
            ("TLS handshake failed", "TLS handshake failed"),
        ] {
            assert_eq!(details_in_words(details), words, "{details}");
        }
        let error = fred::error::Error::new(
            fred::error::ErrorKind::IO,
            format!("{:?}", std::io::Error::from_raw_os_error(111)),
        );
        assert_eq!(in_words(&error), "connection refused");
        let certificate = details_in_words(
            "Custom { kind: InvalidData, error: InvalidCertificate(UnknownIssuer) }",
        );
        assert!(certificate.contains("did not verify"), "{certificate}");
    }
}
