//! `POST /apps/{app_id}/users/{user_id}/terminate_connections` (Pusher's "terminate user
//! connections"): signed as every request is, answered `{}` once the disconnect is on the bus.
//! Every connection signed in as the user (`pusher:signin`, [`crate::users`]), on every node,
//! is closed with 4009, after which pusher-js does not reconnect
//! ([`crate::connections::PusherConnections::terminate_user`]). Since a signed-in Pusher
//! user is the Herald user of that `sub`, Herald's own connections of that user are closed
//! too (as `revoked`).
//!
//! Pusher's Python SDK (`terminate_user_connections`, 3.3) posts to
//! `/users/{user_id}/terminate_connections`, without the `/apps/{app_id}` prefix; that path is
//! served too, its app the one whose `auth_key` signed it (the signature covers the path as
//! sent).

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{Method, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::auth::read_signed;
use super::{Answer, PusherHttp};
use crate::users::MAX_USER_ID_BYTES;

/// `POST /apps/{app_id}/users/{user_id}/terminate_connections`.
pub async fn terminate_connections(
    State(http): State<Arc<PusherHttp>>,
    Path((app_id, user_id)): Path<(String, String)>,
    method: Method,
    uri: Uri,
    body: Body,
) -> Response {
    terminate(&http, &app_id, &user_id, &method, &uri, body)
        .await
        .unwrap_or_else(IntoResponse::into_response)
}

/// `POST /users/{user_id}/terminate_connections`: the same, the app named by `auth_key`.
pub async fn terminate_connections_of_key(
    State(http): State<Arc<PusherHttp>>,
    Path(user_id): Path<String>,
    method: Method,
    uri: Uri,
    body: Body,
) -> Response {
    let key = form_urlencoded::parse(uri.query().unwrap_or("").as_bytes())
        .find(|(k, _)| k.eq_ignore_ascii_case("auth_key"))
        .map(|(_, v)| v.into_owned());
    // Authenticated as for the app of the key (an unknown key is refused there).
    let app_id = match key {
        Some(key) => match http.credentials.by_key(&key).await {
            Ok(Some(set)) => set.app_id.clone(),
            _ => String::new(),
        },
        None => String::new(),
    };
    terminate(&http, &app_id, &user_id, &method, &uri, body)
        .await
        .unwrap_or_else(IntoResponse::into_response)
}

async fn terminate(
    http: &PusherHttp,
    app_id: &str,
    user_id: &str,
    method: &Method,
    uri: &Uri,
    body: Body,
) -> Result<Response, Answer> {
    let limit = http.settings.max_body_bytes();
    let (_, credentials) = read_signed(&http.credentials, limit, app_id, method, uri, body).await?;
    if user_id.is_empty() || user_id.len() > MAX_USER_ID_BYTES {
        return Err(Answer::bad_request(format!(
            "Invalid user id: 1 to {MAX_USER_ID_BYTES} bytes"
        )));
    }
    http.credentials
        .connections()
        .terminate_user(&credentials.app, user_id);
    Ok(axum::Json(json!({})).into_response())
}
