//! `herald hooks`: an app's webhook endpoints through the API (`/v1/apps/{id}/hooks/...`):
//! register (`create`, which prints the signing secret, shown only then), list, show, change,
//! delete, rotate the secret (`rotate`, with an overlap), send a signed test event (`test`),
//! the delivery figures as a table (`stats`), the dead letters (`dead`, `replay`, `drop`), and
//! the events one node queues, live (`tail`, in [`tail`]).
//! The server checks everything sent; its refusals are printed as it words them.

use std::process::ExitCode;

use clap::{Args, Subcommand};
use reqwest::Method;
use serde_json::{json, Map, Value};

use herald_client::api::Publisher;
use herald_client::url::{encode_query, DEFAULT_URL};

mod tail;

pub const EXAMPLES: &str = "\
Examples:
  herald hooks create https://backend.example.com/herald/hooks --events user.online,user.offline
  herald hooks create https://backend.example.com/hooks --events '*' --channel 'rooms/*' \\
      --description 'room presence' --offline-delay 5s
  herald hooks create https://backend.example.com/pusher/webhooks --format pusher \\
      --events channel.occupied,channel.vacated,presence.member_added,presence.member_removed
  herald hooks list
  herald hooks stats
  herald hooks update 3 --disable
  herald hooks rotate 3 --overlap 24h
  herald hooks test 3
  herald hooks dead 3
  herald hooks replay 3 88
  herald hooks delete 3
  herald hooks tail --app shop

--app names the app (default: \"default\"); the key is a publisher key of that app or the
admin key (HERALD_API_KEY). Event types: client.connected, client.disconnected,
client.subscribed, client.unsubscribed, user.online, user.offline, channel.occupied,
channel.vacated, device.registered, device.deactivated, delivery.acked,
delivery.provider_accepted, delivery.failed, delivery.dead_lettered, and the opt-in
subscription_count, pusher.client_event and pusher.cache_miss (not in *), or * for all the
others (docs/hooks.md). An endpoint created with --format pusher gets Pusher's webhooks, signed
with the app's Pusher secret: channel.occupied, channel.vacated, presence.member_added,
presence.member_removed, pusher.client_event, pusher.cache_miss and subscription_count only
(docs/pusher.md).";

/// Where and as whom.
#[derive(Debug, Args)]
pub struct Connection {
    /// The app
    #[arg(long, default_value = "default", value_name = "ID")]
    pub app: String,
    /// Server URL
    #[arg(long, env = "HERALD_URL", default_value = DEFAULT_URL, value_name = "URL", value_parser = super::args::server_url)]
    pub url: String,
    /// A publisher key of the app, or the admin key
    #[arg(
        long,
        env = "HERALD_API_KEY",
        hide_env_values = true,
        value_name = "KEY"
    )]
    pub api_key: Option<String>,
}

/// What `create` and `update` set.
#[derive(Debug, Args)]
pub struct Fields {
    /// Event types, comma-separated (or * for all)
    #[arg(long, value_name = "TYPES", value_delimiter = ',')]
    events: Option<Vec<String>>,
    /// A channel pattern (repeat for several); events about other channels are not sent
    #[arg(long = "channel", value_name = "PATTERN")]
    channels: Vec<String>,
    /// What the endpoint is for (at most 200 characters)
    #[arg(long, value_name = "TEXT")]
    description: Option<String>,
    /// How long a user.offline waits for the user to come back (3s, 500ms; a number is seconds)
    #[arg(long, value_name = "DELAY", value_parser = super::args::seconds)]
    offline_delay: Option<f64>,
}

impl Fields {
    /// The body fields these flags set.
    fn body(&self) -> Map<String, Value> {
        let mut body = Map::new();
        if let Some(events) = &self.events {
            body.insert("events".into(), json!(events));
        }
        if !self.channels.is_empty() {
            body.insert("channels".into(), json!(self.channels));
        }
        if let Some(description) = &self.description {
            body.insert("description".into(), json!(description));
        }
        if let Some(secs) = self.offline_delay {
            body.insert(
                "offline_delay_ms".into(),
                json!((secs * 1000.0).round() as u64),
            );
        }
        body
    }
}

/// `herald hooks ...`.
#[derive(Debug, Subcommand)]
pub enum HooksCommand {
    /// List the app's webhook endpoints.
    #[command(after_help = EXAMPLES)]
    List {
        /// Print the JSON answer instead of a table
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        connection: Connection,
    },
    /// Register an endpoint; prints its signing secret (shown only this once).
    #[command(after_help = EXAMPLES)]
    Create {
        /// Where events are POSTed (http or https)
        #[arg(value_name = "URL")]
        endpoint: String,
        #[command(flatten)]
        fields: Fields,
        /// Register it disabled (nothing is queued for it until enabled)
        #[arg(long)]
        disabled: bool,
        /// How its requests are written and signed: standard (Standard Webhooks, the
        /// endpoint's secret) or pusher (Pusher's webhooks, the app's Pusher secret)
        #[arg(long, value_name = "FORMAT", value_parser = ["standard", "pusher"])]
        format: Option<String>,
        #[command(flatten)]
        connection: Connection,
    },
    /// Show one endpoint (JSON).
    #[command(after_help = EXAMPLES)]
    Show {
        /// Endpoint id
        id: i64,
        #[command(flatten)]
        connection: Connection,
    },
    /// Change an endpoint: the flags given replace what it has.
    #[command(after_help = EXAMPLES)]
    Update {
        /// Endpoint id
        id: i64,
        /// A new URL
        #[arg(long, value_name = "URL")]
        endpoint: Option<String>,
        #[command(flatten)]
        fields: Fields,
        /// Send to every channel again (drop the channel patterns)
        #[arg(long, conflicts_with = "channels")]
        all_channels: bool,
        /// Enable it
        #[arg(long, conflicts_with = "disable")]
        enable: bool,
        /// Disable it (nothing is queued for it; what was queued waits)
        #[arg(long)]
        disable: bool,
        #[command(flatten)]
        connection: Connection,
    },
    /// Delete an endpoint, its queue and its dead letters.
    #[command(after_help = EXAMPLES)]
    Delete {
        /// Endpoint id
        id: i64,
        #[command(flatten)]
        connection: Connection,
    },
    /// A new signing secret (printed, shown only this once); the old one signs too meanwhile.
    #[command(after_help = EXAMPLES)]
    Rotate {
        /// Endpoint id
        id: i64,
        /// How long requests are signed with the old secret too (0 to 7d)
        #[arg(long, value_name = "DURATION", default_value = "24h", value_parser = super::args::whole_seconds)]
        overlap: u64,
        #[command(flatten)]
        connection: Connection,
    },
    /// Send a signed hook.test event to an endpoint now and say how it answered.
    #[command(after_help = EXAMPLES)]
    Test {
        /// Endpoint id
        id: i64,
        #[command(flatten)]
        connection: Connection,
    },
    /// Delivery figures of the app's endpoints (or one) as a table.
    #[command(after_help = EXAMPLES)]
    Stats {
        /// Only this endpoint
        id: Option<i64>,
        #[command(flatten)]
        connection: Connection,
    },
    /// List an endpoint's dead letters (events that failed past the retry horizon).
    #[command(after_help = EXAMPLES)]
    Dead {
        /// Endpoint id
        id: i64,
        /// After this dead letter id (paging)
        #[arg(long)]
        after: Option<i64>,
        /// At most this many
        #[arg(long, default_value_t = 100)]
        limit: usize,
        #[command(flatten)]
        connection: Connection,
    },
    /// Queue a dead letter again, due now.
    #[command(after_help = EXAMPLES)]
    Replay {
        /// Endpoint id
        id: i64,
        /// Dead letter id
        row: i64,
        #[command(flatten)]
        connection: Connection,
    },
    /// Delete a dead letter.
    #[command(after_help = EXAMPLES)]
    Drop {
        /// Endpoint id
        id: i64,
        /// Dead letter id
        row: i64,
        #[command(flatten)]
        connection: Connection,
    },
    /// Show the events the server's node queues for the app's endpoints, live, one line each
    /// (time, type, user/channel, id) until Ctrl-C. One node's only: in a cluster, tail each.
    #[command(after_help = EXAMPLES)]
    Tail {
        /// Print each event's JSON (one line each) instead
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        connection: Connection,
    },
}

/// The line printed under a secret.
const SHOWN_ONCE: &str =
    "(the secret is shown only this once: keep it where your receiver verifies signatures)";

/// A request's answer: its JSON, or the exit code once the server's refusal is printed.
async fn call(
    publisher: &Publisher,
    method: Method,
    path: &str,
    body: Option<&Value>,
) -> anyhow::Result<Result<Value, ExitCode>> {
    match publisher.send(method, path, body, None).await {
        Ok(answer) => Ok(Ok(serde_json::from_str(&answer.body).unwrap_or(Value::Null))),
        Err(e) => super::publish::report(publisher, path, Err(e)).map(Err),
    }
}

fn text(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The endpoints as `list` shows them: id, state, events, URL.
pub fn list_table(hooks: &[Value]) -> String {
    let mut out = format!("{:>5} {:<9} {:<40} {}\n", "id", "state", "events", "url");
    if hooks.is_empty() {
        out.push_str("(no webhook endpoints)\n");
    }
    for h in hooks {
        let events: Vec<String> = h["events"]
            .as_array()
            .map(|a| a.iter().map(text).collect())
            .unwrap_or_default();
        out.push_str(&format!(
            "{:>5} {:<9} {:<40} {}\n",
            text(&h["id"]),
            text(&h["state"]),
            events.join(","),
            text(&h["url"])
        ));
    }
    out
}

/// The endpoints as `stats` shows them: id, state, queued, dead, delivered, failures in a row,
/// the last error.
pub fn stats_table(hooks: &[Value]) -> String {
    let mut out = format!(
        "{:>5} {:<9} {:>8} {:>6} {:>10} {:>8}  {}\n",
        "id", "state", "queued", "dead", "delivered", "failures", "last error"
    );
    if hooks.is_empty() {
        out.push_str("(no webhook endpoints)\n");
    }
    for h in hooks {
        out.push_str(&format!(
            "{:>5} {:<9} {:>8} {:>6} {:>10} {:>8}  {}\n",
            text(&h["id"]),
            text(&h["state"]),
            text(&h["queued"]),
            text(&h["dead"]),
            text(&h["delivered"]),
            text(&h["failures"]),
            text(&h["last_error"]),
        ));
    }
    out
}

/// Runs a `herald hooks` command.
pub async fn run(command: HooksCommand) -> anyhow::Result<ExitCode> {
    let connection = match &command {
        HooksCommand::List { connection, .. }
        | HooksCommand::Create { connection, .. }
        | HooksCommand::Show { connection, .. }
        | HooksCommand::Update { connection, .. }
        | HooksCommand::Delete { connection, .. }
        | HooksCommand::Rotate { connection, .. }
        | HooksCommand::Test { connection, .. }
        | HooksCommand::Stats { connection, .. }
        | HooksCommand::Dead { connection, .. }
        | HooksCommand::Replay { connection, .. }
        | HooksCommand::Drop { connection, .. }
        | HooksCommand::Tail { connection, .. } => connection,
    };
    let publisher = Publisher::new(&connection.url, connection.api_key.as_deref());
    let base = format!("/v1/apps/{}/hooks", encode_query(&connection.app));
    let hook = |id: i64| format!("{base}/{id}");
    let answer = match &command {
        HooksCommand::List { json, .. } => {
            let answer = match call(&publisher, Method::GET, &base, None).await? {
                Ok(answer) => answer,
                Err(code) => return Ok(code),
            };
            if *json {
                println!("{answer}");
            } else {
                let hooks = answer["hooks"].as_array().cloned().unwrap_or_default();
                print!("{}", list_table(&hooks));
            }
            return Ok(ExitCode::SUCCESS);
        }
        HooksCommand::Create {
            endpoint,
            fields,
            disabled,
            format,
            ..
        } => {
            let mut body = fields.body();
            body.insert("url".into(), json!(endpoint));
            if *disabled {
                body.insert("enabled".into(), json!(false));
            }
            if let Some(format) = format {
                body.insert("format".into(), json!(format));
            }
            let body = Value::Object(body);
            let answer = match call(&publisher, Method::POST, &base, Some(&body)).await? {
                Ok(answer) => answer,
                Err(code) => return Ok(code),
            };
            let h = &answer["hook"];
            println!(
                "created webhook endpoint {} for {}",
                text(&h["id"]),
                text(&h["url"])
            );
            if h["format"] == "pusher" {
                println!("signed with the app's Pusher secret (X-Pusher-Signature)");
            } else {
                println!("secret: {}", text(&answer["secret"]));
                println!("{SHOWN_ONCE}");
            }
            return Ok(ExitCode::SUCCESS);
        }
        HooksCommand::Show { id, .. } => call(&publisher, Method::GET, &hook(*id), None).await?,
        HooksCommand::Update {
            id,
            endpoint,
            fields,
            all_channels,
            enable,
            disable,
            ..
        } => {
            let mut body = fields.body();
            if let Some(url) = endpoint {
                body.insert("url".into(), json!(url));
            }
            if *all_channels {
                body.insert("channels".into(), json!([]));
            }
            if *enable || *disable {
                body.insert("enabled".into(), json!(*enable));
            }
            if body.is_empty() {
                anyhow::bail!(
                    "nothing to change: give --endpoint, --events, --channel, --all-channels, \
                     --description, --offline-delay, --enable or --disable"
                );
            }
            let body = Value::Object(body);
            call(&publisher, Method::PATCH, &hook(*id), Some(&body)).await?
        }
        HooksCommand::Delete { id, .. } => {
            match call(&publisher, Method::DELETE, &hook(*id), None).await? {
                Ok(_) => println!("deleted webhook endpoint {id}"),
                Err(code) => return Ok(code),
            }
            return Ok(ExitCode::SUCCESS);
        }
        HooksCommand::Rotate { id, overlap, .. } => {
            let path = format!("{}/rotate-secret", hook(*id));
            let body = json!({ "overlap_seconds": overlap });
            let answer = match call(&publisher, Method::POST, &path, Some(&body)).await? {
                Ok(answer) => answer,
                Err(code) => return Ok(code),
            };
            println!("secret: {}", text(&answer["secret"]));
            match answer["previous_valid_until"].as_str() {
                Some(until) => println!("the previous secret signs too until {until}"),
                None => println!("the previous secret no longer signs"),
            }
            println!("{SHOWN_ONCE}");
            return Ok(ExitCode::SUCCESS);
        }
        HooksCommand::Test { id, .. } => {
            let path = format!("{}/test", hook(*id));
            let answer = match call(&publisher, Method::POST, &path, None).await? {
                Ok(answer) => answer,
                Err(code) => return Ok(code),
            };
            let status = answer["status"]
                .as_u64()
                .map_or_else(|| "no HTTP answer".to_owned(), |s| format!("HTTP {s}"));
            let latency = text(&answer["latency_ms"]);
            if answer["delivered"].as_bool() == Some(true) {
                println!("delivered: {status} in {latency} ms");
                return Ok(ExitCode::SUCCESS);
            }
            println!(
                "not delivered: {} ({status}, {latency} ms)",
                text(&answer["error"])
            );
            return Ok(ExitCode::FAILURE);
        }
        HooksCommand::Stats { id, .. } => {
            let path = id.map_or_else(|| base.clone(), hook);
            let answer = match call(&publisher, Method::GET, &path, None).await? {
                Ok(answer) => answer,
                Err(code) => return Ok(code),
            };
            let hooks = match id {
                Some(_) => vec![answer],
                None => answer["hooks"].as_array().cloned().unwrap_or_default(),
            };
            print!("{}", stats_table(&hooks));
            return Ok(ExitCode::SUCCESS);
        }
        HooksCommand::Dead {
            id, after, limit, ..
        } => {
            let mut path = format!("{}/dead?limit={limit}", hook(*id));
            if let Some(a) = after {
                path.push_str(&format!("&after={a}"));
            }
            call(&publisher, Method::GET, &path, None).await?
        }
        HooksCommand::Replay { id, row, .. } => {
            let path = format!("{}/dead/{row}/replay", hook(*id));
            call(&publisher, Method::POST, &path, None).await?
        }
        HooksCommand::Drop { id, row, .. } => {
            let path = format!("{}/dead/{row}", hook(*id));
            match call(&publisher, Method::DELETE, &path, None).await? {
                Ok(_) => println!("dropped dead letter {row}"),
                Err(code) => return Ok(code),
            }
            return Ok(ExitCode::SUCCESS);
        }
        HooksCommand::Tail { json, .. } => return tail::run(connection, *json).await,
    };
    match answer {
        Ok(answer) => {
            println!("{}", serde_json::to_string_pretty(&answer)?);
            Ok(ExitCode::SUCCESS)
        }
        Err(code) => Ok(code),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_rows_show_each_endpoints_figures() {
        let hooks = [json!({
            "id": 3, "state": "failing", "queued": 12, "dead": 1, "delivered": 1520,
            "failures": 2, "last_error": "HTTP 503: upstream unavailable"
        })];
        let table = stats_table(&hooks);
        let row = table.lines().nth(1).unwrap();
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cells[..6], ["3", "failing", "12", "1", "1520", "2"]);
        assert!(row.ends_with("HTTP 503: upstream unavailable"), "{row}");
        assert!(stats_table(&[]).contains("(no webhook endpoints)"));
    }
}
