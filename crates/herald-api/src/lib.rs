//! Herald's HTTP publisher API: publish and batch publish, channel history, channel info and
//! listing (all behind a publisher API key), plus `/healthz`, `/metrics` and the OpenAPI
//! document. docs/openapi.yaml describes every route.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod channels;
mod error;
mod ops;
mod publish;

use std::sync::Arc;

use axum::http::HeaderMap;
use axum::routing::{get, post};
use axum::Router;
use herald_core::auth::ApiKeys;
use herald_core::{Engine, ErrorCode, HeraldError};

pub use error::ApiError;

/// Renders the Prometheus text exposition of all metrics.
pub type MetricsRender = Arc<dyn Fn() -> String + Send + Sync>;

/// What the API handlers need.
pub struct Api {
    /// The channel engine.
    pub engine: Arc<Engine>,
    /// Valid publisher keys.
    pub keys: Arc<ApiKeys>,
    /// Largest message payload (`data`) accepted, in bytes.
    pub max_message_bytes: usize,
    /// Renders `/metrics`.
    pub metrics: MetricsRender,
}

/// Most messages in one batch publish.
pub const MAX_BATCH: usize = 1000;

impl Api {
    /// Checks the `Authorization: Bearer <publisher key>` header.
    pub fn authorize(&self, headers: &HeaderMap) -> Result<(), HeraldError> {
        let key = headers
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim);
        match key {
            Some(k) if self.keys.check(k) => Ok(()),
            Some(_) => Err(HeraldError::new(
                ErrorCode::Unauthorized,
                "the API key is not valid",
            )),
            None => Err(HeraldError::new(
                ErrorCode::Unauthorized,
                "send the publisher API key as Authorization: Bearer <key>",
            )),
        }
    }
}

/// Routes of the publisher API and the operational endpoints.
pub fn router(api: Arc<Api>) -> Router {
    Router::new()
        .route("/v1/channels", get(channels::list))
        .route(
            "/v1/channels/{*path}",
            get(channels::get_path).post(publish::publish),
        )
        .route("/v1/batch", post(publish::batch))
        .route("/healthz", get(ops::healthz))
        .route("/metrics", get(ops::metrics))
        .route("/v1/openapi.yaml", get(ops::openapi))
        .with_state(api)
}
