//! API errors as HTTP responses: `{"error":{"code":"...","message":"..."}}` with the code's
//! status.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use herald_core::HeraldError;
use herald_proto::frame::ErrorBody;

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
        let status =
            StatusCode::from_u16(self.0.code.http_status()).unwrap_or(StatusCode::BAD_REQUEST);
        let body = serde_json::json!({ "error": ErrorBody::from(&self.0) });
        (status, axum::Json(body)).into_response()
    }
}
