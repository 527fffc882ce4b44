//! `herald push`: sends a targeted push through `POST /v1/push` (to a device, a user's devices,
//! devices matching a tag expression, or every device of the app) and prints the answer.

use std::process::ExitCode;

use serde_json::{json, Map, Value};

use herald_client::api::Publisher;
use herald_client::url::DEFAULT_URL;

pub const EXAMPLES: &str = "\
Examples:
  herald push --device phone-1 '{\"order\":42}'
  herald push --user alice --title 'Your order shipped' --body 'Arriving Tuesday'
  herald push --tags 'sports AND (uk OR ie) AND NOT muted' '{\"score\":\"2-1\"}' --collapse-key score
  herald push --all --string 'maintenance at 22:00' --ttl 1h --id maint-2026-11-22
  herald push --user alice --title 'Sale' --delivery auto --ack-window 3

Exactly one of --device, --user, --tags, --all. DATA must be JSON (--string sends it as a
JSON string); exits with 2 if it is not. --ttl and --ack-window take seconds or a unit.
Prints the server's answer ({\"id\":...,\"targeted\":...}); follow it with GET /v1/push/{id}.";

/// Flags of `herald push`.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("target").required(true).args(["device", "user", "tags", "all"])))]
pub struct PushArgs {
    /// Message data as JSON (with --string: any text)
    pub data: Option<String>,
    /// Send DATA as a JSON string (any text) instead of parsing it as JSON
    #[arg(long, requires = "data")]
    pub string: bool,
    /// Push to one device
    #[arg(long, value_name = "ID")]
    pub device: Option<String>,
    /// Push to every active device of a user
    #[arg(long, value_name = "ID")]
    pub user: Option<String>,
    /// Push to active devices whose tags match the expression
    #[arg(long, value_name = "EXPR")]
    pub tags: Option<String>,
    /// Push to every active device of the app
    #[arg(long)]
    pub all: bool,
    /// Notification title
    #[arg(long)]
    pub title: Option<String>,
    /// Notification body
    #[arg(long)]
    pub body: Option<String>,
    /// How long the push stays deliverable: seconds, or 90s, 15m, 1h, 7d (default: the
    /// server's maximum, 28 days)
    #[arg(long, value_name = "DURATION", value_parser = super::args::whole_seconds)]
    pub ttl: Option<u64>,
    /// A later push with the same key replaces this one if it is still undelivered
    #[arg(long, value_name = "KEY")]
    pub collapse_key: Option<String>,
    /// Idempotency key: the same key twice stores the push once
    #[arg(long, value_name = "KEY")]
    pub id: Option<String>,
    /// live (connections only), provider (APNs/FCM/Web Push at once) or auto (live first, the
    /// provider if not acknowledged in time); default auto with --title/--body, else live
    #[arg(long, value_parser = ["live", "provider", "auto"])]
    pub delivery: Option<String>,
    /// How long an auto push waits for a connected device's ack before its provider push:
    /// seconds (2.5) or 500ms, 3s
    #[arg(long, value_name = "DURATION", value_parser = super::args::seconds)]
    pub ack_window: Option<f64>,
    /// Server URL
    #[arg(long, env = "HERALD_URL", default_value = DEFAULT_URL, value_name = "URL", value_parser = super::args::server_url)]
    pub url: String,
    /// Publisher API key
    #[arg(
        long,
        env = "HERALD_API_KEY",
        hide_env_values = true,
        value_name = "KEY"
    )]
    pub api_key: Option<String>,
}

/// The `POST /v1/push` body the flags describe, or why DATA is not JSON.
fn body(args: &PushArgs) -> Result<Value, String> {
    let target = match (&args.device, &args.user, &args.tags) {
        (Some(d), _, _) => json!({ "device": d }),
        (_, Some(u), _) => json!({ "user": u }),
        (_, _, Some(t)) => json!({ "tags": t }),
        _ => json!({ "app": true }),
    };
    let mut body = Map::new();
    body.insert("target".into(), target);
    if let Some(data) = &args.data {
        body.insert("data".into(), super::args::data(data, args.string)?);
    }
    let mut notification = Map::new();
    if let Some(t) = &args.title {
        notification.insert("title".into(), json!(t));
    }
    if let Some(b) = &args.body {
        notification.insert("body".into(), json!(b));
    }
    if !notification.is_empty() {
        body.insert("notification".into(), Value::Object(notification));
    }
    if let Some(ttl) = args.ttl {
        body.insert("ttl".into(), json!(ttl));
    }
    if let Some(k) = &args.collapse_key {
        body.insert("collapse_key".into(), json!(k));
    }
    if let Some(d) = &args.delivery {
        body.insert("delivery".into(), json!(d));
    }
    if let Some(w) = args.ack_window {
        body.insert("ack_window".into(), json!(w));
    }
    Ok(Value::Object(body))
}

/// Sends the push and prints the answer.
pub async fn run(args: PushArgs) -> anyhow::Result<ExitCode> {
    let body = match body(&args) {
        Ok(body) => body,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    let publisher = Publisher::new(&args.url, args.api_key.as_deref());
    let answer = publisher
        .send(
            reqwest::Method::POST,
            "/v1/push",
            Some(&body),
            args.id.as_deref(),
        )
        .await;
    super::publish::report(&publisher, "/v1/push", answer)
}
