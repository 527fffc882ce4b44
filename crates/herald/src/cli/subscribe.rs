//! `herald subscribe CHANNEL...`: prints a channel's messages as JSON lines.

use std::process::ExitCode;
use std::time::Duration;

use crate::client::subscribe::{subscribe, SubscribeOptions};
use crate::client::DEFAULT_URL;

pub const EXAMPLES: &str = "\
Examples:
  herald subscribe news
  herald subscribe news 'chat/room-42' --token \"$(herald token --sub me --channel '**')\"
  herald subscribe news --since 41           # resume after seq 41
  herald subscribe prices/EURUSD --last      # start with the newest message
  herald subscribe news --count 1 --timeout 10s | jq .data

Each message is printed on stdout as one JSON line ({\"channel\",\"seq\",\"id\",\"time\",\"data\"});
replies and errors go to stderr. Exit codes: 0 after Ctrl-C, --count messages or --timeout;
1 if the server rejects the token or a subscription or closes the connection; 124 if
--timeout passes before --count messages arrived.";

/// Flags of `herald subscribe`.
#[derive(Debug, clap::Args)]
pub struct SubscribeArgs {
    /// Channels to subscribe to
    #[arg(required = true, value_name = "CHANNEL")]
    pub channels: Vec<String>,
    /// Resume after this seq (messages with a greater seq are replayed first)
    #[arg(long, value_name = "SEQ", conflicts_with = "last")]
    pub since: Option<u64>,
    /// Epoch that --since refers to (default: the channel's current epoch)
    #[arg(long, value_name = "EPOCH", requires = "since")]
    pub epoch: Option<String>,
    /// Start with each channel's last message
    #[arg(long)]
    pub last: bool,
    /// Exit after this many messages
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub count: Option<u64>,
    /// Exit after this long, e.g. 30s or 5m
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub timeout: Option<Duration>,
    /// Client token (if none, subscribe anonymously)
    #[arg(
        long,
        env = "HERALD_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    pub token: Option<String>,
    /// Server URL
    #[arg(long, env = "HERALD_URL", default_value = DEFAULT_URL, value_name = "URL")]
    pub url: String,
}

/// Subscribes until a stop condition.
pub async fn run(args: SubscribeArgs) -> anyhow::Result<ExitCode> {
    let opts = SubscribeOptions {
        url: args.url,
        token: args.token.filter(|t| !t.is_empty()),
        channels: args.channels,
        since: args.since,
        epoch: args.epoch,
        last: args.last,
        count: args.count,
        timeout: args.timeout,
        ping_every: Duration::from_secs(25),
    };
    subscribe(&opts).await
}
