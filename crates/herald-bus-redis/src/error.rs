//! The crate's errors: connecting to Redis ([`BusError`]) and parsing what arrives from it
//! ([`DecodeError`]).

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
