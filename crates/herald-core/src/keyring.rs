//! One app's token keys on this node ([`AppKeyring`]): its HS256 secret, the previous secret
//! while a rotation's overlap lasts, its PEM public keys and its JWKS cache, and verifying a
//! token with them. An HS256 token is only ever checked with the secrets, an RS256 or ES256
//! token only with public keys of its own algorithm (so a public key can never be used as an
//! HMAC secret, and `none` is never accepted). Every key carries a generation
//! ([`crate::auth::TokenStamp::secret`]): a live client stays valid while its key's generation
//! is still held, so rebuilding the keyring with unchanged keys ends nobody.

use std::sync::Arc;

use jsonwebtoken::{Algorithm, DecodingKey, Header};

use crate::auth::{decode_client, next_generation, validation, Client, Decoded, TokenKeys};
use crate::error::{ErrorCode, HeraldError};
use crate::jwks::JwksCache;
use crate::tenant::AppId;
use crate::token_keys::{AppTokenKeys, KeyAlg, PublicKeySpec};

/// A configured public key, parsed.
pub(crate) struct PublicKey {
    spec: PublicKeySpec,
    key: DecodingKey,
    generation: u64,
}

/// Everything that verifies one app's tokens.
#[derive(Default)]
pub(crate) struct AppKeyring {
    /// The HS256 secret (minting and verifying).
    pub secret: Option<Arc<TokenKeys>>,
    /// The previous HS256 secret and until when (seconds) it verifies.
    pub previous: Option<(Arc<TokenKeys>, u64)>,
    /// Configured public keys.
    pub public: Vec<Arc<PublicKey>>,
    /// The key set fetched from the app's JWKS URL.
    pub jwks: Option<Arc<JwksCache>>,
}

impl AppKeyring {
    /// A keyring of one HS256 secret.
    pub fn with_secret(secret: &[u8]) -> Self {
        AppKeyring {
            secret: Some(Arc::new(TokenKeys::new(secret))),
            ..AppKeyring::default()
        }
    }

    /// The same keys with `secret` as the HS256 secret (kept as is if unchanged).
    pub fn replace_secret(&self, secret: &[u8]) -> Self {
        AppKeyring {
            secret: Some(self.reuse_secret(secret)),
            previous: self.previous.clone(),
            public: self.public.clone(),
            jwks: self.jwks.clone(),
        }
    }

    /// A keyring of `keys`, keeping every unchanged key of `self` (and its generation). With
    /// `configured_secret`, the HS256 secrets (current and previous) are `self`'s, whatever
    /// `keys` says (the default app's secrets are the server's configuration, not stored).
    pub fn rebuild(&self, app: &AppId, keys: &AppTokenKeys, configured_secret: bool) -> Self {
        let secret = if configured_secret {
            self.secret.clone()
        } else {
            keys.secret
                .as_deref()
                .map(|s| self.reuse_secret(s.as_bytes()))
        };
        let previous = if configured_secret {
            self.previous.clone()
        } else {
            keys.previous
                .as_ref()
                .map(|p| (self.reuse_secret(p.secret.as_bytes()), p.until))
        };
        let public = keys
            .public_keys
            .iter()
            .filter_map(|spec| {
                if let Some(old) = self.public.iter().find(|k| k.spec == *spec) {
                    return Some(old.clone());
                }
                match spec.decoding_key() {
                    Ok(key) => Some(Arc::new(PublicKey {
                        spec: spec.clone(),
                        key,
                        generation: next_generation(),
                    })),
                    Err(e) => {
                        tracing::warn!(%app, error = %e.message, "a stored public key is unusable");
                        None
                    }
                }
            })
            .collect();
        let jwks = keys.jwks_url.as_ref().map(|url| match &self.jwks {
            Some(cache) if cache.url() == url => cache.clone(),
            _ => Arc::new(JwksCache::new(app.clone(), url.clone(), next_generation())),
        });
        AppKeyring {
            secret,
            previous,
            public,
            jwks,
        }
    }

    fn reuse_secret(&self, secret: &[u8]) -> Arc<TokenKeys> {
        self.secret
            .iter()
            .chain(self.previous.iter().map(|(keys, _)| keys))
            .find(|keys| keys.secret() == secret)
            .cloned()
            .unwrap_or_else(|| Arc::new(TokenKeys::new(secret)))
    }

    /// The previous secret, if its overlap lasts at `now` (seconds).
    fn previous_at(&self, now: u64) -> Option<&Arc<TokenKeys>> {
        self.previous
            .as_ref()
            .filter(|(_, until)| *until > now)
            .map(|(keys, _)| keys)
    }

    /// Whether a client verified by the key of `generation` is still valid at `now`.
    pub fn holds(&self, generation: u64, now: u64) -> bool {
        self.secret
            .iter()
            .chain(self.previous_at(now))
            .any(|keys| keys.generation() == generation)
            || self.public.iter().any(|k| k.generation == generation)
            || self
                .jwks
                .as_ref()
                .is_some_and(|c| c.generation == generation)
    }

    /// The key id a token names, unless it is the app's id (which names the app, not a key).
    fn named_kid<'h>(header: &'h Header, app: &AppId) -> Option<&'h str> {
        header.kid.as_deref().filter(|kid| *kid != app.as_str())
    }

    /// Whether a token with `header` needs the app's key set fetched (first, or again for a
    /// key id it does not hold).
    pub fn wants_key_set(&self, header: &Header, app: &AppId) -> Option<&Arc<JwksCache>> {
        let cache = self.jwks.as_ref()?;
        if header.alg == Algorithm::HS256 {
            return None;
        }
        let kid = Self::named_kid(header, app);
        let unknown = kid.is_some_and(|kid| {
            !cache.has_kid(kid)
                && !self
                    .public
                    .iter()
                    .any(|k| k.spec.kid.as_deref() == Some(kid))
        });
        (!cache.fetched() || unknown).then_some(cache)
    }

    /// Verifies a token whose header is `header` with this app's keys at `now` (seconds).
    pub fn verify(
        &self,
        app: &AppId,
        token: &str,
        header: &Header,
        now: u64,
    ) -> Result<(Client, Option<String>), HeraldError> {
        let alg = match header.alg {
            Algorithm::HS256 => return self.verify_hs256(app, token, now),
            Algorithm::RS256 => KeyAlg::RS256,
            Algorithm::ES256 => KeyAlg::ES256,
            other => return Err(unsupported_alg(&format!("{other:?}"))),
        };
        let kid = Self::named_kid(header, app);
        let set = self.jwks.as_ref().map(|c| (c.keys(), c.generation));
        let mut candidates: Vec<(&DecodingKey, KeyAlg, u64)> = Vec::new();
        for key in &self.public {
            if kid.is_none_or(|kid| key.spec.kid.as_deref() == Some(kid)) {
                candidates.push((&key.key, key.spec.alg, key.generation));
            }
        }
        if let Some((keys, generation)) = &set {
            for key in keys.iter() {
                if kid.is_none_or(|kid| key.kid.as_deref() == Some(kid)) {
                    candidates.push((&key.key, key.alg, *generation));
                }
            }
        }
        if candidates.is_empty() {
            return Err(self.no_key(app, kid));
        }
        let own_alg: Vec<_> = candidates.iter().filter(|c| c.1 == alg).collect();
        if own_alg.is_empty() {
            let other = candidates[0].1.as_str();
            return Err(unauthorized(match kid {
                Some(kid) => format!(
                    "the token says alg {} but key {kid:?} of app {app} is an {other} key",
                    alg.as_str()
                ),
                None => format!(
                    "the token says alg {} but app {app} has only {other} keys",
                    alg.as_str()
                ),
            }));
        }
        let validation = validation(alg.jwt());
        for (key, _, generation) in own_alg {
            match decode_client(token, key, &validation, *generation) {
                Decoded::Client(client, jti) => return Ok((client, jti)),
                Decoded::BadSignature => continue,
                Decoded::Refused(e) => return Err(e),
            }
        }
        Err(unauthorized(format!(
            "the token's signature does not verify with {} of app {app}",
            match kid {
                Some(kid) => format!("key {kid:?}"),
                None => "any public key".to_owned(),
            }
        )))
    }

    fn verify_hs256(
        &self,
        app: &AppId,
        token: &str,
        now: u64,
    ) -> Result<(Client, Option<String>), HeraldError> {
        let Some(current) = &self.secret else {
            return Err(unauthorized(format!(
                "app {app} has no HS256 token secret: its tokens are signed by its backend with \
                 RS256 or ES256 keys"
            )));
        };
        for keys in std::iter::once(current).chain(self.previous_at(now)) {
            match keys.decode(token) {
                Decoded::Client(client, jti) => return Ok((client, jti)),
                Decoded::BadSignature => continue,
                Decoded::Refused(e) => return Err(e),
            }
        }
        Err(HeraldError::new(
            ErrorCode::Unauthorized,
            "the token's signature is not valid for this server",
        ))
    }

    fn no_key(&self, app: &AppId, kid: Option<&str>) -> HeraldError {
        let set = match &self.jwks {
            Some(c) if !c.fetched() => format!(
                "; its key set at {} could not be fetched yet (retry shortly)",
                c.url()
            ),
            Some(c) => format!(" nor in its key set at {}", c.url()),
            None => String::new(),
        };
        unauthorized(match kid {
            Some(kid) => format!("the token names key {kid:?}, which app {app} does not have{set}"),
            None => format!(
                "app {app} has no RS256 or ES256 public keys{set} (give it keys with PUT \
                 /v1/apps/{app}/token-keys)"
            ),
        })
    }
}

fn unauthorized(message: String) -> HeraldError {
    HeraldError::new(ErrorCode::Unauthorized, message)
}

/// A token signed with an algorithm Herald never accepts.
pub(crate) fn unsupported_alg(alg: &str) -> HeraldError {
    let alg: String = alg.chars().take(16).collect();
    unauthorized(if alg.eq_ignore_ascii_case("none") {
        "the token is unsigned (alg none), which is never accepted: sign it with HS256, RS256 or \
         ES256"
            .to_owned()
    } else {
        format!("the token is signed with {alg}; Herald accepts HS256, RS256 and ES256")
    })
}
