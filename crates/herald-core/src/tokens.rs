//! Every app's token keys on this node ([`Tokens`]): which app a token is for (its `kid`, else
//! its `aud`, else the default app), verifying it with that app's [`AppKeyring`], refusing
//! revoked tokens, telling which live clients a key change or a revocation ends
//! ([`Tokens::still_valid`]), minting with an app's HS256 secret, and fetching JWKS key sets
//! through the server's [`KeySetSource`] (in the background, or bounded on a connect:
//! [`Tokens::prepare`]).

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use jsonwebtoken::{Algorithm, Header};
use parking_lot::RwLock;

use crate::auth::{token_error, Client, ClientClaims, TokenKeys, TokenStamp};
use crate::error::{ErrorCode, HeraldError};
use crate::jwks::{JwksCache, JwksOptions, KeySetSource};
use crate::keyring::{unsupported_alg, AppKeyring};
use crate::outbox::CloseReason;
use crate::revoked::{RevokedTokens, TokenRevocation};
use crate::tenant::{AppId, DEFAULT_APP};
use crate::token_keys::AppTokenKeys;

/// Every app's token keys: the default app's (the server's token secret, and any public keys
/// it was given) and each other app's (`AppKeyring`). An HS256 token names its app in the
/// header's `kid` (no `kid`: the default app); an RS256 or ES256 token names it in its `kid`,
/// else in its `aud` claim, else is the default app's, and its `kid` (when not the app's id)
/// names the key.
pub struct Tokens {
    default: RwLock<Arc<AppKeyring>>,
    apps: RwLock<HashMap<AppId, Arc<AppKeyring>>>,
    /// Tokens revoked by `jti` or by issue time, per app.
    revoked: RevokedTokens,
    /// Fetches key sets (set once by the server; without it JWKS URLs are never fetched).
    source: OnceLock<(Arc<dyn KeySetSource>, JwksOptions)>,
}

impl Tokens {
    /// A keyring holding the default app's secret.
    pub fn new(default_secret: &[u8]) -> Self {
        Tokens {
            default: RwLock::new(Arc::new(AppKeyring::with_secret(default_secret))),
            apps: RwLock::new(HashMap::new()),
            revoked: RevokedTokens::default(),
            source: OnceLock::new(),
        }
    }

    /// Keeps the default app's previous secret (`previous_token_secret` in the configuration)
    /// verifying tokens beside the current one, for as long as it stays configured.
    pub fn set_default_previous(&self, previous: &[u8]) {
        let mut default = self.default.write();
        *default = Arc::new(AppKeyring {
            secret: default.secret.clone(),
            previous: Some((Arc::new(TokenKeys::new(previous)), u64::MAX)),
            public: default.public.clone(),
            jwks: default.jwks.clone(),
        });
    }

    /// Sets what fetches key sets from JWKS URLs, and how often; `false` if one was set.
    pub fn set_key_source(&self, source: Arc<dyn KeySetSource>, options: JwksOptions) -> bool {
        self.source.set((source, options)).is_ok()
    }

    /// Adds or replaces an app's HS256 secret, keeping its other keys (the same secret again
    /// keeps its keys, so clients it verified stay valid).
    pub fn set_app(&self, app: &AppId, secret: &[u8]) {
        let mut apps = self.apps.write();
        let ring = match apps.get(app) {
            Some(ring) if ring.secret.as_ref().is_some_and(|k| k.secret() == secret) => return,
            Some(ring) => ring.replace_secret(secret),
            None => AppKeyring::with_secret(secret),
        };
        apps.insert(app.clone(), Arc::new(ring));
    }

    /// Replaces everything that verifies an app's tokens with `keys` (unchanged keys keep
    /// verifying the clients they verified); the default app keeps the server's secret. A key
    /// set not fetched yet is fetched in the background.
    pub fn set_app_keys(&self, app: &AppId, keys: &AppTokenKeys) {
        let ring = if app.is_default() {
            let mut default = self.default.write();
            let ring = Arc::new(default.rebuild(app, keys, true));
            *default = ring.clone();
            ring
        } else {
            let mut apps = self.apps.write();
            let old = apps.get(app).cloned().unwrap_or_default();
            let ring = Arc::new(old.rebuild(app, keys, false));
            apps.insert(app.clone(), ring.clone());
            ring
        };
        if let Some(cache) = ring.jwks.as_ref().filter(|c| !c.fetched()) {
            self.refresh_in_background(cache);
        }
    }

    /// Refuses, from now on, the tokens `revocation` names.
    pub fn revoke(&self, revocation: &TokenRevocation) {
        self.revoked.add(revocation);
    }

    /// Replaces every revocation with `revocations` (as the store lists them).
    pub fn replace_revocations(&self, revocations: &[TokenRevocation]) {
        self.revoked.replace(revocations);
    }

    fn keyring(&self, app: &AppId) -> Option<Arc<AppKeyring>> {
        if app.is_default() {
            Some(self.default.read().clone())
        } else {
            self.apps.read().get(app).cloned()
        }
    }

    /// Why a live client verified earlier must end now, if it must: its app is gone, the key
    /// that verified it is no longer the app's (a changed secret, a rotation's overlap ended, a
    /// removed public key or JWKS URL), or its token was revoked. Anonymous clients never end
    /// this way.
    pub fn still_valid(&self, app: &AppId, token: &TokenStamp) -> Result<(), CloseReason> {
        if token.secret == 0 {
            return Ok(());
        }
        let Some(ring) = self.keyring(app) else {
            return Err(CloseReason::AppDeleted);
        };
        if !ring.holds(token.secret, crate::revoked::now_secs()) {
            return Err(CloseReason::SecretChanged);
        }
        if self.revoked.matches(app, token) {
            return Err(CloseReason::Revoked);
        }
        Ok(())
    }

    /// Forgets the secret of every app `keep` rejects.
    pub fn retain_apps(&self, keep: impl Fn(&AppId) -> bool) {
        self.apps.write().retain(|app, _| keep(app));
    }

    /// Forgets an app's secret.
    pub fn remove_app(&self, app: &AppId) {
        self.apps.write().remove(app);
    }

    /// The app a token is for and its keys.
    fn route(&self, token: &str) -> Result<(Header, AppId, Arc<AppKeyring>), HeraldError> {
        let header = jsonwebtoken::decode_header(token).map_err(|e| header_error(token, &e))?;
        let by_kid = |kid: &str| -> Option<(AppId, Arc<AppKeyring>)> {
            if kid == DEFAULT_APP {
                return Some((AppId::default_app(), self.default.read().clone()));
            }
            let app = AppId::parse(kid).ok()?;
            // The map's own id is kept, so every client of an app shares one string.
            self.apps
                .read()
                .get_key_value(&app)
                .map(|(id, ring)| (id.clone(), ring.clone()))
        };
        let default = || (AppId::default_app(), self.default.read().clone());
        let (app, ring) = match (header.alg, header.kid.as_deref()) {
            (Algorithm::HS256, None) => default(),
            (Algorithm::HS256, Some(kid)) => by_kid(kid).ok_or_else(unknown_app)?,
            (Algorithm::RS256 | Algorithm::ES256, kid) => kid
                .and_then(by_kid)
                .or_else(|| audience(token).iter().find_map(|aud| by_kid(aud)))
                .unwrap_or_else(default),
            (other, _) => return Err(unsupported_alg(&format!("{other:?}"))),
        };
        Ok((header, app, ring))
    }

    /// Verifies a token with its app's keys and returns the client it names. Never waits: a
    /// key id the app's key set does not hold starts a refetch in the background (see
    /// [`Tokens::prepare`] for the wait a connect may afford).
    pub fn verify(&self, token: &str) -> Result<Client, HeraldError> {
        let (header, app, ring) = self.route(token)?;
        let verified = ring.verify(&app, token, &header, crate::revoked::now_secs());
        let (mut client, jti) = match verified {
            Ok(found) => found,
            Err(e) => {
                if let Some(cache) = ring.wants_key_set(&header, &app) {
                    self.refetch_for_unknown_kid(cache);
                }
                return Err(e);
            }
        };
        client.app = app;
        if self
            .revoked
            .refuses(&client.app, jti.as_deref(), client.token.iat)
        {
            return Err(HeraldError::new(
                ErrorCode::Unauthorized,
                "the token was revoked; get a new one",
            ));
        }
        Ok(client)
    }

    /// Makes sure the keys `token` needs are here before [`Tokens::verify`]: when its app's key
    /// set was never fetched, or lacks the key id the token names, waits for the fetch running
    /// now or starts one (if the last began at least the least refetch interval ago), at most
    /// the fetch timeout. Returns at once in every other case (no network round trip when the
    /// key is cached); a stale key set is refreshed in the background.
    pub async fn prepare(&self, token: &str) {
        let Some((source, options)) = self.source.get() else {
            return;
        };
        let Ok((header, app, ring)) = self.route(token) else {
            return;
        };
        let Some(cache) = ring.jwks.as_ref() else {
            return;
        };
        let now = std::time::Instant::now();
        // A fetch already running is waited for; a new one only as often as the least refetch
        // interval allows (also while the key server is down and nothing was ever fetched).
        let wanted = ring.wants_key_set(&header, &app).is_some()
            && (cache.fetching() || cache.may_refetch(now, options.min_refetch));
        if wanted {
            let _ =
                tokio::time::timeout(options.fetch_timeout, cache.refresh(source.as_ref())).await;
        } else if cache.stale(now) {
            self.refresh_in_background(cache);
        }
    }

    fn refetch_for_unknown_kid(&self, cache: &Arc<JwksCache>) {
        if let Some((_, options)) = self.source.get() {
            if cache.may_refetch(std::time::Instant::now(), options.min_refetch) {
                self.refresh_in_background(cache);
            }
        }
    }

    fn refresh_in_background(&self, cache: &Arc<JwksCache>) {
        let (Some((source, _)), Ok(runtime)) =
            (self.source.get(), tokio::runtime::Handle::try_current())
        else {
            return;
        };
        let (cache, source) = (cache.clone(), source.clone());
        runtime.spawn(async move { cache.refresh(source.as_ref()).await });
    }

    /// Whether this keyring knows `app` (the default app, or an app whose keys were set):
    /// every app that exists has token keys.
    pub fn knows(&self, app: &AppId) -> bool {
        app.is_default() || self.apps.read().contains_key(app)
    }

    /// Signs a token for `app` with its secret; `None` if the app is unknown or has no HS256
    /// secret (its backend mints its tokens).
    pub fn mint(&self, app: &AppId, claims: &ClientClaims) -> Option<String> {
        let ring = self.keyring(app)?;
        let keys = ring.secret.as_ref()?;
        Some(if app.is_default() {
            keys.mint(claims)
        } else {
            keys.mint_for(app, claims)
        })
    }
}

/// The `aud` claim of a token, unverified (it only picks the app whose keys then verify the
/// token): one string or a list.
fn audience(token: &str) -> Vec<String> {
    use base64::Engine as _;
    let Some(payload) = token.split('.').nth(1) else {
        return Vec::new();
    };
    let Ok(bytes) = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(payload) else {
        return Vec::new();
    };
    #[derive(serde::Deserialize)]
    #[serde(untagged)]
    enum Aud {
        One(String),
        Many(Vec<String>),
    }
    #[derive(serde::Deserialize)]
    struct Peek {
        aud: Option<Aud>,
    }
    match serde_json::from_slice::<Peek>(&bytes)
        .ok()
        .and_then(|p| p.aud)
    {
        Some(Aud::One(aud)) => vec![aud],
        Some(Aud::Many(auds)) => auds.into_iter().take(8).collect(),
        None => Vec::new(),
    }
}

/// Why a token's header was refused: an algorithm Herald never accepts is named as such.
fn header_error(token: &str, e: &jsonwebtoken::errors::Error) -> HeraldError {
    use base64::Engine as _;
    let alg = token
        .split('.')
        .next()
        .and_then(|h| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(h)
                .ok()
        })
        .and_then(|h| serde_json::from_slice::<serde_json::Value>(&h).ok())
        .and_then(|h| h.get("alg").and_then(|a| a.as_str()).map(str::to_owned));
    match alg {
        Some(alg) if alg.parse::<Algorithm>().is_err() => unsupported_alg(&alg),
        _ => token_error(token, e.kind()),
    }
}

fn unknown_app() -> HeraldError {
    HeraldError::new(
        ErrorCode::Unauthorized,
        "the token names an app this server does not know",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::token_keys::{KeyAlg, PreviousSecret, PublicKeySpec};
    use jsonwebtoken::EncodingKey;

    /// A P-256 key pair made for these tests only.
    const EC_PUBLIC: &str = "-----BEGIN PUBLIC KEY-----
MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEoEI1x3SbnuU6A9oA3roWaJZabNd5
Gi97gFUdLInpCR5FW6vrtkrPc7uqu+YiWj2tbmYsa87rh2f1B8APUhgkvw==
-----END PUBLIC KEY-----
";
    const EC_PRIVATE: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgM5kRl+VOCrbNK+BT
6nXSM5znKrf0dcAyvFw8NpHPkFqhRANCAASgQjXHdJue5ToD2gDeuhZollps13ka
L3uAVR0siekJHkVbq+u2Ss9zu6q75iJaPa1uZixrzuuHZ/UHwA9SGCS/
-----END PRIVATE KEY-----
";

    fn claims() -> serde_json::Value {
        serde_json::json!({ "sub": "alice", "aud": "shop", "channels": ["news"] })
    }

    fn sign(alg: Algorithm, kid: Option<&str>, key: &EncodingKey) -> String {
        let mut header = Header::new(alg);
        header.kid = kid.map(str::to_owned);
        jsonwebtoken::encode(&header, &claims(), key).unwrap()
    }

    fn shop_keys(secret: Option<&str>, previous: Option<(&str, u64)>) -> AppTokenKeys {
        AppTokenKeys {
            secret: secret.map(str::to_owned),
            previous: previous.map(|(secret, until)| PreviousSecret {
                secret: secret.into(),
                until,
            }),
            public_keys: vec![PublicKeySpec {
                kid: Some("ec-1".into()),
                alg: KeyAlg::ES256,
                pem: EC_PUBLIC.into(),
            }],
            jwks_url: None,
        }
    }

    #[test]
    fn es256_tokens_verify_by_kid_and_by_audience_and_confusions_are_refused() {
        let tokens = Tokens::new(b"default-secret-0123456789");
        let shop = AppId::parse("shop").unwrap();
        tokens.set_app_keys(&shop, &shop_keys(Some("hs_shop"), None));
        let private = EncodingKey::from_ec_pem(EC_PRIVATE.as_bytes()).unwrap();
        let by_kid = tokens
            .verify(&sign(Algorithm::ES256, Some("ec-1"), &private))
            .unwrap();
        assert_eq!(
            (by_kid.app.as_str(), by_kid.sub.as_str()),
            ("shop", "alice")
        );
        let by_app = tokens
            .verify(&sign(Algorithm::ES256, Some("shop"), &private))
            .unwrap();
        assert_eq!(by_app.token.secret, by_kid.token.secret, "the same key");
        // HS256 with the public key as the HMAC secret: checked only with the app's secret.
        let public_as_secret = EncodingKey::from_secret(EC_PUBLIC.as_bytes());
        let e = tokens
            .verify(&sign(Algorithm::HS256, Some("shop"), &public_as_secret))
            .unwrap_err();
        assert!(
            e.message.contains("signature is not valid"),
            "{}",
            e.message
        );
        let e = tokens
            .verify(&sign(Algorithm::ES256, Some("ec-2"), &private))
            .unwrap_err();
        assert!(e.message.contains("names key \"ec-2\""), "{}", e.message);
        // A changed key ends the clients it verified; an unchanged rebuild ends nobody.
        tokens.set_app_keys(&shop, &shop_keys(Some("hs_shop"), None));
        assert!(tokens.still_valid(&shop, &by_kid.token).is_ok());
        tokens.set_app_keys(
            &shop,
            &AppTokenKeys {
                public_keys: vec![],
                ..shop_keys(Some("hs_shop"), None)
            },
        );
        assert_eq!(
            tokens.still_valid(&shop, &by_kid.token),
            Err(CloseReason::SecretChanged)
        );
    }

    #[test]
    fn a_rotated_out_secret_verifies_until_its_overlap_ends() {
        let tokens = Tokens::new(b"default-secret-0123456789");
        let shop = AppId::parse("shop").unwrap();
        tokens.set_app(&shop, b"hs_old");
        let claims = ClientClaims::default();
        let old = tokens.mint(&shop, &claims).unwrap();
        let client = tokens.verify(&old).unwrap();
        let now = crate::revoked::now_secs();
        tokens.set_app_keys(
            &shop,
            &shop_keys(Some("hs_new"), Some(("hs_old", now + 60))),
        );
        assert!(tokens.verify(&old).is_ok(), "within the overlap");
        assert!(
            tokens.still_valid(&shop, &client.token).is_ok(),
            "same generation"
        );
        let new = tokens.mint(&shop, &claims).unwrap();
        assert_ne!(new, old, "minted with the new secret");
        tokens.set_app_keys(&shop, &shop_keys(Some("hs_new"), Some(("hs_old", now))));
        assert!(tokens.verify(&old).is_err(), "the overlap ended");
        assert_eq!(
            tokens.still_valid(&shop, &client.token),
            Err(CloseReason::SecretChanged)
        );
        // Without an HS256 secret, nothing is minted and HS256 tokens say why.
        tokens.set_app_keys(&shop, &shop_keys(None, None));
        assert!(tokens.mint(&shop, &claims).is_none());
        let e = tokens.verify(&new).unwrap_err();
        assert!(e.message.contains("no HS256 token secret"), "{}", e.message);
    }
}
