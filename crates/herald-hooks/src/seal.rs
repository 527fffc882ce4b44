//! Signing secrets at rest: sealed with the server's credentials key ([`Sealer::seal_bound`],
//! AES-256-GCM, as provider credentials are) with the app as associated data, so a sealed
//! secret copied to another app's endpoint does not open.

use herald_core::tenant::AppId;
use herald_push::credentials::sealer::{SealError, Sealer};

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
