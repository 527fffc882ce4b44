//! HTTP/1.1 over a raw socket for the load clients: reading a response (head, body, chunked),
//! opening an SSE or long-poll connection (query, inbox start, storm timing), and the
//! keep-alive publisher client the scenarios time publishes with.

use std::net::{IpAddr, SocketAddr};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;

use super::{
    channel_list, connect, connection_token, err, inbox_start, lossy, reserve, wait_subscribe,
    Fire, Inbox, Ready,
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
                return Ok((head.status, body));
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
    Ok((head.status, body))
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

/// A keep-alive HTTP/1.1 client for the publisher API.
pub struct HttpClient {
    addr: SocketAddr,
    host: String,
    source: Option<IpAddr>,
    stream: Option<TcpStream>,
    buf: Vec<u8>,
}

impl HttpClient {
    /// A client for `addr` (connects on first use).
    pub fn new(addr: SocketAddr, host: &str, source: Option<IpAddr>) -> Self {
        HttpClient {
            addr,
            host: host.to_string(),
            source,
            stream: None,
            buf: Vec::with_capacity(1024),
        }
    }

    /// POSTs `body` to `path`; returns the status and the response body. A failed request is not
    /// retried (it might have been carried out).
    pub async fn post(
        &mut self,
        path: &str,
        key: &str,
        body: &[u8],
    ) -> Result<(u16, Vec<u8>), String> {
        let request = wire::post_json(&self.host, path, key, body);
        self.send(&request).await
    }

    /// POSTs the JSON `body` to `path` with no `Authorization` header (a request whose query
    /// carries its signature, as Pusher's HTTP API's do); returns the status and the body.
    pub async fn post_signed(&mut self, path: &str, body: &[u8]) -> Result<(u16, Vec<u8>), String> {
        let mut request = format!(
            "POST {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\n\r\n",
            self.host,
            body.len()
        )
        .into_bytes();
        request.extend_from_slice(body);
        self.send(&request).await
    }

    /// Triggers one event stamped with the current time on `channel` through Pusher's HTTP API
    /// (`POST /apps/{app_id}/events`, signed with `app`'s secret); returns the send time.
    pub async fn trigger_now(
        &mut self,
        app: &crate::pusher_api::PusherApp,
        channel: &str,
    ) -> Result<u64, String> {
        let sent = now_ns();
        let body = crate::pusher_api::trigger_body(channel, sent);
        let path = app.events_path(body.as_bytes(), crate::pusher_api::unix_seconds());
        let (status, answer) = self.post_signed(&path, body.as_bytes()).await?;
        if status != 200 {
            return Err(format!("trigger failed: HTTP {status} {}", lossy(&answer)));
        }
        Ok(sent)
    }

    /// PUTs the JSON `body` to `path`; returns the status and the response body.
    pub async fn put(
        &mut self,
        path: &str,
        key: &str,
        body: &[u8],
    ) -> Result<(u16, Vec<u8>), String> {
        let request = wire::request_json("PUT", &self.host, path, key, body);
        self.send(&request).await
    }

    /// GETs `path` with the bearer `key`; returns the status and the response body.
    pub async fn get(&mut self, path: &str, key: &str) -> Result<(u16, Vec<u8>), String> {
        let auth = format!("Authorization: Bearer {key}\r\n");
        let request = wire::get_request(&self.host, path, &auth);
        self.send(&request).await
    }

    /// DELETEs `path` with the bearer `key`; returns the status and the response body.
    pub async fn delete(&mut self, path: &str, key: &str) -> Result<(u16, Vec<u8>), String> {
        let request = format!(
            "DELETE {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {key}\r\n\
             Content-Length: 0\r\n\r\n",
            self.host
        );
        self.send(request.as_bytes()).await
    }

    /// Writes one request and reads its response, connecting first if needed.
    async fn send(&mut self, request: &[u8]) -> Result<(u16, Vec<u8>), String> {
        if self.stream.is_none() {
            self.stream = Some(
                connect(self.addr, self.source, None)
                    .await
                    .map_err(err("connect"))?,
            );
            self.buf.clear();
        }
        let stream = self.stream.as_mut().expect("connected above");
        let result = async {
            stream.write_all(request).await.map_err(err("write"))?;
            read_response(stream, &mut self.buf).await
        }
        .await;
        if result.is_err() {
            self.stream = None;
        }
        result
    }

    /// Publishes `count` messages stamped with the current time to `channel` in one
    /// `POST /v1/batch`; every one must be stored.
    pub async fn publish_batch_now(
        &mut self,
        channel: &str,
        key: &str,
        count: u64,
    ) -> Result<u64, String> {
        let sent = now_ns();
        let one = format!(
            "{{\"channel\":\"{channel}\",\"data\":{}}}",
            wire::stamp(sent)
        );
        let mut body = String::with_capacity(16 + count as usize * (one.len() + 1));
        body.push_str("{\"messages\":[");
        for i in 0..count {
            if i > 0 {
                body.push(',');
            }
            body.push_str(&one);
        }
        body.push_str("]}");
        let (status, answer) = self.post("/v1/batch", key, body.as_bytes()).await?;
        if status != 200 || lossy(&answer).contains("\"error\"") {
            return Err(format!(
                "batch publish failed: HTTP {status} {}",
                lossy(&answer)
            ));
        }
        Ok(sent)
    }

    /// Publishes one message stamped with the current time to `channel`.
    pub async fn publish_now(&mut self, channel: &str, key: &str) -> Result<u64, String> {
        let sent = now_ns();
        let body = format!("{{\"data\":{}}}", wire::stamp(sent));
        let (status, answer) = self
            .post(
                &format!("/v1/channels/{channel}/messages"),
                key,
                body.as_bytes(),
            )
            .await?;
        if status != 200 {
            return Err(format!("publish failed: HTTP {status} {}", lossy(&answer)));
        }
        Ok(sent)
    }
}
