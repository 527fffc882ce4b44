//! Presence channels on one node, end to end: WebSocket, SSE and long-poll subscribers that ask
//! for presence get the members first, then joins and leaves; a user is one member however
//! many connections it holds; anonymous subscribers, a full channel and member data too large
//! are refused with their codes; `GET /v1/channels/{name}/presence` lists the members; and a
//! lifecycle listener (what webhooks listen with) hears each join and leave once.

use std::sync::Arc;
use std::time::Duration;

use herald_client::api::Publisher;
use herald_client::proto::token::{mint, ClientClaims, UserInfo};
use herald_client::ws::WsClient;
use herald_core::lifecycle::{LifecycleEvent, Recorded};
use herald_server::vocabulary::{NamespaceOptions, Namespaces, PresenceLimits};
use herald_server::{RunningServer, Server};
use serde_json::{json, Value};

use crate::support::{self, SECRET};

/// A node whose `rooms/` channels are presence channels of at most four members and 64 bytes
/// of member data, with a listener recording its lifecycle events.
async fn presence_node(dir: &std::path::Path) -> (RunningServer, Arc<Recorded>) {
    let mut settings = support::settings(dir);
    let rooms = NamespaceOptions {
        presence: Some(PresenceLimits {
            max_members: 4,
            max_data_bytes: 64,
        }),
        ..NamespaceOptions::default()
    };
    settings.namespaces =
        Namespaces::new(NamespaceOptions::default(), vec![("rooms/".into(), rooms)]);
    let recorded = Recorded::new();
    let server = Server::builder(settings)
        .lifecycle_listener(recorded.clone())
        .start()
        .await
        .expect("server starts");
    (server, recorded)
}

/// A token for `sub` (none if empty) that may subscribe to `rooms/*`, with `user_info` if given.
fn token(sub: &str, user_info: Option<&str>) -> String {
    mint(
        SECRET.as_bytes(),
        &ClientClaims {
            sub: sub.into(),
            channels: vec!["rooms/*".into(), "news".into()],
            user_info: user_info
                .map(|u| UserInfo(serde_json::value::RawValue::from_string(u.into()).unwrap())),
            ..Default::default()
        },
    )
}

/// A WebSocket client handing the tests every frame as JSON.
struct Client(WsClient);

impl Client {
    async fn connect(server: &RunningServer, token: &str) -> Client {
        let base = format!("http://{}", server.http_addr());
        Client(
            WsClient::connect(&base, Some(token))
                .await
                .expect("ws connect"),
        )
    }

    async fn send(&mut self, frame: Value) {
        self.0.send_text(frame.to_string()).await.expect("sent");
    }

    /// The next frame; panics after 10 s or when the connection closed.
    async fn recv(&mut self) -> Value {
        let frame = tokio::time::timeout(Duration::from_secs(10), self.0.next_frame())
            .await
            .expect("timed out waiting for a frame")
            .expect("a frame")
            .expect("the connection is open");
        serde_json::from_str(frame.text()).unwrap()
    }

    /// The next frame within `wait`, if any.
    async fn maybe(&mut self, wait: Duration) -> Option<Value> {
        match tokio::time::timeout(wait, self.0.next_frame()).await {
            Ok(Ok(Some(frame))) => Some(serde_json::from_str(frame.text()).unwrap()),
            _ => None,
        }
    }
}

/// Who a `members` body lists, in order.
fn users(body: &Value) -> Vec<String> {
    body["members"]
        .as_array()
        .expect("members")
        .iter()
        .map(|m| m["user"].as_str().unwrap().to_string())
        .collect()
}

/// An SSE stream's events as (event name, data), read as they come.
struct Sse {
    response: reqwest::Response,
    buffer: String,
}

impl Sse {
    async fn open(url: String) -> Result<Sse, (u16, Value)> {
        let response = reqwest::get(url).await.unwrap();
        if response.status() != 200 {
            let status = response.status().as_u16();
            return Err((status, response.json().await.unwrap()));
        }
        Ok(Sse {
            response,
            buffer: String::new(),
        })
    }

    /// The next named event (comments, `retry:` and messages skipped unless named).
    async fn next(&mut self) -> (String, Value) {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let mut name = String::from("message");
                let mut data = String::new();
                for line in block.lines() {
                    if let Some(n) = line.strip_prefix("event: ") {
                        name = n.to_string();
                    } else if let Some(d) = line.strip_prefix("data: ") {
                        data.push_str(d);
                    }
                }
                if !data.is_empty() {
                    return (name, serde_json::from_str(&data).unwrap());
                }
                continue;
            }
            let chunk = tokio::time::timeout(Duration::from_secs(10), self.response.chunk())
                .await
                .expect("timed out waiting for an SSE event")
                .unwrap()
                .expect("the stream is open");
            self.buffer.push_str(std::str::from_utf8(&chunk).unwrap());
        }
    }
}

/// Waits (with a generous deadline) until `check` holds of what `recorded` heard.
async fn wait_for(recorded: &Recorded, what: &str, check: impl Fn(&[String]) -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let members: Vec<String> = members_events(recorded);
        if check(&members) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}: {members:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The member events heard, as `+user` and `-user`.
fn members_events(recorded: &Recorded) -> Vec<String> {
    recorded
        .events()
        .iter()
        .filter_map(|e| match e {
            LifecycleEvent::MemberAdded { channel, user, .. } => {
                assert_eq!(channel.public(), "rooms/1");
                Some(format!("+{user}"))
            }
            LifecycleEvent::MemberRemoved { channel, user } => {
                assert_eq!(channel.public(), "rooms/1");
                Some(format!("-{user}"))
            }
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn presence_members_joins_and_leaves_over_every_transport() {
    let dir = tempfile::tempdir().unwrap();
    let (server, recorded) = presence_node(dir.path()).await;
    let base = format!("http://{}", server.http_addr());

    // WebSocket: alice's data comes from her token; the members list follows the reply.
    let mut alice = Client::connect(&server, &token("alice", Some(r#"{"name":"Alice"}"#))).await;
    alice
        .send(json!({"id":1,"subscribe":{"channel":"rooms/1","presence":true,"member":{"name":"ignored"}}}))
        .await;
    let reply = alice.recv().await;
    assert_eq!(
        reply["subscribe"]["channel"], "rooms/1",
        "the reply first: {reply}"
    );
    let members = alice.recv().await;
    assert_eq!(
        members,
        json!({"presence":{"channel":"rooms/1","event":"members","members":[
            {"user":"alice","data":{"name":"Alice"}}
        ]}}),
        "the token's user_info wins over the client's member"
    );

    // SSE: bob's token has no user_info, so the stream's member= is his data.
    let member = "%7B%22name%22%3A%22Bob%22%7D"; // {"name":"Bob"}
    let mut bob = Sse::open(format!(
        "{base}/v1/sse?channel=rooms/1&presence=true&member={member}&token={}",
        token("bob", None)
    ))
    .await
    .expect("bob's stream");
    let (name, subscribed) = bob.next().await;
    assert_eq!(
        (name.as_str(), &subscribed["channel"]),
        ("subscribed", &json!("rooms/1"))
    );
    let (name, members) = bob.next().await;
    assert_eq!(name, "presence");
    assert_eq!(members["event"], "members");
    assert_eq!(users(&members), ["alice", "bob"]);
    assert_eq!(members["members"][1]["data"], json!({"name":"Bob"}));
    assert_eq!(
        alice.recv().await,
        json!({"presence":{"channel":"rooms/1","event":"join","user":"bob","data":{"name":"Bob"}}})
    );

    // A second connection (and subscription) of alice: still one member, no join.
    let mut alice_again = Client::connect(&server, &token("alice", Some(r#"{"name":"A2"}"#))).await;
    alice_again
        .send(json!({"id":1,"subscribe":{"channel":"rooms/1"}}))
        .await;
    assert!(alice_again.recv().await.get("subscribe").is_some());
    let (status, listed) = support::get(&server, "/v1/channels/rooms/1/presence").await;
    assert_eq!(status, 200, "{listed}");
    assert_eq!(
        listed,
        json!({"channel":"rooms/1","members":[
            {"user":"alice","data":{"name":"Alice"}},
            {"user":"bob","data":{"name":"Bob"}}
        ],"count":2}),
        "one member for two connections, with the first subscription's data"
    );

    // Long-poll: the members list alone does not answer the poll; a join does.
    let poll_url = format!(
        "{base}/v1/poll?channel=rooms/1&presence=true&timeout=30&token={}",
        token("carol", None)
    );
    let poll = tokio::spawn(async move {
        let answer: Value = reqwest::get(poll_url).await.unwrap().json().await.unwrap();
        answer
    });
    let join = alice.recv().await;
    assert_eq!(join["presence"]["event"], "join", "{join}");
    assert_eq!(join["presence"]["user"], "carol");
    assert_eq!(
        join["presence"]["data"],
        json!({}),
        "no data given: an empty object"
    );
    // The SSE stream hears the join too, as an `event: presence`.
    let (name, join) = bob.next().await;
    assert_eq!(
        (name.as_str(), &join),
        (
            "presence",
            &json!({"channel":"rooms/1","event":"join","user":"carol","data":{}})
        )
    );
    let mut dave = Client::connect(&server, &token("dave", None)).await;
    dave.send(json!({"id":1,"subscribe":{"channel":"rooms/1","member":{"n":4}}}))
        .await;
    assert!(dave.recv().await.get("subscribe").is_some());
    assert_eq!(alice.recv().await["presence"]["user"], "dave");
    let answer = tokio::time::timeout(Duration::from_secs(20), poll)
        .await
        .expect("the poll answers once dave joins")
        .unwrap();
    let presence = answer["presence"]
        .as_array()
        .expect("presence in the answer");
    assert_eq!(presence[0]["event"], "members", "{answer}");
    assert_eq!(users(&presence[0]), ["alice", "bob", "carol"]);
    assert_eq!(
        presence[1],
        json!({"channel":"rooms/1","event":"join","user":"dave","data":{"n":4}})
    );
    // Carol stays a member after her poll answered (she would poll again at once).
    let publisher = Publisher::new(&base, Some(support::API_KEY));
    let listed = publisher.presence("rooms/1").await.expect("the members");
    let users: Vec<&str> = listed.members.iter().map(|m| m.user.as_str()).collect();
    assert_eq!(
        (listed.count, users),
        (4, vec!["alice", "bob", "carol", "dave"])
    );

    // Full: a fifth user is refused, on WebSocket and on SSE.
    let mut erin = Client::connect(&server, &token("erin", None)).await;
    erin.send(json!({"id":7,"subscribe":{"channel":"rooms/1"}}))
        .await;
    let refused = erin.recv().await;
    assert_eq!(refused["id"], 7);
    assert_eq!(refused["error"]["code"], "limit_exceeded", "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("presence_max_members"),
        "{refused}"
    );
    let Err((status, body)) = Sse::open(format!(
        "{base}/v1/sse?channel=rooms/1&token={}",
        token("erin", None)
    ))
    .await
    else {
        panic!("a fifth member's stream was accepted");
    };
    assert_eq!(
        (status, &body["error"]["code"]),
        (429, &json!("limit_exceeded"))
    );
    // ...but a member's further subscriptions are not.
    let mut dave_again = Client::connect(&server, &token("dave", None)).await;
    dave_again
        .send(json!({"id":1,"subscribe":{"channel":"rooms/1"}}))
        .await;
    assert!(dave_again.recv().await.get("subscribe").is_some());

    // Leaves: alice's second connection goes (she stays), bob's stream goes (he leaves).
    drop(alice_again);
    drop(bob);
    let leave = alice.recv().await;
    assert_eq!(
        leave,
        json!({"presence":{"channel":"rooms/1","event":"leave","user":"bob"}}),
        "bob's leave, and no leave of alice's before it"
    );
    // Carol leaves once her poll's grace passed.
    let leave = alice
        .maybe(Duration::from_secs(30))
        .await
        .expect("carol leaves after the grace");
    assert_eq!(leave["presence"]["user"], "carol", "{leave}");
    assert_eq!(leave["presence"]["event"], "leave");
    assert_eq!(alice.maybe(Duration::from_millis(200)).await, None);

    // The lifecycle listener (webhooks) heard each join and leave once.
    wait_for(&recorded, "carol's removal", |m| {
        m.contains(&"-carol".to_string())
    })
    .await;
    assert_eq!(
        members_events(&recorded),
        ["+alice", "+bob", "+carol", "+dave", "-bob", "-carol"]
    );
    match recorded
        .events()
        .iter()
        .find(|e| matches!(e, LifecycleEvent::MemberAdded { user, .. } if &**user == "bob"))
    {
        Some(LifecycleEvent::MemberAdded { data, .. }) => assert_eq!(&**data, r#"{"name":"Bob"}"#),
        other => panic!("{other:?}"),
    }
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn presence_refuses_anonymous_subscribers_and_data_too_large() {
    let dir = tempfile::tempdir().unwrap();
    let (server, _recorded) = presence_node(dir.path()).await;
    let base = format!("http://{}", server.http_addr());

    // No sub: refused on every transport; the channel's plain messages need none elsewhere.
    let nobody = token("", None);
    let mut ws = Client::connect(&server, &nobody).await;
    ws.send(json!({"id":1,"subscribe":{"channel":"rooms/1"}}))
        .await;
    let refused = ws.recv().await;
    assert_eq!(refused["error"]["code"], "forbidden", "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("sub"),
        "{refused}"
    );
    ws.send(json!({"id":2,"subscribe":{"channel":"news","presence":true}}))
        .await;
    let plain = ws.recv().await;
    assert!(
        plain.get("subscribe").is_some(),
        "not a presence channel: {plain}"
    );
    assert_eq!(
        ws.maybe(Duration::from_millis(200)).await,
        None,
        "no presence frame"
    );
    for transport in ["sse", "poll"] {
        let url = format!("{base}/v1/{transport}?channel=rooms/1&timeout=0&token={nobody}");
        let r = reqwest::get(url).await.unwrap();
        assert_eq!(r.status(), 403, "{transport}");
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["error"]["code"], "forbidden", "{transport}: {body}");
    }

    // Member data over 64 bytes: too_large, naming the limit; not an object: bad_request.
    let big = format!(r#"{{"bio":"{}"}}"#, "x".repeat(80));
    let mut ws = Client::connect(&server, &token("frank", Some(&big))).await;
    ws.send(json!({"id":3,"subscribe":{"channel":"rooms/1"}}))
        .await;
    let refused = ws.recv().await;
    assert_eq!(refused["error"]["code"], "too_large", "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("64") && message.contains("presence_max_data_bytes"),
        "{message}"
    );
    let mut ws = Client::connect(&server, &token("gina", None)).await;
    ws.send(json!({"id":4,"subscribe":{"channel":"rooms/1","member":[1,2]}}))
        .await;
    assert_eq!(ws.recv().await["error"]["code"], "bad_request");
    let (status, listed) = support::get(&server, "/v1/channels/rooms/1/presence").await;
    assert_eq!(
        (status, listed["count"].clone()),
        (200, json!(0)),
        "nobody joined: {listed}"
    );

    // The route refuses a channel outside presence namespaces.
    let e = Publisher::new(&base, Some(support::API_KEY))
        .presence("news")
        .await
        .unwrap_err();
    assert_eq!(e.server().unwrap().status, Some(404), "{e}");
    let (status, body) = support::get(&server, "/v1/channels/news/presence").await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (404, &json!("not_found")),
        "{body}"
    );
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not a presence channel"),
        "{body}"
    );
    server.shutdown().await.unwrap();
}
