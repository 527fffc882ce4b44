//! App token secrets sealed at rest: [`SealedTenancy`] wraps the store's [`Tenancy`] so every
//! token secret (an app's current one, and the previous one during a rotation's overlap) is
//! sealed with the server key (`credentials_key`, AES-256-GCM, the provider credentials'
//! sealer) on its way in and opened on its way out; nothing else of the server sees a sealed
//! value. The associated data names the app and which secret it is, so a sealed value copied to
//! another app's row or to the other field does not open. Secrets stored in plain text by an
//! older Herald are sealed when the server opens its store ([`SealedTenancy::seal_plain_secrets`],
//! idempotent; several nodes may do it at once). Publisher keys need none of this: the store
//! only ever holds their SHA-256 hashes.

use std::sync::Arc;

use async_trait::async_trait;
use herald_core::log::StoreError;
use herald_core::revoked::{now_secs, TokenRevocation};
use herald_core::tenancy::{App, AppLimits, KeyInfo, Tenancy, Usage};
use herald_core::tenant::AppId;
use herald_core::token_keys::{AppTokenKeys, PreviousSecret};
use herald_push::credentials::sealer::Sealer;

/// How a sealed secret starts in its column (then hex of nonce, ciphertext and tag).
const SEALED: &str = "sealed:v1:";

/// Which of an app's secrets a value is.
#[derive(Clone, Copy)]
enum Field {
    Current,
    Previous,
}

/// The store's [`Tenancy`], with token secrets sealed at rest.
pub(crate) struct SealedTenancy {
    inner: Arc<dyn Tenancy>,
    sealer: Arc<Sealer>,
}

impl SealedTenancy {
    /// Wraps `inner`, sealing with `sealer`.
    pub fn new(inner: Arc<dyn Tenancy>, sealer: Arc<Sealer>) -> Self {
        SealedTenancy { inner, sealer }
    }

    fn associated(app: &AppId, field: Field) -> Vec<u8> {
        let field = match field {
            Field::Current => "current",
            Field::Previous => "previous",
        };
        format!("herald-token-secret:{}:{field}", app.as_str()).into_bytes()
    }

    fn seal(&self, app: &AppId, field: Field, secret: &str) -> String {
        let sealed = self
            .sealer
            .seal_bound(&Self::associated(app, field), secret.as_bytes());
        format!("{SEALED}{}", hex::encode(sealed))
    }

    /// Opens a stored value; a value stored before sealing existed is returned as it is.
    fn open(&self, app: &AppId, field: Field, stored: &str) -> Result<String, StoreError> {
        let Some(sealed) = stored.strip_prefix(SEALED) else {
            return Ok(stored.to_owned());
        };
        let fail = || {
            StoreError::failed(format!(
                "app {app}'s token secret does not open with this server's credentials key (was \
                 the key changed, or the database copied from another server?)"
            ))
        };
        let sealed = hex::decode(sealed).map_err(|_| fail())?;
        let plain = self
            .sealer
            .open_bound(&Self::associated(app, field), &sealed)
            .map_err(|_| fail())?;
        String::from_utf8(plain).map_err(|_| fail())
    }

    fn open_app(&self, mut app: App) -> Result<App, StoreError> {
        if let Some(secret) = &app.token_secret {
            app.token_secret = Some(self.open(&app.id, Field::Current, secret)?);
        }
        Ok(app)
    }

    fn seal_keys(&self, app: &AppId, keys: &AppTokenKeys) -> AppTokenKeys {
        AppTokenKeys {
            secret: keys
                .secret
                .as_deref()
                .map(|s| self.seal(app, Field::Current, s)),
            previous: keys.previous.as_ref().map(|p| PreviousSecret {
                secret: self.seal(app, Field::Previous, &p.secret),
                until: p.until,
            }),
            public_keys: keys.public_keys.clone(),
            jwks_url: keys.jwks_url.clone(),
        }
    }

    /// Opens what the store holds; a previous secret whose overlap has ended is left out.
    fn open_keys(&self, app: &AppId, keys: AppTokenKeys) -> Result<AppTokenKeys, StoreError> {
        let now = now_secs();
        Ok(AppTokenKeys {
            secret: match &keys.secret {
                Some(s) => Some(self.open(app, Field::Current, s)?),
                None => None,
            },
            previous: match keys.previous_at(now) {
                Some(p) => Some(PreviousSecret {
                    secret: self.open(app, Field::Previous, &p.secret)?,
                    until: p.until,
                }),
                None => None,
            },
            public_keys: keys.public_keys,
            jwks_url: keys.jwks_url,
        })
    }

    /// Seals every token secret the store holds in plain text (stored by an older Herald), and
    /// forgets previous secrets whose overlap has ended; answers how many apps were rewritten.
    /// Running it again (or on several nodes at once) changes nothing more.
    pub async fn seal_plain_secrets(&self) -> Result<usize, StoreError> {
        let now = now_secs();
        let mut sealed = 0;
        for (app, stored) in self.inner.all_token_keys().await? {
            let plain = |v: &str| !v.starts_with(SEALED);
            let expired = stored.previous.as_ref().is_some_and(|p| p.until <= now);
            let needs = stored.secret.as_deref().is_some_and(plain)
                || stored.previous.as_ref().is_some_and(|p| plain(&p.secret))
                || expired;
            if !needs {
                continue;
            }
            let opened = self.open_keys(&app, stored)?;
            self.inner
                .set_token_keys(&app, &self.seal_keys(&app, &opened))
                .await?;
            sealed += 1;
        }
        if sealed > 0 {
            tracing::info!(
                apps = sealed,
                "sealed the token secrets stored in plain text with the server key \
                 (credentials_key); keep that key: without it they cannot be read"
            );
        }
        Ok(sealed)
    }
}

#[async_trait]
impl Tenancy for SealedTenancy {
    async fn create_app(&self, app: &App) -> Result<bool, StoreError> {
        let mut sealed = app.clone();
        sealed.token_secret = app
            .token_secret
            .as_deref()
            .map(|s| self.seal(&app.id, Field::Current, s));
        self.inner.create_app(&sealed).await
    }

    async fn apps(&self) -> Result<Vec<App>, StoreError> {
        let apps = self.inner.apps().await?;
        apps.into_iter().map(|app| self.open_app(app)).collect()
    }

    async fn app(&self, id: &AppId) -> Result<Option<App>, StoreError> {
        match self.inner.app(id).await? {
            Some(app) => Ok(Some(self.open_app(app)?)),
            None => Ok(None),
        }
    }

    async fn set_limits(&self, id: &AppId, limits: AppLimits) -> Result<bool, StoreError> {
        self.inner.set_limits(id, limits).await
    }

    async fn delete_app(&self, id: &AppId) -> Result<bool, StoreError> {
        self.inner.delete_app(id).await
    }

    async fn add_key(&self, key: &KeyInfo) -> Result<(), StoreError> {
        self.inner.add_key(key).await
    }

    async fn remove_key(&self, app: &AppId, key_id: &str) -> Result<bool, StoreError> {
        self.inner.remove_key(app, key_id).await
    }

    async fn keys(&self) -> Result<Vec<KeyInfo>, StoreError> {
        self.inner.keys().await
    }

    async fn add_usage(&self, app: &AppId, counted: Usage) -> Result<(), StoreError> {
        self.inner.add_usage(app, counted).await
    }

    async fn usage(&self, app: &AppId) -> Result<Usage, StoreError> {
        self.inner.usage(app).await
    }

    async fn revoke_tokens(&self, revocation: &TokenRevocation) -> Result<(), StoreError> {
        self.inner.revoke_tokens(revocation).await
    }

    async fn token_revocations(&self) -> Result<Vec<TokenRevocation>, StoreError> {
        self.inner.token_revocations().await
    }

    async fn token_keys(&self, id: &AppId) -> Result<Option<AppTokenKeys>, StoreError> {
        match self.inner.token_keys(id).await? {
            Some(keys) => Ok(Some(self.open_keys(id, keys)?)),
            None => Ok(None),
        }
    }

    async fn all_token_keys(&self) -> Result<Vec<(AppId, AppTokenKeys)>, StoreError> {
        let all = self.inner.all_token_keys().await?;
        all.into_iter()
            .map(|(app, keys)| {
                let keys = self.open_keys(&app, keys)?;
                Ok((app, keys))
            })
            .collect()
    }

    async fn set_token_keys(&self, id: &AppId, keys: &AppTokenKeys) -> Result<bool, StoreError> {
        self.inner
            .set_token_keys(id, &self.seal_keys(id, keys))
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_secret_opens_only_for_its_app_and_field() {
        let sealer =
            Arc::new(Sealer::new(&herald_push::credentials::sealer::generate_key()).unwrap());
        let sealed = SealedTenancy::new(Arc::new(crate::usage_store::UsageOnly::default()), sealer);
        let (shop, other) = (
            AppId::parse("shop").unwrap(),
            AppId::parse("other").unwrap(),
        );
        let value = sealed.seal(&shop, Field::Current, "hs_secret");
        assert!(value.starts_with(SEALED) && !value.contains("hs_secret"));
        assert_eq!(
            sealed.open(&shop, Field::Current, &value).unwrap(),
            "hs_secret"
        );
        assert!(sealed.open(&other, Field::Current, &value).is_err());
        assert!(sealed.open(&shop, Field::Previous, &value).is_err());
        assert_eq!(
            sealed.open(&shop, Field::Current, "plain").unwrap(),
            "plain"
        );
    }
}
