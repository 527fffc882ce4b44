//! `herald audit`: the audit log of admin actions through the API (`GET /v1/audit`), newest
//! first, as a table or (`--json`) the API's answer. The admin key sees every app's entries, a
//! publisher key its own app's.

use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::Args;
use reqwest::Method;
use serde_json::Value;

use herald_client::api::Publisher;
use herald_client::url::DEFAULT_URL;

pub const EXAMPLES: &str = "\
Examples:
  herald audit
  herald audit --app shop --since 24h
  herald audit --action app.delete --json
  herald audit --since 2026-01-01T00:00:00Z --until 2026-02-01T00:00:00Z --limit 1000

The key is the admin key (every app's entries) or an app's publisher key (its own) in
HERALD_API_KEY. A page ends with the --cursor that gives the next (older) one.";

/// `herald audit ...`.
#[derive(Debug, Args)]
pub struct AuditArgs {
    /// Only entries about this app
    #[arg(long, value_name = "APP")]
    app: Option<String>,
    /// Only this action (e.g. app.delete, key.create, session.login)
    #[arg(long, value_name = "ACTION")]
    action: Option<String>,
    /// Only entries since this time: RFC 3339 (2026-01-31T12:00:00Z) or how long ago (24h, 7d)
    #[arg(long, value_name = "TIME", value_parser = time_ms)]
    since: Option<i64>,
    /// Only entries before this time: RFC 3339 or how long ago
    #[arg(long, value_name = "TIME", value_parser = time_ms)]
    until: Option<i64>,
    /// At most this many entries (1 to 1000)
    #[arg(long, default_value_t = 50)]
    limit: usize,
    /// Continue after the page that printed this cursor
    #[arg(long, value_name = "CURSOR")]
    cursor: Option<String>,
    /// Print the JSON answer instead of a table
    #[arg(long)]
    json: bool,
    /// Server URL
    #[arg(long, env = "HERALD_URL", default_value = DEFAULT_URL, value_name = "URL", value_parser = super::args::server_url)]
    url: String,
    /// The admin key, or a publisher key of an app
    #[arg(
        long,
        env = "HERALD_API_KEY",
        hide_env_values = true,
        value_name = "KEY"
    )]
    api_key: Option<String>,
}

/// A time as milliseconds since the Unix epoch: RFC 3339, or a duration before now.
fn time_ms(text: &str) -> Result<i64, String> {
    let text = text.trim();
    let at = match humantime::parse_rfc3339_weak(text) {
        Ok(at) => at,
        Err(_) => {
            let ago = humantime::parse_duration(text).map_err(|_| {
                format!("{text:?} is not a time: give RFC 3339 (2026-01-31T12:00:00Z) or how long ago (24h, 7d)")
            })?;
            SystemTime::now()
                .checked_sub(ago)
                .ok_or_else(|| format!("{text:?} ago is before 1970"))?
        }
    };
    let ms = at
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis();
    Ok(i64::try_from(ms).unwrap_or(i64::MAX))
}

/// A time in ms as RFC 3339 (UTC, milliseconds).
fn rfc3339(ms: i64) -> String {
    let at = UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap_or(0));
    humantime::format_rfc3339_millis(at).to_string()
}

/// The query string of the request.
fn query(args: &AuditArgs) -> String {
    let mut url = reqwest::Url::parse("http://herald/v1/audit").expect("a valid URL");
    let mut q = url.query_pairs_mut();
    q.append_pair("limit", &args.limit.to_string());
    for (name, value) in [
        ("app", args.app.clone()),
        ("action", args.action.clone()),
        ("since", args.since.map(|t| t.to_string())),
        ("until", args.until.map(|t| t.to_string())),
        ("cursor", args.cursor.clone()),
    ] {
        if let Some(value) = value {
            q.append_pair(name, &value);
        }
    }
    drop(q);
    url.query().unwrap_or_default().to_owned()
}

/// The answer's entries as a table, one line each.
pub fn table(answer: &Value) -> String {
    let mut out = format!(
        "{:<24} {:<17} {:<12} {:<20} {:<28} {:<21} {}\n",
        "time", "action", "app", "target", "actor", "source", "result"
    );
    let entries = answer["entries"].as_array().cloned().unwrap_or_default();
    if entries.is_empty() {
        out.push_str("(no entries)\n");
    }
    let text = |v: &Value| v.as_str().unwrap_or("-").to_owned();
    for e in &entries {
        let actor = &e["actor"];
        let who = match actor["key_id"].as_str() {
            Some(id) => format!("{} {id} ({})", text(&actor["role"]), text(&actor["via"])),
            None => format!("{} ({})", text(&actor["role"]), text(&actor["via"])),
        };
        out.push_str(&format!(
            "{:<24} {:<17} {:<12} {:<20} {:<28} {:<21} {}\n",
            rfc3339(e["time"].as_i64().unwrap_or(0)),
            text(&e["action"]),
            text(&e["app"]),
            text(&e["target"]),
            who,
            text(&e["source"]),
            text(&e["result"]),
        ));
        if e["details"].as_object().is_some_and(|d| !d.is_empty()) {
            out.push_str(&format!("  {}\n", e["details"]));
        }
    }
    out
}

/// Runs `herald audit`.
pub async fn run(args: AuditArgs) -> anyhow::Result<ExitCode> {
    let path = format!("/v1/audit?{}", query(&args));
    let publisher = Publisher::new(&args.url, args.api_key.as_deref());
    let answer = publisher.send(Method::GET, &path, None, None).await;
    let Ok(ok) = &answer else {
        return super::publish::report(&publisher, &path, answer);
    };
    if args.json {
        return super::publish::report(&publisher, &path, answer);
    }
    let body: Value = serde_json::from_str(&ok.body).unwrap_or(Value::Null);
    print!("{}", table(&body));
    if let Some(next) = body["next_cursor"].as_str() {
        eprintln!("(more: --cursor {next})");
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_rfc3339_or_ago() {
        assert_eq!(time_ms("1970-01-01T00:00:01Z"), Ok(1000));
        let hour_ago = time_ms("1h").unwrap();
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64;
        assert!((now - 3_600_000 - hour_ago).abs() < 60_000);
        assert!(time_ms("yesterday").is_err());
        assert_eq!(rfc3339(1000), "1970-01-01T00:00:01.000Z");
    }
}
