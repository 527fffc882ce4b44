//! Test harness: starts the real `herald` binary on port 0 with its own data directory, and
//! gives tests real HTTP, WebSocket, SSE and long-poll clients. Tokens are minted through
//! `herald-proto`, SSE events are read with proto's `SseEvent`, and [`Server::publisher`] is
//! `herald-client`'s typed publisher API; `Ws`, `post` and `get` hand tests the raw JSON on
//! purpose, since many tests check the exact bytes the server sends.
#![allow(dead_code)]

pub mod cluster;
pub mod meteor;
pub mod mqtt;
pub mod proxy;
pub mod raw;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use herald_proto::token::{mint, ClientClaims};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

pub const API_KEY: &str = "hk_test_publisher_key";
pub const SECRET: &str = "test-token-secret-0123456789";

/// A running server process.
pub struct Server {
    child: Option<Child>,
    pub addr: SocketAddr,
    /// The Meteor subscriber port, when started with `--meteor`.
    pub meteor: Option<SocketAddr>,
    /// The Meteor controller port, when started with `--meteor-control`.
    pub meteor_control: Option<SocketAddr>,
    /// The MQTT listener, when started with `--mqtt` ([`Builder::mqtt`]).
    pub mqtt: Option<SocketAddr>,
    pub data: PathBuf,
    _tmp: Option<tempfile::TempDir>,
    extra: Vec<String>,
    env: Vec<(String, String)>,
    /// A command the binary is started through (e.g. `prlimit --fsize=N:`), empty for none.
    wrapper: Vec<String>,
    pub http: reqwest::Client,
}

impl Server {
    /// A server on a fresh data dir.
    pub async fn start() -> Server {
        Self::builder().start().await
    }

    pub fn builder() -> Builder {
        Builder::default()
    }

    fn spawn(
        data: &Path,
        extra: &[String],
        env: &[(String, String)],
        wrapper: &[String],
    ) -> (Child, Addrs) {
        Self::spawn_on("127.0.0.1:0", data, extra, env, wrapper)
            .expect("herald did not report its address")
    }

    /// Starts the binary listening on `listen`; `None` if it exits before reporting an address
    /// (a port still held by a process that just died).
    fn spawn_on(
        listen: &str,
        data: &Path,
        extra: &[String],
        env: &[(String, String)],
        wrapper: &[String],
    ) -> Option<(Child, Addrs)> {
        let binary = env!("CARGO_BIN_EXE_herald");
        let mut cmd = match wrapper.split_first() {
            Some((program, args)) => {
                let mut cmd = Command::new(program);
                cmd.args(args).arg(binary);
                cmd
            }
            None => Command::new(binary),
        };
        cmd.arg("serve")
            .arg("--listen")
            .arg(listen)
            .arg("--data")
            .arg(data)
            .arg("--api-key")
            .arg(API_KEY)
            .arg("--token-secret")
            .arg(SECRET)
            .args(extra)
            .env_remove("HERALD_CONFIG")
            .env("HERALD_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("start herald");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            let (mut meteor, mut meteor_control, mut mqtt) = (None, None, None);
            let parse = |a: &str| Some(a.trim().parse::<SocketAddr>().unwrap());
            // The Meteor and MQTT lines come before the HTTP one.
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(addr) = line.strip_prefix("herald meteor listening on ") {
                    meteor = parse(addr);
                } else if let Some(addr) = line.strip_prefix("herald meteor-control listening on ")
                {
                    meteor_control = parse(addr);
                } else if let Some(addr) = line.strip_prefix("herald mqtt listening on ") {
                    mqtt = parse(addr);
                } else if let Some(addr) = line.strip_prefix("herald listening on http://") {
                    if let Some(tx) = tx.take() {
                        let _ = tx.send(Addrs {
                            http: addr.parse::<SocketAddr>().unwrap(),
                            meteor,
                            meteor_control,
                            mqtt,
                        });
                    }
                }
            }
        });
        match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(addrs) => Some((child, addrs)),
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                None
            }
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// `herald-client`'s publisher API with the test API key.
    pub fn publisher(&self) -> herald_client::api::Publisher {
        herald_client::api::Publisher::new(&self.url(""), Some(API_KEY))
    }

    /// The MQTT listener's address; panics unless started with [`Builder::mqtt`].
    pub fn mqtt_addr(&self) -> SocketAddr {
        self.mqtt
            .expect("the server was started without --mqtt (Builder::mqtt)")
    }

    pub fn ws_url(&self, query: &str) -> String {
        format!("ws://{}/v1/ws{}", self.addr, query)
    }

    /// A client token.
    pub fn token(&self, channels: &[&str], publish: &[&str]) -> String {
        mint(
            SECRET.as_bytes(),
            &ClientClaims {
                sub: "tester".into(),
                exp: None,
                channels: channels.iter().map(|s| s.to_string()).collect(),
                publish: publish.iter().map(|s| s.to_string()).collect(),
                device: None,
                ..Default::default()
            },
        )
    }

    /// A client token that expires `secs` seconds from now.
    pub fn token_expiring_in(&self, secs: u64, channels: &[&str]) -> String {
        let exp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
            + secs;
        mint(
            SECRET.as_bytes(),
            &ClientClaims {
                sub: "tester".into(),
                exp: Some(exp),
                channels: channels.iter().map(|s| s.to_string()).collect(),
                publish: Vec::new(),
                device: None,
                ..Default::default()
            },
        )
    }

    /// Publishes through the HTTP API; returns the response body (panics on failure).
    pub async fn publish(&self, channel: &str, data: Value) -> Value {
        let (status, body) = self
            .post(
                &format!("/v1/channels/{channel}/messages"),
                json!({ "data": data }),
            )
            .await;
        assert_eq!(status, 200, "publish failed: {body}");
        body
    }

    /// Publishes about 20 MB to `channel` (1,200 messages of 16 KiB, in batches of 100): more
    /// than a subscriber that stops reading can be queued.
    pub async fn flood(&self, channel: &str) {
        let pad = "p".repeat(16 * 1024);
        let batch: Vec<Value> = (0..100)
            .map(|_| json!({ "channel": channel, "data": { "pad": pad } }))
            .collect();
        for _ in 0..12 {
            let (status, body) = self.post("/v1/batch", json!({ "messages": batch })).await;
            assert_eq!(status, 200, "{body}");
        }
    }

    pub async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        let r = self
            .http
            .post(self.url(path))
            .bearer_auth(API_KEY)
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    /// `method path` with the publisher key and a JSON body.
    pub async fn post_as(&self, method: &str, path: &str, body: Value) -> (u16, Value) {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let r = self
            .http
            .request(method, self.url(path))
            .bearer_auth(API_KEY)
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    pub async fn get(&self, path: &str) -> (u16, Value) {
        let r = self
            .http
            .get(self.url(path))
            .bearer_auth(API_KEY)
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    /// The Prometheus text of `GET /metrics`.
    pub async fn metrics(&self) -> String {
        self.http
            .get(self.url("/metrics"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }

    /// `kill -9` and wait.
    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Sends `signal` (e.g. "INT") to the server.
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.pid().to_string())
            .status()
            .unwrap();
        assert!(status.success(), "kill -{signal} failed");
    }

    /// Waits up to `within` for the process to exit; its status (panics if it is still running).
    pub fn wait_exit(&mut self, within: Duration) -> std::process::ExitStatus {
        let mut c = self.child.take().expect("running");
        let deadline = std::time::Instant::now() + within;
        loop {
            if let Ok(Some(status)) = c.try_wait() {
                return status;
            }
            if std::time::Instant::now() > deadline {
                let _ = c.kill();
                panic!("herald did not exit within {within:?}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// SIGTERM; returns the exit status.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        let mut c = self.child.take().expect("running");
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(c.id().to_string())
            .status();
        for _ in 0..300 {
            if let Ok(Some(status)) = c.try_wait() {
                return status;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = c.kill();
        panic!("herald did not exit within 15 s of SIGTERM");
    }

    /// kill -9, then starts the server again on the same data directory and the same port, as
    /// a supervisor restarting a crashed server would (clients reconnect to the same address).
    pub async fn restart_same_port(&mut self) {
        let addr = self.addr;
        self.restart_listening_on(addr).await;
    }

    /// kill -9, then starts the server again on the same data directory, listening on `addr`
    /// (retrying while the port is still held).
    pub async fn restart_listening_on(&mut self, addr: SocketAddr) {
        self.kill9();
        self.addr = addr;
        let listen = addr.to_string();
        for _ in 0..50 {
            if let Some((child, addrs)) =
                Self::spawn_on(&listen, &self.data, &self.extra, &self.env, &self.wrapper)
            {
                self.child = Some(child);
                self.meteor = addrs.meteor;
                self.meteor_control = addrs.meteor_control;
                self.mqtt = addrs.mqtt;
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("herald could not listen on {listen} again");
    }

    /// Starts the server again on the same data directory (new port).
    pub async fn restart(&mut self) {
        self.kill9();
        let (child, addrs) = Self::spawn(&self.data, &self.extra, &self.env, &self.wrapper);
        self.child = Some(child);
        self.addr = addrs.http;
        self.meteor = addrs.meteor;
        self.meteor_control = addrs.meteor_control;
        self.mqtt = addrs.mqtt;
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// One request to `s` with a chosen key (publisher, admin or device token); its status and
/// JSON body (`null` when the body is not JSON).
pub async fn call(
    s: &Server,
    method: &str,
    path: &str,
    key: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let m = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
    let mut r = s.http.request(m, s.url(path)).bearer_auth(key);
    if let Some(b) = body {
        r = r.json(&b);
    }
    let r = r.send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// The addresses a server printed.
struct Addrs {
    http: SocketAddr,
    meteor: Option<SocketAddr>,
    meteor_control: Option<SocketAddr>,
    mqtt: Option<SocketAddr>,
}

#[derive(Default)]
pub struct Builder {
    args: Vec<String>,
    env: Vec<(String, String)>,
    config: Option<String>,
    files: Vec<(String, String, String)>,
    wrapper: Vec<String>,
}

impl Builder {
    pub fn arg(mut self, a: &str) -> Self {
        self.args.push(a.to_string());
        self
    }

    pub fn env(mut self, k: &str, v: &str) -> Self {
        self.env.push((k.to_string(), v.to_string()));
        self
    }

    /// A file with `text` in the server's temporary directory, passed as `flag PATH`.
    pub fn file_arg(mut self, flag: &str, name: &str, text: &str) -> Self {
        self.files
            .push((flag.to_string(), name.to_string(), text.to_string()));
        self
    }

    /// Starts the binary through `command` (its program and arguments, the binary's path and
    /// arguments after them), e.g. `prlimit --fsize=N:`; restarts use it too.
    pub fn through(mut self, command: &[&str]) -> Self {
        self.wrapper = command.iter().map(|a| a.to_string()).collect();
        self
    }

    /// Serves MQTT too: `--mqtt 127.0.0.1:0` (the port is [`Server::mqtt`]).
    pub fn mqtt(self) -> Self {
        self.arg("--mqtt").arg("127.0.0.1:0")
    }

    /// TOML written to a file passed with --config.
    pub fn config(mut self, toml: &str) -> Self {
        self.config = Some(toml.to_string());
        self
    }

    pub async fn start(mut self) -> Server {
        let tmp = tempfile::tempdir().unwrap();
        let data = tmp.path().join("data");
        for (flag, name, text) in &self.files {
            let path = tmp.path().join(name);
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir).unwrap();
            }
            std::fs::write(&path, text).unwrap();
            self.args.push(flag.clone());
            self.args.push(path.display().to_string());
        }
        if let Some(toml) = &self.config {
            let path = tmp.path().join("herald.toml");
            std::fs::write(&path, toml).unwrap();
            self.args.push("--config".into());
            self.args.push(path.display().to_string());
        }
        let (child, addrs) = Server::spawn(&data, &self.args, &self.env, &self.wrapper);
        Server {
            child: Some(child),
            addr: addrs.http,
            meteor: addrs.meteor,
            meteor_control: addrs.meteor_control,
            mqtt: addrs.mqtt,
            data,
            _tmp: Some(tmp),
            extra: self.args,
            env: self.env,
            wrapper: self.wrapper,
            http: reqwest::Client::new(),
        }
    }
}

type WsStream =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A WebSocket client speaking Herald's JSON protocol.
pub struct Ws {
    pub stream: WsStream,
    next_id: u64,
    /// The last text frame received, for a test that sees the connection close.
    last: Option<String>,
    /// How the connection ended: the close frame's code and reason, or the error.
    ended: Option<String>,
}

impl Ws {
    fn from_stream(stream: WsStream) -> Ws {
        Ws {
            stream,
            next_id: 1,
            last: None,
            ended: None,
        }
    }

    /// How the connection ended (close code and reason, or the error) and the server's last
    /// frame before it, for a test's failure message.
    pub fn why_closed(&self) -> String {
        format!(
            "connection closed ({}); the server's last frame: {}",
            self.ended.as_deref().unwrap_or("no close frame"),
            self.last.as_deref().unwrap_or("none")
        )
    }

    /// The next JSON text frame; panics with [`Ws::why_closed`] if the connection closed.
    pub async fn frame(&mut self) -> Value {
        match self.recv().await {
            Some(v) => v,
            None => panic!("{}", self.why_closed()),
        }
    }

    pub async fn connect(url: &str) -> Ws {
        let (stream, _) = tokio_tungstenite::connect_async(url)
            .await
            .expect("ws connect");
        Ws::from_stream(stream)
    }

    /// The WebSocket handshake on a connection already open (for example one that has served
    /// other HTTP requests).
    pub async fn upgrade(stream: tokio::net::TcpStream, url: &str) -> Ws {
        let stream = tokio_tungstenite::MaybeTlsStream::Plain(stream);
        let (stream, _) = tokio_tungstenite::client_async(url, stream)
            .await
            .expect("ws upgrade");
        Ws::from_stream(stream)
    }

    /// Tries to connect; returns the HTTP status of a refused upgrade.
    pub async fn try_connect(url: &str) -> Result<Ws, u16> {
        match tokio_tungstenite::connect_async(url).await {
            Ok((stream, _)) => Ok(Ws::from_stream(stream)),
            Err(tokio_tungstenite::tungstenite::Error::Http(r)) => Err(r.status().as_u16()),
            Err(e) => panic!("unexpected ws error {e}"),
        }
    }

    pub async fn send(&mut self, v: Value) {
        self.stream
            .send(Message::text(v.to_string()))
            .await
            .unwrap();
    }

    pub async fn send_raw(&mut self, text: &str) {
        self.stream.send(Message::text(text)).await.unwrap();
    }

    /// Next JSON text frame; None when the connection closed. Panics after 10 s.
    pub async fn recv(&mut self) -> Option<Value> {
        loop {
            let next = tokio::time::timeout(Duration::from_secs(10), self.stream.next())
                .await
                .expect("timed out waiting for a frame");
            match next {
                Some(Ok(Message::Text(t))) => {
                    let value = serde_json::from_str(&t).unwrap();
                    self.last = Some(t.to_string());
                    return Some(value);
                }
                Some(Ok(Message::Close(frame))) => {
                    self.ended = Some(match frame {
                        Some(f) => format!(
                            "close code {} reason {:?}",
                            u16::from(f.code),
                            f.reason.as_str()
                        ),
                        None => "close frame without a code".into(),
                    });
                    return None;
                }
                None => {
                    self.ended
                        .get_or_insert_with(|| "the stream ended without a close frame".into());
                    return None;
                }
                Some(Err(e)) => {
                    self.ended = Some(format!("error: {e}"));
                    return None;
                }
                Some(Ok(_)) => continue,
            }
        }
    }

    /// Sends a command with a fresh id and returns the reply with that id.
    pub async fn request(&mut self, name: &str, body: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({ "id": id, name: body })).await;
        loop {
            let v = self.frame().await;
            if v["id"] == id {
                return v;
            }
        }
    }
}

/// One Server-Sent Event.
#[derive(Debug, Clone, Default)]
pub struct Event {
    pub event: String,
    pub id: Option<String>,
    pub data: String,
}

impl Event {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.data).unwrap()
    }
}

/// A minimal EventSource: parses the stream as the HTML spec says.
pub struct Sse {
    resp: reqwest::Response,
    buf: String,
}

impl Sse {
    pub async fn open(
        server: &Server,
        query: &str,
        last_event_id: Option<&str>,
    ) -> Result<Sse, (u16, Value)> {
        let mut req = server.http.get(server.url(&format!("/v1/sse{query}")));
        if let Some(id) = last_event_id {
            req = req.header("Last-Event-ID", id);
        }
        let resp = req.send().await.unwrap();
        if resp.status() != 200 {
            let status = resp.status().as_u16();
            return Err((status, resp.json().await.unwrap_or(Value::Null)));
        }
        assert_eq!(resp.headers()["content-type"], "text/event-stream");
        Ok(Sse {
            resp,
            buf: String::new(),
        })
    }

    /// Next event (comments and retry lines skipped); None at end of stream.
    pub async fn next(&mut self) -> Option<Event> {
        loop {
            if let Some(end) = self.buf.find("\n\n") {
                let block: String = self.buf.drain(..end + 2).collect();
                if let Some(e) = herald_proto::sse::SseEvent::parse(block.trim_end_matches('\n')) {
                    return Some(Event {
                        event: e.event.unwrap_or_else(|| "message".into()),
                        id: e.id,
                        data: e.data,
                    });
                }
                continue;
            }
            let chunk = tokio::time::timeout(Duration::from_secs(10), self.resp.chunk())
                .await
                .expect("timed out waiting for SSE data");
            match chunk {
                Ok(Some(bytes)) => self.buf.push_str(std::str::from_utf8(&bytes).unwrap()),
                _ => return None,
            }
        }
    }
}

/// The file whose existence holds part of a server under test (debug builds' test hooks:
/// `HERALD_TEST_FANOUT_HOLD` holds the fan-out thread, `HERALD_TEST_FEED_HOLD` a cluster
/// node's start of an app's feed); removed when dropped, so a failing test leaves none behind.
pub struct HoldFile(pub PathBuf);

impl HoldFile {
    /// A file name of its own in the temporary directory (`what` names the hold).
    pub fn new(what: &str) -> HoldFile {
        let name = format!(
            "herald-{what}-hold-{}-{}",
            std::process::id(),
            rand::random::<u64>()
        );
        HoldFile(std::env::temp_dir().join(name))
    }

    /// Its path, for the server's environment.
    pub fn path(&self) -> &str {
        self.0.to_str().expect("a UTF-8 path")
    }

    pub fn hold(&self) {
        std::fs::write(&self.0, b"held").expect("the hold's file");
    }

    pub fn release(&self) {
        std::fs::remove_file(&self.0).expect("the hold's file");
    }
}

impl Drop for HoldFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
