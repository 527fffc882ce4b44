//! Laravel Echo (npm `laravel-echo` 2.x with its `pusher` broadcaster over pusher-js's Node
//! build, run by `tests/pusher/echo.mjs`, installed by `scripts/install-pusher-clients.sh`)
//! against the real binary, used as a Laravel app's front end uses it, with Pusher's server SDKs
//! as the broadcaster: `Echo.channel(..).listen(..)` hears events by their broadcast names
//! (`.OrderShipped`) and by Laravel's class names (`OrderShipped` for
//! `App\Events\OrderShipped`), exactly those; a trigger naming a socket (Laravel's `toOthers()`)
//! skips that Echo, and reaches another configured as a Reverb app's (`broadcaster: 'reverb'`);
//! `Echo.private(..)` is authorised by the app's auth endpoint (a real HTTP endpoint signing with
//! the Pusher Node SDK, asked through `authEndpoint` or an `authorizer`), and refused with
//! Pusher's error when it signs with another secret; whispers reach the other Echo and not their
//! sender; `Echo.join(..)` tells `here`, `joining` and `leaving` with the members Laravel's
//! broadcaster makes (numeric user ids, the user as `user_info`); `.notification(..)` on a
//! user's `App.Models.User.{id}` channel hears that user's broadcast notifications only.

use std::process::Stdio;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

use crate::pusher_api::{clients, run, Credentials, Sdk};
use crate::pusher_client::server_with_credentials;
use crate::support::Server;

/// One Laravel Echo run by `echo.mjs`.
struct Echo {
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
    /// Every line printed so far, for a failure message.
    seen: Vec<String>,
    socket_id: String,
}

impl Echo {
    /// Starts Echo against `s` with `creds` and `extra` fields in its order (`auth`, `user`,
    /// `badSecret`); waits for the connection.
    async fn start(s: &Server, creds: &Credentials, extra: Value) -> Self {
        let dir = clients();
        assert!(
            dir.join("node_modules/laravel-echo").is_dir(),
            "tests/pusher/node_modules has no laravel-echo: run scripts/install-pusher-clients.sh"
        );
        let mut order = json!({
            "host": s.addr.ip().to_string(),
            "port": s.addr.port(),
            "appId": creds.app_id,
            "key": creds.key,
            "secret": creds.secret,
        });
        if let (Some(order), Some(extra)) = (order.as_object_mut(), extra.as_object()) {
            order.extend(extra.clone());
        }
        let mut child = tokio::process::Command::new("node")
            .arg(dir.join("echo.mjs"))
            .arg(order.to_string())
            .current_dir(&dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("run node");
        let stdin = child.stdin.take().unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut echo = Echo {
            child,
            stdin,
            lines,
            seen: Vec::new(),
            socket_id: String::new(),
        };
        let connected = echo.until(|l| l["type"] == "connected").await;
        echo.socket_id = connected["socket_id"].as_str().unwrap().to_owned();
        echo
    }

    /// The next line Echo prints; panics after 10 s with what it printed.
    async fn next(&mut self) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(10), self.lines.next_line()).await;
        match line {
            Ok(Ok(Some(line))) => {
                self.seen.push(line.clone());
                serde_json::from_str(&line).unwrap_or_else(|e| panic!("{line:?}: {e}"))
            }
            other => panic!(
                "Echo printed nothing more ({other:?}); it printed:\n{}",
                self.seen.join("\n")
            ),
        }
    }

    /// Lines until one `wanted` accepts.
    async fn until(&mut self, wanted: impl Fn(&Value) -> bool) -> Value {
        loop {
            let line = self.next().await;
            if wanted(&line) {
                return line;
            }
        }
    }

    /// The next line of one of `types`.
    async fn next_of(&mut self, types: &[&str]) -> Value {
        self.until(|l| types.iter().any(|t| l["type"] == *t)).await
    }

    /// The next callback Echo ran: an event, a whisper, a notification, a presence change or an
    /// error.
    async fn next_callback(&mut self) -> Value {
        self.next_of(&[
            "event",
            "whisper",
            "notification",
            "here",
            "joining",
            "leaving",
            "subscription_error",
            "error",
        ])
        .await
    }

    async fn send(&mut self, command: Value) {
        let line = format!("{command}\n");
        self.stdin.write_all(line.as_bytes()).await.unwrap();
        self.stdin.flush().await.unwrap();
    }

    /// `Echo.channel(name)` / `.private(name)` / `.join(name)` (`kind`), listening for `listen`
    /// and whispers of `whispers`.
    async fn subscribe(&mut self, kind: &str, name: &str, listen: &[&str], whispers: &[&str]) {
        self.send(json!({ "subscribe": {
            "kind": kind, "name": name, "listen": listen, "whispers": whispers,
        }}))
        .await;
    }

    /// `Echo.private(name).notification(..)`.
    async fn notifications(&mut self, name: &str) {
        self.send(json!({ "subscribe": {
            "kind": "private", "name": name, "notifications": true,
        }}))
        .await;
    }

    /// Waits for `name`'s `.subscribed()` callback; panics on its `.error()`.
    async fn subscribed(&mut self, name: &str) {
        let line = self
            .until(|l| {
                (l["type"] == "subscribed" || l["type"] == "subscription_error")
                    && l["name"] == name
            })
            .await;
        assert_eq!(line["type"], "subscribed", "{line}");
    }

    async fn whisper(&mut self, kind: &str, name: &str, event: &str, data: Value) {
        self.send(json!({ "whisper": {
            "kind": kind, "name": name, "event": event, "data": data,
        }}))
        .await;
        self.next_of(&["whispered"]).await;
    }

    async fn exit(mut self) {
        self.send(json!({ "exit": true })).await;
        let _ = tokio::time::timeout(Duration::from_secs(5), self.child.wait()).await;
    }
}

/// Broadcasts `event` with `data` (a JSON text) to `channels` through `sdk`, as Laravel's Pusher
/// broadcaster does (`socket_id` for `toOthers()`).
async fn broadcast(
    sdk: Sdk,
    s: &Server,
    creds: &Credentials,
    channels: &[&str],
    event: &str,
    data: &str,
    socket_id: Option<&str>,
) {
    let mut trigger = json!({ "channels": channels, "event": event, "data": data });
    if let Some(socket_id) = socket_id {
        trigger["socket_id"] = json!(socket_id);
    }
    let (status, body) = run(sdk, s, creds, json!({ "trigger": trigger })).await;
    assert_eq!(
        (status, body.as_str()),
        (200, "{}"),
        "{sdk:?} trigger {event}"
    );
}

/// An `event` line as `echo.mjs` prints it.
fn heard(name: &str, event: &str, data: Value) -> Value {
    json!({ "type": "event", "name": name, "event": event, "data": data })
}

#[tokio::test]
async fn echo_listens_by_broadcast_name_and_by_laravel_event_class() {
    let (s, creds) = server_with_credentials(None).await;
    let mut echo = Echo::start(&s, &creds, json!({})).await;
    echo.subscribe("channel", "orders", &[".OrderShipped", "OrderShipped"], &[])
        .await;
    echo.subscribed("orders").await;

    // Laravel names an event by its class unless it has broadcastAs(): Echo's `OrderShipped`
    // is `App\Events\OrderShipped` (the default namespace), `.OrderShipped` is that name as is.
    let sdk = Sdk::Node;
    broadcast(
        sdk,
        &s,
        &creds,
        &["orders"],
        r"App\Events\OrderShipped",
        r#"{"order":{"id":1}}"#,
        None,
    )
    .await;
    broadcast(
        Sdk::Python,
        &s,
        &creds,
        &["orders"],
        "OrderShipped",
        r#"{"order":{"id":2}}"#,
        None,
    )
    .await;
    // Nobody listens for these: another event, another channel.
    broadcast(
        sdk,
        &s,
        &creds,
        &["orders"],
        r"App\Events\OrderCancelled",
        r#"{"order":{"id":3}}"#,
        None,
    )
    .await;
    broadcast(
        sdk,
        &s,
        &creds,
        &["orders-eu"],
        "OrderShipped",
        r#"{"order":{"id":4}}"#,
        None,
    )
    .await;
    broadcast(
        sdk,
        &s,
        &creds,
        &["orders"],
        "OrderShipped",
        r#"{"order":{"id":5}}"#,
        None,
    )
    .await;

    let mut callbacks = Vec::new();
    for _ in 0..3 {
        callbacks.push(echo.next_callback().await);
    }
    assert_eq!(
        callbacks,
        vec![
            heard("orders", "OrderShipped", json!({ "order": { "id": 1 } })),
            heard("orders", ".OrderShipped", json!({ "order": { "id": 2 } })),
            heard("orders", ".OrderShipped", json!({ "order": { "id": 5 } })),
        ]
    );
    echo.exit().await;
}

#[tokio::test]
async fn a_broadcast_to_others_skips_the_echo_whose_socket_it_names() {
    let (s, creds) = server_with_credentials(None).await;
    let mut sender = Echo::start(&s, &creds, json!({})).await;
    // The other is configured as a Reverb app's front end is (`broadcaster: 'reverb'`).
    let mut other = Echo::start(&s, &creds, json!({ "broadcaster": "reverb" })).await;
    for echo in [&mut sender, &mut other] {
        echo.subscribe("channel", "orders", &[".OrderShipped"], &[])
            .await;
        echo.subscribed("orders").await;
    }
    // `broadcast(new OrderShipped)->toOthers()`: the request's X-Socket-ID, passed on.
    let first = r#"{"id":1}"#;
    broadcast(
        Sdk::Node,
        &s,
        &creds,
        &["orders"],
        "OrderShipped",
        first,
        Some(&sender.socket_id),
    )
    .await;
    broadcast(
        Sdk::Node,
        &s,
        &creds,
        &["orders"],
        "OrderShipped",
        r#"{"id":2}"#,
        None,
    )
    .await;
    assert_eq!(
        other.next_callback().await,
        heard("orders", ".OrderShipped", json!({ "id": 1 }))
    );
    assert_eq!(
        other.next_callback().await,
        heard("orders", ".OrderShipped", json!({ "id": 2 }))
    );
    assert_eq!(
        sender.next_callback().await,
        heard("orders", ".OrderShipped", json!({ "id": 2 })),
        "the sender's Echo got only the broadcast that did not name it"
    );
    sender.exit().await;
    other.exit().await;
}

#[tokio::test]
async fn echo_private_channels_are_authorised_by_the_apps_auth_endpoint_and_whisper() {
    let (s, creds) = server_with_credentials(None).await;
    // The two ways a Laravel front end asks for authorisation.
    let mut form = Echo::start(&s, &creds, json!({ "auth": "endpoint" })).await;
    let mut json_auth = Echo::start(&s, &creds, json!({ "auth": "authorizer" })).await;
    for (echo, via) in [(&mut form, "form"), (&mut json_auth, "json")] {
        echo.subscribe("private", "orders.1", &[".OrderShipped"], &["typing"])
            .await;
        let asked = echo.next_of(&["auth"]).await;
        assert_eq!(
            asked,
            json!({ "type": "auth", "channel": "private-orders.1", "via": via, "csrf": true })
        );
        echo.subscribed("orders.1").await;
    }

    broadcast(
        Sdk::Node,
        &s,
        &creds,
        &["private-orders.1"],
        "OrderShipped",
        r#"{"id":1}"#,
        None,
    )
    .await;
    for echo in [&mut form, &mut json_auth] {
        assert_eq!(
            echo.next_callback().await,
            heard("orders.1", ".OrderShipped", json!({ "id": 1 }))
        );
    }

    // Whispers (client events) reach the other Echo, never their sender.
    form.whisper("private", "orders.1", "typing", json!({ "name": "Ann" }))
        .await;
    json_auth
        .whisper("private", "orders.1", "typing", json!({ "name": "Bob" }))
        .await;
    let whisper = |data: Value| json!({ "type": "whisper", "name": "orders.1", "event": "typing", "data": data });
    assert_eq!(
        json_auth.next_callback().await,
        whisper(json!({ "name": "Ann" }))
    );
    assert_eq!(
        form.next_callback().await,
        whisper(json!({ "name": "Bob" }))
    );
    form.exit().await;
    json_auth.exit().await;

    // An endpoint that signs with another secret: Herald refuses the subscription with
    // Pusher's error, which Echo hands to `.error()`.
    let mut wrong = Echo::start(&s, &creds, json!({ "badSecret": true })).await;
    wrong
        .subscribe("private", "orders.1", &[".OrderShipped"], &[])
        .await;
    let refused = wrong.next_callback().await;
    assert_eq!(refused["type"], "subscription_error", "{refused}");
    assert_eq!(refused["name"], "orders.1", "{refused}");
    assert_eq!(refused["error"]["type"], "AuthError", "{refused}");
    assert_eq!(refused["error"]["status"], 401, "{refused}");
    wrong.exit().await;
}

#[tokio::test]
async fn echo_join_tells_here_joining_leaving_and_whispers_with_laravel_members() {
    let (s, creds) = server_with_credentials(None).await;
    // Laravel's broadcaster makes the member {user_id: <the user's id, a number>, user_info:
    // <what the channel's callback returned>}.
    let ann_user = json!({ "id": 1, "name": "Ann" });
    let bob_user = json!({ "id": 2, "name": "Bob" });
    let mut ann = Echo::start(&s, &creds, json!({ "user": ann_user })).await;
    let mut bob = Echo::start(&s, &creds, json!({ "user": bob_user })).await;

    ann.subscribe("join", "chat.1", &[".MessagePosted"], &["typing"])
        .await;
    assert_eq!(
        ann.next_callback().await,
        json!({ "type": "here", "name": "chat.1", "users": [ann_user] })
    );
    bob.subscribe("join", "chat.1", &[".MessagePosted"], &["typing"])
        .await;
    assert_eq!(
        bob.next_callback().await,
        json!({ "type": "here", "name": "chat.1", "users": [ann_user, bob_user] })
    );
    assert_eq!(
        ann.next_callback().await,
        json!({ "type": "joining", "name": "chat.1", "user": bob_user })
    );

    // A whisper reaches the other member only; a broadcast reaches both.
    bob.whisper("join", "chat.1", "typing", json!({ "typing": true }))
        .await;
    assert_eq!(
        ann.next_callback().await,
        json!({ "type": "whisper", "name": "chat.1", "event": "typing", "data": { "typing": true } })
    );
    broadcast(
        Sdk::Node,
        &s,
        &creds,
        &["presence-chat.1"],
        "MessagePosted",
        r#"{"text":"hi"}"#,
        None,
    )
    .await;
    for echo in [&mut bob, &mut ann] {
        assert_eq!(
            echo.next_callback().await,
            heard("chat.1", ".MessagePosted", json!({ "text": "hi" })),
            "the broadcast, and before it no whisper of its own"
        );
    }

    // Echo.leave('chat.1'): the others are told, with the member's info.
    bob.send(json!({ "leave": "chat.1" })).await;
    bob.next_of(&["left"]).await;
    assert_eq!(
        ann.next_callback().await,
        json!({ "type": "leaving", "name": "chat.1", "user": bob_user })
    );
    ann.exit().await;
    bob.exit().await;
}

#[tokio::test]
async fn echo_notification_hears_laravels_broadcast_notifications_on_the_users_channel() {
    let (s, creds) = server_with_credentials(None).await;
    let mut echo = Echo::start(&s, &creds, json!({})).await;
    // Laravel's notifiable user 1 is told on `private-App.Models.User.1`.
    echo.notifications("App.Models.User.1").await;
    let asked = echo.next_of(&["auth"]).await;
    assert_eq!(asked["channel"], "private-App.Models.User.1", "{asked}");
    echo.subscribed("App.Models.User.1").await;

    // What Laravel's broadcaster sends for a notification: the event named by its class, the
    // notification's data with its id and type.
    let notification = |amount: u32| {
        json!({
            "id": format!("5b1f7a2e-3c1d-4c47-9a3e-{amount:012}"),
            "type": "App\\Notifications\\InvoicePaid",
            "amount": amount,
        })
    };
    let event = r"Illuminate\Notifications\Events\BroadcastNotificationCreated";
    // Another user's notification first: not this Echo's.
    for (user, amount) in [
        ("private-App.Models.User.2", 7),
        ("private-App.Models.User.1", 42),
    ] {
        let data = notification(amount).to_string();
        broadcast(Sdk::Node, &s, &creds, &[user], event, &data, None).await;
    }
    assert_eq!(
        echo.next_callback().await,
        json!({ "type": "notification", "name": "App.Models.User.1", "data": notification(42) })
    );
    echo.exit().await;
}
