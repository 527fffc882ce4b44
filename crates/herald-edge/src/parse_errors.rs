//! The answers hyper's HTTP/1 parser writes by itself, given the JSON error body every other
//! answer has. When a request cannot be parsed (a URI over hyper's limit, headers over its
//! buffer, two `Content-Length` headers, bytes that are not HTTP), hyper answers `414`, `431`
//! or `400` with an empty body and closes the connection, before any of Herald's code sees a
//! request. [`ParseErrorRewrite`] recognises that answer on its way to the socket (its exact
//! shape: one of those statuses, `connection: close` and `content-length: 0` as its first
//! headers, which no answer of Herald's has) and writes in its place the same status with
//! `{"error":{"code","message"}}`.

use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use herald_core::{ErrorCode, HeraldError};
use tokio::io::AsyncWrite;

/// The most bytes a request head (request line and headers) may have; a longer one is answered
/// `431` (or `414` when its request line alone is longer) by `crate::deadlines::TimedStream`,
/// whatever size the reads that brought it were. hyper's own bound depends on how the bytes
/// arrive (its buffer may grow past it within one read), so it is not the one that applies.
pub const MAX_HEAD_BYTES: usize = 64 * 1024;

/// What hyper's own error answers start with, after the status line.
const HYPER_ERROR_HEADERS: &[u8] = b"\r\nconnection: close\r\ncontent-length: 0\r\n";

/// The JSON answer that replaces `head` when `head` is one of hyper's own error answers.
pub fn replacement(head: &[u8]) -> Option<Vec<u8>> {
    let rest = head.strip_prefix(b"HTTP/1.1 ")?;
    let status = rest.get(..3)?;
    if !matches!(status, b"414" | b"431" | b"400") {
        return None;
    }
    let line_end = rest.windows(2).position(|w| w == b"\r\n")?;
    if !rest[line_end..].starts_with(HYPER_ERROR_HEADERS) {
        return None;
    }
    let status_line = &head[.."HTTP/1.1 ".len() + line_end];
    answer_for(status_line, status)
}

/// The whole JSON answer to a request the parser refuses, given its status line
/// (`HTTP/1.1 431 Request Header Fields Too Large`) and status (`414`, `431` or `400`).
fn answer_for(status_line: &[u8], status: &[u8]) -> Option<Vec<u8>> {
    let error = match status {
        b"414" => HeraldError::new(
            ErrorCode::TooLarge,
            "the request's URI is too long: send long data in the request body",
        ),
        b"431" => HeraldError::new(
            ErrorCode::TooLarge,
            "the request's headers are too large: send long data in the request body",
        ),
        b"400" => HeraldError::bad_request(
            "the request is not valid HTTP/1.1 (for example a header line without a colon, or \
             two Content-Length headers); nothing of it was read",
        ),
        _ => return None,
    };
    let (_, body) = herald_proto::http::error_answer(&error);
    let mut answer = status_line.to_vec();
    answer.extend_from_slice(
        format!(
            "\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
            body.len()
        )
        .as_bytes(),
    );
    answer.extend_from_slice(&body);
    Some(answer)
}

/// The answer to a request head over [`MAX_HEAD_BYTES`]: `414` when not even its request line
/// ended within the limit, else `431`.
pub fn head_too_large(request_line_ended: bool) -> Vec<u8> {
    let (line, status): (&[u8], &[u8]) = if request_line_ended {
        (b"HTTP/1.1 431 Request Header Fields Too Large", b"431")
    } else {
        (b"HTTP/1.1 414 URI Too Long", b"414")
    };
    answer_for(line, status).expect("414 and 431 have answers")
}

/// A replacement answer being written in place of hyper's: the bytes, how many are written,
/// and how many bytes of hyper's write they stand for.
#[derive(Debug, Default)]
pub struct ParseErrorRewrite {
    pending: Option<(Vec<u8>, usize, usize)>,
}

impl ParseErrorRewrite {
    /// Writes `bufs` to `io`, or, when they are one of hyper's error answers, the JSON answer
    /// in their place (reporting all of `bufs` written once the replacement is).
    pub fn poll_write_vectored<W: AsyncWrite + Unpin>(
        &mut self,
        io: &mut W,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        if self.pending.is_none() {
            // hyper writes an error answer's head in one slice, before anything else of it.
            let answer = bufs
                .iter()
                .find(|b| !b.is_empty())
                .and_then(|b| replacement(b));
            match answer {
                Some(answer) => {
                    let stands_for = bufs.iter().map(|b| b.len()).sum();
                    self.pending = Some((answer, 0, stands_for));
                }
                None => return Pin::new(io).poll_write_vectored(cx, bufs),
            }
        }
        let Some((answer, written, stands_for)) = &mut self.pending else {
            unreachable!("set above")
        };
        while *written < answer.len() {
            let n = ready!(Pin::new(&mut *io).poll_write(cx, &answer[*written..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            *written += n;
        }
        let stands_for = *stands_for;
        self.pending = None;
        Poll::Ready(Ok(stands_for))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hypers_own_answers_are_replaced_and_no_other() {
        let hyper = b"HTTP/1.1 431 Request Header Fields Too Large\r\nconnection: close\r\n\
                      content-length: 0\r\ndate: Tue, 24 Nov 2026 07:11:55 GMT\r\n\r\n";
        let answer = String::from_utf8(replacement(hyper).unwrap()).unwrap();
        assert!(
            answer.starts_with("HTTP/1.1 431 Request Header Fields Too Large\r\n"),
            "{answer}"
        );
        let body = answer.split("\r\n\r\n").nth(1).unwrap();
        let json: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(json["error"]["code"], "too_large");
        assert!(answer.contains(&format!("content-length: {}\r\n", body.len())));

        for other in [
            // Herald's own answers carry a body and a content type.
            &b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 9\r\n\r\n"[..],
            // A status hyper's parser does not write.
            b"HTTP/1.1 404 Not Found\r\nconnection: close\r\ncontent-length: 0\r\n\r\n",
            b"HTTP/1.1 200 OK\r\n\r\n",
            b"{\"data\":1}",
            b"",
        ] {
            assert_eq!(replacement(other), None, "{}", String::from_utf8_lossy(other));
        }
    }
}
