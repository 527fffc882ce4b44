//! The per-app and per-publisher-key rate limits of the publisher routes (publishes, pushes,
//! device registrations and updates), counted after the key is checked, so only valid keys
//! are ever tracked. A refusal is `429 rate_limited` with `Retry-After` ([`crate::ApiError`]).
//! A route that counts one event as soon as the key is checked says so in its signature
//! ([`Counted`]); a batch counts its messages or devices once it has read them
//! ([`Publisher::count`]).

use std::marker::PhantomData;
use std::sync::Arc;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use herald_core::limits::AppAction;
use herald_core::tenant::AppId;
use herald_core::HeraldError;

use crate::auth::Publisher;
use crate::error::ApiError;
use crate::Api;

impl Publisher {
    /// Counts `cost` events of `action` (a batch: its messages or devices) against the app's
    /// and the key's rate limits.
    pub(crate) fn count(
        &self,
        api: &Api,
        action: AppAction,
        cost: usize,
    ) -> Result<(), HeraldError> {
        let limits = api.usage.app(&self.app).limits();
        let cost = u32::try_from(cost).unwrap_or(u32::MAX);
        api.limits
            .check_app(&self.app, &limits, &self.key_hash, action, cost)
    }
}

/// What a [`Counted`] route counts, one per request.
pub(crate) trait CountedAction {
    /// The rate the request counts against.
    const ACTION: AppAction;
}

/// One push (`POST /v1/push`).
pub(crate) struct OnePush;

impl CountedAction for OnePush {
    const ACTION: AppAction = AppAction::Push;
}

/// One device registration or update.
pub(crate) struct OneRegistration;

impl CountedAction for OneRegistration {
    const ACTION: AppAction = AppAction::Registration;
}

/// A [`Publisher`] whose request is counted as one `A` against its app's and its key's rate
/// limits, before anything else of the request is read.
pub(crate) struct Counted<A> {
    /// The app the request acts for.
    pub app: AppId,
    action: PhantomData<fn() -> A>,
}

impl<A: CountedAction> FromRequestParts<Arc<Api>> for Counted<A> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, api: &Arc<Api>) -> Result<Self, ApiError> {
        let publisher = Publisher::of(api, &parts.headers)?;
        publisher.count(api, A::ACTION, 1)?;
        Ok(Counted {
            app: publisher.app,
            action: PhantomData,
        })
    }
}
