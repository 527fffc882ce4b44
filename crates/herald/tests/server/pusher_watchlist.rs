//! Pusher watchlists against the real binary, with pusher-js 8.6.0 in Node
//! (`tests/pusher/client.mjs`, `pusher.user.watchlist.bind('online' | 'offline')`): a user
//! signing in with a watchlist is told who of it is online now, then each watched user's first
//! signed-in connection (`online`) and its last one closing (`offline`), once per change
//! however many connections the user has. A raw WebSocket checks the limit: a watchlist of
//! more than 100 user ids is refused with `pusher:error` 4009 and the close 4009.

use serde_json::{json, Value};

use crate::pusher_api::Credentials;
use crate::pusher_client::{established, server_with_credentials, PusherJs};
use crate::support::{Server, Ws};

/// pusher-js connected and signed in as `id` watching `watchlist` (waits for the sign-in),
/// and the watchlist events it was handed meanwhile (pusher-js tells its sign-in's end a
/// moment after it handled the frames that came with it).
async fn signed_in(
    s: &Server,
    creds: &Credentials,
    id: &str,
    watchlist: &[&str],
) -> (PusherJs, Vec<(String, Vec<String>)>) {
    let user = json!({ "id": id, "watchlist": watchlist });
    let mut js = PusherJs::start_with(s, creds, &[], json!({ "signin": user })).await;
    let mut told = Vec::new();
    let done = loop {
        let line = js
            .until(|l| l["type"] == "signin_done" || l["type"] == "watchlist")
            .await;
        if line["type"] == "watchlist" {
            told.push(watchlist_event(&line));
            continue;
        }
        break line;
    };
    assert_eq!(done["user_data"], user, "{done}");
    (js, told)
}

/// A user who watches nobody, signed in.
async fn online(s: &Server, creds: &Credentials, id: &str) -> PusherJs {
    let (js, told) = signed_in(s, creds, id, &[]).await;
    assert!(told.is_empty(), "{told:?}");
    js
}

/// The next watchlist event pusher-js hands its listeners: (name, user ids).
async fn next_watchlist_event(js: &mut PusherJs) -> (String, Vec<String>) {
    watchlist_event(&js.until(|l| l["type"] == "watchlist").await)
}

fn watchlist_event(line: &Value) -> (String, Vec<String>) {
    let ids = line["user_ids"].as_array().expect("user_ids");
    (
        line["name"].as_str().unwrap_or_default().to_owned(),
        ids.iter()
            .map(|i| i.as_str().unwrap_or_default().to_owned())
            .collect(),
    )
}

/// The sign-in's first watchlist event: the one told meanwhile, else the next.
async fn first_event(
    js: &mut PusherJs,
    meanwhile: Vec<(String, Vec<String>)>,
) -> Vec<(String, Vec<String>)> {
    if meanwhile.is_empty() {
        vec![next_watchlist_event(js).await]
    } else {
        meanwhile
    }
}

fn told(name: &str, ids: &[&str]) -> (String, Vec<String>) {
    (
        name.to_owned(),
        ids.iter().map(|s| (*s).to_owned()).collect(),
    )
}

#[tokio::test]
async fn a_watchlist_is_told_who_is_online_then_who_comes_and_goes() {
    let (s, creds) = server_with_credentials(None).await;
    // c is online before the watcher signs in; b is not.
    let c = online(&s, &creds, "c").await;
    let (mut ann, meanwhile) = signed_in(&s, &creds, "ann", &["b", "c"]).await;
    assert_eq!(
        first_event(&mut ann, meanwhile).await,
        [told("online", &["c"])],
        "who of the watchlist is online at sign-in"
    );

    // b's first signed-in connection makes it online; its second changes nothing.
    let b1 = online(&s, &creds, "b").await;
    assert_eq!(next_watchlist_event(&mut ann).await, told("online", &["b"]));
    let b2 = online(&s, &creds, "b").await;
    // A user nobody watches comes and goes: nothing for ann.
    online(&s, &creds, "zed").await.exit().await;
    b1.exit().await;
    // b's last connection closing makes it offline: the next event after `online` is this.
    b2.exit().await;
    assert_eq!(
        next_watchlist_event(&mut ann).await,
        told("offline", &["b"])
    );
    c.exit().await;
    assert_eq!(
        next_watchlist_event(&mut ann).await,
        told("offline", &["c"])
    );

    // A second watcher signing in now sees nobody online but ann, whom it watches.
    let (mut dan, meanwhile) = signed_in(&s, &creds, "dan", &["ann", "b"]).await;
    assert_eq!(
        first_event(&mut dan, meanwhile).await,
        [told("online", &["ann"])]
    );
    ann.exit().await;
    assert_eq!(
        next_watchlist_event(&mut dan).await,
        told("offline", &["ann"])
    );
    dan.exit().await;
}

/// A raw connection's sign-in as `id` watching `watchlist`, signed with the app's secret: the
/// answer, and the connection.
async fn raw_sign_in(
    s: &Server,
    creds: &Credentials,
    id: &str,
    watchlist: &[String],
) -> (Ws, Value) {
    let (mut ws, socket_id) = established(s, creds).await;
    let user_data = json!({ "id": id, "watchlist": watchlist }).to_string();
    let signed = herald_pusher::signature::signin_string(&socket_id, &user_data);
    let auth =
        herald_pusher::signature::key_signature(&creds.key, creds.secret.as_bytes(), &signed);
    ws.send(json!({ "event": "pusher:signin", "data": { "auth": auth, "user_data": user_data } }))
        .await;
    let answer = ws.frame().await;
    (ws, answer)
}

#[tokio::test]
async fn a_watchlist_over_100_user_ids_is_refused_with_4009() {
    let (s, creds) = server_with_credentials(None).await;
    let ids = |n: usize| (0..n).map(|i| format!("u{i}")).collect::<Vec<_>>();

    let (mut ws, answer) = raw_sign_in(&s, &creds, "ann", &ids(100)).await;
    assert_eq!(
        answer["event"], "pusher:signin_success",
        "100 is the limit: {answer}"
    );
    ws.send(json!({ "event": "pusher:ping", "data": {} })).await;
    assert_eq!(
        ws.frame().await["event"],
        "pusher:pong",
        "and the connection goes on"
    );

    let (mut ws, answer) = raw_sign_in(&s, &creds, "ann", &ids(101)).await;
    assert_eq!(answer["event"], "pusher:error", "{answer}");
    assert_eq!(answer["data"]["code"], 4009, "{answer}");
    let message = answer["data"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("at most 100 user ids"), "{answer}");
    while ws.recv().await.is_some() {}
    assert!(
        ws.why_closed().contains("close code 4009"),
        "{}",
        ws.why_closed()
    );
}
