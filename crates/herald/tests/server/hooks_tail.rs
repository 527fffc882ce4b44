//! `GET /v1/apps/{id}/hooks/tail` and `herald hooks tail`, against the real binary: a tail open
//! before a client connects reads that client's `client.connected` as it is queued for the
//! app's endpoint (and nothing an endpoint does not want); the CLI prints it as one line; a node
//! serves at most 16 tails at once, and the 17th is refused with `429 limit_exceeded`.

use std::process::Stdio;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::support::{call, Server, Sse, API_KEY};

/// Longest wait for anything in these tests (a hang fails instead of blocking the run).
const WAIT: Duration = Duration::from_secs(30);

/// A server that may reach loopback, with an endpoint of the default app wanting
/// `client.connected` only.
async fn server_with_endpoint() -> Server {
    let s = Server::builder()
        .arg("--outbound-allow")
        .arg("127.0.0.1")
        .start()
        .await;
    let body = json!({"url": "http://127.0.0.1:9/hooks", "events": ["client.connected"]});
    let (status, created) = call(&s, "POST", "/v1/apps/default/hooks", API_KEY, Some(body)).await;
    assert_eq!(status, 201, "{created}");
    s
}

/// An open tail: the response, read as Server-Sent Events.
struct Tail {
    response: reqwest::Response,
    buf: String,
}

impl Tail {
    /// Opens the default app's tail with the app's key; the answer when it is not a stream.
    async fn open(s: &Server) -> Result<Tail, (u16, Value)> {
        let response = s
            .http
            .get(s.url("/v1/apps/default/hooks/tail"))
            .bearer_auth(API_KEY)
            .send()
            .await
            .unwrap();
        if response.status() != 200 {
            let status = response.status().as_u16();
            return Err((status, response.json().await.unwrap_or(Value::Null)));
        }
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        assert_eq!(response.headers()["cache-control"], "no-cache");
        Ok(Tail {
            response,
            buf: String::new(),
        })
    }

    /// The next event with data: its name (`message` when unnamed) and JSON.
    async fn next(&mut self) -> (String, Value) {
        loop {
            if let Some(end) = self.buf.find("\n\n") {
                let block: String = self.buf.drain(..end + 2).collect();
                if let Some(e) = herald_proto::sse::SseEvent::parse(block.trim_end_matches('\n')) {
                    let name = e.event.unwrap_or_else(|| "message".into());
                    return (name, serde_json::from_str(&e.data).unwrap());
                }
                continue;
            }
            let chunk = tokio::time::timeout(WAIT, self.response.chunk())
                .await
                .expect("the tail said nothing");
            let bytes = chunk.unwrap().expect("the tail ended");
            self.buf.push_str(std::str::from_utf8(&bytes).unwrap());
        }
    }
}

#[tokio::test]
async fn a_tail_reads_a_client_connecting_as_its_event_is_queued() {
    let s = server_with_endpoint().await;
    let mut tail = Tail::open(&s).await.expect("a tail");
    let token = s.token(&["news"], &[]);
    let _client = Sse::open(&s, &format!("?channel=news&token={token}"), None)
        .await
        .expect("an SSE client");
    let (name, event) = tail.next().await;
    assert_eq!(name, "message", "{event}");
    assert_eq!(event["type"], "client.connected", "{event}");
    assert_eq!(event["app"], "default");
    assert_eq!(event["data"]["user"], "tester");
    assert_eq!(event["data"]["transport"], "sse");
    assert!(
        event["id"]
            .as_str()
            .is_some_and(|id| id.starts_with("evt_")),
        "{event}"
    );
    // The endpoint wants client.connected only: the subscription's events (which no endpoint
    // wants) are not shown; the next client's connection is.
    let _second = Sse::open(&s, &format!("?channel=news&token={token}"), None)
        .await
        .expect("a second SSE client");
    let (_, next) = tail.next().await;
    assert_eq!(next["type"], "client.connected", "{next}");
    assert_ne!(next["id"], event["id"]);
}

#[tokio::test]
async fn herald_hooks_tail_prints_one_line_per_event() {
    let s = server_with_endpoint().await;
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_herald"))
        .args(["hooks", "tail", "--app", "default"])
        .env("HERALD_URL", format!("http://{}", s.addr))
        .env("HERALD_API_KEY", API_KEY)
        .env_remove("HERALD_CONFIG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("run herald hooks tail");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut said = BufReader::new(child.stderr.take().unwrap()).lines();
    // Its first line (on stderr: stdout holds events only) says the tail is open: only then
    // can a connection be seen.
    let first = tokio::time::timeout(WAIT, said.next_line())
        .await
        .expect("herald hooks tail said nothing")
        .unwrap()
        .expect("herald hooks tail ended");
    assert!(first.contains("tailing"), "{first}");
    let token = s.token(&["news"], &[]);
    let _client = Sse::open(&s, &format!("?channel=news&token={token}"), None)
        .await
        .expect("an SSE client");
    let line = tokio::time::timeout(WAIT, lines.next_line())
        .await
        .expect("no event line")
        .unwrap()
        .expect("herald hooks tail ended");
    let cells: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(cells.len(), 4, "time, type, user/channel, id: {line}");
    assert!(cells[0].ends_with('Z'), "{line}");
    assert_eq!(&cells[1..3], ["client.connected", "user=tester"], "{line}");
    assert!(cells[3].starts_with("evt_"), "{line}");
    child.kill().await.unwrap();
}

#[tokio::test]
async fn a_node_serves_at_most_16_tails_at_once() {
    let s = server_with_endpoint().await;
    let mut open = Vec::new();
    for _ in 0..16 {
        open.push(Tail::open(&s).await.expect("a tail within the limit"));
    }
    let (status, answer) = Tail::open(&s).await.err().expect("the 17th is refused");
    assert_eq!(status, 429, "{answer}");
    assert_eq!(answer["error"]["code"], "limit_exceeded");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(message.contains("16 webhook tails"), "{message}");
}
