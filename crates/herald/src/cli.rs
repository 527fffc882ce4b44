//! The command line: one subcommand per file under `cli/`, parsed with clap. Errors are printed
//! as `error: ...`; invalid configuration exits with code 2, other failures with 1.

mod args;
mod audit;
mod config_check;
mod hooks;
mod jobs;
mod migrate;
mod mock;
mod providers;
mod publish;
mod push;
mod pusher;
mod serve;
mod subscribe;
mod token;
mod vapid;
mod version;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::config::{Config, ConfigError};

const EXAMPLES: &str = "\
Examples:
  herald serve --listen 0.0.0.0:7070 --data /var/lib/herald
  herald config check --config herald.toml
  herald token --sub alice --channel news --channel 'chat/*' --ttl 1h
  herald publish news '{\"title\":\"hello\"}'
  herald push --tags 'sports AND uk' '{\"score\":\"2-1\"}'
  herald subscribe news --last

Environment: HERALD_CONFIG, HERALD_URL, HERALD_API_KEY, HERALD_TOKEN, HERALD_CACERT and the
HERALD_* settings listed in docs/config.md.";

/// Herald: a self-hosted push server.
#[derive(Debug, Parser)]
#[command(name = "herald", version = version::LINE, after_help = EXAMPLES, max_term_width = 100)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Also trust the PEM CA certificates in FILE for https:// and wss:// servers (client
    /// commands: publish, push, subscribe, providers, jobs, hooks, bench) [env: HERALD_CACERT]
    #[arg(long, global = true, env = "HERALD_CACERT", value_name = "FILE")]
    cacert: Option<std::path::PathBuf>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the server.
    #[command(after_help = serve::EXAMPLES)]
    Serve(serve::ServeArgs),
    /// Run a PostgreSQL store's schema migrations and exit.
    #[command(after_help = migrate::EXAMPLES)]
    Migrate(migrate::MigrateArgs),
    /// Inspect the configuration.
    #[command(subcommand, after_help = config_check::EXAMPLES)]
    Config(config_check::ConfigCommand),
    /// Print the name, version and the commit it was built from.
    #[command(after_help = version::EXAMPLES)]
    Version,
    /// Mint a client token (printed on stdout).
    #[command(after_help = token::EXAMPLES)]
    Token(token::TokenArgs),
    /// Publish a message to a channel through the HTTP API.
    #[command(after_help = publish::EXAMPLES)]
    Publish(publish::PublishArgs),
    /// Push to a device, a user, a tag expression or every device of the app.
    #[command(after_help = push::EXAMPLES)]
    Push(push::PushArgs),
    /// Subscribe to channels over WebSocket and print messages as JSON lines.
    #[command(after_help = subscribe::EXAMPLES)]
    Subscribe(subscribe::SubscribeArgs),
    /// An app's provider credentials (APNs, FCM, Web Push).
    #[command(subcommand, after_help = providers::EXAMPLES)]
    Providers(providers::ProvidersCommand),
    /// Make a VAPID key pair for Web Push.
    #[command(after_help = vapid::EXAMPLES)]
    Vapid,
    /// The provider job queue: worker statistics, dead letters.
    #[command(subcommand, after_help = jobs::EXAMPLES)]
    Jobs(jobs::JobsCommand),
    /// An app's webhook endpoints: register, list, test, rotate secrets, delivery figures, dead
    /// letters.
    #[command(subcommand, after_help = hooks::EXAMPLES)]
    Hooks(hooks::HooksCommand),
    /// An app's Pusher credentials (app id, key, secret) for Pusher's SDKs: create, show,
    /// rotate, delete.
    #[command(subcommand, after_help = pusher::EXAMPLES)]
    Pusher(pusher::PusherCommand),
    /// The audit log of admin actions (who did what, when).
    #[command(after_help = audit::EXAMPLES)]
    Audit(audit::AuditArgs),
    /// Run a mock provider (APNs, FCM, Web Push) for tests and benchmarks.
    #[command(subcommand, after_help = mock::EXAMPLES)]
    Mock(mock::MockCommand),
    /// Load and burn-in tests (docs/benchmarks.md): `herald bench <scenario> --spawn`.
    Bench(herald_bench::BenchArgs),
}

/// The command line, parsed, with `herald serve`'s configuration already loaded: the main
/// runtime's size (`workers`) must be known before that runtime starts ([`prepare`]).
pub struct Invocation {
    cli: Cli,
    serve_config: Option<Box<Config>>,
}

impl Invocation {
    /// Worker threads the main runtime should have: the configured `workers` for `serve`,
    /// `None` (tokio's default, one per CPU) for the other commands.
    pub fn workers(&self) -> Option<usize> {
        self.serve_config.as_ref().map(|config| config.workers)
    }
}

/// Parses the command line and, for `serve`, loads its configuration. What cannot be loaded
/// is printed as `main` would print it, and answered with its exit code.
pub fn prepare() -> Result<Invocation, ExitCode> {
    let cli = Cli::parse();
    let serve_config = match &cli.command {
        Command::Serve(args) => Some(Box::new(
            Config::load(&args.config).map_err(|e| exit_code(e.into()))?,
        )),
        _ => None,
    };
    Ok(Invocation { cli, serve_config })
}

/// Runs the command [`prepare`] parsed and turns its outcome into an exit code.
pub async fn main(invocation: Invocation) -> ExitCode {
    let Invocation { cli, serve_config } = invocation;
    if let Some(file) = &cli.cacert {
        if let Err(e) = herald_client::tls::trust_ca_file(file) {
            eprintln!("error: --cacert: {e}");
            return ExitCode::from(2);
        }
    }
    let outcome = match cli.command {
        Command::Serve(_) => match serve_config {
            Some(config) => serve::run(*config).await,
            None => Err(anyhow::anyhow!("the configuration was not loaded")),
        },
        Command::Migrate(args) => migrate::run(args).await,
        Command::Config(cmd) => config_check::run(cmd),
        Command::Version => version::run(),
        Command::Token(args) => token::run(args),
        Command::Publish(args) => publish::run(args).await,
        Command::Push(args) => push::run(args).await,
        Command::Subscribe(args) => subscribe::run(args).await,
        Command::Providers(cmd) => providers::run(cmd).await,
        Command::Vapid => vapid::run(),
        Command::Jobs(cmd) => jobs::run(cmd).await,
        Command::Hooks(cmd) => hooks::run(cmd).await,
        Command::Pusher(cmd) => pusher::run(cmd).await,
        Command::Audit(args) => audit::run(args).await,
        Command::Mock(cmd) => {
            silence_tracing();
            mock::run(cmd).await
        }
        Command::Bench(args) => {
            silence_tracing();
            herald_bench::run(args, herald_bench::Host::Herald)
                .await
                .map(|()| ExitCode::SUCCESS)
        }
    };
    match outcome {
        Ok(code) => code,
        Err(e) => exit_code(e),
    }
}

/// Prints `e` as `error: ...` and answers its exit code: 2 for invalid configuration, else 1.
fn exit_code(e: anyhow::Error) -> ExitCode {
    eprintln!("error: {e:#}");
    if e.downcast_ref::<ConfigError>().is_some() {
        ExitCode::from(2)
    } else {
        ExitCode::FAILURE
    }
}

/// The mocks and the bench print no log: a subscriber that takes nothing says so once per
/// callsite. Without any, every span h2 and rustls open (several per request) goes on to ask
/// the `log` crate whether it wants it, a cost the mock and the bench's clients paid per
/// request (2-4 % of the mock's CPU) for output nobody reads.
fn silence_tracing() {
    let _ = tracing::subscriber::set_global_default(tracing::subscriber::NoSubscriber::default());
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_valid() {
        Cli::command().debug_assert();
    }

    #[test]
    fn every_command_has_examples() {
        let mut cmd = Cli::command();
        cmd.build();
        for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
            let mut subs: Vec<_> = sub.get_subcommands().collect();
            if subs.is_empty() {
                subs.push(sub);
            }
            for s in subs
                .into_iter()
                .filter(|s| s.get_name() != "help" && !s.is_hide_set())
            {
                let help = s
                    .get_after_help()
                    .map(|h| h.to_string())
                    .unwrap_or_default();
                assert!(
                    help.contains("Examples:"),
                    "{} has no examples",
                    s.get_name()
                );
            }
        }
    }
}
