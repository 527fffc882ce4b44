//! The long-poll load client: one request after another on a keep-alive connection, each
//! carrying the previous answer's cursor.

use tokio::io::AsyncWriteExt;
use tokio::sync::watch;

use super::{err, lossy, open_http, query, read_response, Fire, HttpOpening, Ready, Tally};
use crate::proto::Plan;
use crate::wire::{self, find_ts, now_ns};
use crate::worker::Shared;
use herald_client::url::encode_query;

pub(super) async fn poll(
    sh: &Shared,
    n: u64,
    plan: &Plan,
    ready: &Ready,
    mut fire: watch::Receiver<Option<Fire>>,
) -> Result<(), String> {
    let cfg = &sh.cfg;
    let storm = matches!(plan, Plan::Connect);
    let HttpOpening {
        token,
        mut inbox,
        mut stream,
        channels,
        sent,
    } = open_http(sh, n, plan, ready, &mut fire).await?;
    let mut buf = Vec::with_capacity(4096);
    let mut tally = Tally {
        ack_sent_ns: sent,
        ..Default::default()
    };
    let mut since: Option<String> = None;
    loop {
        let extra = match &since {
            None => "&timeout=0".to_string(),
            Some(c) => format!("&since={}&timeout=30", encode_query(c)),
        };
        let path = format!("/v1/poll{}", query(&channels, &token, &extra));
        stream
            .write_all(&wire::get_request(&cfg.host, &path, ""))
            .await
            .map_err(err("write"))?;
        let (status, body) = read_response(&mut stream, &mut buf).await?;
        let now = now_ns();
        if status != 200 {
            return Err(format!("poll refused: HTTP {status} {}", lossy(&body)));
        }
        let answer: wire::PollAnswer =
            serde_json::from_slice(&body).map_err(|e| format!("bad poll answer: {e}"))?;
        for m in &answer.messages {
            if let Some(ts) = find_ts(m.data.get().as_bytes()) {
                tally.sent.push(ts);
            }
            if let Some(i) = &mut inbox {
                i.count(&mut tally);
            }
        }
        if since.is_none() && inbox.is_none() {
            tally.acks += answer.channels.len() as u64;
        }
        since = Some(answer.cursor.clone());
        if !tally.is_empty() {
            sh.apply(now, &mut tally);
        }
        if ready.pending() {
            ready.ok(sh);
        }
        let caught_up = inbox.as_ref().is_some_and(|i| i.got >= i.pending);
        if storm || caught_up {
            // The storm measures subscribing only, a device its catch-up: keep the
            // connection, poll no more.
            loop {
                if fire.changed().await.is_err() {
                    return Ok(());
                }
            }
        }
    }
}
