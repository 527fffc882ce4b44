//! Revoked client tokens: by `jti` (until an expiry, so the list stays bounded) and by issue
//! time (every token of an app issued before a time; one value per app). [`RevokedTokens`] is
//! what [`crate::auth::Tokens`] refuses new connections with and tells live ones to end by;
//! the store keeps the same list ([`crate::tenancy::Tenancy::token_revocations`]) so it
//! survives a restart and reaches every node.

use std::collections::{HashMap, HashSet};
use std::hash::BuildHasher;
use std::sync::LazyLock;

use parking_lot::RwLock;

use crate::auth::TokenStamp;
use crate::tenant::AppId;

/// One revocation of tokens, as stored and as carried by a [`crate::caches::CacheEvent`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenRevocation {
    /// The app whose tokens are revoked.
    pub app: AppId,
    /// Which of its tokens.
    pub kind: RevokedKind,
}

/// Which tokens a [`TokenRevocation`] names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RevokedKind {
    /// The token whose `jti` this is, refused until `expires` (seconds since the Unix epoch;
    /// after that the entry is forgotten, so it should not be earlier than the token's `exp`).
    Jti {
        /// The token id.
        jti: String,
        /// When the entry may be forgotten.
        expires: u64,
    },
    /// Every token whose `iat` is earlier than this (seconds since the Unix epoch), and every
    /// token without `iat`. A later revocation with an earlier time does not move it back.
    IssuedBefore(u64),
}

/// A 64-bit fingerprint of a string (a `sub`, a device id, a `jti`) with a per-process random
/// key, never 0: what the live-client registry keeps instead of the string, so matching a
/// revocation to live clients costs no allocation per connection. Two strings share one with
/// probability 2^-64 (a revocation would then also close the other's connection, which
/// reconnects; refusing tokens compares the strings themselves).
pub fn fingerprint(s: &str) -> u64 {
    static KEY: LazyLock<std::collections::hash_map::RandomState> =
        LazyLock::new(std::collections::hash_map::RandomState::new);
    KEY.hash_one(s).max(1)
}

/// Seconds since the Unix epoch.
pub fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[derive(Default)]
struct AppRevoked {
    /// Revoked token ids, each with when it may be forgotten.
    jtis: HashMap<String, u64>,
    /// Fingerprints of `jtis`, to match live clients by.
    fingerprints: HashSet<u64>,
    /// Tokens issued before this are revoked (0: none).
    issued_before: u64,
}

impl AppRevoked {
    fn add(&mut self, kind: &RevokedKind, now: u64) {
        match kind {
            RevokedKind::Jti { jti, expires } => {
                let until = self.jtis.entry(jti.clone()).or_insert(0);
                *until = (*until).max(*expires);
            }
            RevokedKind::IssuedBefore(t) => self.issued_before = self.issued_before.max(*t),
        }
        self.jtis.retain(|_, expires| *expires > now);
        self.fingerprints = self.jtis.keys().map(|j| fingerprint(j)).collect();
    }
}

/// Every app's revoked tokens, on one node.
#[derive(Default)]
pub struct RevokedTokens {
    apps: RwLock<HashMap<AppId, AppRevoked>>,
}

impl RevokedTokens {
    /// Adds a revocation (and forgets the app's expired ones).
    pub fn add(&self, revocation: &TokenRevocation) {
        self.apps
            .write()
            .entry(revocation.app.clone())
            .or_default()
            .add(&revocation.kind, now_secs());
    }

    /// Replaces every revocation with these.
    pub fn replace(&self, revocations: &[TokenRevocation]) {
        let now = now_secs();
        let mut apps: HashMap<AppId, AppRevoked> = HashMap::new();
        for r in revocations {
            apps.entry(r.app.clone()).or_default().add(&r.kind, now);
        }
        *self.apps.write() = apps;
    }

    /// Whether a token of `app` with this `jti` and `iat` (0 without one) is revoked.
    pub fn refuses(&self, app: &AppId, jti: Option<&str>, iat: u64) -> bool {
        let apps = self.apps.read();
        let Some(revoked) = apps.get(app) else {
            return false;
        };
        iat < revoked.issued_before
            || jti
                .and_then(|j| revoked.jtis.get(j))
                .is_some_and(|expires| *expires > now_secs())
    }

    /// Whether a live client of `app` verified with `token` is revoked (its `jti` is matched by
    /// fingerprint).
    pub fn matches(&self, app: &AppId, token: &TokenStamp) -> bool {
        let apps = self.apps.read();
        apps.get(app).is_some_and(|revoked| {
            token.iat < revoked.issued_before
                || (token.jti != 0 && revoked.fingerprints.contains(&token.jti))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revoked_by_jti_until_it_expires_and_by_issue_time() {
        let revoked = RevokedTokens::default();
        let shop = AppId::parse("shop").unwrap();
        let other = AppId::parse("other").unwrap();
        let now = now_secs();
        revoked.add(&TokenRevocation {
            app: shop.clone(),
            kind: RevokedKind::Jti {
                jti: "t-1".into(),
                expires: now + 60,
            },
        });
        revoked.add(&TokenRevocation {
            app: shop.clone(),
            kind: RevokedKind::Jti {
                jti: "t-old".into(),
                expires: now - 1,
            },
        });
        assert!(revoked.refuses(&shop, Some("t-1"), now));
        assert!(!revoked.refuses(&shop, Some("t-old"), now), "expired entry");
        assert!(!revoked.refuses(&shop, Some("t-2"), now));
        assert!(!revoked.refuses(&other, Some("t-1"), now), "another app's");
        let stamp = |jti: &str, iat| TokenStamp {
            jti: fingerprint(jti),
            iat,
            secret: 1,
        };
        assert!(revoked.matches(&shop, &stamp("t-1", now)));
        assert!(!revoked.matches(&shop, &stamp("t-2", now)));

        revoked.add(&TokenRevocation {
            app: shop.clone(),
            kind: RevokedKind::IssuedBefore(now),
        });
        revoked.add(&TokenRevocation {
            app: shop.clone(),
            kind: RevokedKind::IssuedBefore(now - 100),
        });
        assert!(revoked.refuses(&shop, None, now - 1));
        assert!(
            revoked.refuses(&shop, None, 0),
            "no iat counts as issued at 0"
        );
        assert!(
            !revoked.refuses(&shop, None, now),
            "issued at the time itself"
        );
        assert!(revoked.matches(&shop, &stamp("t-9", now - 1)));

        revoked.replace(&[]);
        assert!(!revoked.refuses(&shop, Some("t-1"), 0));
    }
}
