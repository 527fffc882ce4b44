//! `herald hooks`, run as a real process against a real server: create (the secret printed
//! once, with the line saying so), list, stats, update, test (not delivered: a failing exit
//! code), dead letters, rotate, delete; and a refusal printed as the server words it (an
//! unknown event type, named), with a failing exit code and nothing stored.

use std::process::{Command, Output};

use serde_json::Value;

use crate::support::{Server, API_KEY};

/// `herald ARGS` against `server` with the default app's publisher key: exit code, stdout,
/// stderr.
fn herald(server: &Server, args: &[&str]) -> (i32, String, String) {
    let Output {
        status,
        stdout,
        stderr,
    } = Command::new(env!("CARGO_BIN_EXE_herald"))
        .args(args)
        .env("HERALD_URL", format!("http://{}", server.addr))
        .env("HERALD_API_KEY", API_KEY)
        .env_remove("HERALD_CONFIG")
        .output()
        .expect("run herald");
    (
        status.code().expect("exit code"),
        String::from_utf8(stdout).unwrap(),
        String::from_utf8(stderr).unwrap(),
    )
}

/// Runs `herald ARGS`, which must succeed; its stdout.
fn ok(server: &Server, args: &[&str]) -> String {
    let (code, out, err) = herald(server, args);
    assert_eq!(code, 0, "herald {args:?}: {out}{err}");
    out
}

/// The `secret: ...` line's secret.
fn secret_in(out: &str) -> String {
    out.lines()
        .find_map(|l| l.strip_prefix("secret: "))
        .unwrap_or_else(|| panic!("no secret line in {out}"))
        .to_owned()
}

#[tokio::test]
async fn herald_hooks_creates_lists_rotates_and_deletes_an_endpoint() {
    let s = Server::builder()
        .arg("--outbound-allow")
        .arg("127.0.0.1")
        .start()
        .await;
    let out = ok(
        &s,
        &[
            "hooks",
            "create",
            "http://127.0.0.1:9/hooks",
            "--events",
            "user.online,user.offline",
            "--channel",
            "rooms/*",
            "--description",
            "presence",
            "--offline-delay",
            "5s",
        ],
    );
    let secret = secret_in(&out);
    assert!(secret.starts_with("whsec_"), "{out}");
    assert!(out.contains("shown only this once"), "{out}");
    let id: i64 = out
        .lines()
        .find_map(|l| l.strip_prefix("created webhook endpoint "))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no endpoint id in {out}"));

    let list = ok(&s, &["hooks", "list"]);
    let row = list
        .lines()
        .find(|l| l.split_whitespace().next() == Some(&id.to_string()))
        .unwrap_or_else(|| panic!("endpoint {id} not listed: {list}"));
    assert!(row.contains("user.online,user.offline"), "{row}");
    assert!(row.contains("http://127.0.0.1:9/hooks"), "{row}");
    assert!(!list.contains(&secret), "{list}");

    let shown: Value = serde_json::from_str(&ok(&s, &["hooks", "show", &id.to_string()])).unwrap();
    assert_eq!(shown["offline_delay_ms"], 5000);
    assert_eq!(shown["channels"], serde_json::json!(["rooms/*"]));

    let stats = ok(&s, &["hooks", "stats"]);
    let header = stats.lines().next().unwrap();
    for column in [
        "id",
        "state",
        "queued",
        "dead",
        "delivered",
        "failures",
        "last error",
    ] {
        assert!(header.contains(column), "{stats}");
    }
    let cells: Vec<String> = stats
        .lines()
        .nth(1)
        .unwrap()
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    assert_eq!(
        cells[..6],
        [
            id.to_string(),
            "ok".into(),
            "0".into(),
            "0".into(),
            "0".into(),
            "0".into()
        ],
        "{stats}"
    );

    let updated: Value =
        serde_json::from_str(&ok(&s, &["hooks", "update", &id.to_string(), "--disable"])).unwrap();
    assert_eq!(updated["state"], "disabled");

    // Nothing listens on port 9: the test event is not delivered, and the exit code says so.
    let (code, out, err) = herald(&s, &["hooks", "test", &id.to_string()]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        out.starts_with("not delivered: ") && out.contains("no HTTP answer"),
        "{out}"
    );
    let dead: Value = serde_json::from_str(&ok(&s, &["hooks", "dead", &id.to_string()])).unwrap();
    assert_eq!(dead, serde_json::json!({"dead": [], "next": null}));

    let out = ok(&s, &["hooks", "rotate", &id.to_string(), "--overlap", "1h"]);
    let rotated = secret_in(&out);
    assert!(rotated.starts_with("whsec_") && rotated != secret, "{out}");
    assert!(out.contains("shown only this once"), "{out}");
    assert!(out.contains("signs too until"), "{out}");

    let out = ok(&s, &["hooks", "delete", &id.to_string()]);
    assert!(out.contains("deleted"), "{out}");
    let list = ok(&s, &["hooks", "list"]);
    assert!(list.contains("(no webhook endpoints)"), "{list}");
    let (code, _, err) = herald(&s, &["hooks", "show", &id.to_string()]);
    assert_eq!(code, 1);
    assert!(
        err.contains("not_found") && err.contains("HTTP 404"),
        "{err}"
    );
}

#[tokio::test]
async fn herald_hooks_prints_the_servers_refusal_naming_the_unknown_event_type() {
    let s = Server::builder()
        .arg("--outbound-allow")
        .arg("127.0.0.1")
        .start()
        .await;
    let (code, out, err) = herald(
        &s,
        &[
            "hooks",
            "create",
            "http://127.0.0.1:9/hooks",
            "--events",
            "user.online,user.vanished",
        ],
    );
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.starts_with("error: "), "{err}");
    assert!(err.contains("\"user.vanished\""), "{err}");
    assert!(err.contains("bad_request, HTTP 400"), "{err}");
    assert!(!out.contains("secret"), "{out}");
    let list = ok(&s, &["hooks", "list"]);
    assert!(
        list.contains("(no webhook endpoints)"),
        "nothing stored: {list}"
    );
}

#[tokio::test]
async fn herald_hooks_creates_an_endpoint_in_pushers_format() {
    let s = Server::builder()
        .arg("--outbound-allow")
        .arg("127.0.0.1")
        .start()
        .await;
    let out = ok(
        &s,
        &[
            "hooks",
            "create",
            "http://127.0.0.1:9/pusher",
            "--format",
            "pusher",
            "--events",
            "*,pusher.client_event",
        ],
    );
    assert!(out.contains("Pusher secret"), "{out}");
    assert!(!out.contains("whsec_"), "{out}");
    let shown: Value = serde_json::from_str(&ok(&s, &["hooks", "list", "--json"])).unwrap();
    let hook = &shown["hooks"][0];
    assert_eq!(hook["format"], "pusher", "{shown}");
    assert_eq!(
        hook["events"],
        serde_json::json!([
            "channel.occupied",
            "channel.vacated",
            "presence.member_added",
            "presence.member_removed",
            "pusher.client_event"
        ]),
        "{shown}"
    );
    // Herald's own types have no Pusher form: refused, saying so.
    let (code, out, err) = herald(
        &s,
        &[
            "hooks",
            "create",
            "http://127.0.0.1:9/pusher",
            "--format",
            "pusher",
            "--events",
            "user.online",
        ],
    );
    assert_ne!(code, 0, "{out}");
    assert!(err.contains("no Pusher webhook"), "{out}{err}");
}
