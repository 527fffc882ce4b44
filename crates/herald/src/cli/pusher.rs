//! `herald pusher`: an app's Pusher credentials through the API (`/v1/apps/{id}/pusher`):
//! `create` (drawn, or `--app-id`/`--key`/`--secret` kept from Pusher, Reverb or soketi;
//! prints the secret, shown only then), `show`, `rotate` (with an overlap) and `delete`.
//! The server checks everything sent; its refusals are printed as it words them.

use std::process::ExitCode;

use clap::Subcommand;
use reqwest::Method;
use serde_json::{json, Map, Value};

use herald_client::api::Publisher;
use herald_client::url::encode_query;

use super::hooks::Connection;

pub const EXAMPLES: &str = "\
Examples:
  herald pusher create --app shop
  herald pusher create --app shop --app-id 1234567 --key 278d425bdf160c739803 \\
      --secret 7ad3773142a6692b25b8
  herald pusher show --app shop
  herald pusher rotate --app shop --overlap 1h
  herald pusher delete --app shop

--app names the app (default: \"default\"); the key is a publisher key of that app or the
admin key (HERALD_API_KEY). Pusher's SDKs then take the app id, key and secret with
Herald's host and port (docs/pusher.md).";

/// `herald pusher ...`.
#[derive(Debug, Subcommand)]
pub enum PusherCommand {
    /// Create the app's Pusher credentials; prints the secret (shown only this once).
    #[command(after_help = EXAMPLES)]
    Create {
        /// The Pusher app id to keep (default: 7 random digits)
        #[arg(long, value_name = "ID")]
        app_id: Option<String>,
        /// The key to keep (default: 20 random hex digits)
        #[arg(long, value_name = "KEY")]
        key: Option<String>,
        /// The secret to keep (default: 20 random hex digits)
        #[arg(long, value_name = "SECRET")]
        secret: Option<String>,
        #[command(flatten)]
        connection: Connection,
    },
    /// Show the app's Pusher app id and key (not the secret).
    #[command(after_help = EXAMPLES)]
    Show {
        #[command(flatten)]
        connection: Connection,
    },
    /// A new secret; the previous one is accepted too for the overlap.
    #[command(after_help = EXAMPLES)]
    Rotate {
        /// How long the previous secret stays valid (0 for not at all; at most 7 days)
        #[arg(long, value_name = "DURATION", default_value = "24h", value_parser = super::args::whole_seconds)]
        overlap: u64,
        #[command(flatten)]
        connection: Connection,
    },
    /// Delete the app's Pusher credentials (their key stops working at once).
    #[command(after_help = EXAMPLES)]
    Delete {
        #[command(flatten)]
        connection: Connection,
    },
}

const SHOWN_ONCE: &str =
    "(the secret is shown only this once: keep it where your backend signs Pusher requests)";

fn text(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The lines `create` and `show` print.
fn credentials_lines(answer: &Value) -> String {
    let mut out = format!(
        "app_id: {}\nkey:    {}\n",
        text(&answer["app_id"]),
        text(&answer["key"])
    );
    if answer.get("secret").is_some() {
        out.push_str(&format!("secret: {}\n", text(&answer["secret"])));
    }
    if let Some(until) = answer["previous_secret_valid_until"].as_str() {
        out.push_str(&format!("the previous secret is valid too until {until}\n"));
    }
    out
}

pub async fn run(command: PusherCommand) -> anyhow::Result<ExitCode> {
    let connection = match &command {
        PusherCommand::Create { connection, .. }
        | PusherCommand::Show { connection }
        | PusherCommand::Rotate { connection, .. }
        | PusherCommand::Delete { connection } => connection,
    };
    let publisher = Publisher::new(&connection.url, connection.api_key.as_deref());
    let base = format!("/v1/apps/{}/pusher", encode_query(&connection.app));
    let (method, path, body) = match &command {
        PusherCommand::Create {
            app_id,
            key,
            secret,
            ..
        } => {
            let mut body = Map::new();
            for (field, value) in [("app_id", app_id), ("key", key), ("secret", secret)] {
                if let Some(value) = value {
                    body.insert(field.into(), json!(value));
                }
            }
            (Method::POST, base.clone(), Some(Value::Object(body)))
        }
        PusherCommand::Show { .. } => (Method::GET, base.clone(), None),
        PusherCommand::Rotate { overlap, .. } => (
            Method::POST,
            format!("{base}/rotate"),
            Some(json!({ "overlap_seconds": overlap })),
        ),
        PusherCommand::Delete { .. } => (Method::DELETE, base.clone(), None),
    };
    let answer = match publisher.send(method, &path, body.as_ref(), None).await {
        Ok(answer) => serde_json::from_str(&answer.body).unwrap_or(Value::Null),
        Err(e) => return super::publish::report(&publisher, &path, Err(e)),
    };
    match &command {
        PusherCommand::Create { .. } => {
            print!("{}", credentials_lines(&answer));
            println!("{SHOWN_ONCE}");
        }
        PusherCommand::Show { .. } => print!("{}", credentials_lines(&answer)),
        PusherCommand::Rotate { .. } => {
            println!("secret: {}", text(&answer["secret"]));
            match answer["previous_valid_until"].as_str() {
                Some(until) => println!("the previous secret is valid too until {until}"),
                None => println!("the previous secret no longer works"),
            }
            println!("{SHOWN_ONCE}");
        }
        PusherCommand::Delete { .. } => println!("deleted the app's Pusher credentials"),
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_print_as_lines() {
        let created = json!({"app_id":"1234567","key":"k","secret":"s","created":"x"});
        assert_eq!(
            credentials_lines(&created),
            "app_id: 1234567\nkey:    k\nsecret: s\n"
        );
        let shown = json!({"app_id":"1","key":"k","previous_secret_valid_until":"2026-11-30T00:00:00.000Z"});
        assert_eq!(
            credentials_lines(&shown),
            "app_id: 1\nkey:    k\nthe previous secret is valid too until 2026-11-30T00:00:00.000Z\n"
        );
    }
}
