//! `herald publish CHANNEL DATA`: publishes one message through the HTTP API and prints the
//! server's JSON answer.

use std::io::Read;
use std::process::ExitCode;

use anyhow::Context;

use crate::client::publish::{data_from_arg, publish, PublishOutcome, PublishRequest};
use crate::client::DEFAULT_URL;

pub const EXAMPLES: &str = "\
Examples:
  herald publish news '{\"title\":\"hello\"}'
  herald publish chat/room-42 'plain text becomes a JSON string'
  herald publish prices/EURUSD 1.0842 --id tick-0001
  echo '{\"big\":true}' | herald publish news -
  HERALD_URL=http://push.internal:7070 HERALD_API_KEY=hk_... herald publish news '\"hi\"'

DATA is sent as JSON if it parses as JSON, otherwise as a JSON string (--string forces that).
Prints the server's JSON response; on an error response prints its message to stderr and
exits with 1.";

/// Flags of `herald publish`.
#[derive(Debug, clap::Args)]
pub struct PublishArgs {
    /// Channel to publish to
    pub channel: String,
    /// Message data: JSON, or any text (sent as a JSON string); `-` reads stdin
    pub data: String,
    /// Idempotency key: publishing the same key twice stores the message once
    #[arg(long, value_name = "KEY")]
    pub id: Option<String>,
    /// Send DATA as a JSON string even if it parses as JSON
    #[arg(long)]
    pub string: bool,
    /// Server URL
    #[arg(long, env = "HERALD_URL", default_value = DEFAULT_URL, value_name = "URL")]
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
    let request = PublishRequest {
        url: args.url,
        api_key: args.api_key.filter(|k| !k.is_empty()),
        channel: args.channel,
        data: data_from_arg(&text, args.string),
        id: args.id,
    };
    report(publish(&request).await?)
}

/// Prints a publisher API answer: the body on success, the error on stderr otherwise.
pub fn report(outcome: PublishOutcome) -> anyhow::Result<ExitCode> {
    match outcome {
        PublishOutcome::Published(body) => {
            println!("{body}");
            Ok(ExitCode::SUCCESS)
        }
        PublishOutcome::Rejected {
            status,
            code,
            message,
        } => {
            if code.is_empty() {
                eprintln!("error: {message} (HTTP {status})");
            } else {
                eprintln!("error: {message} ({code}, HTTP {status})");
            }
            Ok(ExitCode::FAILURE)
        }
    }
}
