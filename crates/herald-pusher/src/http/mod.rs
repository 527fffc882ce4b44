//! Pusher's HTTP API at `/apps/{app_id}/...`, served on Herald's HTTP listener by this
//! router (herald-server merges it beside the publisher API's): `POST .../events` and
//! `POST .../batch_events` ([`events`]), the channels and users queries `GET .../channels`,
//! `GET .../channels/{name}` and `GET .../channels/{name}/users` ([`channels`]);
//! `POST .../users/{user_id}/terminate_connections` ([`users`]).
//!
//! Every request is signed as Pusher's server SDKs sign it and checked in Pusher's order
//! ([`auth`]); every refusal is Pusher's status with a plain-text body that says what was
//! wrong, as Pusher answers ([`Answer`]). A trigger is appended to each channel's log through
//! core's [`Publisher`] (the app's size limit, its usage) after the app's publish rate limit,
//! as Herald's own publish is, and answered once every append is durable.

pub mod auth;
pub mod channels;
pub mod events;
pub mod users;

use std::sync::Arc;

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use herald_core::limits::Limiters;
use herald_core::publish::Publisher;
use herald_core::usage::UsageMeter;
use herald_core::HeraldError;

use crate::credentials::service::PusherCredentials;

/// The HTTP API's limits; the defaults are Pusher's documented ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpLimits {
    /// Largest `data` of one event, in bytes (Pusher: 10 KB).
    pub max_data_bytes: usize,
    /// Most channels one trigger names (Pusher: 100).
    pub max_channels: usize,
    /// Most events in one batch (Pusher: 10).
    pub max_batch_events: usize,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            max_data_bytes: 10 * 1024,
            max_channels: 100,
            max_batch_events: 10,
        }
    }
}

impl HttpLimits {
    /// Largest request body read: a full batch of the largest events, their data escaped
    /// (at most 6 bytes per byte of data), with room for names and channels.
    pub fn max_body_bytes(&self) -> usize {
        let event = self.max_data_bytes * 6 + self.max_channels * 200 + 1024;
        event * self.max_batch_events.max(1)
    }
}

/// What the HTTP API's handlers need.
pub struct PusherHttp {
    /// Apps' Pusher credentials.
    pub credentials: Arc<PusherCredentials>,
    /// Stores and counts published messages (the one publish rule).
    pub publisher: Arc<Publisher>,
    /// Apps' usage and limits (the publish rate limit is the app's).
    pub usage: Arc<UsageMeter>,
    /// The rate limiters.
    pub limits: Arc<Limiters>,
    /// The cluster's subscriber counts (a networked bus's), for `subscription_count`; `None`
    /// on one node (this node's counts are the server's).
    pub subscribers: Option<Arc<dyn herald_core::bus::Presence>>,
    /// The node's bus, for the cluster's occupied channels (`GET /apps/{app_id}/channels`).
    pub bus: Arc<dyn herald_core::bus::Bus>,
    /// The API's limits.
    pub settings: HttpLimits,
}

/// The router of the HTTP API.
pub fn router(state: Arc<PusherHttp>) -> Router {
    Router::new()
        .route("/apps/{app_id}/events", post(events::events))
        .route("/apps/{app_id}/batch_events", post(events::batch_events))
        .route("/apps/{app_id}/channels", get(channels::list))
        .route("/apps/{app_id}/channels/{channel_name}", get(channels::one))
        .route(
            "/apps/{app_id}/channels/{channel_name}/users",
            get(channels::users),
        )
        .route(
            "/apps/{app_id}/users/{user_id}/terminate_connections",
            post(users::terminate_connections),
        )
        .route(
            "/users/{user_id}/terminate_connections",
            post(users::terminate_connections_of_key),
        )
        .with_state(state)
}

/// An answer of the HTTP API that is not a success: Pusher's status and a plain-text body
/// saying what was wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The status.
    pub status: StatusCode,
    /// What was wrong.
    pub text: String,
    /// Seconds to wait, for a rate limit.
    pub retry_after: Option<u64>,
}

impl Answer {
    /// `status` with `text`.
    pub fn new(status: StatusCode, text: impl Into<String>) -> Self {
        Answer {
            status,
            text: text.into(),
            retry_after: None,
        }
    }

    /// `400 Bad Request` with `text`.
    pub fn bad_request(text: impl Into<String>) -> Self {
        Answer::new(StatusCode::BAD_REQUEST, text)
    }

    /// `401 Unauthorized` with `text`.
    pub fn unauthorized(text: impl Into<String>) -> Self {
        Answer::new(StatusCode::UNAUTHORIZED, text)
    }
}

impl From<HeraldError> for Answer {
    fn from(e: HeraldError) -> Self {
        let status =
            StatusCode::from_u16(e.code.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        Answer {
            status,
            text: e.message,
            retry_after: e.retry_after,
        }
    }
}

impl IntoResponse for Answer {
    fn into_response(self) -> Response {
        let mut response = (self.status, format!("{}\n", self.text)).into_response();
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        if let Some(secs) = self.retry_after {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}
