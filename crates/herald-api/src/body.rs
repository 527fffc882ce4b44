//! Request bodies, read one way on every route: at most a route's limit of bytes, refused as
//! soon as they are over it (`413 too_large`), with a body that stops arriving or is not one
//! told apart (`408`, `400`) ([`read_body`]); then parsed as a JSON object, strictly
//! (`herald_proto::strict_json`), with errors that name where and never the server's own
//! types ([`parse_json`]).

use axum::body::Body;
use bytes::Bytes;
use herald_core::{ErrorCode, HeraldError};
use serde::Deserialize;

/// The error for a request body over `limit` bytes.
pub(crate) fn too_large(limit: usize) -> HeraldError {
    HeraldError::new(
        ErrorCode::TooLarge,
        format!("request body is larger than {limit} bytes"),
    )
}

/// Reads a request body of at most `limit` bytes. A declared `Content-Length` over the limit is
/// refused before anything is read, and a body that grows past it while read is refused as it
/// does (`413 too_large`); a body that stops arriving before its deadline (the listener's
/// `body_timeout`) is answered `408 request_timeout`; a body that cannot be read (a chunked
/// body whose framing is malformed, one that ends early) is the client's error: `400`.
pub(crate) async fn read_body(body: Body, limit: usize) -> Result<Bytes, HeraldError> {
    use futures_util::StreamExt;
    if axum::body::HttpBody::size_hint(&body).lower() > limit as u64 {
        return Err(too_large(limit));
    }
    // The limit is checked here rather than by `axum::body::to_bytes`, whose error does not
    // tell a body over the limit from one that could not be read.
    let mut chunks = body.into_data_stream();
    let mut first: Option<Bytes> = None;
    let mut more: Option<bytes::BytesMut> = None;
    let mut read = 0usize;
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.map_err(|e| unreadable_body(&e))?;
        read = read.saturating_add(chunk.len());
        if read > limit {
            return Err(too_large(limit));
        }
        // One chunk (the usual case) is kept as it came, without a copy.
        match (&first, &mut more) {
            (None, _) => first = Some(chunk),
            (Some(head), None) => {
                let mut joined = bytes::BytesMut::with_capacity(read);
                joined.extend_from_slice(head);
                joined.extend_from_slice(&chunk);
                more = Some(joined);
            }
            (Some(_), Some(joined)) => joined.extend_from_slice(&chunk),
        }
    }
    Ok(match more {
        Some(joined) => joined.freeze(),
        None => first.unwrap_or_default(),
    })
}

/// The answer to a body that failed while read: its deadline passed (`408`), or its bytes are
/// not a body (`400`): hyper's chunked decoder reports a bad chunk-size line or framing as
/// `InvalidInput`/`InvalidData`, and a body cut short as `UnexpectedEof`.
fn unreadable_body(e: &axum::Error) -> HeraldError {
    use std::io::ErrorKind;
    let found = |kinds: &[ErrorKind]| io_errors_in(e).find(|io| kinds.contains(&io.kind()));
    if found(&[ErrorKind::TimedOut]).is_some() {
        return HeraldError::new(
            ErrorCode::RequestTimeout,
            "the request body stopped arriving before the body deadline (body_timeout); \
             the connection is closed",
        );
    }
    if let Some(io) = found(&[ErrorKind::InvalidInput, ErrorKind::InvalidData]) {
        return HeraldError::bad_request(format!(
            "the chunked request body is malformed ({io}): each chunk is a hexadecimal size \
             line, CRLF, that many bytes and CRLF, and a 0 size ends the body; nothing of it \
             was used and the connection is closed"
        ));
    }
    if found(&[ErrorKind::UnexpectedEof]).is_some() {
        return HeraldError::bad_request(
            "the request body ended before it was complete; nothing of it was used",
        );
    }
    HeraldError::bad_request("the request body could not be read; nothing of it was used")
}

/// The `io::Error`s in `e`'s chain (how the listener's timed body and hyper say what went
/// wrong).
fn io_errors_in(e: &axum::Error) -> impl Iterator<Item = &std::io::Error> {
    let first: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    std::iter::successors(first, |e| e.source()).filter_map(|e| e.downcast_ref())
}

/// Parses a JSON request body, saying what is wrong with it. Every body of the API is a JSON
/// object, read strictly (`herald_proto::strict_json`): serde would read an array as an
/// object's fields in order (`[1]` as `{"data":1}`, `{"limits":[5,7]}` as two limits), which no
/// one means, so an array where an object belongs is refused at any depth, naming where.
pub(crate) fn parse_json<'a, T: Deserialize<'a>>(body: &'a [u8]) -> Result<T, HeraldError> {
    match body.iter().find(|b| !b.is_ascii_whitespace()) {
        None => {
            return Err(HeraldError::bad_request(
                "the request body is empty: send a JSON object",
            ))
        }
        Some(b'{') => {}
        Some(_) => {
            return Err(HeraldError::bad_request(
                "the request body must be a JSON object ({...}), not an array, a string or a \
                 number",
            ))
        }
    }
    herald_proto::strict_json::from_slice(body).map_err(|e| {
        HeraldError::bad_request(format!("invalid request body: {}", without_type_names(&e)))
    })
}

/// serde's message without the server's own type names (`expected struct PublishBody` says
/// nothing to a client): a struct is "an object", an enum "one of the allowed values".
fn without_type_names(e: &herald_proto::strict_json::Error) -> String {
    let text = e.to_string();
    let mut out = String::with_capacity(text.len());
    let mut rest = text.as_str();
    while let Some(at) = rest
        .find("expected struct ")
        .or_else(|| rest.find("expected enum "))
    {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        let (phrase, skip) = if tail.starts_with("expected struct ") {
            ("expected an object", "expected struct ".len())
        } else {
            ("expected one of the allowed values", "expected enum ".len())
        };
        out.push_str(phrase);
        let name = &tail[skip..];
        let end = name
            .find(|c: char| !c.is_ascii_alphanumeric() && c != '_')
            .unwrap_or(name.len());
        rest = &name[end..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_are_objects_and_errors_name_no_server_types() {
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct PublishBody {
            data: u8,
        }
        let e = parse_json::<PublishBody>(b" [1]").unwrap_err();
        assert!(e.message.contains("must be a JSON object"), "{}", e.message);
        let e = parse_json::<PublishBody>(b"").unwrap_err();
        assert!(e.message.contains("empty"), "{}", e.message);
        let e = parse_json::<std::collections::HashMap<String, PublishBody>>(br#"{"a":"x"}"#)
            .unwrap_err();
        assert!(e.message.contains("expected an object"), "{}", e.message);
        assert!(!e.message.contains("PublishBody"), "{}", e.message);
    }

    #[test]
    fn arrays_in_place_of_objects_are_refused_at_any_depth_naming_where() {
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct Update {
            limits: herald_core::tenancy::AppLimits,
        }
        for (body, path) in [
            (&br#"{"limits":[null,null]}"#[..], "limits"),
            (br#"{"limits":[5,7,1000]}"#, "limits"),
        ] {
            let e = parse_json::<Update>(body).unwrap_err();
            assert_eq!(
                e.message,
                format!("invalid request body: {path}: expected an object, not an array")
            );
        }
        let e = parse_json::<herald_push::push::PushBody>(br#"{"target":["dev-1"],"data":1}"#)
            .err()
            .expect("refused");
        assert_eq!(
            e.message,
            "invalid request body: target: expected an object, not an array"
        );
    }
}
