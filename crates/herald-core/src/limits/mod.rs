//! Rate limits: what each limit counts, their server-wide settings ([`RateLimits`], the
//! `[limits]` table) and the running limiters ([`Limiters`]) every transport and the API ask.
//!
//! - per app and per publisher key: publishes, pushes, device registrations and updates
//!   ([`AppAction`]); an app's own [`crate::tenancy::AppLimits`] may override the app's rates;
//! - per WebSocket connection: commands ([`CommandBudget`], held in the connection's session);
//! - per source address ([`AddressKey`]): new connections, and admin dashboard log-ins.
//!
//! The limiters are GCRA buckets from `governor` (lock-free atomic state). The keyed ones
//! (publisher keys, source addresses) forget a key once its bucket is full again, and never
//! hold more than [`MAX_TRACKED`] keys, so a flood of distinct addresses cannot grow memory
//! without bound. Limits are per process: on a cluster every node counts on its own.

mod address;
mod command;
mod rate;

use std::collections::HashMap;
use std::hash::Hash;
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultDirectRateLimiter, DefaultKeyedRateLimiter, RateLimiter};
use parking_lot::RwLock;

pub use address::{AddressKey, Cidr, CidrParseError};
pub use command::{Admission, CommandBudget, CommandRate};
pub use rate::{Rate, RateParseError};

use crate::error::{ErrorCode, HeraldError};
use crate::tenancy::AppLimits;
use crate::tenant::AppId;

/// Most keys one keyed limiter tracks; past it, keys whose buckets are full are forgotten at
/// once, and if every tracked key is still active the limiter starts afresh.
pub const MAX_TRACKED: usize = 100_000;

/// Checks between two sweeps of a keyed limiter's full buckets.
const SWEEP_EVERY: u32 = 4096;

/// Each limit, as `/metrics` labels it (`herald_rate_limited_total{limit="..."}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LimitKind {
    /// Channel publishes (HTTP).
    Publish,
    /// Pushes.
    Push,
    /// Device registrations and updates.
    Registration,
    /// WebSocket commands on one connection.
    Command,
    /// New connections from one source address.
    Connection,
    /// Admin dashboard log-ins from one source address.
    Login,
}

impl LimitKind {
    /// The metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            LimitKind::Publish => "publish",
            LimitKind::Push => "push",
            LimitKind::Registration => "registration",
            LimitKind::Command => "command",
            LimitKind::Connection => "connection",
            LimitKind::Login => "login",
        }
    }

    /// Counts one refusal in `herald_rate_limited_total`.
    fn count(self, app: Option<&AppId>) {
        match app {
            Some(app) => metrics::counter!("herald_rate_limited_total",
                "limit" => self.as_str(), "app" => app.as_str().to_string())
            .increment(1),
            None => metrics::counter!("herald_rate_limited_total", "limit" => self.as_str())
                .increment(1),
        }
    }
}

/// What an app or publisher key is limited in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AppAction {
    /// Channel messages published over HTTP (`POST /v1/channels/.../messages`, `/v1/batch`).
    Publish,
    /// Pushes (`POST /v1/push`).
    Push,
    /// Device registrations and updates.
    Registration,
}

impl AppAction {
    fn index(self) -> usize {
        self as usize
    }

    fn kind(self) -> LimitKind {
        match self {
            AppAction::Publish => LimitKind::Publish,
            AppAction::Push => LimitKind::Push,
            AppAction::Registration => LimitKind::Registration,
        }
    }

    fn verb(self) -> &'static str {
        match self {
            AppAction::Publish => "publish",
            AppAction::Push => "push",
            AppAction::Registration => "register or update devices",
        }
    }
}

/// The server-wide limits (the `[limits]` table of the configuration).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateLimits {
    /// Messages one app publishes over HTTP.
    pub publish: Rate,
    /// Pushes one app sends.
    pub push: Rate,
    /// Devices one app registers or updates.
    pub registration: Rate,
    /// Messages one publisher key publishes over HTTP.
    pub key_publish: Rate,
    /// Pushes one publisher key sends.
    pub key_push: Rate,
    /// Devices one publisher key registers or updates.
    pub key_registration: Rate,
    /// Commands one WebSocket connection sends.
    pub command: Rate,
    /// New connections from one source address (every listener: HTTP, WebSocket, SSE, Meteor).
    pub connection: Rate,
    /// Admin dashboard log-in attempts from one source address.
    pub login: Rate,
    /// Source addresses the connection and log-in limits do not apply to.
    pub exempt: Vec<Cidr>,
}

impl Default for RateLimits {
    /// Generous defaults: far above what one well-behaved app, key, connection or address
    /// does, low enough that a runaway loop or a reconnect storm is held back.
    fn default() -> Self {
        RateLimits {
            publish: Rate::per_second(10_000, 20_000),
            push: Rate::per_second(10_000, 20_000),
            registration: Rate::per_second(10_000, 20_000),
            key_publish: Rate::OFF,
            key_push: Rate::OFF,
            key_registration: Rate::OFF,
            command: Rate::per_second(1_000, 5_000),
            connection: Rate::per_second(1_000, 5_000),
            login: Rate::new(20, 60, 20),
            exempt: Vec::new(),
        }
    }
}

impl RateLimits {
    /// Every limit off.
    pub fn off() -> Self {
        RateLimits {
            publish: Rate::OFF,
            push: Rate::OFF,
            registration: Rate::OFF,
            key_publish: Rate::OFF,
            key_push: Rate::OFF,
            key_registration: Rate::OFF,
            command: Rate::OFF,
            connection: Rate::OFF,
            login: Rate::OFF,
            exempt: Vec::new(),
        }
    }

    fn app_rate(&self, action: AppAction, overrides: &AppLimits) -> (Rate, &'static str) {
        let (own, default, name) = match action {
            AppAction::Publish => (overrides.publish_rate, self.publish, "publish_rate"),
            AppAction::Push => (overrides.push_rate, self.push, "push_rate"),
            AppAction::Registration => (
                overrides.registration_rate,
                self.registration,
                "registration_rate",
            ),
        };
        match own {
            Some(rate) => (rate, name),
            None => (default, name),
        }
    }
}

/// A keyed GCRA limiter that stays bounded in memory (see [`MAX_TRACKED`]).
struct Keyed<K: Hash + Eq + Clone> {
    rate: Rate,
    /// Replaced by a fresh limiter only when every tracked key is active past the bound.
    limiter: RwLock<DefaultKeyedRateLimiter<K>>,
    checks: AtomicU32,
}

impl<K: Hash + Eq + Clone> Keyed<K> {
    fn new(rate: Rate) -> Option<Self> {
        Some(Keyed {
            rate,
            limiter: RwLock::new(RateLimiter::dashmap(rate.quota()?)),
            checks: AtomicU32::new(0),
        })
    }

    /// Counts `cost` events for `key` (a cost above the burst counts as the burst); the wait
    /// when refused.
    fn check(&self, key: &K, cost: u32) -> Result<(), Duration> {
        if self.checks.fetch_add(1, Ordering::Relaxed) % SWEEP_EVERY == SWEEP_EVERY - 1
            || self.len() > MAX_TRACKED
        {
            self.sweep();
        }
        let cost = NonZeroU32::new(cost.clamp(1, self.rate.burst())).unwrap_or(NonZeroU32::MIN);
        match self.limiter.read().check_key_n(key, cost) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(not_until)) => Err(not_until.wait_time_from(DefaultClock::default().now())),
            // The cost is clamped to the burst, so this cannot happen; refuse for one interval.
            Err(_) => Err(self.rate.interval()),
        }
    }

    /// Forgets keys whose buckets are full again; starts afresh if still over the bound.
    fn sweep(&self) {
        let limiter = self.limiter.read();
        limiter.retain_recent();
        limiter.shrink_to_fit();
        let tracked = limiter.len();
        drop(limiter);
        if tracked > MAX_TRACKED {
            tracing::warn!(
                tracked,
                "a rate limiter tracks too many active keys; forgetting them all"
            );
            if let Some(quota) = self.rate.quota() {
                *self.limiter.write() = RateLimiter::dashmap(quota);
            }
        }
    }

    /// Keys tracked now.
    fn len(&self) -> usize {
        self.limiter.read().len()
    }
}

/// One app's limiter for one action, with the rate it was built for.
type AppBucket = (Rate, std::sync::Arc<DefaultDirectRateLimiter>);

/// The running rate limiters of this process.
pub struct Limiters {
    settings: RateLimits,
    /// Each app's limiter per action, with the rate it was built for (rebuilt when the app's
    /// override changes). Bounded by the number of apps.
    apps: RwLock<HashMap<(AppId, AppAction), AppBucket>>,
    /// Per publisher key (by the key's hash), per action.
    keys: [Option<Keyed<String>>; 3],
    connections: Option<Keyed<AddressKey>>,
    logins: Option<Keyed<AddressKey>>,
    command: CommandRate,
}

/// Whole seconds to wait, at least 1.
pub fn retry_after_secs(wait: Duration) -> u64 {
    let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    secs.max(1)
}

impl Limiters {
    /// Limiters with these settings.
    pub fn new(settings: RateLimits) -> Self {
        Limiters {
            keys: [
                Keyed::new(settings.key_publish),
                Keyed::new(settings.key_push),
                Keyed::new(settings.key_registration),
            ],
            connections: Keyed::new(settings.connection),
            logins: Keyed::new(settings.login),
            command: CommandRate::new(settings.command),
            apps: RwLock::new(HashMap::new()),
            settings,
        }
    }

    /// The settings.
    pub fn settings(&self) -> &RateLimits {
        &self.settings
    }

    /// Counts `cost` events of `action` for `app` (with its own `limits`) and for the
    /// publisher key hashed as `key_hash`: a batch counts each message or device, but never
    /// more than the limit's burst. The error is `rate_limited` with its `Retry-After`.
    pub fn check_app(
        &self,
        app: &AppId,
        limits: &AppLimits,
        key_hash: &str,
        action: AppAction,
        cost: u32,
    ) -> Result<(), HeraldError> {
        let (rate, name) = self.settings.app_rate(action, limits);
        if let Err(wait) = self.check_app_rate(app, action, rate, cost) {
            action.kind().count(Some(app));
            return Err(refused(
                format!(
                    "rate limit reached: app {app} may {} {rate} (limits.{name})",
                    action.verb()
                ),
                wait,
            ));
        }
        if let Some(keyed) = &self.keys[action.index()] {
            if let Err(wait) = keyed.check(&key_hash.to_string(), cost) {
                action.kind().count(Some(app));
                let name = action.kind().as_str();
                return Err(refused(
                    format!(
                        "rate limit reached: this publisher key may {} {} (limits.key_{name})",
                        action.verb(),
                        keyed.rate
                    ),
                    wait,
                ));
            }
        }
        Ok(())
    }

    fn check_app_rate(
        &self,
        app: &AppId,
        action: AppAction,
        rate: Rate,
        cost: u32,
    ) -> Result<(), Duration> {
        let Some(quota) = rate.quota() else {
            return Ok(());
        };
        let slot = (app.clone(), action);
        let current = self.apps.read().get(&slot).cloned();
        let limiter = match current {
            Some((built, limiter)) if built == rate => limiter,
            _ => {
                // Two first requests at once share the limiter the first of them made.
                let mut apps = self.apps.write();
                let entry = apps
                    .entry(slot)
                    .or_insert_with(|| (rate, std::sync::Arc::new(RateLimiter::direct(quota))));
                if entry.0 != rate {
                    *entry = (rate, std::sync::Arc::new(RateLimiter::direct(quota)));
                }
                entry.1.clone()
            }
        };
        let cost = NonZeroU32::new(cost.clamp(1, rate.burst())).unwrap_or(NonZeroU32::MIN);
        match limiter.check_n(cost) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(not_until)) => Err(not_until.wait_time_from(DefaultClock::default().now())),
            Err(_) => Err(rate.interval()),
        }
    }

    /// Forgets a deleted app's limiters.
    pub fn forget_app(&self, app: &AppId) {
        self.apps.write().retain(|(a, _), _| a != app);
    }

    fn exempt(&self, ip: IpAddr) -> bool {
        self.settings.exempt.iter().any(|c| c.contains(ip))
    }

    /// Counts a new connection from `ip`; the wait when it must be refused.
    pub fn check_connection(&self, ip: IpAddr) -> Result<(), Duration> {
        let Some(keyed) = &self.connections else {
            return Ok(());
        };
        if self.exempt(ip) {
            return Ok(());
        }
        keyed.check(&AddressKey::of(ip), 1).inspect_err(|_| {
            LimitKind::Connection.count(None);
        })
    }

    /// Counts an admin dashboard log-in attempt from `ip` (every attempt counts, right key or
    /// wrong, so a right key is not found faster); `rate_limited` when refused.
    pub fn check_login(&self, ip: IpAddr) -> Result<(), HeraldError> {
        let Some(keyed) = &self.logins else {
            return Ok(());
        };
        if self.exempt(ip) {
            return Ok(());
        }
        keyed.check(&AddressKey::of(ip), 1).map_err(|wait| {
            LimitKind::Login.count(None);
            refused(
                format!(
                    "too many log-in attempts from this address: {} (limits.login)",
                    keyed.rate
                ),
                wait,
            )
        })
    }

    /// The per-connection command rate.
    pub fn command_rate(&self) -> &CommandRate {
        &self.command
    }

    /// The `rate_limited` error of a refused WebSocket command, counted in `/metrics`.
    pub fn command_refused(&self, wait: Duration) -> HeraldError {
        LimitKind::Command.count(None);
        refused(
            format!(
                "too many commands on this connection: {} (limits.command)",
                self.settings.command
            ),
            wait,
        )
    }

    /// Counts a connection closed for flooding commands.
    pub fn command_flood(&self) {
        LimitKind::Command.count(None);
    }
}

fn refused(what: String, wait: Duration) -> HeraldError {
    let secs = retry_after_secs(wait);
    HeraldError::new(
        ErrorCode::RateLimited,
        format!("{what}; retry after {secs} s"),
    )
    .retry_after(secs)
}

impl Default for Limiters {
    fn default() -> Self {
        Limiters::new(RateLimits::default())
    }
}

#[cfg(test)]
mod tests;
