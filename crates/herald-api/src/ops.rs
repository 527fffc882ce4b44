//! Operational endpoints: health, Prometheus metrics, and the OpenAPI document.

use std::sync::Arc;

use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;

use crate::Api;

/// `GET /healthz`: 200 while the server accepts work; 503 with the store's error
/// (`insufficient_storage` while it has no space left, `store_halted` after a failed fsync)
/// while its writes fail, so a load balancer or an orchestrator can see it.
pub async fn healthz(State(api): State<Arc<Api>>) -> axum::response::Response {
    match api.engine.store_write_fault() {
        None => axum::Json(serde_json::json!({ "status": "ok" })).into_response(),
        Some(fault) => {
            use herald_core::log::StoreError;
            let code = match &fault {
                StoreError::Full { .. } => herald_core::ErrorCode::InsufficientStorage,
                StoreError::Halted { .. } => herald_core::ErrorCode::StoreHalted,
                _ => herald_core::ErrorCode::StoreFailed,
            };
            let error = herald_core::HeraldError::new(code, fault.chain());
            let (_, body) = herald_proto::http::error_answer(&error);
            (
                axum::http::StatusCode::SERVICE_UNAVAILABLE,
                [(header::CONTENT_TYPE, "application/json")],
                body,
            )
                .into_response()
        }
    }
}

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
