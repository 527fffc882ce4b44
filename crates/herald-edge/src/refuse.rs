//! The answer to a connection over its source address's rate limit (`limits.connection`):
//! `429 rate_limited` with `Retry-After`, written straight to the socket before any request
//! is read (hyper is never started for it), then the connection is closed.

use std::time::Duration;

use herald_core::limits::retry_after_secs;
use herald_core::{ErrorCode, HeraldError};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How long a refused connection may take to read its answer.
const ANSWER_WITHIN: Duration = Duration::from_secs(2);

/// The whole HTTP answer to a refused connection.
fn answer(wait: Duration) -> Vec<u8> {
    let secs = retry_after_secs(wait);
    let e = HeraldError::new(
        ErrorCode::RateLimited,
        format!(
            "too many new connections from this address (limits.connection); retry after {secs} s"
        ),
    );
    let (_, body) = herald_proto::http::error_answer(&e);
    let mut out = format!(
        "HTTP/1.1 429 Too Many Requests\r\ncontent-type: application/json\r\n\
         retry-after: {secs}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(&body);
    out
}

/// Answers `429` on `tcp` and closes it, reading (and dropping) what the client sends
/// meanwhile so the close does not reset the connection before the answer is read; bounded
/// by `ANSWER_WITHIN`.
pub async fn too_many_connections(mut tcp: TcpStream, wait: Duration) {
    let finish = async {
        tcp.write_all(&answer(wait)).await?;
        tcp.shutdown().await?;
        let mut sink = [0u8; 1024];
        while tcp.read(&mut sink).await? > 0 {}
        Ok::<_, std::io::Error>(())
    };
    let _ = tokio::time::timeout(ANSWER_WITHIN, finish).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_answer_is_429_with_whole_seconds_and_a_json_body() {
        let text = String::from_utf8(answer(Duration::from_millis(1500))).unwrap();
        assert!(text.starts_with("HTTP/1.1 429 "), "{text}");
        assert!(text.contains("\r\nretry-after: 2\r\n"), "{text}");
        let body = text.split("\r\n\r\n").nth(1).unwrap();
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(v["error"]["code"], "rate_limited");
        assert!(text.contains(&format!("content-length: {}\r\n", body.len())));
    }
}
