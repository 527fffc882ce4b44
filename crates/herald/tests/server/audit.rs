//! The audit log of admin actions against the real binary (issue 13): every admin action is
//! recorded with who (role, key id, source address, user agent), what (action, app, target,
//! details), when (server time) and how it ended (`ok` or the error code); no secret the test
//! used appears in any entry nor in the raw rows of `audit_log`; a publisher key sees only its
//! own app's entries; pages are cut by the cursor; entries past `audit_retention` go; entries
//! survive a restart; `herald audit` prints them.

use std::process::Command;
use std::time::Duration;

use herald_mock::apns::test_key;
use serde_json::{json, Value};

use crate::support::{call, Server, API_KEY};

const ADMIN: &str = "audit-admin-key-0123456789abcdef";
const AGENT: &str = "audit-test/1.0";

async fn server_with(config: Option<&str>) -> Server {
    let mut builder = Server::builder().arg("--admin-key").arg(ADMIN);
    if let Some(toml) = config {
        builder = builder.config(toml);
    }
    builder.start().await
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// One request with the test's user agent; its status and JSON body.
async fn act(s: &Server, method: &str, path: &str, key: &str, body: Option<Value>) -> (u16, Value) {
    let m = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
    let mut r = s
        .http
        .request(m, s.url(path))
        .bearer_auth(key)
        .header("user-agent", AGENT);
    if let Some(b) = body {
        r = r.json(&b);
    }
    let r = tokio::time::timeout(Duration::from_secs(10), r.send())
        .await
        .expect("answered in time")
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// `POST /admin/session` with `key`: the status.
async fn login(s: &Server, key: &str) -> u16 {
    s.http
        .post(s.url("/admin/session"))
        .header("x-herald-session", "1")
        .header("user-agent", AGENT)
        .json(&json!({ "key": key }))
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// Every entry `key` may see with `query`, newest first, following the cursors.
async fn entries(s: &Server, key: &str, query: &str) -> Vec<Value> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..100 {
        let path = match &cursor {
            Some(c) => format!("/v1/audit?{query}&cursor={c}"),
            None => format!("/v1/audit?{query}"),
        };
        let (status, page) = call(s, "GET", &path, key, None).await;
        assert_eq!(status, 200, "{page}");
        out.extend(page["entries"].as_array().unwrap().iter().cloned());
        match page["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => return out,
        }
    }
    panic!("more than 100 pages");
}

/// Every row of `audit_log` in the server's database, as text.
fn raw_rows(s: &Server) -> String {
    let db = rusqlite::Connection::open(s.data.join("herald.db")).unwrap();
    let mut stmt = db.prepare("SELECT * FROM audit_log").unwrap();
    let columns = stmt.column_count();
    let rows = stmt
        .query_map([], |row| {
            let mut line = Vec::new();
            for i in 0..columns {
                let v: rusqlite::types::Value = row.get(i)?;
                line.push(format!("{v:?}"));
            }
            Ok(line.join("|"))
        })
        .unwrap();
    rows.map(Result::unwrap).collect::<Vec<_>>().join("\n")
}

/// The one entry of `action` (oldest first list `all`), checked for who and result.
fn find<'a>(all: &'a [Value], action: &str, result: &str) -> &'a Value {
    all.iter()
        .find(|e| e["action"] == action && e["result"] == result)
        .unwrap_or_else(|| panic!("no {action} entry with result {result} in {all:#?}"))
}

#[tokio::test]
async fn every_admin_action_is_recorded_with_who_what_when_and_result_and_never_a_secret() {
    // The JWKS URL set below is on loopback, which tenant-given URLs reach only when allowed.
    let s = server_with(Some("outbound_allow = [\"127.0.0.1\"]\n")).await;
    let started = now_ms();
    let wrong_key = "hk_not_a_valid_key_0123456789";
    assert_eq!(login(&s, wrong_key).await, 401);
    assert_eq!(login(&s, ADMIN).await, 200);

    let (status, created) = act(
        &s,
        "POST",
        "/v1/apps",
        ADMIN,
        Some(json!({"id": "shop", "name": "Shop"})),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    let shop_key = created["key"].as_str().unwrap().to_owned();
    let shop_key_id = created["key_id"].as_str().unwrap().to_owned();
    let token_secret = created["token_secret"].as_str().unwrap().to_owned();
    let limits = json!({"limits": {"max_devices": 10}});
    let (status, _) = act(&s, "PATCH", "/v1/apps/shop", ADMIN, Some(limits)).await;
    assert_eq!(status, 200);
    let (status, added) = act(
        &s,
        "POST",
        "/v1/apps/shop/keys",
        ADMIN,
        Some(json!({"label": "backend-2"})),
    )
    .await;
    assert_eq!(status, 201, "{added}");
    let second_key = added["key"].as_str().unwrap().to_owned();
    let second_id = added["key_id"].as_str().unwrap().to_owned();
    let path = format!("/v1/apps/shop/keys/{second_id}");
    assert_eq!(act(&s, "DELETE", &path, ADMIN, None).await.0, 204);
    let revoke = Some(json!({"sub": "alice"}));
    let (status, _) = act(&s, "POST", "/v1/apps/shop/revoke", &shop_key, revoke).await;
    assert_eq!(status, 200);

    let rotate = Some(json!({"overlap": 60}));
    let (status, rotated) = act(&s, "POST", "/v1/apps/shop/token-secret", ADMIN, rotate).await;
    assert_eq!(status, 200, "{rotated}");
    let rotated_secret = rotated["token_secret"].as_str().unwrap().to_owned();
    let jwks = Some(json!({"jwks_url": "https://127.0.0.1:9/jwks.json?sig=jwks-secret-123"}));
    let (status, keys) = act(&s, "PUT", "/v1/apps/shop/token-keys", &shop_key, jwks).await;
    assert_eq!(status, 200, "{keys}");

    let (p8, _) = test_key();
    let apns =
        json!({"topic":"com.example.app","key":p8,"key_id":"KEYID00001","team_id":"TEAMID0001"});
    let providers = "/v1/apps/shop/providers/apns";
    assert_eq!(
        act(&s, "PUT", providers, &shop_key, Some(apns)).await.0,
        201
    );
    assert_eq!(act(&s, "DELETE", providers, ADMIN, None).await.0, 204);

    let device = json!({"platform": "herald", "id": "phone-1"});
    let (status, _) = act(&s, "POST", "/v1/devices", &shop_key, Some(device)).await;
    assert!(status == 200 || status == 201, "{status}");
    let phone = "/v1/devices/phone-1";
    assert_eq!(
        act(&s, "POST", &format!("{phone}/deactivate"), &shop_key, None)
            .await
            .0,
        200
    );
    assert_eq!(
        act(&s, "POST", &format!("{phone}/activate"), &shop_key, None)
            .await
            .0,
        200
    );
    assert_eq!(act(&s, "DELETE", phone, &shop_key, None).await.0, 204);
    assert_eq!(
        act(&s, "POST", "/v1/jobs/99/replay", &shop_key, None)
            .await
            .0,
        404
    );
    assert_eq!(
        act(&s, "DELETE", "/v1/jobs/99", &shop_key, None).await.0,
        404
    );
    // A credential not valid for the route is not an entry.
    let (status, _) = act(&s, "DELETE", "/v1/apps/shop", &shop_key, None).await;
    assert_eq!(status, 401);
    assert_eq!(act(&s, "DELETE", "/v1/apps/nope", ADMIN, None).await.0, 404);
    assert_eq!(act(&s, "DELETE", "/v1/apps/shop", ADMIN, None).await.0, 204);
    let ended = now_ms();

    let all = entries(&s, ADMIN, "limit=1000").await;
    let times: Vec<i64> = all.iter().map(|e| e["time"].as_i64().unwrap()).collect();
    assert!(
        times.windows(2).all(|w| w[0] >= w[1]),
        "newest first: {times:?}"
    );
    assert!(
        times.iter().all(|t| (started..=ended).contains(t)),
        "{times:?}"
    );
    for e in &all {
        assert_eq!(e["user_agent"], AGENT, "{e}");
        assert!(
            e["source"].as_str().unwrap().starts_with("127.0.0.1:"),
            "{e}"
        );
    }
    let actions: Vec<&str> = all
        .iter()
        .rev()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(
        actions,
        [
            "session.login",
            "session.login",
            "app.create",
            "app.update",
            "key.create",
            "key.revoke",
            "app.revoke",
            "token_secret.rotate",
            "token_keys.set",
            "provider.set",
            "provider.delete",
            "device.deactivate",
            "device.activate",
            "device.delete",
            "job.replay",
            "job.drop",
            "app.delete",
            "app.delete",
        ]
    );

    let failed_login = find(&all, "session.login", "unauthorized");
    assert_eq!(
        failed_login["actor"],
        json!({"role": "anonymous", "via": "login"})
    );
    let admin_login = find(&all, "session.login", "ok");
    assert_eq!(
        admin_login["actor"],
        json!({"role": "admin", "via": "login"})
    );
    let create = find(&all, "app.create", "ok");
    assert_eq!(create["actor"], json!({"role": "admin", "via": "bearer"}));
    assert_eq!(create["app"], "shop");
    assert_eq!(create["details"]["key_id"], shop_key_id.as_str());
    assert_eq!(create["details"]["name"], "Shop");
    let update = find(&all, "app.update", "ok");
    assert_eq!(update["details"], json!({"limits": {"max_devices": 10}}));
    let key = find(&all, "key.create", "ok");
    assert_eq!(
        (&key["target"], &key["details"]["label"]),
        (&json!(second_id), &json!("backend-2"))
    );
    assert_eq!(find(&all, "key.revoke", "ok")["target"], second_id.as_str());
    let revoked = find(&all, "app.revoke", "ok");
    let by_shop_key = json!({"role": "publisher", "key_id": shop_key_id, "via": "bearer"});
    assert_eq!(revoked["actor"], by_shop_key);
    assert_eq!(revoked["details"], json!({"sub": "alice", "closed": 0}));
    let rotation = find(&all, "token_secret.rotate", "ok");
    assert_eq!(rotation["details"], json!({"overlap": 60}));
    let token_keys = find(&all, "token_keys.set", "ok");
    assert_eq!(token_keys["actor"], by_shop_key);
    assert_eq!(
        token_keys["details"],
        json!({"public_keys": 0, "jwks_url": true, "hs256": null})
    );
    let set = find(&all, "provider.set", "ok");
    assert_eq!(
        (&set["actor"], &set["target"]),
        (&by_shop_key, &json!("apns"))
    );
    assert_eq!(find(&all, "device.delete", "ok")["target"], "phone-1");
    assert_eq!(find(&all, "job.replay", "not_found")["target"], "99");
    assert_eq!(find(&all, "app.delete", "not_found")["app"], "nope");
    find(&all, "app.delete", "ok");

    // No secret the test used, in the answers or in the stored rows.
    let answered = serde_json::to_string(&all).unwrap();
    let rows = raw_rows(&s);
    assert!(rows.contains("app.create"), "{rows}");
    let p8_body: String = p8.lines().filter(|l| !l.starts_with("-----")).collect();
    for secret in [
        ADMIN,
        API_KEY,
        wrong_key,
        &shop_key,
        &second_key,
        &token_secret,
        &rotated_secret,
        "jwks-secret-123",
        &p8_body[..40],
    ] {
        assert!(!answered.contains(secret), "{secret} in the answer");
        assert!(!rows.contains(secret), "{secret} in audit_log's rows");
    }
}

#[tokio::test]
async fn a_publisher_key_sees_its_own_app_only_and_pages_follow_the_cursor() {
    let s = server_with(None).await;
    let mut keys = Vec::new();
    for app in ["a", "b"] {
        let (status, created) = act(&s, "POST", "/v1/apps", ADMIN, Some(json!({"id": app}))).await;
        assert_eq!(status, 201, "{created}");
        keys.push(created["key"].as_str().unwrap().to_owned());
    }
    for round in 0..3 {
        for (app, key) in ["a", "b"].iter().zip(&keys) {
            let body = Some(json!({"sub": format!("{app}-{round}")}));
            let path = format!("/v1/apps/{app}/revoke");
            assert_eq!(act(&s, "POST", &path, key, body).await.0, 200);
        }
    }
    let all = entries(&s, ADMIN, "limit=1000").await;
    assert_eq!(all.len(), 8, "{all:#?}");
    // Pages of 3: the same entries, none twice, ids decreasing.
    let paged = entries(&s, ADMIN, "limit=3").await;
    assert_eq!(paged, all);
    let ids: Vec<u64> = paged.iter().map(|e| e["id"].as_u64().unwrap()).collect();
    assert!(ids.windows(2).all(|w| w[0] > w[1]), "{ids:?}");

    let own = entries(&s, &keys[0], "limit=2").await;
    assert_eq!(own.len(), 4, "app.create and three revokes: {own:#?}");
    assert!(own.iter().all(|e| e["app"] == "a"), "{own:#?}");
    let (status, body) = call(&s, "GET", "/v1/audit?app=b", &keys[0], None).await;
    assert_eq!((status, &body["error"]["code"]), (404, &json!("not_found")));
    let revokes = entries(&s, ADMIN, "app=b&action=app.revoke&limit=10").await;
    let subs: Vec<&str> = revokes
        .iter()
        .map(|e| e["details"]["sub"].as_str().unwrap())
        .collect();
    assert_eq!(subs, ["b-2", "b-1", "b-0"]);
    let since = all[1]["time"].as_i64().unwrap();
    let until = all[0]["time"].as_i64().unwrap() + 1;
    let window = entries(&s, ADMIN, &format!("since={since}&until={until}&limit=10")).await;
    assert!(window.len() >= 2 && window.contains(&all[0]) && window.contains(&all[1]));
    let (status, _) = call(&s, "GET", "/v1/audit?limit=0", ADMIN, None).await;
    assert_eq!(status, 400);
    let (status, _) = call(&s, "GET", "/v1/audit?cursor=x", ADMIN, None).await;
    assert_eq!(status, 400);
    let (status, _) = call(&s, "GET", "/v1/audit", "hk_wrong_key_0123456789", None).await;
    assert_eq!(status, 401);
}

#[tokio::test]
async fn entries_survive_a_restart_and_herald_audit_prints_them() {
    let mut s = server_with(None).await;
    let (status, _) = act(&s, "POST", "/v1/apps", ADMIN, Some(json!({"id": "shop"}))).await;
    assert_eq!(status, 201);
    s.restart().await;
    let all = entries(&s, ADMIN, "limit=10").await;
    assert_eq!(all.len(), 1, "{all:#?}");
    assert_eq!(
        (&all[0]["action"], &all[0]["app"]),
        (&json!("app.create"), &json!("shop"))
    );

    let cli = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_herald"))
            .arg("audit")
            .args(args)
            .env("HERALD_URL", format!("http://{}", s.addr))
            .env("HERALD_API_KEY", ADMIN)
            .env_remove("HERALD_CONFIG")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let table = cli(&["--app", "shop", "--since", "1h"]);
    let line = table.lines().nth(1).unwrap_or_default();
    assert!(
        line.contains("app.create") && line.contains("shop") && line.contains("admin (bearer)"),
        "{table}"
    );
    let answer: Value = serde_json::from_str(&cli(&["--json"])).unwrap();
    assert_eq!(answer["entries"], json!(all));
}

#[tokio::test]
async fn entries_past_the_retention_are_deleted() {
    let s = server_with(Some("audit_retention = \"1s\"\n")).await;
    let (status, _) = act(&s, "POST", "/v1/apps", ADMIN, Some(json!({"id": "old"}))).await;
    assert_eq!(status, 201);
    let first = entries(&s, ADMIN, "limit=10").await;
    assert_eq!(first.len(), 1);
    // Time passing is what is tested: the entry is older than the retention once this is over.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let (status, _) = act(&s, "POST", "/v1/apps", ADMIN, Some(json!({"id": "new"}))).await;
    assert_eq!(status, 201);
    let left = entries(&s, ADMIN, "limit=10").await;
    assert_eq!(left.len(), 1, "{left:#?}");
    assert_eq!(left[0]["app"], "new");
    let rows = raw_rows(&s);
    assert!(
        !rows.contains("\"old\""),
        "the old entry's row is gone: {rows}"
    );
}
