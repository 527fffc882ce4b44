//! `herald publish CHANNEL DATA`: publishes one message through the HTTP API and prints the
//! server's JSON answer.

use std::io::Read;
use std::process::ExitCode;

use anyhow::Context;
use herald_client::api::{Answer, Publisher};
use herald_client::url::{encode_path, DEFAULT_URL};
use serde_json::Value;

pub const EXAMPLES: &str = "\
Examples:
  herald publish news '{\"title\":\"hello\"}'
  herald publish chat/room-42 --string 'plain text, sent as a JSON string'
  herald publish prices/EURUSD 1.0842 --id tick-0001
  echo '{\"big\":true}' | herald publish news -
  HERALD_URL=http://push.internal:7070 HERALD_API_KEY=hk_... herald publish news '\"hi\"'

DATA must be JSON (a mistyped object is refused, not sent as a string); --string sends DATA
as a JSON string. Exits with 2 if DATA is not JSON. Prints the server's JSON response; on an error response prints its message to stderr and
exits with 1.";

/// Flags of `herald publish`.
#[derive(Debug, clap::Args)]
pub struct PublishArgs {
    /// Channel to publish to
    pub channel: String,
    /// Message data as JSON (with --string: any text); `-` reads stdin
    pub data: String,
    /// Idempotency key: publishing the same key twice stores the message once
    #[arg(long, value_name = "KEY")]
    pub id: Option<String>,
    /// Send DATA as a JSON string (any text) instead of parsing it as JSON
    #[arg(long)]
    pub string: bool,
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

/// Publishes and prints the answer.
pub async fn run(args: PublishArgs) -> anyhow::Result<ExitCode> {
    let text = if args.data == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("reading DATA from stdin")?;
        let trimmed = text.strip_suffix('\n').unwrap_or(&text);
        trimmed.strip_suffix('\r').unwrap_or(trimmed).to_owned()
    } else {
        args.data
    };
    let data = match super::args::data(&text, args.string) {
        Ok(data) => data,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    let publisher = Publisher::new(&args.url, args.api_key.as_deref());
    let path = format!("/v1/channels/{}/messages", encode_path(&args.channel));
    let body = serde_json::json!({ "data": data });
    let answer = publisher
        .send(
            reqwest::Method::POST,
            &path,
            Some(&body),
            args.id.as_deref(),
        )
        .await;
    report(&publisher, &path, answer)
}

/// Prints a publisher API answer to `path`: the body on success (JSON when it parses, else as a
/// string), the server's error on stderr otherwise (exit code 1).
pub fn report(
    publisher: &Publisher,
    path: &str,
    answer: Result<Answer, herald_client::Error>,
) -> anyhow::Result<ExitCode> {
    let url = herald_client::url::join(publisher.base(), path);
    match answer {
        Ok(answer) => {
            let body: Value =
                serde_json::from_str(&answer.body).unwrap_or(Value::String(answer.body));
            println!("{body}");
            Ok(ExitCode::SUCCESS)
        }
        Err(herald_client::Error::Server(e)) => {
            let status = e.status.unwrap_or_default();
            if e.code.is_empty() && e.message.is_empty() {
                let status = reqwest::StatusCode::from_u16(status)
                    .map_or_else(|_| status.to_string(), |s| s.to_string());
                anyhow::bail!("{url} answered {status} with an empty body");
            }
            if e.code.is_empty() {
                eprintln!("error: {} (HTTP {status})", e.message);
            } else {
                eprintln!("error: {} ({}, HTTP {status})", e.message, e.code);
            }
            Ok(ExitCode::FAILURE)
        }
        Err(herald_client::Error::Http { source, .. }) => {
            Err(anyhow::Error::new(source).context(format!("cannot reach {url}")))
        }
        Err(e) => Err(e.into()),
    }
}
