//! Who may do what: publisher API keys (kept only as SHA-256 hashes) and client tokens (JWTs
//! with `sub`, `exp`, `channels` and `publish` claims, HS256 over an app's secret or RS256 and
//! ES256 over its public keys: [`Tokens`], `crate::keyring`, [`crate::jwks`]). The claims and minting are the wire
//! contract's (`herald_proto::token`); verifying them is the server's, here, as is refusing
//! revoked tokens ([`crate::revoked`]) and telling which live clients a secret change or a
//! revocation ends ([`Tokens::still_valid`]).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};

use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use parking_lot::RwLock;
use sha2::{Digest, Sha256};

use crate::error::{ErrorCode, HeraldError};
use crate::pattern::PatternSet;
use crate::revoked::fingerprint;
use crate::tenant::AppId;

pub use herald_proto::token::ClientClaims;

pub use crate::tokens::Tokens;

/// An authenticated (or anonymous) client and what it may do.
#[derive(Debug, Clone)]
pub struct Client {
    /// The app the client belongs to.
    pub app: AppId,
    /// The device a device token names.
    pub device: Option<String>,
    /// The token's `sub`, empty for anonymous clients.
    pub sub: String,
    /// When the token expires, seconds since the Unix epoch.
    pub expires: Option<u64>,
    /// Channels it may subscribe to.
    pub subscribe: PatternSet,
    /// Channels it may publish to.
    pub publish: PatternSet,
    /// What a revocation can match of the token the client presented.
    pub token: TokenStamp,
    /// The token's `user_info` claim (JSON text), a presence channel's member data.
    pub user_info: Option<Box<str>>,
}

/// What a secret change or a revocation can match of a verified token, kept compact (24 bytes)
/// because every live client holds one in the registry ([`crate::live`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TokenStamp {
    /// [`fingerprint`] of the token's `jti`; 0 without one.
    pub jti: u64,
    /// The token's `iat`; 0 without one.
    pub iat: u64,
    /// The generation of the app secret that verified it ([`TokenKeys`]); 0 for an anonymous
    /// client, which presented no token.
    pub secret: u64,
}

impl Client {
    /// An anonymous client (only when the server allows it): may subscribe to any channel and
    /// publish to none.
    pub fn anonymous() -> Self {
        Client {
            app: AppId::default_app(),
            device: None,
            sub: String::new(),
            expires: None,
            subscribe: PatternSet::all(),
            publish: PatternSet::default(),
            token: TokenStamp::default(),
            user_info: None,
        }
    }

    /// Checks subscribe permission.
    pub fn check_subscribe(&self, channel: &str) -> Result<(), HeraldError> {
        if self.subscribe.allows(channel) {
            Ok(())
        } else {
            Err(HeraldError::forbidden(format!(
                "the token does not allow subscribing to {channel:?}"
            )))
        }
    }

    /// Checks publish permission.
    pub fn check_publish(&self, channel: &str) -> Result<(), HeraldError> {
        if self.publish.allows(channel) {
            Ok(())
        } else {
            Err(HeraldError::forbidden(format!(
                "the token does not allow publishing to {channel:?}"
            )))
        }
    }
}

/// Hands out key generations: every [`TokenKeys`] and public key made gets the next.
static GENERATIONS: AtomicU64 = AtomicU64::new(1);

/// The next key generation (never 0).
pub(crate) fn next_generation() -> u64 {
    GENERATIONS.fetch_add(1, Ordering::Relaxed)
}

/// The claim checks every token passes, whatever its algorithm: `exp` and `nbf` without
/// leeway, no audience check (an `aud` only names the app).
pub(crate) fn validation(alg: Algorithm) -> Validation {
    let mut validation = Validation::new(alg);
    validation.required_spec_claims = HashSet::new();
    validation.leeway = 0;
    validation.validate_exp = true;
    validation.validate_nbf = true;
    validation.validate_aud = false;
    validation
}

/// What decoding a token with one key found.
pub(crate) enum Decoded {
    /// The client it names, with its `jti`.
    Client(Client, Option<String>),
    /// The signature is not this key's (another key may verify it).
    BadSignature,
    /// The signature is this key's but the token is refused (expired, bad claims).
    Refused(HeraldError),
}

/// Decodes a token with one key: the client it names, verified by the key of `generation`.
pub(crate) fn decode_client(
    token: &str,
    key: &DecodingKey,
    validation: &Validation,
    generation: u64,
) -> Decoded {
    use jsonwebtoken::errors::ErrorKind;
    let data = match jsonwebtoken::decode::<ClientClaims>(token, key, validation) {
        Ok(data) => data,
        Err(e) => {
            return match e.kind() {
                ErrorKind::InvalidSignature => Decoded::BadSignature,
                ErrorKind::ExpiredSignature => Decoded::Refused(expired()),
                other => Decoded::Refused(token_error(token, other)),
            }
        }
    };
    let c = data.claims;
    // No leeway: a token is expired from the second its `exp` names (the library still
    // accepts it during that second).
    if c.exp.is_some_and(|exp| exp <= crate::revoked::now_secs()) {
        return Decoded::Refused(expired());
    }
    if let Some(d) = &c.device {
        if let Err(e) = crate::device_id::check_device_id(d) {
            return Decoded::Refused(HeraldError::new(
                ErrorCode::Unauthorized,
                format!("the token's device: {}", e.message),
            ));
        }
    }
    let token = TokenStamp {
        jti: c.jti.as_deref().map_or(0, fingerprint),
        iat: c.iat.unwrap_or(0),
        secret: generation,
    };
    let client = Client {
        app: AppId::default_app(),
        device: c.device,
        subscribe: PatternSet::new(&c.channels),
        publish: PatternSet::new(&c.publish),
        sub: c.sub,
        expires: c.exp,
        token,
        user_info: c.user_info.map(|u| Box::<str>::from(u.0.get())),
    };
    Decoded::Client(client, c.jti)
}

/// Signs and verifies client tokens with one HS256 secret.
pub struct TokenKeys {
    secret: Vec<u8>,
    decoding: DecodingKey,
    validation: Validation,
    /// Tells these keys from every other keys made by this process (never 0): a client records
    /// the generation that verified it, so a changed secret ends it.
    generation: u64,
}

impl TokenKeys {
    /// Keys from a shared secret.
    pub fn new(secret: &[u8]) -> Self {
        TokenKeys {
            secret: secret.to_vec(),
            decoding: DecodingKey::from_secret(secret),
            validation: validation(Algorithm::HS256),
            generation: next_generation(),
        }
    }

    /// Verifies a token and returns the client it names.
    pub fn verify(&self, token: &str) -> Result<Client, HeraldError> {
        match self.decode(token) {
            Decoded::Client(client, _) => Ok(client),
            Decoded::BadSignature => Err(HeraldError::new(
                ErrorCode::Unauthorized,
                "the token's signature is not valid for this server",
            )),
            Decoded::Refused(e) => Err(e),
        }
    }

    /// Decodes a token with this secret.
    pub(crate) fn decode(&self, token: &str) -> Decoded {
        decode_client(token, &self.decoding, &self.validation, self.generation)
    }

    /// The secret.
    pub(crate) fn secret(&self) -> &[u8] {
        &self.secret
    }

    /// The generation clients verified by these keys record.
    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }

    /// Signs a token with these claims (for the default app).
    pub fn mint(&self, claims: &ClientClaims) -> String {
        herald_proto::token::mint(&self.secret, claims)
    }

    /// Signs a token for `app`: its header's `kid` names the app, so the server knows which
    /// secret verifies it.
    pub fn mint_for(&self, app: &AppId, claims: &ClientClaims) -> String {
        herald_proto::token::mint_for_app(&self.secret, app.as_str(), claims)
    }
}

/// SHA-256 hex of an API key; only this is ever stored.
pub fn hash_api_key(key: &str) -> String {
    // Into a buffer, not `hex::encode`'s string built a char at a time: every publish asks.
    let mut hex = [0u8; 64];
    hex::encode_to_slice(Sha256::digest(key.as_bytes()), &mut hex)
        .expect("a SHA-256 is 32 bytes, 64 hex digits");
    String::from_utf8(hex.to_vec()).expect("hex digits are ASCII")
}

/// A new random API key (`hk_` and 40 hex digits).
pub fn generate_secret(prefix: &str) -> String {
    let bytes: [u8; 20] = rand::random();
    format!("{prefix}{}", hex::encode(bytes))
}

/// The valid publisher API keys, by hash, each with the app it publishes for.
#[derive(Default)]
pub struct ApiKeys {
    hashes: RwLock<HashMap<String, AppId>>,
}

impl ApiKeys {
    /// A set holding these hashes, all for the default app.
    pub fn from_hashes(hashes: impl IntoIterator<Item = String>) -> Self {
        let keys = ApiKeys::default();
        for h in hashes {
            keys.insert(h, AppId::default_app());
        }
        keys
    }

    /// Adds a key hash for `app`.
    pub fn insert(&self, hash: String, app: AppId) {
        self.hashes.write().insert(hash, app);
    }

    /// Removes every key hash that starts with `prefix` for `app`.
    pub fn remove(&self, app: &AppId, prefix: &str) {
        self.hashes
            .write()
            .retain(|h, a| !(a == app && h.starts_with(prefix)));
    }

    /// Replaces, in one step, every key whose app `stored_app` says the store owns with
    /// `stored` (hash, app) pairs; keys of other apps (the server's configured keys of the
    /// default app) stay.
    pub fn replace_stored(
        &self,
        stored_app: impl Fn(&AppId) -> bool,
        stored: impl IntoIterator<Item = (String, AppId)>,
    ) {
        let mut hashes = self.hashes.write();
        hashes.retain(|_, app| !stored_app(app));
        hashes.extend(stored);
    }

    /// Removes every key of `app`.
    pub fn remove_app(&self, app: &AppId) {
        self.hashes.write().retain(|_, a| a != app);
    }

    /// The app `key` publishes for, if it is a valid publisher key.
    pub fn check(&self, key: &str) -> Option<AppId> {
        self.check_hash(&hash_api_key(key))
    }

    /// The app the key hashed as `hash` ([`hash_api_key`]) publishes for, if it is still valid.
    pub fn check_hash(&self, hash: &str) -> Option<AppId> {
        self.hashes.read().get(hash).cloned()
    }
}

pub(crate) fn expired() -> HeraldError {
    HeraldError::new(
        ErrorCode::TokenExpired,
        "the token has expired: get a fresh one from your backend (or POST /v1/tokens)",
    )
}

/// Why a token was refused, in words a client developer can act on (never the library's type
/// names).
pub(crate) fn token_error(token: &str, kind: &jsonwebtoken::errors::ErrorKind) -> HeraldError {
    use jsonwebtoken::errors::ErrorKind;
    let message = if token.starts_with("hk_") || token.starts_with("hs_") {
        "that looks like a publisher API key or a token secret, not a client token: clients need \
         a token your backend mints with the app's token secret (or gets from POST /v1/tokens)"
            .to_owned()
    } else {
        match kind {
            ErrorKind::InvalidToken => "the token is not a JWT (three base64url parts joined by \
                 dots); clients need a token your backend mints (or gets from POST /v1/tokens)"
                .to_owned(),
            ErrorKind::ImmatureSignature => {
                "the token is not valid yet: its nbf (not before) is in the future".to_owned()
            }
            ErrorKind::InvalidAlgorithm | ErrorKind::InvalidAlgorithmName => {
                "the token's alg does not match its key: HS256 tokens are checked with the app's \
                 secret, RS256 and ES256 tokens with its public keys"
                    .to_owned()
            }
            ErrorKind::Base64(_) | ErrorKind::Utf8(_) => {
                "the token's parts are not valid base64url".to_owned()
            }
            ErrorKind::Json(e) if e.is_data() => "a claim of the token has the wrong type (sub \
                 and jti are strings; exp, nbf and iat whole seconds; channels and publish lists \
                 of strings; device a string)"
                .to_owned(),
            ErrorKind::Json(_) => "the token's header or claims are not valid JSON".to_owned(),
            ErrorKind::MissingRequiredClaim(claim) => format!("the token lacks the {claim} claim"),
            _ => "the token is not valid".to_owned(),
        }
    };
    HeraldError::new(ErrorCode::Unauthorized, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_api_key_is_kept_as_its_sha256_in_lowercase_hex() {
        assert_eq!(
            hash_api_key("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(hash_api_key("").len(), 64);
    }

    #[test]
    fn mint_verify_roundtrip_and_permissions() {
        let keys = TokenKeys::new(b"secret");
        let token = keys.mint(&ClientClaims {
            sub: "alice".into(),
            exp: Some(u64::MAX / 2),
            channels: vec!["news".into(), "chat/*".into()],
            publish: vec!["chat/*".into()],
            device: None,
            ..Default::default()
        });
        let c = keys.verify(&token).unwrap();
        assert_eq!(c.sub, "alice");
        assert!(c.check_subscribe("chat/1").is_ok());
        assert_eq!(
            c.check_subscribe("other").unwrap_err().code,
            ErrorCode::Forbidden
        );
        assert!(c.check_publish("news").is_err());
    }

    #[test]
    fn rejects_forged_and_expired_and_garbage() {
        let keys = TokenKeys::new(b"secret");
        let forged = TokenKeys::new(b"other").mint(&ClientClaims::default());
        assert_eq!(
            keys.verify(&forged).unwrap_err().code,
            ErrorCode::Unauthorized
        );
        let expired = keys.mint(&ClientClaims {
            exp: Some(1000),
            ..Default::default()
        });
        assert_eq!(
            keys.verify(&expired).unwrap_err().code,
            ErrorCode::TokenExpired
        );
        assert_eq!(
            keys.verify("not.a.jwt").unwrap_err().code,
            ErrorCode::Unauthorized
        );
        // no exp at all is accepted
        assert!(keys.verify(&keys.mint(&ClientClaims::default())).is_ok());
    }

    /// The contract's token vectors (herald-proto/tests/vectors/tokens.json): every valid token
    /// verifies to its claims and app, every invalid one is refused with its code.
    #[test]
    fn token_vectors_verify() {
        let v: serde_json::Value =
            serde_json::from_str(include_str!("../../herald-proto/tests/vectors/tokens.json"))
                .unwrap();
        let keyring = |secret: &str| {
            let tokens = Tokens::new(secret.as_bytes());
            tokens.set_app(&AppId::parse("shop").unwrap(), secret.as_bytes());
            tokens
        };
        for case in v["valid"].as_array().unwrap() {
            let tokens = keyring(case["secret"].as_str().unwrap());
            let client = tokens.verify(case["token"].as_str().unwrap()).unwrap();
            let claims: ClientClaims = serde_json::from_value(case["claims"].clone()).unwrap();
            assert_eq!(client.app.as_str(), case["app"].as_str().unwrap());
            assert_eq!((client.sub, client.expires), (claims.sub, claims.exp));
            assert_eq!(client.device, claims.device);
        }
        for case in v["invalid"].as_array().unwrap() {
            let tokens = keyring(case["secret"].as_str().unwrap());
            let e = tokens.verify(case["token"].as_str().unwrap()).unwrap_err();
            assert_eq!(e.code.as_str(), case["error"], "{}", case["name"]);
        }
    }

    #[test]
    fn api_keys_by_hash() {
        let k = generate_secret("hk_");
        let keys = ApiKeys::from_hashes([hash_api_key(&k)]);
        assert_eq!(keys.check(&k), Some(AppId::default_app()));
        assert!(keys.check("hk_wrong").is_none());
        let shop = AppId::parse("shop").unwrap();
        let k2 = generate_secret("hk_");
        keys.insert(hash_api_key(&k2), shop.clone());
        assert_eq!(keys.check(&k2), Some(shop.clone()));
        keys.remove_app(&shop);
        assert!(keys.check(&k2).is_none());
    }

    #[test]
    fn tokens_name_their_app() {
        let tokens = Tokens::new(b"default-secret");
        let shop = AppId::parse("shop").unwrap();
        tokens.set_app(&shop, b"shop-secret");
        let claims = ClientClaims {
            device: Some("d1".into()),
            ..Default::default()
        };
        let t = tokens.mint(&shop, &claims).unwrap();
        let c = tokens.verify(&t).unwrap();
        assert_eq!(c.app, shop);
        assert_eq!(c.device.as_deref(), Some("d1"));
        // signed with the default secret but claiming the shop app: refused
        let forged = TokenKeys::new(b"default-secret").mint_for(&shop, &claims);
        assert_eq!(
            tokens.verify(&forged).unwrap_err().code,
            ErrorCode::Unauthorized
        );
        let d = tokens.mint(&AppId::default_app(), &claims).unwrap();
        assert!(tokens.verify(&d).unwrap().app.is_default());
        tokens.remove_app(&shop);
        assert!(tokens.verify(&t).is_err());
        assert!(tokens.mint(&shop, &claims).is_none());
    }

    #[test]
    fn a_token_is_expired_from_the_second_its_exp_names_and_errors_speak_plainly() {
        let keys = TokenKeys::new(b"0123456789abcdef0123456789abcdef");
        let now = crate::revoked::now_secs();
        let at = |exp| {
            keys.mint(&ClientClaims {
                sub: "a".into(),
                exp: Some(exp),
                ..ClientClaims::default()
            })
        };
        assert_eq!(
            keys.verify(&at(now)).unwrap_err().code,
            ErrorCode::TokenExpired
        );
        assert!(keys.verify(&at(now + 60)).is_ok());
        let tokens = Tokens::new(b"0123456789abcdef0123456789abcdef");
        for (token, says) in [
            ("hk_0123456789abcdef", "looks like a publisher API key"),
            ("not-a-jwt", "is not a JWT"),
            ("a.b.c", "not valid"),
        ] {
            let e = tokens.verify(token).unwrap_err();
            assert_eq!(e.code, ErrorCode::Unauthorized, "{token}");
            assert!(e.message.contains(says), "{token}: {}", e.message);
            assert!(!e.message.contains("Invalid"), "{token}: {}", e.message);
        }
    }
}
