//! Publishing over the HTTP API with a bearer API key: `POST /v1/channels/{channel}/messages`,
//! and any other JSON `POST` of the publisher API (`herald push` sends `POST /v1/push`).

use anyhow::{bail, Context};
use serde_json::Value;

/// One publish request.
#[derive(Debug, Clone)]
pub struct PublishRequest {
    /// Server base URL, e.g. `http://127.0.0.1:7070`.
    pub url: String,
    /// Publisher API key, sent as `Authorization: Bearer`.
    pub api_key: Option<String>,
    /// Channel name.
    pub channel: String,
    /// The message data.
    pub data: Value,
    /// `Idempotency-Key` header.
    pub id: Option<String>,
}

/// What the server answered.
#[derive(Debug)]
pub enum PublishOutcome {
    /// A 2xx response and its body (JSON when it parsed, else as a string).
    Published(Value),
    /// An error response: HTTP status, error code and message.
    Rejected {
        /// HTTP status.
        status: u16,
        /// The `error.code`, or empty.
        code: String,
        /// The `error.message`, or the raw body.
        message: String,
    },
}

/// DATA as the user typed it: JSON if it parses, otherwise a JSON string.
pub fn data_from_arg(text: &str, force_string: bool) -> Value {
    if force_string {
        return Value::String(text.to_owned());
    }
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
}

/// Sends the request.
pub async fn publish(req: &PublishRequest) -> anyhow::Result<PublishOutcome> {
    let path = format!("/v1/channels/{}/messages", super::encode_path(&req.channel));
    let body = serde_json::json!({ "data": req.data });
    post_json(
        &req.url,
        &path,
        req.api_key.as_deref(),
        req.id.as_deref(),
        &body,
    )
    .await
}

/// `POST`s `body` to `path` with the API key and optional `Idempotency-Key`.
pub async fn post_json(
    base: &str,
    path: &str,
    api_key: Option<&str>,
    idempotency_key: Option<&str>,
    body: &Value,
) -> anyhow::Result<PublishOutcome> {
    let url = super::join_url(base, path);
    let mut http = reqwest::Client::new().post(&url).json(body);
    if let Some(key) = api_key {
        http = http.bearer_auth(key);
    }
    if let Some(id) = idempotency_key {
        http = http.header("Idempotency-Key", id);
    }
    let response = http
        .send()
        .await
        .with_context(|| format!("cannot reach {url}"))?;
    let status = response.status();
    let body = response
        .text()
        .await
        .with_context(|| format!("reading the response from {url}"))?;
    let json: Option<Value> = serde_json::from_str(&body).ok();
    if status.is_success() {
        return Ok(PublishOutcome::Published(
            json.unwrap_or(Value::String(body)),
        ));
    }
    let error = json.as_ref().and_then(|v| v.get("error"));
    let field = |name: &str| {
        error
            .and_then(|e| e.get(name))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    match (field("code"), field("message")) {
        (code, Some(message)) => Ok(PublishOutcome::Rejected {
            status: status.as_u16(),
            code: code.unwrap_or_default(),
            message,
        }),
        _ if body.trim().is_empty() => bail!("{url} answered {status} with an empty body"),
        _ => Ok(PublishOutcome::Rejected {
            status: status.as_u16(),
            code: String::new(),
            message: body.trim().chars().take(500).collect(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_is_json_or_a_string() {
        assert_eq!(data_from_arg(r#"{"a":1}"#, false)["a"], 1);
        assert_eq!(data_from_arg("42", false), Value::from(42));
        assert_eq!(
            data_from_arg("hello world", false),
            Value::from("hello world")
        );
        assert_eq!(data_from_arg("42", true), Value::from("42"));
    }
}
