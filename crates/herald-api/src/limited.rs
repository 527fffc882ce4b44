//! The per-app and per-publisher-key rate limits of the publisher routes (publishes, pushes,
//! device registrations and updates), counted after the key is checked, so only valid keys
//! are ever tracked. A refusal is `429 rate_limited` with `Retry-After` ([`crate::ApiError`]).

use axum::http::HeaderMap;
use herald_core::limits::AppAction;
use herald_core::tenant::AppId;
use herald_core::HeraldError;

use crate::Api;

impl Api {
    /// Checks the publisher key ([`Api::authorize`]) and counts `cost` events of `action`
    /// against its app's and its own rate limits.
    pub(crate) fn authorize_counted(
        &self,
        headers: &HeaderMap,
        action: AppAction,
        cost: usize,
    ) -> Result<AppId, HeraldError> {
        let (app, key) = self.authorize_key(headers)?;
        self.count_rate(&app, &key, action, cost)?;
        Ok(app)
    }

    /// Counts `cost` events of `action` (a batch: its messages or devices) for `app` and the
    /// key hashed as `key`.
    pub(crate) fn count_rate(
        &self,
        app: &AppId,
        key: &str,
        action: AppAction,
        cost: usize,
    ) -> Result<(), HeraldError> {
        let limits = self.usage.app(app).limits();
        let cost = u32::try_from(cost).unwrap_or(u32::MAX);
        self.limits.check_app(app, &limits, key, action, cost)
    }
}
