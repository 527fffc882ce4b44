//! Signing secrets at rest: sealed with the server's credentials key ([`Sealer::seal_bound`],
//! AES-256-GCM, as provider credentials are) with the app as associated data, so a sealed
//! secret copied to another app's endpoint does not open. `signing_secrets` opens the ones a
//! request is signed with (the worker's batches and the service's test event alike).

use herald_core::tenant::AppId;
use herald_push::credentials::sealer::{SealError, Sealer};

use crate::endpoint::StoredEndpoint;
use crate::signing::SigningSecret;

fn associated(app: &AppId) -> Vec<u8> {
    format!("herald-hook-secret:{}", app.as_str()).into_bytes()
}

/// `secret` sealed for an endpoint of `app`.
pub fn seal(sealer: &Sealer, app: &AppId, secret: &SigningSecret) -> Vec<u8> {
    sealer.seal_bound(&associated(app), secret.bytes())
}

/// A sealed secret of an endpoint of `app`, opened.
pub fn open(sealer: &Sealer, app: &AppId, sealed: &[u8]) -> Result<SigningSecret, SealError> {
    sealer
        .open_bound(&associated(app), sealed)
        .map(SigningSecret::from_bytes)
}

/// The secrets a request to `stored` is signed with at `now_ms`, opened: the current one,
/// then the one it replaced while its overlap lasts (`now_ms` before its end). An error when
/// the current one does not open; a previous one that does not open is left out (it only adds
/// a signature: the current one signs without it).
pub(crate) fn signing_secrets(
    sealer: &Sealer,
    stored: &StoredEndpoint,
    now_ms: i64,
) -> Result<Vec<SigningSecret>, SealError> {
    let app = &stored.endpoint.app;
    let mut secrets = vec![open(sealer, app, &stored.secret)?];
    if let Some((sealed, until_ms)) = &stored.previous_secret {
        if now_ms < *until_ms {
            if let Ok(previous) = open(sealer, app, sealed) {
                secrets.push(previous);
            }
        }
    }
    Ok(secrets)
}

#[cfg(test)]
mod tests {
    use super::*;
    use herald_push::credentials::sealer::generate_key;

    #[test]
    fn a_secret_opens_for_its_app_only() {
        let sealer = Sealer::new(&generate_key()).unwrap();
        let shop = AppId::parse("shop").unwrap();
        let secret = SigningSecret::generate();
        let sealed = seal(&sealer, &shop, &secret);
        assert!(!sealed
            .windows(secret.bytes().len())
            .any(|w| w == secret.bytes()));
        assert_eq!(open(&sealer, &shop, &sealed).unwrap(), secret);
        assert!(open(&sealer, &AppId::default_app(), &sealed).is_err());
    }
}
