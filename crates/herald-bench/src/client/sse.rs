//! The Server-Sent Events load client: one streaming request, events split and classified in
//! place, message stamps read from the `data:` lines.

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;

use super::{err, lossy, open_http, query, read_head, reserve, Fire, HttpOpening, Ready, Tally};
use crate::proto::Plan;
use crate::wire::{self, find, find_ts, now_ns};
use crate::worker::Shared;

pub(super) async fn sse(
    sh: &Shared,
    n: u64,
    plan: &Plan,
    ready: &Ready,
    mut fire: watch::Receiver<Option<Fire>>,
) -> Result<(), String> {
    let cfg = &sh.cfg;
    let HttpOpening {
        token,
        mut inbox,
        mut stream,
        channels,
        sent,
    } = open_http(sh, n, plan, ready, &mut fire).await?;
    let path = format!("/v1/sse{}", query(&channels, &token, ""));
    stream
        .write_all(&wire::get_request(
            &cfg.host,
            &path,
            "Accept: text/event-stream\r\n",
        ))
        .await
        .map_err(err("write"))?;
    let mut raw = Vec::with_capacity(4096);
    let head = read_head(&mut stream, &mut raw).await?;
    if head.status != 200 {
        let _ = tokio::time::timeout(
            std::time::Duration::from_millis(200),
            stream.read_buf(&mut raw),
        )
        .await;
        return Err(format!("SSE refused: HTTP {} {}", head.status, lossy(&raw)));
    }
    let mut pending = channels.len() as u64;
    let mut tally = Tally {
        ack_sent_ns: sent,
        ..Default::default()
    };
    let mut dechunk = wire::Dechunker::default();
    let mut body = Vec::with_capacity(4096);
    loop {
        if head.chunked {
            dechunk.feed(&mut raw, &mut body)?;
        } else {
            body.append(&mut raw);
        }
        let now = now_ns();
        let mut at = 0;
        while let Some(end) = find(&body[at..], b"\n\n") {
            match wire::sse_classify(&body[at..at + end]) {
                // A device's inbox opens with `subscribed` events too; they are not counted.
                wire::SseEvent::Subscribed if inbox.is_none() => {
                    tally.acks += 1;
                    pending = pending.saturating_sub(1);
                }
                wire::SseEvent::Message(d) => {
                    if let Some(ts) = find_ts(d) {
                        tally.sent.push(ts);
                    }
                    if let Some(i) = &mut inbox {
                        i.count(&mut tally);
                    }
                }
                wire::SseEvent::Disconnect(d) => return Err(lossy(d)),
                wire::SseEvent::Subscribed | wire::SseEvent::Other => {}
            }
            at += end + 2;
        }
        body.drain(..at);
        if !tally.is_empty() {
            sh.apply(now, &mut tally);
        }
        if pending == 0 && ready.pending() {
            ready.ok(sh);
        }
        if dechunk.done {
            return Err("SSE stream ended".into());
        }
        reserve(&mut raw);
        if stream.read_buf(&mut raw).await.map_err(err("read"))? == 0 {
            return Err("connection closed by server".into());
        }
    }
}
