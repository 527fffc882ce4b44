//! Client tokens beyond one HS256 secret, against the real binary (issue 13, "Tokens"): RS256
//! and ES256 tokens verified with an app's PEM public keys on WebSocket, SSE and long-poll; the
//! refusals (wrong alg, `none`, HS256 signed with a public key, unknown kid, expired) and their
//! messages; a JWKS URL served by a real HTTP server in the test (fetched on the first connect,
//! a key rotated at the key server picked up on its unknown kid, an outage keeping the cached
//! keys, a flood of unknown kids causing no fetch within the least refetch interval); HS256 secret rotation with an overlap (old tokens accepted during it, refused after,
//! their connections closed with `revoked`; across a restart); and the raw SQLite file holding
//! no token secret. Keys are made with the `openssl` command, tokens signed with jsonwebtoken.

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use base64::Engine as _;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::revoke::{wait_connections, ws_status, Clients};
use crate::support::{call, Server, Sse, Ws};

const ADMIN: &str = "admin-key-0123456789abcdef";

/// A key pair made by `openssl`.
struct KeyPair {
    private_pem: String,
    public_pem: String,
    /// The public key's SubjectPublicKeyInfo, DER.
    public_der: Vec<u8>,
}

fn openssl(args: &[&str], input: Option<&[u8]>) -> Vec<u8> {
    let mut child = Command::new("openssl")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the openssl command runs");
    let mut stdin = child.stdin.take().unwrap();
    if let Some(input) = input {
        std::io::Write::write_all(&mut stdin, input).unwrap();
    }
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "openssl {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

fn key_pair(genpkey: &[&str]) -> KeyPair {
    let private = openssl(genpkey, None);
    let public_pem = openssl(&["pkey", "-pubout"], Some(&private));
    let public_der = openssl(&["pkey", "-pubout", "-outform", "DER"], Some(&private));
    KeyPair {
        private_pem: String::from_utf8(private).unwrap(),
        public_pem: String::from_utf8(public_pem).unwrap(),
        public_der,
    }
}

fn rsa_key() -> KeyPair {
    key_pair(&[
        "genpkey",
        "-algorithm",
        "RSA",
        "-pkeyopt",
        "rsa_keygen_bits:2048",
    ])
}

fn ec_key() -> KeyPair {
    key_pair(&[
        "genpkey",
        "-algorithm",
        "EC",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
    ])
}

/// The JWK of a P-256 public key (its DER ends with the uncompressed point 04 || x || y).
fn ec_jwk(kid: &str, key: &KeyPair) -> Value {
    let point = &key.public_der[key.public_der.len() - 65..];
    assert_eq!(point[0], 4);
    let b64 = |b: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b);
    json!({ "kty": "EC", "crv": "P-256", "use": "sig", "alg": "ES256", "kid": kid,
            "x": b64(&point[1..33]), "y": b64(&point[33..]) })
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// Claims reading `news` for ten minutes, for `app` (named in `aud`).
fn claims(app: &str) -> Value {
    json!({ "sub": "alice", "aud": app, "channels": ["news"], "exp": now() + 600, "iat": now() })
}

/// A token signed by `key` with `alg`, naming `kid`.
fn sign(alg: Algorithm, kid: Option<&str>, key: &KeyPair, claims: &Value) -> String {
    let encoding = match alg {
        Algorithm::RS256 | Algorithm::RS384 => {
            EncodingKey::from_rsa_pem(key.private_pem.as_bytes()).unwrap()
        }
        _ => EncodingKey::from_ec_pem(key.private_pem.as_bytes()).unwrap(),
    };
    let mut header = Header::new(alg);
    header.kid = kid.map(str::to_owned);
    jsonwebtoken::encode(&header, claims, &encoding).unwrap()
}

async fn server(extra: &[&str]) -> Server {
    let mut builder = Server::builder().arg("--admin-key").arg(ADMIN);
    for a in extra {
        builder = builder.arg(a);
    }
    builder.start().await
}

/// Creates app `id`; returns its publisher key and token secret.
async fn create_app(s: &Server, id: &str) -> (String, String) {
    let (status, body) = call(s, "POST", "/v1/apps", ADMIN, Some(json!({ "id": id }))).await;
    assert_eq!(status, 201, "{body}");
    (
        body["key"].as_str().unwrap().to_owned(),
        body["token_secret"].as_str().unwrap().to_owned(),
    )
}

/// A long-poll for `news` with `token` that answers at once: status and body.
async fn poll(s: &Server, token: &str) -> (u16, Value) {
    let r = s
        .http
        .get(s.url(&format!("/v1/poll?token={token}&channel=news&timeout=0")))
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

/// `token` subscribes to `news` over WebSocket, SSE and long-poll.
async fn accepted_everywhere(s: &Server, token: &str) {
    let mut ws = Ws::try_connect(&s.ws_url(&format!("?token={token}")))
        .await
        .expect("the WebSocket upgrade is accepted");
    let r = ws.request("subscribe", json!({ "channel": "news" })).await;
    assert!(r.get("subscribe").is_some(), "{r}");
    let mut sse = Sse::open(s, &format!("?token={token}&channel=news"), None)
        .await
        .expect("SSE accepted");
    assert_eq!(sse.next().await.unwrap().event, "subscribed");
    let (status, body) = poll(s, token).await;
    assert_eq!(status, 200, "{body}");
}

/// `token` is refused with 401 everywhere; the long-poll's message contains `says`.
async fn refused(s: &Server, token: &str, code: &str, says: &str) {
    assert_eq!(ws_status(s, token).await, 401, "WebSocket: {says}");
    let (status, body) = Sse::open(s, &format!("?token={token}&channel=news"), None)
        .await
        .err()
        .expect("SSE refused");
    assert_eq!(status, 401, "{body}");
    let (status, body) = poll(s, token).await;
    assert_eq!(status, 401, "{body}");
    assert_eq!(body["error"]["code"], code, "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains(says), "{message:?} should say {says:?}");
}

#[tokio::test]
async fn rs256_and_es256_tokens_verify_with_an_apps_public_keys_and_confusions_are_refused() {
    let s = server(&[]).await;
    let (key, _) = create_app(&s, "shop").await;
    let (rsa, ec, stranger) = (rsa_key(), ec_key(), ec_key());
    let keys = json!({ "keys": [
        { "kid": "rsa-1", "alg": "RS256", "pem": rsa.public_pem },
        { "kid": "ec-1", "alg": "ES256", "pem": ec.public_pem },
    ]});
    // A private key is refused with a reason; the app's own publisher key may set its keys.
    let bad = json!({ "keys": [{ "kid": "x", "alg": "ES256", "pem": ec.private_pem }] });
    let (status, body) = call(&s, "PUT", "/v1/apps/shop/token-keys", &key, Some(bad)).await;
    assert_eq!(status, 400, "{body}");
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("private key"));
    let (status, body) = call(&s, "PUT", "/v1/apps/shop/token-keys", &key, Some(keys)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["hs256"], true);
    assert_eq!(body["keys"][1]["kid"], "ec-1");

    let rs = sign(Algorithm::RS256, Some("rsa-1"), &rsa, &claims("shop"));
    let es = sign(Algorithm::ES256, Some("ec-1"), &ec, &claims("shop"));
    // The app's id as kid (no aud): the app's keys are tried.
    let mut no_aud = claims("shop");
    no_aud.as_object_mut().unwrap().remove("aud");
    let es_by_app = sign(Algorithm::ES256, Some("shop"), &ec, &no_aud);
    for token in [&rs, &es, &es_by_app] {
        accepted_everywhere(&s, token).await;
    }

    let unauthorized = "unauthorized";
    // alg and key disagree: an RS256 token naming the ES256 key.
    let wrong_alg = sign(Algorithm::RS256, Some("ec-1"), &rsa, &claims("shop"));
    refused(&s, &wrong_alg, unauthorized, "is an ES256 key").await;
    let rs384 = sign(Algorithm::RS384, Some("rsa-1"), &rsa, &claims("shop"));
    refused(
        &s,
        &rs384,
        unauthorized,
        "Herald accepts HS256, RS256 and ES256",
    )
    .await;
    // Unsigned.
    let b64 = |v: &Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
    let none = format!(
        "{}.{}.",
        b64(&json!({ "alg": "none", "kid": "shop" })),
        b64(&claims("shop"))
    );
    refused(&s, &none, unauthorized, "alg none").await;
    // HS256 with the public key as the secret: only the app's HS256 secret checks HS256.
    let confused = jsonwebtoken::encode(
        &Header {
            kid: Some("shop".into()),
            ..Header::new(Algorithm::HS256)
        },
        &claims("shop"),
        &EncodingKey::from_secret(rsa.public_pem.as_bytes()),
    )
    .unwrap();
    refused(&s, &confused, unauthorized, "signature is not valid").await;
    let unknown = sign(Algorithm::ES256, Some("ec-9"), &ec, &claims("shop"));
    refused(&s, &unknown, unauthorized, "names key \"ec-9\"").await;
    let forged = sign(Algorithm::ES256, Some("ec-1"), &stranger, &claims("shop"));
    refused(&s, &forged, unauthorized, "does not verify").await;
    let mut past = claims("shop");
    past["exp"] = json!(now() - 1);
    let expired = sign(Algorithm::RS256, Some("rsa-1"), &rsa, &past);
    refused(&s, &expired, "token_expired", "expired").await;

    // Herald mints with the HS256 secret while the app has one; without it, it says why.
    let (status, body) = call(&s, "POST", "/v1/tokens", &key, Some(json!({}))).await;
    assert_eq!(status, 200, "{body}");
    let hs256_off = json!({ "keys": [{ "kid": "rsa-1", "alg": "RS256", "pem": rsa.public_pem }],
                            "hs256": false });
    let (status, body) = call(
        &s,
        "PUT",
        "/v1/apps/shop/token-keys",
        ADMIN,
        Some(hs256_off),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["hs256"], false);
    let (status, body) = call(&s, "POST", "/v1/tokens", &key, Some(json!({}))).await;
    assert_eq!(status, 409, "{body}");
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("cannot mint"));
    // The removed ES256 key no longer verifies; the kept RSA key does, also after a restart.
    refused(&s, &es, unauthorized, "names key \"ec-1\"").await;
    let mut s = s;
    s.restart().await;
    accepted_everywhere(&s, &rs).await;
    refused(&s, &es, unauthorized, "names key \"ec-1\"").await;
}

/// A JWKS server: serves `doc` (503 while it is `None`) and counts requests.
struct KeyServer {
    url: String,
    doc: Arc<parking_lot_free::Slot>,
    hits: Arc<AtomicUsize>,
}

/// A mutex-guarded document (std's, so the test needs no other crate).
mod parking_lot_free {
    #[derive(Default)]
    pub struct Slot(pub std::sync::Mutex<Option<String>>);
}

impl KeyServer {
    async fn start(doc: Value) -> KeyServer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/jwks.json", listener.local_addr().unwrap());
        let slot = Arc::new(parking_lot_free::Slot::default());
        *slot.0.lock().unwrap() = Some(doc.to_string());
        let hits = Arc::new(AtomicUsize::new(0));
        let (served, counted) = (slot.clone(), hits.clone());
        tokio::spawn(async move {
            while let Ok((mut tcp, _)) = listener.accept().await {
                let (served, counted) = (served.clone(), counted.clone());
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut buf = [0u8; 1024];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16384 {
                        match tcp.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    counted.fetch_add(1, Ordering::SeqCst);
                    let doc = served.0.lock().unwrap().clone();
                    let answer = match doc {
                        Some(doc) => format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
                             cache-control: public, max-age=600\r\ncontent-length: {}\r\n\
                             connection: close\r\n\r\n{doc}",
                            doc.len()
                        ),
                        None => "HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n\
                                 connection: close\r\n\r\n"
                            .to_owned(),
                    };
                    let _ = tcp.write_all(answer.as_bytes()).await;
                    let _ = tcp.shutdown().await;
                });
            }
        });
        KeyServer {
            url,
            doc: slot,
            hits,
        }
    }

    fn serve(&self, doc: Option<Value>) {
        *self.doc.0.lock().unwrap() = doc.map(|d| d.to_string());
    }

    fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

#[tokio::test]
async fn a_jwks_url_is_fetched_cached_refetched_for_an_unknown_kid_and_kept_through_an_outage() {
    let (k1, k2, k3) = (ec_key(), ec_key(), ec_key());
    let jwks = KeyServer::start(json!({ "keys": [ec_jwk("k1", &k1)] })).await;
    // Unknown kids may refetch at once here (the default waits 10 s between such fetches).
    // The key server listens on loopback, which a tenant's JWKS URL reaches only when allowed.
    let s = Server::builder()
        .arg("--admin-key")
        .arg(ADMIN)
        .arg("--outbound-allow")
        .arg("127.0.0.1")
        .config("jwks_min_refetch = \"0s\"\n")
        .start()
        .await;
    create_app(&s, "idp").await;
    let body = json!({ "jwks_url": jwks.url, "hs256": false });
    let (status, body) = call(&s, "PUT", "/v1/apps/idp/token-keys", ADMIN, Some(body)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["jwks_url"], jwks.url.as_str());

    // The first connect may wait for the first fetch; then the key is cached.
    let t1 = sign(Algorithm::ES256, Some("k1"), &k1, &claims("idp"));
    accepted_everywhere(&s, &t1).await;
    let after_first = jwks.hits();
    assert!(after_first >= 1);
    accepted_everywhere(&s, &t1).await;
    assert_eq!(jwks.hits(), after_first, "a cached key needs no fetch");

    // The key server rotates to k2: a token naming k2 makes the node fetch again.
    jwks.serve(Some(json!({ "keys": [ec_jwk("k2", &k2)] })));
    let t2 = sign(Algorithm::ES256, Some("k2"), &k2, &claims("idp"));
    accepted_everywhere(&s, &t2).await;
    assert!(jwks.hits() > after_first);
    refused(&s, &t1, "unauthorized", "names key \"k1\"").await;

    // A restart keeps the URL: the node fetches again and k2 verifies.
    let mut s = s;
    s.restart().await;
    accepted_everywhere(&s, &t2).await;

    // An outage: the unknown k3 cannot be fetched, and the cached k2 keeps working.
    jwks.serve(None);
    let t3 = sign(Algorithm::ES256, Some("k3"), &k3, &claims("idp"));
    refused(&s, &t3, "unauthorized", "names key \"k3\"").await;
    accepted_everywhere(&s, &t2).await;
}

#[tokio::test]
async fn a_flood_of_unknown_key_ids_fetches_the_key_set_at_most_once_per_interval() {
    let k1 = ec_key();
    let jwks = KeyServer::start(json!({ "keys": [ec_jwk("k1", &k1)] })).await;
    let s = Server::builder()
        .arg("--admin-key")
        .arg(ADMIN)
        .arg("--outbound-allow")
        .arg("127.0.0.1")
        .config("jwks_min_refetch = \"1h\"\n")
        .start()
        .await;
    create_app(&s, "idp").await;
    let body = json!({ "jwks_url": jwks.url, "hs256": false });
    let (status, body) = call(&s, "PUT", "/v1/apps/idp/token-keys", ADMIN, Some(body)).await;
    assert_eq!(status, 200, "{body}");
    let t1 = sign(Algorithm::ES256, Some("k1"), &k1, &claims("idp"));
    accepted_everywhere(&s, &t1).await;
    let fetched = jwks.hits();
    for n in 0..20 {
        let kid = format!("made-up-{n}");
        let token = sign(Algorithm::ES256, Some(&kid), &k1, &claims("idp"));
        let (status, body) = poll(&s, &token).await;
        assert_eq!(status, 401, "{body}");
    }
    assert_eq!(
        jwks.hits(),
        fetched,
        "no fetch within the least refetch interval"
    );
    accepted_everywhere(&s, &t1).await;
}

/// A token of the key's app, minted by the server.
async fn mint(s: &Server, key: &str, claims: &Value) -> String {
    let (status, body) = call(s, "POST", "/v1/tokens", key, Some(claims.clone())).await;
    assert_eq!(status, 200, "{body}");
    body["token"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_rotated_secret_verifies_old_tokens_during_the_overlap_then_their_connections_close() {
    let mut s = server(&[]).await;
    let (key, first_secret) = create_app(&s, "shop").await;
    let read_news = json!({ "sub": "alice", "channels": ["news"] });
    let old = mint(&s, &key, &read_news).await;

    // A rotation with a one-hour overlap, then a restart: the old token still verifies.
    let (status, body) = call(&s, "POST", "/v1/apps/shop/token-secret", &key, None).await;
    assert_eq!(status, 200, "{body}");
    let second_secret = body["token_secret"].as_str().unwrap().to_owned();
    assert_ne!(second_secret, first_secret);
    assert!(body["previous_valid_until"].as_u64().unwrap() >= now() + 3590);
    s.restart().await;
    accepted_everywhere(&s, &old).await;
    let second = mint(&s, &key, &read_news).await;
    accepted_everywhere(&s, &second).await;
    // The connections those checks opened have closed before the clients below are counted.
    wait_connections(&s, "shop", 0).await;
    let old_clients = Clients::open(&s, &old, "shop", false).await;
    let second_clients = Clients::open(&s, &second, "shop", false).await;

    // Another rotation with a 2-second overlap: the first secret is gone at once (only one
    // previous secret is kept), the second lasts until the overlap ends.
    let (status, body) = call(
        &s,
        "POST",
        "/v1/apps/shop/token-secret",
        ADMIN,
        Some(json!({ "overlap": 2 })),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    old_clients.all_revoked().await;
    refused(&s, &old, "unauthorized", "signature is not valid").await;
    assert_eq!(ws_status(&s, &second).await, 101, "within the overlap");
    let third = mint(&s, &key, &read_news).await;
    // When the overlap ends the second secret's connections are closed with `revoked`.
    second_clients.all_revoked().await;
    refused(&s, &second, "unauthorized", "signature is not valid").await;
    accepted_everywhere(&s, &third).await;

    // Overlap 0: the old secret ends now.
    wait_connections(&s, "shop", 0).await;
    let third_clients = Clients::open(&s, &third, "shop", false).await;
    let (status, _) = call(
        &s,
        "POST",
        "/v1/apps/shop/token-secret",
        ADMIN,
        Some(json!({ "overlap": 0 })),
    )
    .await;
    assert_eq!(status, 200);
    third_clients.all_revoked().await;
    s.restart().await;
    refused(&s, &third, "unauthorized", "signature is not valid").await;
    // The default app's secret is the server's configuration's.
    let (status, body) = call(&s, "POST", "/v1/apps/default/token-secret", ADMIN, None).await;
    assert_eq!(status, 400, "{body}");
}

#[tokio::test]
async fn the_raw_database_holds_no_app_token_secret() {
    let mut s = server(&[]).await;
    let (key, first) = create_app(&s, "shop").await;
    let (status, body) = call(&s, "POST", "/v1/apps/shop/token-secret", &key, None).await;
    assert_eq!(status, 200, "{body}");
    let second = body["token_secret"].as_str().unwrap().to_owned();
    // Stop it (the write-ahead log is checkpointed into the database on close), then read
    // every file of the store raw.
    s.terminate();
    let mut read = 0;
    for entry in std::fs::read_dir(&s.data).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !name.starts_with("herald.db") {
            continue;
        }
        let bytes = std::fs::read(&path).unwrap();
        read += bytes.len();
        for secret in [&first, &second] {
            assert!(
                !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
                "{name} holds a token secret in plain text"
            );
        }
    }
    assert!(read > 0, "the store's files were read");
    // The sealed secrets still open after a restart: Herald mints with the current one.
    s.restart().await;
    let (status, body) = call(&s, "POST", "/v1/tokens", &key, Some(json!({}))).await;
    assert_eq!(status, 200, "{body}");
    let token = body["token"].as_str().unwrap();
    let verify = jsonwebtoken::decode::<Value>(
        token,
        &jsonwebtoken::DecodingKey::from_secret(second.as_bytes()),
        &jsonwebtoken::Validation::new(Algorithm::HS256),
    );
    assert!(verify.is_ok(), "minted with the rotated secret");
}

/// The default app's secret rotates through the configuration: with `previous_token_secret`
/// set, tokens signed with the secret before stay valid beside the new secret's; a server
/// without it refuses them.
#[tokio::test]
async fn the_default_apps_previous_secret_verifies_while_it_is_configured() {
    use herald_proto::token::{mint, ClientClaims};
    const OLD: &str = "the-default-apps-old-secret-0123";
    let claims = ClientClaims {
        sub: "alice".into(),
        channels: vec!["news".into()],
        ..Default::default()
    };
    let old_token = mint(OLD.as_bytes(), &claims);
    let current_token = mint(crate::support::SECRET.as_bytes(), &claims);
    let other_token = mint(b"a-secret-no-server-was-given-0123", &claims);

    let overlap = Server::builder()
        .env("HERALD_PREVIOUS_TOKEN_SECRET", OLD)
        .start()
        .await;
    assert_eq!(ws_status(&overlap, &old_token).await, 101);
    assert_eq!(ws_status(&overlap, &current_token).await, 101);
    assert_eq!(ws_status(&overlap, &other_token).await, 401);
    // Minting uses the current secret only.
    let (status, minted) = call(
        &overlap,
        "POST",
        "/v1/tokens",
        crate::support::API_KEY,
        Some(json!({"sub": "bob", "channels": ["news"]})),
    )
    .await;
    assert_eq!(status, 200, "{minted}");
    let minted = minted["token"].as_str().unwrap();
    let verify = jsonwebtoken::DecodingKey::from_secret(crate::support::SECRET.as_bytes());
    let mut validation = jsonwebtoken::Validation::new(Algorithm::HS256);
    validation.required_spec_claims.clear();
    validation.validate_exp = false;
    jsonwebtoken::decode::<Value>(minted, &verify, &validation)
        .expect("signed with the current secret");

    let after = Server::builder().start().await;
    assert_eq!(ws_status(&after, &old_token).await, 401);
    assert_eq!(ws_status(&after, &current_token).await, 101);
}

#[tokio::test]
async fn a_minted_user_info_is_the_members_data_and_anything_but_a_small_object_is_refused() {
    let s = Server::builder()
        .config("[[namespaces]]\nprefix = \"rooms/\"\npresence = true\n")
        .start()
        .await;
    let (status, body) = s
        .post(
            "/v1/tokens",
            json!({ "sub": "ada", "channels": ["rooms/*"], "user_info": { "name": "Ada", "tags": [1, 2] } }),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let token = body["token"].as_str().unwrap();
    let mut ws = Ws::connect(&s.ws_url(&format!("?token={token}"))).await;
    let reply = ws
        .request(
            "subscribe",
            json!({ "channel": "rooms/1", "presence": true }),
        )
        .await;
    assert!(reply.get("subscribe").is_some(), "{reply}");
    let frame = ws.frame().await;
    assert_eq!(
        frame["presence"]["members"],
        json!([{ "user": "ada", "data": { "name": "Ada", "tags": [1, 2] } }]),
        "{frame}"
    );

    let big = json!({ "name": "x".repeat(1_100) });
    for (user_info, says) in [
        (json!(null), "user_info: null is not allowed"),
        (
            json!([1, 2]),
            "user_info must be a JSON object ({\"name\":\"Alice\"}), not an array",
        ),
        (json!("Ada"), "not a string"),
        (json!(7), "not a number"),
        (
            big,
            "user_info is 1111 bytes of JSON; a token's user_info may be at most 1024 bytes",
        ),
    ] {
        let (status, body) = s
            .post(
                "/v1/tokens",
                json!({ "sub": "ada", "user_info": user_info }),
            )
            .await;
        assert_eq!(status, 400, "{user_info}: {body}");
        assert_eq!(body["error"]["code"], "bad_request", "{body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{message:?} should say {says:?}");
    }
}
