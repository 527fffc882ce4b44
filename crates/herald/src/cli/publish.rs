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
    let publisher = Publisher::new(&args.url, args.api_key.as_deref());
    let path = format!("/v1/channels/{}/messages", encode_path(&args.channel));
    let body = serde_json::json!({ "data": data_from_arg(&text, args.string) });
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

/// DATA as the user typed it: JSON if it parses, otherwise a JSON string.
pub fn data_from_arg(text: &str, force_string: bool) -> Value {
    if force_string {
        return Value::String(text.to_owned());
    }
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_is_json_or_a_string() {
        assert_eq!(data_from_arg(r#"{"a":1}"#, false)["a"], 1);
        assert_eq!(data_from_arg("42", false), Value::from(42));
        assert_eq!(
            data_from_arg("hello world", false),
            Value::from("hello world")
        );
        assert_eq!(data_from_arg("42", true), Value::from("42"));
    }
}
