//! Operational endpoints: Prometheus metrics and the OpenAPI document (the health probes are
//! `probes.rs`).

use std::sync::Arc;

use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;

use crate::Api;

/// `GET /metrics`: Prometheus text format.
pub async fn metrics(
    State(api): State<Arc<Api>>,
    headers: axum::http::HeaderMap,
) -> Result<impl IntoResponse, crate::ApiError> {
    if let Some(wanted) = &api.metrics_token_hash {
        let given = crate::bearer(&headers).map(herald_core::auth::hash_api_key);
        if given.as_ref() != Some(wanted) {
            return Err(herald_core::HeraldError::new(
                herald_core::ErrorCode::Unauthorized,
                "GET /metrics needs the metrics token (metrics_token) as Authorization: Bearer \
                 <token>; in Prometheus, set the scrape job's authorization credentials",
            )
            .into());
        }
    }
    // Rendering folds pending histogram samples too: off the connection workers.
    let render = api.metrics.clone();
    let text = tokio::task::spawn_blocking(move || render())
        .await
        .unwrap_or_default();
    Ok(([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text))
}

/// `GET /v1/openapi.yaml`: the API description this server implements.
pub async fn openapi() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "application/yaml")],
        include_str!("../../../docs/openapi.yaml"),
    )
}
