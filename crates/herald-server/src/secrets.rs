//! The secrets kept in the data directory (the client-token secret, the key that seals provider
//! credentials): read when the settings give none, and generated (and written readable by the
//! owner only) on the first start.

use std::path::Path;

use herald_core::auth::generate_secret;

use crate::error::ServerError;
use crate::settings::ServerSettings;

/// Name of the file in the data directory that holds the generated token secret.
pub const TOKEN_SECRET_FILE: &str = "token-secret";

/// Name of the file in the data directory that holds the generated credentials key.
pub const CREDENTIALS_KEY_FILE: &str = "credentials-key";

/// The key that seals provider credentials: configured, or read from (or first generated into)
/// the data directory. Losing it makes the stored credentials unreadable (set them again).
pub(crate) fn credentials_key(settings: &ServerSettings) -> Result<String, ServerError> {
    if let Some(key) = &settings.providers.credentials_key {
        return Ok(key.clone());
    }
    if settings.cluster.shared_store() {
        return Err(ServerError::ClusterSecret {
            what: "the credentials key",
            how: "credentials_key, HERALD_CREDENTIALS_KEY; `herald vapid` is not it: 64 hex digits, e.g. from `openssl rand -hex 32`",
        });
    }
    let path = settings.data.join(CREDENTIALS_KEY_FILE);
    let found = read_secret_file(&path).map_err(|source| ServerError::ReadSecret {
        path: path.clone(),
        source,
    })?;
    if let Some(key) = found {
        return Ok(key);
    }
    let key = herald_push::credentials::sealer::generate_key();
    write_private(&path, &key).map_err(|source| ServerError::WriteSecret {
        path: path.clone(),
        source,
    })?;
    tracing::info!(path = %path.display(), "generated a provider credentials key");
    Ok(key)
}

/// Reads a secret file written by the server (trimmed); `Ok(None)` if it does not exist or is
/// empty.
pub fn read_secret_file(path: &Path) -> std::io::Result<Option<String>> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text.trim().to_owned()).filter(|s| !s.is_empty())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// The client-token secret: configured, or read from (or first generated into) the data dir.
pub(crate) fn token_secret(settings: &ServerSettings) -> Result<String, ServerError> {
    if let Some(secret) = &settings.token_secret {
        return Ok(secret.clone());
    }
    if settings.cluster.shared_store() {
        return Err(ServerError::ClusterSecret {
            what: "the client-token secret",
            how: "token_secret, HERALD_TOKEN_SECRET or --token-secret",
        });
    }
    let path = settings.data.join(TOKEN_SECRET_FILE);
    let found = read_secret_file(&path).map_err(|source| ServerError::ReadSecret {
        path: path.clone(),
        source,
    })?;
    if let Some(secret) = found {
        return Ok(secret);
    }
    let secret = generate_secret("");
    write_private(&path, &secret).map_err(|source| ServerError::WriteSecret {
        path: path.clone(),
        source,
    })?;
    tracing::info!(path = %path.display(), "generated a client-token secret");
    Ok(secret)
}

/// Name of the file in the data directory that holds a fingerprint of the token secret the
/// server last started with (never the secret).
pub const TOKEN_SECRET_FINGERPRINT_FILE: &str = "token-secret.fingerprint";

/// Says at WARN when the token secret is not the one of the last start (every client token
/// minted before is refused from now on: a `--token-secret` flag left out, or a new secret),
/// and remembers this one's fingerprint. One node only: a cluster's nodes keep nothing in their
/// data directories.
pub(crate) fn remember_token_secret(settings: &ServerSettings, secret: &str) {
    if settings.cluster.shared_store() {
        return;
    }
    let path = settings.data.join(TOKEN_SECRET_FINGERPRINT_FILE);
    let fingerprint = herald_core::auth::hash_api_key(&format!("herald token secret:{secret}"));
    let fingerprint = &fingerprint[..16];
    let previous = settings.previous_token_secret.as_ref().map(|previous| {
        herald_core::auth::hash_api_key(&format!("herald token secret:{previous}"))[..16].to_owned()
    });
    match read_secret_file(&path) {
        Ok(Some(before)) if before == fingerprint => return,
        Ok(Some(before)) if previous.as_deref() == Some(before.as_str()) => tracing::info!(
            "the client-token secret changed; tokens signed with the one before stay valid while \
             previous_token_secret is set"
        ),
        Ok(Some(_)) => tracing::warn!(
            source = if settings.token_secret.is_some() {
                "configured"
            } else {
                "the data directory's token-secret file"
            },
            "the client-token secret is not the one this server last started with: every \
             client token minted before is refused from now on (was --token-secret or \
             HERALD_TOKEN_SECRET left out, or changed?)"
        ),
        Ok(None) => {}
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "cannot read the token secret's fingerprint")
        }
    }
    let _ = std::fs::remove_file(&path);
    if let Err(e) = write_private(&path, fingerprint) {
        tracing::warn!(path = %path.display(), error = %e, "cannot write the token secret's fingerprint");
    }
}

/// Creates `path` (failing if it exists) readable only by its owner, writes `contents` and
/// syncs it.
fn write_private(path: &Path, contents: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut f = options.open(path)?;
    f.write_all(contents.as_bytes())?;
    f.sync_all()
}
