//! Errors a client or publisher can be told about: a stable machine-readable code plus a
//! human message. Every transport and the HTTP API render these the same way:
//! `{"error":{"code":"...","message":"..."}}`.

use std::fmt;

/// Stable error codes, documented in docs/protocol.md.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    /// The request is malformed (bad JSON, missing field, bad parameter).
    BadRequest,
    /// The command is not one the server knows.
    UnknownCommand,
    /// The channel name does not follow the grammar.
    ChannelInvalid,
    /// No or invalid credentials.
    Unauthorized,
    /// Token expired.
    TokenExpired,
    /// Valid credentials that do not allow this action.
    Forbidden,
    /// The frame or body is larger than the configured limit.
    TooLarge,
    /// The connection is already subscribed to this channel.
    AlreadySubscribed,
    /// The connection is not subscribed to this channel.
    NotSubscribed,
    /// Too many subscriptions on one connection.
    TooManySubscriptions,
    /// The thing asked for does not exist.
    NotFound,
    /// The endpoint exists but does not take this HTTP method.
    MethodNotAllowed,
    /// The server is shutting down.
    ShuttingDown,
    /// Storage failed; the action did not happen.
    StoreFailed,
    /// Anything else that is the server's fault.
    Internal,
    /// A tag does not follow the tag grammar.
    TagInvalid,
    /// A tag expression does not parse.
    TagExpressionInvalid,
    /// A device registration or update is invalid (platform, token format, ids).
    DeviceInvalid,
    /// The thing to create exists already, or its state forbids the action.
    Conflict,
    /// The app reached one of its limits (devices, connections).
    LimitExceeded,
}

impl ErrorCode {
    /// The wire spelling of the code.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::BadRequest => "bad_request",
            ErrorCode::UnknownCommand => "unknown_command",
            ErrorCode::ChannelInvalid => "channel_invalid",
            ErrorCode::Unauthorized => "unauthorized",
            ErrorCode::TokenExpired => "token_expired",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::TooLarge => "too_large",
            ErrorCode::AlreadySubscribed => "already_subscribed",
            ErrorCode::NotSubscribed => "not_subscribed",
            ErrorCode::TooManySubscriptions => "too_many_subscriptions",
            ErrorCode::NotFound => "not_found",
            ErrorCode::MethodNotAllowed => "method_not_allowed",
            ErrorCode::ShuttingDown => "shutting_down",
            ErrorCode::StoreFailed => "store_failed",
            ErrorCode::Internal => "internal",
            ErrorCode::TagInvalid => "tag_invalid",
            ErrorCode::TagExpressionInvalid => "tag_expression_invalid",
            ErrorCode::DeviceInvalid => "device_invalid",
            ErrorCode::Conflict => "conflict",
            ErrorCode::LimitExceeded => "limit_exceeded",
        }
    }

    /// The HTTP status that carries this code.
    pub fn http_status(self) -> u16 {
        match self {
            ErrorCode::BadRequest
            | ErrorCode::UnknownCommand
            | ErrorCode::ChannelInvalid
            | ErrorCode::AlreadySubscribed
            | ErrorCode::NotSubscribed
            | ErrorCode::TooManySubscriptions
            | ErrorCode::TagInvalid
            | ErrorCode::TagExpressionInvalid
            | ErrorCode::DeviceInvalid => 400,
            ErrorCode::Conflict => 409,
            ErrorCode::LimitExceeded => 429,
            ErrorCode::Unauthorized | ErrorCode::TokenExpired => 401,
            ErrorCode::Forbidden => 403,
            ErrorCode::NotFound => 404,
            ErrorCode::MethodNotAllowed => 405,
            ErrorCode::TooLarge => 413,
            ErrorCode::ShuttingDown => 503,
            ErrorCode::StoreFailed | ErrorCode::Internal => 500,
        }
    }
}

/// An error with a code for machines and a message for people.
#[derive(Debug, Clone, thiserror::Error)]
pub struct HeraldError {
    /// What kind of error.
    pub code: ErrorCode,
    /// What went wrong, for a person.
    pub message: String,
}

impl HeraldError {
    /// Builds an error.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        HeraldError {
            code,
            message: message.into(),
        }
    }

    /// A `bad_request` error.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::BadRequest, message)
    }

    /// A `forbidden` error.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Forbidden, message)
    }
}

impl fmt::Display for HeraldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code.as_str(), self.message)
    }
}
