//! The WebSocket opening handshake (RFC 6455 section 4.2) on top of axum/hyper: checks the
//! upgrade request, answers `101 Switching Protocols` with `Sec-WebSocket-Accept`, and hands
//! back the raw connection (TCP, or TLS over TCP) once hyper lets go of it, so the connection can run on Herald's own
//! lean frame loop instead of a buffered WebSocket library.

use crate::conn::Conn;
use crate::deadlines::TimedStream;
use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, HeaderMap, HeaderValue, Method, Response, StatusCode};
use base64::Engine as _;
use bytes::Bytes;
use herald_core::HeraldError;
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use sha1::{Digest, Sha1};

/// The GUID RFC 6455 appends to the client's key.
const ACCEPT_GUID: &str = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// A checked upgrade request, ready to be answered.
pub struct Upgrade {
    accept: HeaderValue,
    on_upgrade: OnUpgrade,
    /// The subprotocol the answer names (`Sec-WebSocket-Protocol`), if one was chosen.
    protocol: Option<HeaderValue>,
}

/// The subprotocols a handshake offers (`Sec-WebSocket-Protocol`, RFC 6455 section 4.1), in the
/// client's order of preference.
pub fn offered_protocols(headers: &HeaderMap) -> impl Iterator<Item = &str> {
    headers
        .get_all(header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|p| !p.is_empty())
}

fn has_token(headers: &HeaderMap, name: header::HeaderName, token: &str) -> bool {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case(token))
}

impl Upgrade {
    /// Checks that `request` is a WebSocket upgrade Herald can accept.
    pub fn from_request(request: &mut Request) -> Result<Upgrade, HeraldError> {
        let headers = request.headers();
        if request.method() != Method::GET
            || !has_token(headers, header::CONNECTION, "upgrade")
            || !has_token(headers, header::UPGRADE, "websocket")
        {
            return Err(HeraldError::bad_request(
                "not a WebSocket upgrade (a GET with Connection: upgrade, Upgrade: websocket)",
            ));
        }
        if headers
            .get(header::SEC_WEBSOCKET_VERSION)
            .is_none_or(|v| v.as_bytes() != b"13")
        {
            return Err(HeraldError::bad_request(
                "unsupported WebSocket version: send Sec-WebSocket-Version: 13",
            ));
        }
        let key = headers
            .get(header::SEC_WEBSOCKET_KEY)
            .filter(|k| {
                base64::engine::general_purpose::STANDARD
                    .decode(k.as_bytes())
                    .is_ok_and(|d| d.len() == 16)
            })
            .ok_or_else(|| {
                HeraldError::bad_request("missing or malformed Sec-WebSocket-Key header")
            })?;
        let accept = accept_key(key.as_bytes());
        let on_upgrade = request
            .extensions_mut()
            .remove::<OnUpgrade>()
            .ok_or_else(|| {
                HeraldError::bad_request("this connection cannot be upgraded (HTTP/1.1 only)")
            })?;
        Ok(Upgrade {
            accept,
            on_upgrade,
            protocol: None,
        })
    }

    /// The answer names `protocol` as the subprotocol chosen (one the client offered,
    /// [`offered_protocols`]).
    pub fn with_protocol(mut self, protocol: &str) -> Upgrade {
        self.protocol = HeaderValue::from_str(protocol).ok();
        self
    }

    /// The `101 Switching Protocols` answer, and the future that yields the socket after it.
    /// With `move_socket`, the socket's registration moves to the runtime that polls that
    /// future ([`Conn::register_here`]): the connection's own, not the one that served the
    /// HTTP request.
    pub fn accept(
        self,
        move_socket: bool,
    ) -> (
        Response<Body>,
        impl std::future::Future<Output = Option<(Conn, Bytes)>>,
    ) {
        let mut response = Response::builder()
            .status(StatusCode::SWITCHING_PROTOCOLS)
            .header(header::CONNECTION, "upgrade")
            .header(header::UPGRADE, "websocket")
            .header(header::SEC_WEBSOCKET_ACCEPT, self.accept);
        if let Some(protocol) = self.protocol {
            response = response.header(header::SEC_WEBSOCKET_PROTOCOL, protocol);
        }
        let response = response
            .body(Body::empty())
            .expect("static response parts are valid");
        let on_upgrade = self.on_upgrade;
        let socket = async move {
            let upgraded = match on_upgrade.await {
                Ok(u) => u,
                Err(e) => {
                    tracing::debug!(error = %e, "WebSocket upgrade did not complete");
                    return None;
                }
            };
            match upgraded.downcast::<TokioIo<TimedStream>>() {
                Ok(parts) => {
                    let mut conn = parts.io.into_inner().into_inner();
                    if move_socket {
                        if let Err(e) = conn.register_here() {
                            tracing::warn!(error = %e, "could not move a WebSocket connection");
                            return None;
                        }
                    }
                    Some((conn, parts.read_buf))
                }
                Err(_) => {
                    tracing::error!("upgraded connection is not a Herald connection; closing it");
                    None
                }
            }
        };
        (response, socket)
    }
}

/// `Sec-WebSocket-Accept` for a client key.
fn accept_key(key: &[u8]) -> HeaderValue {
    let mut sha = Sha1::new();
    sha.update(key);
    sha.update(ACCEPT_GUID.as_bytes());
    let encoded = base64::engine::general_purpose::STANDARD.encode(sha.finalize());
    HeaderValue::from_str(&encoded).expect("base64 is a valid header value")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offered_protocols_are_read_from_every_header_in_order() {
        let mut headers = HeaderMap::new();
        headers.append(
            header::SEC_WEBSOCKET_PROTOCOL,
            "mqttv3.1, mqtt".parse().unwrap(),
        );
        headers.append(header::SEC_WEBSOCKET_PROTOCOL, "x".parse().unwrap());
        let offered: Vec<&str> = offered_protocols(&headers).collect();
        assert_eq!(offered, ["mqttv3.1", "mqtt", "x"]);
    }

    #[test]
    fn accept_key_matches_rfc_6455_example() {
        assert_eq!(
            accept_key(b"dGhlIHNhbXBsZSBub25jZQ=="),
            "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        );
    }
}
