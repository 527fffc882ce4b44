//! Revocation against the real binary (issue 13, defect 1): deleting an app, deactivating or
//! deleting a device, and `POST /v1/apps/{id}/revoke` close the affected live connections at
//! once, on WebSocket, SSE, long-poll and Meteor, each with a `disconnect` whose code is
//! `revoked`; revoked tokens are refused from then on, also after a restart.

use std::time::Duration;

use herald_proto::token::{mint, ClientClaims};
use serde_json::{json, Value};

use crate::support::meteor::Subscriber;
use crate::support::{call, Server, Sse, Ws, API_KEY, SECRET};

const ADMIN: &str = "admin-key-0123456789abcdef";

async fn server() -> Server {
    Server::builder()
        .arg("--admin-key")
        .arg(ADMIN)
        .arg("--meteor")
        .arg("127.0.0.1:0")
        .start()
        .await
}

/// Creates app `id`; returns its publisher key.
async fn create_app(s: &Server, id: &str) -> String {
    let (status, body) = call(s, "POST", "/v1/apps", ADMIN, Some(json!({ "id": id }))).await;
    assert_eq!(status, 201, "{body}");
    body["key"].as_str().unwrap().to_owned()
}

/// A token of the key's app, minted by the server.
async fn server_token(s: &Server, key: &str, claims: Value) -> String {
    let (status, body) = call(s, "POST", "/v1/tokens", key, Some(claims)).await;
    assert_eq!(status, 200, "{body}");
    body["token"].as_str().unwrap().to_owned()
}

/// A default-app token for `sub` reading `news`, with these `iat` and `jti`.
fn default_token(sub: &str, iat: Option<u64>, jti: Option<&str>) -> String {
    mint(
        SECRET.as_bytes(),
        &ClientClaims {
            sub: sub.into(),
            channels: vec!["news".into()],
            iat,
            jti: jti.map(str::to_owned),
            ..Default::default()
        },
    )
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// `herald_app_connections` of `app` as `/metrics` shows it.
async fn connections(s: &Server, app: &str) -> u64 {
    let needle = format!("herald_app_connections{{app=\"{app}\"}} ");
    s.metrics()
        .await
        .lines()
        .find_map(|l| {
            l.strip_prefix(&needle)
                .and_then(|v| v.trim().parse::<f64>().ok())
        })
        .map_or(0, |v| v as u64)
}

/// Waits (bounded) until `app` holds `n` live connections, so a long-poll is known to wait.
pub(crate) async fn wait_connections(s: &Server, app: &str, n: u64) {
    tokio::time::timeout(Duration::from_secs(10), async {
        while connections(s, app).await != n {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{app} never held {n} connections"));
}

/// One client on each native transport, all with `token`: a WebSocket subscribed to `news`
/// (or its inbox, for a device token), an SSE stream past its first event, a waiting long-poll.
pub(crate) struct Clients {
    ws: Ws,
    sse: Sse,
    poll: tokio::task::JoinHandle<(u16, Value)>,
}

impl Clients {
    pub(crate) async fn open(s: &Server, token: &str, app: &str, device: bool) -> Clients {
        let before = connections(s, app).await;
        let mut ws = Ws::connect(&s.ws_url(&format!("?token={token}"))).await;
        let channel = if device { "" } else { "&channel=news" };
        if !device {
            let r = ws.request("subscribe", json!({ "channel": "news" })).await;
            assert!(r.get("subscribe").is_some(), "{r}");
        } else {
            let first = ws.recv().await.expect("inbox confirmation");
            assert!(first.get("subscribe").is_some(), "{first}");
        }
        let mut sse = Sse::open(s, &format!("?token={token}{channel}"), None)
            .await
            .expect("sse opens");
        assert_eq!(sse.next().await.unwrap().event, "subscribed");
        let (http, url) = (
            s.http.clone(),
            s.url(&format!(
                "/v1/poll?token={token}{channel}&timeout=60&last=false"
            )),
        );
        let poll = tokio::spawn(async move {
            let r = http.get(url).send().await.unwrap();
            (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
        });
        wait_connections(s, app, before + 3).await;
        Clients { ws, sse, poll }
    }

    /// Every transport got a `disconnect` with code `revoked` and was closed.
    pub(crate) async fn all_revoked(mut self) {
        let frame = loop {
            let v = self.ws.recv().await.expect("a disconnect before the close");
            if v.get("disconnect").is_some() {
                break v;
            }
        };
        assert_eq!(frame["disconnect"]["code"], "revoked", "{frame}");
        assert!(self.ws.recv().await.is_none(), "the WebSocket is closed");
        let event = loop {
            let e = self.sse.next().await.expect("a disconnect event");
            if e.event == "disconnect" {
                break e;
            }
        };
        assert_eq!(event.json()["code"], "revoked");
        assert!(self.sse.next().await.is_none(), "the SSE stream ended");
        let (status, body) = tokio::time::timeout(Duration::from_secs(10), self.poll)
            .await
            .expect("the long-poll answers at once")
            .unwrap();
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["disconnect"]["code"], "revoked", "{body}");
    }
}

pub(crate) async fn ws_status(s: &Server, token: &str) -> u16 {
    match Ws::try_connect(&s.ws_url(&format!("?token={token}"))).await {
        Ok(_) => 101,
        Err(status) => status,
    }
}

#[tokio::test]
async fn deleting_an_app_closes_its_connections_and_deleting_a_key_does_not() {
    let s = server().await;
    let key = create_app(&s, "shop").await;
    let token = server_token(
        &s,
        &key,
        json!({ "sub": "alice", "channels": ["news"], "publish": ["news"] }),
    )
    .await;
    let clients = Clients::open(&s, &token, "shop", false).await;
    // Publisher keys are not client credentials: removing one leaves clients connected.
    let (status, added) = call(&s, "POST", "/v1/apps/shop/keys", ADMIN, None).await;
    assert_eq!(status, 201, "{added}");
    let key_id = added["key_id"].as_str().unwrap();
    let (status, _) = call(
        &s,
        "DELETE",
        &format!("/v1/apps/shop/keys/{key_id}"),
        ADMIN,
        None,
    )
    .await;
    assert_eq!(status, 204);
    let mut clients = clients;
    let r = clients.ws.request("ping", json!({})).await;
    assert!(r.get("pong").is_some(), "still connected: {r}");

    let (status, _) = call(&s, "DELETE", "/v1/apps/shop", ADMIN, None).await;
    assert_eq!(status, 204);
    clients.all_revoked().await;
    assert_eq!(
        ws_status(&s, &token).await,
        401,
        "the app's tokens are refused"
    );
    let (status, _) = Sse::open(&s, &format!("?token={token}&channel=news"), None)
        .await
        .err()
        .expect("refused");
    assert_eq!(status, 401);
}

#[tokio::test]
async fn deactivating_or_deleting_a_device_closes_its_connections() {
    let s = server().await;
    let key = create_app(&s, "shop").await;
    for id in ["phone", "tablet"] {
        let (status, body) = call(
            &s,
            "POST",
            "/v1/devices",
            &key,
            Some(json!({"platform": "herald", "id": id})),
        )
        .await;
        assert_eq!(status, 201, "{body}");
    }
    let phone = server_token(&s, &key, json!({ "sub": "alice", "device": "phone" })).await;
    let tablet = server_token(&s, &key, json!({ "sub": "alice", "device": "tablet" })).await;
    let phones = Clients::open(&s, &phone, "shop", true).await;
    let mut other = Ws::connect(&s.ws_url(&format!("?token={tablet}"))).await;
    other.recv().await.expect("the tablet's inbox opens");
    let (status, body) = call(&s, "POST", "/v1/devices/phone/deactivate", &key, None).await;
    assert_eq!(status, 200, "{body}");
    phones.all_revoked().await;
    let r = other.request("ping", json!({})).await;
    assert!(
        r.get("pong").is_some(),
        "another device stays connected: {r}"
    );
    let (status, _) = Sse::open(&s, &format!("?token={phone}"), None)
        .await
        .err()
        .expect("refused");
    assert_eq!(status, 403, "a deactivated device's inbox is refused");

    let (status, _) = call(&s, "DELETE", "/v1/devices/tablet", &key, None).await;
    assert_eq!(status, 204);
    let frame = loop {
        let v = other.recv().await.expect("a disconnect");
        if v.get("disconnect").is_some() {
            break v;
        }
    };
    assert_eq!(frame["disconnect"]["code"], "revoked", "{frame}");
    assert!(other.recv().await.is_none());
}

#[tokio::test]
async fn the_revoke_api_disconnects_a_user_then_everyone_including_meteor() {
    let s = server().await;
    let alice = default_token("alice", None, None);
    let bob = default_token("bob", None, None);
    let alices = Clients::open(&s, &alice, "default", false).await;
    let mut bobs = Ws::connect(&s.ws_url(&format!("?token={bob}"))).await;
    bobs.request("subscribe", json!({ "channel": "news" }))
        .await;
    let mut meteor = Subscriber::get(s.meteor.unwrap(), "/push/h1/stream/news").await;
    meteor.until("</script>\r\n").await;

    let (status, body) = s
        .post("/v1/apps/default/revoke", json!({ "sub": "alice" }))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["closed"], 3, "alice's three connections: {body}");
    alices.all_revoked().await;
    assert!(
        bobs.request("ping", json!({})).await.get("pong").is_some(),
        "bob stays"
    );
    // A disconnect stores nothing: alice may come back.
    assert_eq!(ws_status(&s, &alice).await, 101);

    let (status, body) = call(
        &s,
        "POST",
        "/v1/apps/default/revoke",
        ADMIN,
        Some(json!({ "all": true })),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(
        body["closed"].as_u64().unwrap() >= 2,
        "bob and the Meteor subscriber: {body}"
    );
    let frame = loop {
        let v = bobs.recv().await.expect("a disconnect");
        if v.get("disconnect").is_some() {
            break v;
        }
    };
    assert_eq!(frame["disconnect"]["code"], "revoked");
    meteor.read_to_close().await;

    for bad in [
        json!({}),
        json!({"all": true, "sub": "x"}),
        json!({"sub": ""}),
        json!({"issued_before": now() + 3600}),
        json!({"expires": 5}),
    ] {
        let (status, body) = s.post("/v1/apps/default/revoke", bad.clone()).await;
        assert_eq!(status, 400, "{bad}: {body}");
    }
    let other = create_app(&s, "other").await;
    let (status, _) = call(
        &s,
        "POST",
        "/v1/apps/default/revoke",
        &other,
        Some(json!({"all": true})),
    )
    .await;
    assert_eq!(status, 404, "another app's key cannot revoke");
}

#[tokio::test]
async fn revoked_tokens_are_closed_refused_and_stay_refused_after_a_restart() {
    let mut s = server().await;
    let old = now() - 60;
    let by_id = default_token("alice", Some(now()), Some("t-1"));
    let stale = default_token("bob", Some(old), None);
    let fresh = default_token("carol", Some(now()), Some("t-2"));
    let no_iat = default_token("dave", None, None);
    let by_ids = Clients::open(&s, &by_id, "default", false).await;
    let (status, body) = s
        .post("/v1/apps/default/revoke", json!({ "jti": "t-1" }))
        .await;
    assert_eq!((status, body["closed"].as_u64()), (200, Some(3)), "{body}");
    by_ids.all_revoked().await;
    assert_eq!(ws_status(&s, &by_id).await, 401);

    let stales = Clients::open(&s, &stale, "default", false).await;
    let mut fresh_ws = Ws::connect(&s.ws_url(&format!("?token={fresh}"))).await;
    fresh_ws
        .request("subscribe", json!({ "channel": "news" }))
        .await;
    let (status, body) = s
        .post(
            "/v1/apps/default/revoke",
            json!({ "issued_before": old + 1 }),
        )
        .await;
    assert_eq!((status, body["closed"].as_u64()), (200, Some(3)), "{body}");
    stales.all_revoked().await;
    assert!(
        fresh_ws
            .request("ping", json!({}))
            .await
            .get("pong")
            .is_some(),
        "issued later"
    );
    for refused in [&stale, &no_iat] {
        assert_eq!(ws_status(&s, refused).await, 401);
    }

    s.restart().await;
    for refused in [&by_id, &stale, &no_iat] {
        assert_eq!(
            ws_status(&s, refused).await,
            401,
            "still refused after a restart"
        );
        let status = s
            .http
            .get(s.url(&format!("/v1/poll?token={refused}&channel=news&timeout=0")))
            .send()
            .await
            .unwrap()
            .status();
        assert_eq!(status, 401);
    }
    assert_eq!(ws_status(&s, &fresh).await, 101);
    let _ = API_KEY;
}
