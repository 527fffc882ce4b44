//! In-process integration tests of `herald-server`: each test starts servers inside the test
//! process on port 0 with a temporary data directory, and talks to them with real clients
//! (reqwest over HTTP, tokio-tungstenite over WebSocket). Several servers run in one process,
//! sharing the process's metrics recorder. The real-binary tests (kill -9, CLI) live in
//! `crates/herald/tests/server`.

mod support {
    //! Starting servers and talking to them.

    use std::net::SocketAddr;
    use std::path::Path;
    use std::time::Duration;

    use herald_client::proto::command::{self, Command};
    use herald_client::proto::token::{mint, ClientClaims};
    use herald_client::ws::WsClient;
    use herald_server::{RunningServer, Server, ServerSettings};
    use serde_json::{json, Value};

    pub const API_KEY: &str = "hk_in_process_publisher_key";
    pub const SECRET: &str = "in-process-token-secret-0123456789";

    /// Settings for a server on a free loopback port keeping its data in `data`.
    pub fn settings(data: &Path) -> ServerSettings {
        let mut settings = ServerSettings::new(SocketAddr::from(([127, 0, 0, 1], 0)), data);
        settings.api_key = Some(API_KEY.into());
        settings.token_secret = Some(SECRET.into());
        settings.shutdown_grace = Duration::from_secs(5);
        settings
    }

    /// Starts a server with `settings`.
    pub async fn start(settings: ServerSettings) -> RunningServer {
        Server::builder(settings)
            .start()
            .await
            .expect("server starts")
    }

    /// A client token that may subscribe to `channels`.
    pub fn token(channels: &[&str]) -> String {
        mint(
            SECRET.as_bytes(),
            &ClientClaims {
                sub: "tester".into(),
                exp: None,
                channels: channels.iter().map(|s| s.to_string()).collect(),
                publish: Vec::new(),
                device: None,
                ..Default::default()
            },
        )
    }

    /// `GET path` with the publisher key: status and JSON body.
    pub async fn get(server: &RunningServer, path: &str) -> (u16, Value) {
        let r = reqwest::Client::new()
            .get(format!("http://{}{path}", server.http_addr()))
            .bearer_auth(API_KEY)
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    /// Publishes `data` to `channel` over HTTP with `key`; returns status and body.
    pub async fn publish_with(
        server: &RunningServer,
        key: &str,
        channel: &str,
        data: Value,
    ) -> (u16, Value) {
        let r = reqwest::Client::new()
            .post(format!(
                "http://{}/v1/channels/{channel}/messages",
                server.http_addr()
            ))
            .bearer_auth(key)
            .json(&json!({ "data": data }))
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    /// Publishes with the configured key; panics unless it succeeds. Returns the answer.
    pub async fn publish(server: &RunningServer, channel: &str, data: Value) -> Value {
        let (status, body) = publish_with(server, API_KEY, channel, data).await;
        assert_eq!(status, 200, "publish failed: {body}");
        body
    }

    /// A WebSocket client speaking Herald's JSON protocol: `herald-client`'s, handing frames to
    /// the tests as JSON values.
    pub struct Ws(WsClient);

    impl Ws {
        /// Connects with a token that may subscribe to `channels`.
        pub async fn connect(server: &RunningServer, channels: &[&str]) -> Ws {
            let base = format!("http://{}", server.http_addr());
            let client = WsClient::connect(&base, Some(&token(channels)))
                .await
                .expect("ws connect");
            Ws(client)
        }

        /// Next JSON text frame; `None` once the connection closed. Panics after 10 s.
        pub async fn recv(&mut self) -> Option<Value> {
            let next = tokio::time::timeout(Duration::from_secs(10), self.0.next_frame())
                .await
                .expect("timed out waiting for a frame");
            next.ok()
                .flatten()
                .map(|frame| serde_json::from_str(frame.text()).unwrap())
        }

        /// Subscribes (with `since`, if given); returns the `subscribe` reply.
        pub async fn subscribe(&mut self, channel: &str, since: Option<Value>) -> Value {
            let since = since.map(|v| serde_json::from_value(v).expect("a resume position"));
            let reply = self
                .0
                .request(Command::Subscribe(command::Subscribe {
                    channel: channel.to_owned(),
                    since,
                    last: None,
                    ..Default::default()
                }))
                .await
                .expect("subscribed");
            let reply: Value = serde_json::from_str(reply.text()).unwrap();
            assert!(reply.get("subscribe").is_some(), "{reply}");
            reply["subscribe"].clone()
        }

        /// The seqs of the next `n` message frames.
        pub async fn message_seqs(&mut self, n: usize) -> Vec<u64> {
            let mut seqs = Vec::new();
            while seqs.len() < n {
                let v = self.recv().await.expect("connection closed");
                if let Some(seq) = v["message"]["seq"].as_u64() {
                    seqs.push(seq);
                }
            }
            seqs
        }
    }
}

mod delivery {
    //! Publish over HTTP, receive over WebSocket; several servers side by side.

    use crate::support::{self, Ws};
    use serde_json::json;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_published_message_reaches_a_websocket_subscriber() {
        let dir = tempfile::tempdir().unwrap();
        let server = support::start(support::settings(dir.path())).await;
        assert_eq!(server.generated_api_key(), None, "a key was configured");
        let mut ws = Ws::connect(&server, &["news"]).await;
        let reply = ws.subscribe("news", None).await;
        assert_eq!(
            (reply["seq"].clone(), reply["recovered"].clone()),
            (json!(0), json!(false))
        );

        let answer = support::publish(&server, "news", json!({ "t": "hello" })).await;
        assert_eq!(answer["seq"], 1);
        let frame = ws.recv().await.expect("a message frame");
        assert_eq!(frame["message"]["channel"], "news", "{frame}");
        assert_eq!(frame["message"]["seq"], 1);
        assert_eq!(frame["message"]["data"], json!({ "t": "hello" }));
        assert_eq!(frame["message"]["id"], answer["id"]);
        server.shutdown().await.unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn several_servers_run_side_by_side_in_one_process() {
        let (a_dir, b_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let a = support::start(support::settings(a_dir.path())).await;
        let b = support::start(support::settings(b_dir.path())).await;
        assert_ne!(a.http_addr(), b.http_addr());
        let mut on_b = Ws::connect(&b, &["news"]).await;
        on_b.subscribe("news", None).await;

        support::publish(&a, "news", json!("for a")).await;
        support::publish(&b, "news", json!("for b")).await;
        let frame = on_b.recv().await.unwrap();
        assert_eq!(
            frame["message"]["data"], "for b",
            "only b's own message: {frame}"
        );
        assert_eq!(frame["message"]["seq"], 1);
        for server in [&a, &b] {
            let (status, info) = support::get(server, "/v1/channels/news").await;
            assert_eq!((status, info["seq"].clone()), (200, json!(1)), "{info}");
            let metrics = reqwest::get(format!("http://{}/metrics", server.http_addr()))
                .await
                .unwrap();
            assert_eq!(metrics.status(), 200, "both render the shared recorder");
            assert!(metrics.text().await.unwrap().contains("herald_"));
        }
        a.shutdown().await.unwrap();
        b.shutdown().await.unwrap();
    }
}

mod lifecycle {
    //! Start, shutdown and restart: addresses, generated keys, the probes, the shutdown notice,
    //! exact resume across a restart in the same process, and a failed start that leaves nothing
    //! open.

    use std::net::SocketAddr;

    use crate::support::{self, Ws};
    use herald_server::{Server, ServerError};
    use serde_json::json;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn shutdown_tells_a_connected_websocket_why() {
        let dir = tempfile::tempdir().unwrap();
        let server = support::start(support::settings(dir.path())).await;
        let mut ws = Ws::connect(&server, &["news"]).await;
        ws.subscribe("news", None).await;
        let stopping = tokio::spawn(server.shutdown());
        let mut frames = Vec::new();
        while let Some(frame) = ws.recv().await {
            frames.push(frame);
        }
        let last = frames.last().expect("a frame before the close");
        assert_eq!(last["disconnect"]["code"], "shutdown", "{frames:?}");
        stopping.await.unwrap().unwrap();
    }

    /// One node over SQLite and its local bus: alive and ready, with every check named. (A
    /// stopping node's `/readyz` says `"draining": true` only to a request already in flight
    /// when shutdown begins, as the listener closes at once: `herald-api`'s unit tests cover
    /// that answer.)
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_single_node_is_alive_and_ready_over_its_local_bus() {
        let dir = tempfile::tempdir().unwrap();
        let server = support::start(support::settings(dir.path())).await;
        let base = format!("http://{}", server.http_addr());
        let ready = reqwest::get(format!("{base}/readyz")).await.unwrap();
        assert_eq!(ready.status(), 200);
        assert_eq!(ready.headers()["cache-control"], "no-store");
        let body: serde_json::Value = ready.json().await.unwrap();
        assert_eq!(
            body,
            json!({
                "status": "ready",
                "checks": {
                    "store": { "status": "ok" },
                    "bus": { "status": "ok", "link": "local" },
                    "draining": false,
                },
            })
        );
        let alive = reqwest::get(format!("{base}/healthz")).await.unwrap();
        assert_eq!(alive.status(), 200);
        let body: serde_json::Value = alive.json().await.unwrap();
        assert_eq!(body, json!({ "status": "ok" }));
        server.shutdown().await.unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_restart_on_the_same_data_dir_resumes_exactly() {
        let dir = tempfile::tempdir().unwrap();
        let server = support::start(support::settings(dir.path())).await;
        let first = support::publish(&server, "chat/1", json!(1)).await;
        for i in 2..=3 {
            support::publish(&server, "chat/1", json!(i)).await;
        }
        let epoch = first["epoch"].clone();
        assert!(epoch.is_string(), "{first}");
        server.shutdown().await.unwrap();

        let server = support::start(support::settings(dir.path())).await;
        let mut ws = Ws::connect(&server, &["chat/*"]).await;
        let since = json!({ "seq": 1, "epoch": epoch });
        let reply = ws.subscribe("chat/1", Some(since)).await;
        assert_eq!(reply["recovered"], true, "{reply}");
        assert_eq!(
            (reply["seq"].clone(), reply["epoch"].clone()),
            (json!(3), epoch.clone())
        );
        let next = support::publish(&server, "chat/1", json!(4)).await;
        assert_eq!(
            (next["seq"].clone(), next["epoch"].clone()),
            (json!(4), epoch)
        );
        assert_eq!(ws.message_seqs(3).await, [2, 3, 4], "replayed, then live");
        server.shutdown().await.unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_publisher_key_is_generated_once_and_works() {
        let dir = tempfile::tempdir().unwrap();
        let mut settings = support::settings(dir.path());
        settings.api_key = None;
        let server = support::start(settings.clone()).await;
        let key = server.generated_api_key().expect("generated").to_owned();
        assert!(key.starts_with("hk_"), "{key}");
        let (status, body) = support::publish_with(&server, &key, "news", json!(1)).await;
        assert_eq!(status, 200, "{body}");
        server.shutdown().await.unwrap();

        let server = support::start(settings).await;
        assert_eq!(
            server.generated_api_key(),
            None,
            "stored: not generated again"
        );
        let (status, body) = support::publish_with(&server, &key, "news", json!(2)).await;
        assert_eq!((status, body["seq"].clone()), (200, json!(2)), "{body}");
        server.shutdown().await.unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_meteor_ports_report_their_bound_addresses() {
        let dir = tempfile::tempdir().unwrap();
        let mut settings = support::settings(dir.path());
        let any_port = SocketAddr::from(([127, 0, 0, 1], 0));
        settings.meteor.listen = Some(any_port);
        settings.meteor.control = Some(any_port);
        let server = support::start(settings).await;
        let addresses = server.addresses();
        let (meteor, control) = (addresses.meteor.unwrap(), addresses.meteor_control.unwrap());
        for addr in [addresses.http, meteor, control] {
            assert_ne!(addr.port(), 0, "{addresses:?}");
            tokio::net::TcpStream::connect(addr)
                .await
                .expect("accepting");
        }
        assert_ne!(meteor, control);
        server.shutdown().await.unwrap();

        let server = support::start(support::settings(dir.path())).await;
        assert_eq!(
            (server.addresses().meteor, server.addresses().meteor_control),
            (None, None)
        );
        server.shutdown().await.unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failed_start_leaves_the_data_dir_free_to_start_again() {
        let dir = tempfile::tempdir().unwrap();
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut settings = support::settings(dir.path());
        settings.listen = taken.local_addr().unwrap();
        let failed = Server::builder(settings).start().await;
        match failed {
            Err(ServerError::Listen { addr, .. }) => assert_eq!(addr, taken.local_addr().unwrap()),
            Err(e) => panic!("unexpected error: {e}"),
            Ok(_) => panic!("started on a port in use"),
        }
        let server = support::start(support::settings(dir.path())).await;
        support::publish(&server, "news", json!(1)).await;
        server.shutdown().await.unwrap();
    }
}

#[path = "server/admin.rs"]
mod admin;
#[path = "server/connection_events.rs"]
mod connection_events;

#[path = "server/cluster/mod.rs"]
mod cluster;
#[path = "server/mqtt_listener.rs"]
mod mqtt_listener;
#[path = "server/openapi.rs"]
mod openapi;
#[path = "server/presence.rs"]
mod presence;
#[path = "server/providers/mod.rs"]
mod providers;
#[path = "server/sealing.rs"]
mod sealing;
