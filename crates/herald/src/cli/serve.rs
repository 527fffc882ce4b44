//! `herald serve`: loads the configuration, sets up logging and runs the server.

use std::io::IsTerminal;
use std::process::ExitCode;

use anyhow::Context;
use tracing_subscriber::EnvFilter;

use crate::config::{Config, ConfigFlags, LogFormat};

pub const EXAMPLES: &str = "\
Examples:
  herald serve
  herald serve --config /etc/herald.toml
  herald serve --listen 0.0.0.0:7070 --data /var/lib/herald --sync always
  HERALD_LOG=debug herald serve --log-format json

Settings come from defaults, then the config file, then HERALD_* variables, then flags.
See docs/config.md for every setting.";

/// Flags of `herald serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub config: ConfigFlags,
}

/// Runs the server until it shuts down.
pub async fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let config = Config::load(&args.config)?;
    config.check_serve()?;
    init_tracing(&config)?;
    tracing::debug!(?config, "configuration loaded");
    crate::serve::serve(config).await?;
    Ok(ExitCode::SUCCESS)
}

/// Logs to stderr in the configured format, filtered by `log_level`.
fn init_tracing(config: &Config) -> anyhow::Result<()> {
    let filter = EnvFilter::try_new(&config.log_level).context("invalid log filter")?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none());
    let result = match config.log_format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
    result.map_err(|e| anyhow::anyhow!("cannot set up logging: {e}"))
}
