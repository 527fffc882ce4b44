//! Error codes and the error type every transport and the HTTP API report: a stable
//! machine-readable code, the HTTP status that carries it, and a human message. On the wire it
//! is `{"code":"...","message":"..."}` (see [`crate::http`] for the HTTP answer).

use std::fmt;

/// Stable error codes, documented in docs/protocol.md ("Error codes").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
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
    /// HTTP: a request head or body stopped arriving before its deadline; the connection is
    /// closed after this answer.
    RequestTimeout,
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
    /// The store cannot be reached now (a cluster's database is down or unreachable); the
    /// action did not happen; retry after the `Retry-After` the answer carries.
    StoreUnavailable,
    /// The store has no space left (disk full, a file-size limit, PostgreSQL's `disk_full`); the
    /// action did not happen; writes work again once space is freed.
    InsufficientStorage,
    /// The store stopped accepting writes after a failed fsync (the operating system may have
    /// dropped written data, so nothing more is acknowledged); the action did not happen; an
    /// operator restarts the server after checking the disk.
    StoreHalted,
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
    /// Too many requests, commands or connections in too short a time; retry after the
    /// `Retry-After` the HTTP answer carries (whole seconds).
    RateLimited,
}

impl ErrorCode {
    /// Every code, in the order docs/protocol.md lists them.
    pub const ALL: [ErrorCode; 25] = [
        ErrorCode::BadRequest,
        ErrorCode::UnknownCommand,
        ErrorCode::ChannelInvalid,
        ErrorCode::AlreadySubscribed,
        ErrorCode::NotSubscribed,
        ErrorCode::TooManySubscriptions,
        ErrorCode::TagInvalid,
        ErrorCode::TagExpressionInvalid,
        ErrorCode::DeviceInvalid,
        ErrorCode::Unauthorized,
        ErrorCode::TokenExpired,
        ErrorCode::Forbidden,
        ErrorCode::NotFound,
        ErrorCode::Conflict,
        ErrorCode::MethodNotAllowed,
        ErrorCode::TooLarge,
        ErrorCode::RequestTimeout,
        ErrorCode::LimitExceeded,
        ErrorCode::RateLimited,
        ErrorCode::StoreFailed,
        ErrorCode::StoreUnavailable,
        ErrorCode::InsufficientStorage,
        ErrorCode::StoreHalted,
        ErrorCode::Internal,
        ErrorCode::ShuttingDown,
    ];

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
            ErrorCode::RequestTimeout => "request_timeout",
            ErrorCode::AlreadySubscribed => "already_subscribed",
            ErrorCode::NotSubscribed => "not_subscribed",
            ErrorCode::TooManySubscriptions => "too_many_subscriptions",
            ErrorCode::NotFound => "not_found",
            ErrorCode::MethodNotAllowed => "method_not_allowed",
            ErrorCode::ShuttingDown => "shutting_down",
            ErrorCode::StoreFailed => "store_failed",
            ErrorCode::StoreUnavailable => "store_unavailable",
            ErrorCode::InsufficientStorage => "insufficient_storage",
            ErrorCode::StoreHalted => "store_halted",
            ErrorCode::Internal => "internal",
            ErrorCode::TagInvalid => "tag_invalid",
            ErrorCode::TagExpressionInvalid => "tag_expression_invalid",
            ErrorCode::DeviceInvalid => "device_invalid",
            ErrorCode::Conflict => "conflict",
            ErrorCode::LimitExceeded => "limit_exceeded",
            ErrorCode::RateLimited => "rate_limited",
        }
    }

    /// The code a wire spelling names, for clients reading an error; `None` for a spelling this
    /// version does not know.
    pub fn from_wire(s: &str) -> Option<ErrorCode> {
        ErrorCode::ALL.into_iter().find(|c| c.as_str() == s)
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
            ErrorCode::LimitExceeded | ErrorCode::RateLimited => 429,
            ErrorCode::Unauthorized | ErrorCode::TokenExpired => 401,
            ErrorCode::Forbidden => 403,
            ErrorCode::NotFound => 404,
            ErrorCode::MethodNotAllowed => 405,
            ErrorCode::TooLarge => 413,
            ErrorCode::RequestTimeout => 408,
            ErrorCode::ShuttingDown | ErrorCode::StoreUnavailable | ErrorCode::StoreHalted => 503,
            ErrorCode::InsufficientStorage => 507,
            ErrorCode::StoreFailed | ErrorCode::Internal => 500,
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl serde::Serialize for ErrorCode {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for ErrorCode {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        ErrorCode::from_wire(&s)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown error code {s:?}")))
    }
}

/// An error with a code for machines and a message for people.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct HeraldError {
    /// What kind of error.
    pub code: ErrorCode,
    /// What went wrong, for a person.
    pub message: String,
    /// How long to wait before retrying, in whole seconds, when the answer says so (a
    /// `rate_limited` error): the HTTP answer's `Retry-After`. Not part of the JSON body.
    pub retry_after: Option<u64>,
}

impl HeraldError {
    /// Builds an error.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        HeraldError {
            code,
            message: message.into(),
            retry_after: None,
        }
    }

    /// The same error, telling the client to retry after `seconds` (at least 1).
    pub fn retry_after(mut self, seconds: u64) -> Self {
        self.retry_after = Some(seconds.max(1));
        self
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_parses_back_from_its_spelling() {
        for c in ErrorCode::ALL {
            assert_eq!(ErrorCode::from_wire(c.as_str()), Some(c));
        }
        assert_eq!(ErrorCode::from_wire("Bad_Request"), None);
    }
}
