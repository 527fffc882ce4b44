//! `herald mock apns|fcm|webpush`: runs a mock provider (`herald-mock`: real TLS and HTTP/2,
//! checking what the real provider checks) until Ctrl-C or SIGTERM, and writes what a Herald
//! server needs to use it into a folder: the mock's certificate (`ca.pem`, for
//! `provider_ca_file`), and an APNs `.p8` key, an FCM service account, or Web Push subscriptions
//! to register as devices. Every few seconds it prints how many notifications it accepted.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Subcommand};
use serde_json::json;

use herald_mock::apns::{test_key, ApnsMock, ApnsMockOptions};
use herald_mock::fcm::{test_account, FcmMock, FcmMockOptions};
use herald_mock::webpush::{WebPushMock, WebPushMockOptions};

pub const EXAMPLES: &str = "\
Examples:
  herald mock apns --listen 127.0.0.1:8443 --out mock
  herald serve --apns-url https://127.0.0.1:8443 --provider-ca-file mock/ca.pem
  herald providers set apns --key-file mock/AuthKey.p8 --key-id MOCKKEY001 \\
      --team-id MOCKTEAM01 --topic com.example.app
  herald mock fcm --listen 127.0.0.1:8444 --out mock-fcm
  herald mock webpush --listen 127.0.0.1:8445 --out mock-webpush --subscriptions 100
  herald serve --provider-ca-file mock-webpush/ca.pem --outbound-allow 127.0.0.1

The mock runs until Ctrl-C. It listens on loopback unless told otherwise; it is for tests and
benchmarks, never for real devices.";

/// The APNs key id and team id the mock's key is known by.
pub const MOCK_KEY_ID: &str = "MOCKKEY001";
/// See [`MOCK_KEY_ID`].
pub const MOCK_TEAM_ID: &str = "MOCKTEAM01";

/// Where the mock listens and writes its files.
#[derive(Debug, Args)]
pub struct MockPlace {
    /// Listen on IP:PORT
    #[arg(long, default_value = "127.0.0.1:0", value_name = "ADDR")]
    pub listen: SocketAddr,
    /// Folder for the certificate and credentials (created if missing)
    #[arg(long, default_value = "herald-mock", value_name = "DIR")]
    pub out: PathBuf,
}

/// `herald mock ...`.
#[derive(Debug, Subcommand)]
pub enum MockCommand {
    /// A mock APNs: writes ca.pem and AuthKey.p8 (key id MOCKKEY001, team MOCKTEAM01).
    #[command(after_help = EXAMPLES)]
    Apns {
        #[command(flatten)]
        place: MockPlace,
        /// SETTINGS_MAX_CONCURRENT_STREAMS per connection
        #[arg(long, default_value_t = 1000)]
        max_streams: u32,
        /// Send GOAWAY after this many requests on a connection
        #[arg(long)]
        goaway_after: Option<u64>,
        /// Certificate auth: require a TLS client certificate issued by a CA in this PEM file
        /// (provider tokens are then not required)
        #[arg(long, value_name = "PEM")]
        client_ca: Option<std::path::PathBuf>,
    },
    /// A mock FCM (token endpoint and messages:send): writes ca.pem and service-account.json.
    #[command(after_help = EXAMPLES)]
    Fcm {
        #[command(flatten)]
        place: MockPlace,
    },
    /// A mock Web Push service: writes ca.pem and subscriptions.json (devices to register).
    #[command(after_help = EXAMPLES)]
    Webpush {
        #[command(flatten)]
        place: MockPlace,
        /// Subscriptions to make
        #[arg(long, default_value_t = 10)]
        subscriptions: usize,
    },
}

fn write(dir: &Path, name: &str, contents: &str) -> anyhow::Result<PathBuf> {
    let path = dir.join(name);
    std::fs::write(&path, contents).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path)
}

/// Runs a mock until Ctrl-C or SIGTERM.
pub async fn run(command: MockCommand) -> anyhow::Result<ExitCode> {
    let place = match &command {
        MockCommand::Apns { place, .. }
        | MockCommand::Fcm { place }
        | MockCommand::Webpush { place, .. } => place,
    };
    std::fs::create_dir_all(&place.out)
        .with_context(|| format!("cannot create {}", place.out.display()))?;
    let out = &place.out.clone();
    let accepted: Box<dyn Fn() -> u64> = match command {
        MockCommand::Apns {
            place,
            max_streams,
            goaway_after,
            client_ca,
        } => {
            let (p8, public) = test_key();
            let client_ca_pem = match &client_ca {
                Some(path) => Some(
                    std::fs::read_to_string(path)
                        .with_context(|| format!("cannot read {}", path.display()))?,
                ),
                None => None,
            };
            let keys = if client_ca_pem.is_some() {
                Vec::new()
            } else {
                vec![(MOCK_KEY_ID.into(), MOCK_TEAM_ID.into(), public)]
            };
            let mock = ApnsMock::start(ApnsMockOptions {
                bind: place.listen,
                max_concurrent_streams: max_streams,
                goaway_after,
                keys,
                client_ca_pem,
            })
            .await
            .context("cannot start the APNs mock")?;
            let ca = write(out, "ca.pem", &mock.cert_pem)?;
            let key = write(out, "AuthKey.p8", &p8)?;
            println!("herald mock apns listening on {}", mock.url());
            println!("certificate: {}", ca.display());
            println!(
                "key: {} (key id {MOCK_KEY_ID}, team id {MOCK_TEAM_ID})",
                key.display()
            );
            Box::new(move || mock.accepted())
        }
        MockCommand::Fcm { place } => {
            let mock = FcmMock::start(FcmMockOptions {
                bind: place.listen,
                ..FcmMockOptions::default()
            })
            .await
            .context("cannot start the FCM mock")?;
            let ca = write(out, "ca.pem", &mock.cert_pem)?;
            let account = write(out, "service-account.json", &test_account(&mock.url()))?;
            println!("herald mock fcm listening on {}", mock.url());
            println!("certificate: {}", ca.display());
            println!("service account: {}", account.display());
            Box::new(move || mock.accepted())
        }
        MockCommand::Webpush {
            place,
            subscriptions,
        } => {
            let mock = WebPushMock::start(WebPushMockOptions {
                bind: place.listen,
                ..WebPushMockOptions::default()
            })
            .await
            .context("cannot start the Web Push mock")?;
            let ca = write(out, "ca.pem", &mock.cert_pem)?;
            let devices: Vec<_> = (0..subscriptions)
                .map(|i| {
                    let s = mock.subscription();
                    json!({"id": format!("webpush-{i}"), "platform": "webpush", "token": s.endpoint,
                           "keys": {"p256dh": s.p256dh, "auth": s.auth}})
                })
                .collect();
            let subs = write(
                out,
                "subscriptions.json",
                &serde_json::to_string_pretty(&json!({ "devices": devices }))?,
            )?;
            println!("herald mock webpush listening on {}", mock.url());
            println!("certificate: {}", ca.display());
            println!(
                "subscriptions: {} (POST it to /v1/devices/batch)",
                subs.display()
            );
            Box::new(move || mock.accepted())
        }
    };
    let mut last = 0;
    let mut tick = tokio::time::interval(Duration::from_secs(5));
    tick.tick().await;
    let mut signals = crate::serve::Signals::install();
    loop {
        tokio::select! {
            _ = signals.next() => break,
            _ = tick.tick() => {
                let now = accepted();
                if now != last {
                    println!("accepted {now} (+{})", now - last);
                    last = now;
                }
            }
        }
    }
    println!("accepted {} in all", accepted());
    Ok(ExitCode::SUCCESS)
}
