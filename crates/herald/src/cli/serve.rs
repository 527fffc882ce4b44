//! `herald serve`: its flags, and with the configuration they load (`cli::prepare`, before the
//! main runtime starts, whose size is the `workers` setting) it sets up logging and runs the
//! server.

use std::io::IsTerminal;
use std::process::ExitCode;

use anyhow::Context;
use tracing::level_filters::LevelFilter;
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

/// Runs the server with `config` (loaded from [`ServeArgs`] before the main runtime started,
/// `cli::prepare`) until it shuts down.
pub async fn run(config: Config) -> anyhow::Result<ExitCode> {
    config.check_serve()?;
    init_tracing(&config)?;
    tracing::debug!(?config, "configuration loaded");
    crate::serve::serve(config).await?;
    Ok(ExitCode::SUCCESS)
}

/// Logs to stderr in the configured format, filtered by `log_level` ([`log_filter`]).
fn init_tracing(config: &Config) -> anyhow::Result<()> {
    let filter = EnvFilter::try_new(log_filter(&config.log_level)).context("invalid log filter")?;
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

/// Crates whose failures Herald says in its own words (the Redis client, the PostgreSQL pool):
/// under a bare level, only their errors are logged.
const SAID_BY_HERALD: &[&str] = &["fred", "deadpool"];

/// The filter of `log_level`. A bare level (`info`, the default) is the level of Herald's own
/// lines: other crates log at WARN at most, and those of [`SAID_BY_HERALD`] at ERROR at most,
/// so that an outage reads as Herald's lines, not as the libraries' internals. A filter that
/// names a target (`info,fred=debug`) is used as written.
fn log_filter(log_level: &str) -> String {
    let Ok(level) = log_level.trim().parse::<LevelFilter>() else {
        return log_level.to_owned();
    };
    let others = level.min(LevelFilter::WARN);
    let said_by_herald = level.min(LevelFilter::ERROR);
    let mut filter = format!("{others},herald={level}");
    for target in SAID_BY_HERALD {
        filter.push_str(&format!(",{target}={said_by_herald}"));
    }
    filter
}

#[cfg(test)]
mod tests {
    use super::log_filter;

    #[test]
    fn a_bare_level_is_herald_s_and_other_crates_say_less() {
        assert_eq!(
            log_filter("info"),
            "warn,herald=info,fred=error,deadpool=error"
        );
        assert_eq!(
            log_filter("DEBUG"),
            "warn,herald=debug,fred=error,deadpool=error"
        );
        // Never more than asked for.
        assert_eq!(
            log_filter("error"),
            "error,herald=error,fred=error,deadpool=error"
        );
        assert_eq!(log_filter("off"), "off,herald=off,fred=off,deadpool=off");
    }

    #[test]
    fn a_filter_naming_targets_is_kept_as_written() {
        for given in [
            "info,fred=debug",
            "herald=debug,info",
            "tokio_postgres=trace",
        ] {
            assert_eq!(log_filter(given), given);
        }
    }
}
