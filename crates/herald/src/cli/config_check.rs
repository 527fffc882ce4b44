//! `herald config check`: loads the configuration exactly as `serve` would and prints the
//! effective values (secrets redacted) or the first error (exit code 2).

use std::process::ExitCode;

use crate::config::{Config, ConfigFlags};

pub const EXAMPLES: &str = "\
Examples:
  herald config check --config herald.toml
  HERALD_LISTEN=0.0.0.0:8080 herald config check --config herald.toml
  herald config check --config herald.toml --sync always

Prints the effective configuration as TOML (each value's source in a comment, secrets
redacted) and `# config ok`; on an invalid value prints which value, where it came from and
why, and exits with code 2.";

/// `herald config ...`
#[derive(Debug, clap::Subcommand)]
pub enum ConfigCommand {
    /// Validate the configuration and print the effective values.
    #[command(after_help = EXAMPLES)]
    Check(CheckArgs),
}

/// Flags of `herald config check`: the same as `herald serve`.
#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    #[command(flatten)]
    pub config: ConfigFlags,
}

/// Runs a `config` subcommand.
pub fn run(cmd: ConfigCommand) -> anyhow::Result<ExitCode> {
    let ConfigCommand::Check(args) = cmd;
    let config = Config::load(&args.config)?;
    match &config.config_file {
        Some(path) => println!("# effective configuration (file: {})", path.display()),
        None => println!("# effective configuration (no config file)"),
    }
    print!("{}", config.to_toml_redacted());
    println!("\n# config ok");
    Ok(ExitCode::SUCCESS)
}
