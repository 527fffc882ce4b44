//! `herald token`: mints an HS256 client token with the server's token secret, taken from
//! `--token-secret` / `HERALD_TOKEN_SECRET`, else the config file, else `<data>/token-secret`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context};
use herald_client::proto::token::{mint, ClientClaims, UserInfo};

use crate::config::{self, Config, ConfigFlags, MIN_TOKEN_SECRET_BYTES};

pub const EXAMPLES: &str = "\
Examples:
  herald token --sub alice --channel news --channel 'chat/*' --publish 'chat/*' --ttl 1h
  herald token --sub kiosk-7 --channel 'prices/*' --ttl 30d --data /var/lib/herald
  herald token --sub alice --device phone-1 --ttl 7d      # a device token (default app)
  herald token --sub alice --channel 'room-*' --user-info '{\"name\":\"Alice\"}'
  TOKEN=$(herald token --sub bob --channel news) && herald subscribe news --token \"$TOKEN\"

The secret is taken from --token-secret or HERALD_TOKEN_SECRET, else token_secret in the config
file, else <data>/token-secret (written by the server on first run). Only the token is printed.
Tokens for other apps come from their backends through POST /v1/tokens.";

/// Flags of `herald token`.
#[derive(Debug, clap::Args)]
pub struct TokenArgs {
    /// Who the client is (the token's `sub` claim)
    #[arg(long, value_name = "ID")]
    pub sub: String,
    /// Channel pattern the client may subscribe to (repeatable; `*` matches one segment, a final `**` the rest)
    #[arg(long = "channel", value_name = "PATTERN")]
    pub channels: Vec<String>,
    /// Channel pattern the client may publish to (repeatable)
    #[arg(long = "publish", value_name = "PATTERN")]
    pub publish: Vec<String>,
    /// Device id: a device token receives that device's inbox (the device must be registered
    /// with POST /v1/devices)
    #[arg(long, value_name = "ID")]
    pub device: Option<String>,
    /// The token's id (`jti` claim), to revoke it by with POST /v1/apps/default/revoke
    #[arg(long, value_name = "ID")]
    pub jti: Option<String>,
    /// What presence channels show of the user (the `user_info` claim): a JSON object of at
    /// most 1,024 bytes, signed compact
    #[arg(long, value_name = "JSON")]
    pub user_info: Option<String>,
    /// How long the token is valid; 0s means it never expires
    #[arg(long, value_name = "DURATION", default_value = "24h", value_parser = humantime::parse_duration)]
    pub ttl: Duration,
    /// TOML config file [env: HERALD_CONFIG]
    #[arg(long, short = 'c', value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// Data directory holding token-secret [env: HERALD_DATA]
    #[arg(long, value_name = "DIR")]
    pub data: Option<PathBuf>,
    /// Token secret, at least 16 bytes [env: HERALD_TOKEN_SECRET]
    #[arg(long, value_name = "SECRET")]
    pub token_secret: Option<String>,
}

/// Prints a newly minted token.
pub fn run(args: TokenArgs) -> anyhow::Result<ExitCode> {
    let user_info = match check_claims(&args) {
        Ok(user_info) => user_info,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    let flags = ConfigFlags {
        config: args.config,
        data: args.data,
        token_secret: args.token_secret,
        ..ConfigFlags::default()
    };
    let config = Config::load(&flags)?;
    let secret = match config.token_secret.clone() {
        Some(secret) => secret,
        None => secret_from_data_dir(&config)?,
    };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let exp = if args.ttl.is_zero() {
        None
    } else {
        Some(now.saturating_add(args.ttl).as_secs())
    };
    let claims = ClientClaims {
        sub: args.sub,
        exp,
        channels: args.channels,
        publish: args.publish,
        device: args.device,
        iat: Some(now.as_secs()),
        jti: args.jti,
        user_info,
    };
    println!("{}", mint(secret.as_bytes(), &claims));
    Ok(ExitCode::SUCCESS)
}

/// The checks the server makes when it mints a token (`POST /v1/tokens`): channel patterns
/// that can match channel names, a valid device id and token id, and a `user_info` that is a
/// JSON object within the size limit (answered as the claim to sign).
fn check_claims(args: &TokenArgs) -> Result<Option<UserInfo>, String> {
    for (flag, pattern) in args
        .channels
        .iter()
        .map(|p| ("--channel", p))
        .chain(args.publish.iter().map(|p| ("--publish", p)))
    {
        herald_client::proto::token::check_pattern(pattern)
            .map_err(|e| format!("{flag}: {}", e.message))?;
    }
    if let Some(device) = &args.device {
        herald_client::proto::token::check_device_id(device)
            .map_err(|e| format!("--device: {}", e.message))?;
    }
    if let Some(jti) = &args.jti {
        herald_client::proto::token::check_jti(jti).map_err(|e| format!("--jti: {}", e.message))?;
    }
    let Some(text) = &args.user_info else {
        return Ok(None);
    };
    herald_client::proto::token::user_info("--user-info", text)
        .map(Some)
        .map_err(|e| e.message)
}

fn secret_from_data_dir(config: &Config) -> anyhow::Result<String> {
    let path = config.token_secret_file();
    let found = config::read_secret_file(&path)
        .with_context(|| format!("cannot read token secret file {}", path.display()))?;
    let Some(secret) = found else {
        bail!(
            "no token secret found: pass --token-secret, set HERALD_TOKEN_SECRET, set \
             token_secret in the config file, or point --data / HERALD_DATA at the server's data \
             directory (looked for {}, which the server writes on first run)",
            path.display()
        );
    };
    if secret.len() < MIN_TOKEN_SECRET_BYTES {
        bail!(
            "the token secret in {} is shorter than {MIN_TOKEN_SECRET_BYTES} bytes",
            path.display()
        );
    }
    Ok(secret)
}
