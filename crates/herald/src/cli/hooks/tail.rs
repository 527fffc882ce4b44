//! `herald hooks tail`: the webhook events one node queues for an app's endpoints, live
//! (`GET /v1/apps/{id}/hooks/tail`), one line per event (time, type, user and channel, id) or,
//! with `--json`, each event's JSON as the stream carries it. Lines about the tail itself (it
//! is open, events were missed, it ended) go to stderr, so stdout holds events only. Runs until
//! Ctrl-C; the server ending the stream (it shuts down) ends it with a failing exit code.

use std::process::ExitCode;

use herald_client::api::Publisher;
use herald_client::proto::sse::SseEvent;
use herald_client::ServerError;
use serde_json::Value;

use super::Connection;

/// The event as one line: `time type who id`, `who` being `user=U`, `channel=C`, both
/// (`user=U,channel=C`) or `-`.
pub fn event_line(event: &Value) -> String {
    let text = |v: &Value| v.as_str().map(str::to_owned);
    let mut who = Vec::new();
    if let Some(user) = text(&event["data"]["user"]) {
        who.push(format!("user={user}"));
    }
    if let Some(channel) = text(&event["data"]["channel"]) {
        who.push(format!("channel={channel}"));
    }
    let who = if who.is_empty() {
        "-".to_owned()
    } else {
        who.join(",")
    };
    let or_dash = |v: &Value| text(v).unwrap_or_else(|| "-".into());
    format!(
        "{} {:<22} {} {}",
        or_dash(&event["timestamp"]),
        or_dash(&event["type"]),
        who,
        or_dash(&event["id"])
    )
}

/// Runs `herald hooks tail`.
pub async fn run(connection: &Connection, json: bool) -> anyhow::Result<ExitCode> {
    let publisher = Publisher::new(&connection.url, connection.api_key.as_deref());
    let app = &connection.app;
    let path = format!(
        "/v1/apps/{}/hooks/tail",
        herald_client::url::encode_query(app)
    );
    let url = herald_client::url::join(publisher.base(), &path);
    let mut request = herald_client::tls::http_client().get(&url);
    if let Some(key) = &connection.api_key {
        request = request.bearer_auth(key);
    }
    let sent = tokio::select! {
        sent = request.send() => sent,
        _ = tokio::signal::ctrl_c() => return Ok(ExitCode::SUCCESS),
    };
    let mut response = match sent {
        Ok(response) => response,
        Err(source) => {
            return Err(anyhow::Error::new(source).context(format!("cannot reach {url}")))
        }
    };
    if !response.status().is_success() {
        let status = response.status().as_u16();
        let body = response.bytes().await.unwrap_or_default();
        let refused = ServerError::from_http(status, &body);
        return super::super::publish::report(&publisher, &path, Err(refused.into()));
    }
    eprintln!(
        "tailing the webhook events this node ({}) queues for app {app} (Ctrl-C to stop)",
        publisher.base()
    );
    let mut buf: Vec<u8> = Vec::new();
    loop {
        while let Some(end) = buf.windows(2).position(|w| w == b"\n\n") {
            let block: Vec<u8> = buf.drain(..end + 2).collect();
            let block = String::from_utf8_lossy(&block);
            let Some(event) = SseEvent::parse(block.trim_end_matches('\n')) else {
                continue;
            };
            print_event(&event, json);
        }
        let chunk = tokio::select! {
            chunk = response.chunk() => chunk,
            _ = tokio::signal::ctrl_c() => return Ok(ExitCode::SUCCESS),
        };
        match chunk {
            Ok(Some(bytes)) => buf.extend_from_slice(&bytes),
            Ok(None) => {
                eprintln!("the server ended the tail (it is shutting down)");
                return Ok(ExitCode::FAILURE);
            }
            Err(source) => {
                return Err(anyhow::Error::new(source).context(format!("reading {url}")));
            }
        }
    }
}

/// Prints one event of the stream: an event to stdout, a lag to stderr.
fn print_event(event: &SseEvent, json: bool) {
    if event.event.as_deref() == Some("lagged") {
        let missed: Value = serde_json::from_str(&event.data).unwrap_or(Value::Null);
        eprintln!(
            "(missed {} events: this tail fell behind)",
            missed["missed"].as_u64().unwrap_or(0)
        );
        return;
    }
    if json {
        println!("{}", event.data);
        return;
    }
    match serde_json::from_str::<Value>(&event.data) {
        Ok(value) => println!("{}", event_line(&value)),
        Err(_) => println!("{}", event.data),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_line_says_when_what_who_and_which() {
        let connected = json!({
            "id": "evt_1", "type": "client.connected", "app": "shop",
            "timestamp": "2026-11-29T09:41:07.123Z",
            "data": {"connection": "c-1", "transport": "sse", "user": "alice", "device": null}
        });
        let cells: Vec<String> = event_line(&connected)
            .split_whitespace()
            .map(str::to_owned)
            .collect();
        assert_eq!(
            cells,
            [
                "2026-11-29T09:41:07.123Z",
                "client.connected",
                "user=alice",
                "evt_1"
            ]
        );
        let subscribed = json!({"id": "evt_2", "type": "client.subscribed", "timestamp": "t",
            "data": {"channel": "rooms/1", "user": "al"}});
        assert!(event_line(&subscribed).contains(" user=al,channel=rooms/1 "));
        let vacated = json!({"id": "evt_3", "type": "channel.vacated", "timestamp": "t",
            "data": {"channel": "rooms/1"}});
        assert!(event_line(&vacated).contains(" channel=rooms/1 "));
        let anonymous = json!({"id": "evt_4", "type": "client.connected", "timestamp": "t",
            "data": {"user": null}});
        assert!(event_line(&anonymous).contains(" - evt_4"));
    }
}
