//! The client's errors: what the server said went wrong (its code and message), and what went
//! wrong on the way (connection, decoding).

use herald_proto::{reply::ErrorBody, ErrorCode};

/// An error the server reported: an HTTP error answer, a WebSocket `error` frame or a
/// `disconnect`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message} ({code}{})", status.map(|s| format!(", HTTP {s}")).unwrap_or_default())]
pub struct ServerError {
    /// The HTTP status, for an HTTP answer (including a refused WebSocket handshake).
    pub status: Option<u16>,
    /// The code as the server spelled it; empty when the answer carried none.
    pub code: String,
    /// The server's message, or the answer's text when it was not a JSON error.
    pub message: String,
}

impl ServerError {
    /// The code, when it is one this version of the contract knows (a `disconnect` may carry
    /// others, such as `slow_consumer` or `shutdown`).
    pub fn code(&self) -> Option<ErrorCode> {
        ErrorCode::from_wire(&self.code)
    }

    /// The error of an HTTP answer with status `status` and body `body`: the JSON error's code
    /// and message, or the body's text (trimmed, at most 500 characters) with no code.
    pub fn from_http(status: u16, body: &[u8]) -> ServerError {
        #[derive(serde::Deserialize)]
        struct Envelope<'a> {
            #[serde(borrow)]
            error: ErrorBody<'a>,
        }
        match serde_json::from_slice::<Envelope<'_>>(body) {
            Ok(e) => ServerError {
                status: Some(status),
                code: e.error.code.into_owned(),
                message: e.error.message.into_owned(),
            },
            Err(_) => ServerError {
                status: Some(status),
                code: String::new(),
                message: String::from_utf8_lossy(body)
                    .trim()
                    .chars()
                    .take(500)
                    .collect(),
            },
        }
    }
}

impl From<&ErrorBody<'_>> for ServerError {
    fn from(e: &ErrorBody<'_>) -> Self {
        ServerError {
            status: None,
            code: e.code.to_string(),
            message: e.message.to_string(),
        }
    }
}

/// Everything a client call can fail with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The server answered with an error.
    #[error("{0}")]
    Server(#[from] ServerError),
    /// A TLS setting (a CA file) cannot be used.
    #[error("TLS: {0}")]
    Tls(String),
    /// The HTTP request could not be made or its answer not read.
    #[error("HTTP request to {url} failed: {source}")]
    Http {
        /// The URL asked.
        url: String,
        /// What failed.
        #[source]
        source: reqwest::Error,
    },
    /// The WebSocket could not be opened, written or read.
    #[error("WebSocket {url}: {source}")]
    WebSocket {
        /// The URL of the socket.
        url: String,
        /// What failed.
        #[source]
        source: Box<tokio_tungstenite::tungstenite::Error>,
    },
    /// The server sent something that is not what the contract says.
    #[error("unexpected answer from the server: {0}")]
    Decode(String),
    /// The connection ended before the answer came.
    #[error("the server closed the connection")]
    Closed,
    /// The server URL cannot be used.
    #[error("{0}")]
    Url(String),
}

impl Error {
    /// The server's error, if the server reported one.
    pub fn server(&self) -> Option<&ServerError> {
        match self {
            Error::Server(e) => Some(e),
            _ => None,
        }
    }

    /// The server's error code, if the server reported a known one.
    pub fn code(&self) -> Option<ErrorCode> {
        self.server().and_then(ServerError::code)
    }
}

impl From<herald_proto::HeraldError> for Error {
    fn from(e: herald_proto::HeraldError) -> Self {
        Error::Decode(e.message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_errors_keep_the_code_or_the_text() {
        let e = ServerError::from_http(404, br#"{"error":{"code":"not_found","message":"no"}}"#);
        assert_eq!(e.code(), Some(ErrorCode::NotFound));
        assert_eq!(e.to_string(), "no (not_found, HTTP 404)");
        let e = ServerError::from_http(502, b"  bad gateway\n");
        assert_eq!((e.code.as_str(), e.message.as_str()), ("", "bad gateway"));
    }
}
