//! HTTP/1.1 over a raw socket for the load clients: reading a response (head, body, chunked) and
//! opening an SSE or long-poll connection (query, inbox start, storm timing). The keep-alive
//! publisher client is [`super::http_client`].

use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tokio::sync::watch;

use super::{
    channel_list, connect, connection_token, err, inbox_start, reserve, wait_subscribe, Fire,
    Inbox, Ready,
};
use crate::proto::Plan;
use crate::wire::{self, now_ns};
use crate::worker::Shared;
use herald_client::url::encode_query;

/// Reads until a complete response head is in `buf`; removes it and returns it.
pub(super) async fn read_head(
    s: &mut TcpStream,
    buf: &mut Vec<u8>,
) -> Result<wire::ResponseHead, String> {
    loop {
        if let Some(head) = wire::parse_response_head(buf)? {
            buf.drain(..head.len);
            return Ok(head);
        }
        reserve(buf);
        if s.read_buf(buf).await.map_err(err("read"))? == 0 {
            return Err("connection closed by server".into());
        }
    }
}

/// Reads a whole response (head and body) to a request already written.
pub(super) async fn read_response(
    s: &mut TcpStream,
    buf: &mut Vec<u8>,
) -> Result<(u16, Vec<u8>), String> {
    let (head, body) = read_answer(s, buf).await?;
    Ok((head.status, body))
}

/// Reads a whole response to a request already written: its head and its body.
pub(super) async fn read_answer(
    s: &mut TcpStream,
    buf: &mut Vec<u8>,
) -> Result<(wire::ResponseHead, Vec<u8>), String> {
    let head = read_head(s, buf).await?;
    if head.chunked {
        let mut d = wire::Dechunker::default();
        let mut body = Vec::new();
        loop {
            d.feed(buf, &mut body)?;
            if d.done {
                // Drop the trailer's blank line.
                if buf.starts_with(b"\r\n") {
                    buf.drain(..2);
                }
                return Ok((head, body));
            }
            reserve(buf);
            if s.read_buf(buf).await.map_err(err("read"))? == 0 {
                return Err("connection closed mid-response".into());
            }
        }
    }
    // A 204 or 304 answer has no body (RFC 9110), with or without a Content-Length.
    let len = match head.status {
        204 | 304 => 0,
        _ => head
            .content_length
            .ok_or("response has neither Content-Length nor chunked encoding")?,
    };
    while buf.len() < len {
        reserve(buf);
        if s.read_buf(buf).await.map_err(err("read"))? == 0 {
            return Err("connection closed mid-response".into());
        }
    }
    let body: Vec<u8> = buf.drain(..len).collect();
    Ok((head, body))
}

pub(super) fn query(channels: &[String], token: &Option<String>, extra: &str) -> String {
    let mut q = String::with_capacity(channels.len() * 20 + 64);
    for (i, c) in channels.iter().enumerate() {
        q.push(if i == 0 { '?' } else { '&' });
        q.push_str("channel=");
        q.push_str(&encode_query(c));
    }
    if let Some(t) = token {
        q.push_str("&token=");
        q.push_str(&encode_query(t));
    }
    q.push_str(extra);
    if q.starts_with('&') {
        q.replace_range(..1, "?");
    }
    q
}

/// What an SSE or long-poll connection starts with: its token, its inbox (device plans), the
/// TCP connection, the channels to name, and when the request counts as sent.
pub(super) struct HttpOpening {
    pub(super) token: Option<String>,
    pub(super) inbox: Option<Inbox>,
    pub(super) stream: TcpStream,
    pub(super) channels: Vec<String>,
    pub(super) sent: u64,
}

/// Connects, takes part in the inbox start, and, for a storm, waits for the moment to subscribe.
pub(super) async fn open_http(
    sh: &Shared,
    n: u64,
    plan: &Plan,
    ready: &Ready,
    fire: &mut watch::Receiver<Option<Fire>>,
) -> Result<HttpOpening, String> {
    let cfg = &sh.cfg;
    let token = connection_token(sh, n, plan)?;
    let mut inbox = Inbox::of(plan);
    let stream = connect(cfg.addr, cfg.source_ip, cfg.rcvbuf)
        .await
        .map_err(err("connect"))?;
    fire.borrow_and_update();
    inbox_start(sh, ready, fire, &mut inbox).await?;
    let (channels, sent) = if matches!(plan, Plan::Connect) {
        ready.ok(sh);
        wait_subscribe(fire, n).await?
    } else {
        (channel_list(plan, n), now_ns())
    };
    Ok(HttpOpening {
        token,
        inbox,
        stream,
        channels,
        sent,
    })
}
