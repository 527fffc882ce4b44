//! API errors as HTTP responses: `{"error":{"code":"...","message":"..."}}` with the code's
//! status, rendered by `herald_proto::http` as every HTTP error is.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use herald_core::{ErrorCode, HeraldError};

/// A [`HeraldError`] that renders as an HTTP response.
#[derive(Debug)]
pub struct ApiError(pub HeraldError);

impl From<HeraldError> for ApiError {
    fn from(e: HeraldError) -> Self {
        ApiError(e)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, body) = herald_proto::http::error_answer(&self.0);
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST);
        let json = HeaderValue::from_static("application/json");
        let mut response = (status, [(header::CONTENT_TYPE, json)], body).into_response();
        // The audit log records the code as the action's result.
        response.extensions_mut().insert(self.0.code);
        if let Some(seconds) = self.0.retry_after {
            if let Ok(value) = HeaderValue::from_str(&seconds.to_string()) {
                response.headers_mut().insert(header::RETRY_AFTER, value);
            }
        } else if self.0.code == ErrorCode::StoreUnavailable {
            // The store is expected back (a database restarting, a failover): ask clients to
            // retry soon rather than give up.
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        response
    }
}
