//! `herald vapid`: makes a VAPID key pair (P-256) for Web Push and prints it as JSON. The public
//! key is what a web page passes to `pushManager.subscribe` as `applicationServerKey`; the
//! private key goes to `herald providers set webpush --private-key`.

use std::process::ExitCode;

use serde_json::json;

use herald_server::vocabulary::VapidKeys;

pub const EXAMPLES: &str = "\
Examples:
  herald vapid
  herald providers set webpush --subject mailto:ops@example.com \\
      --private-key \"$(herald vapid | jq -r .private_key)\"

Prints {\"public_key\": ..., \"private_key\": ...}, both base64url (RFC 8292). Keep the private
key secret; `herald providers set webpush --generate` makes one on the server instead.";

/// Prints a new key pair.
pub fn run() -> anyhow::Result<ExitCode> {
    let keys = VapidKeys::generate();
    println!(
        "{}",
        json!({ "public_key": keys.public_b64url(), "private_key": keys.private_b64url() })
    );
    Ok(ExitCode::SUCCESS)
}
