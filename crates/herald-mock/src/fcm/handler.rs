//! The FCM mock's two endpoints: `POST /token` (Google's OAuth2 token endpoint, checking the
//! RS256 assertion) and `POST /v1/projects/{p}/messages:send` (checking the bearer token and
//! the message's shape the way FCM does), answering with FCM's v1 error JSON.

use std::sync::atomic::Ordering;

use bytes::Bytes;
use http::{header, Method, Request, Response, StatusCode};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use serde_json::{json, Value};

use super::state::{Scripted, State};
use crate::server::Answer;

const JWT_BEARER_GRANT: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";
const FCM_SCOPE: &str = "https://www.googleapis.com/auth/firebase.messaging";
/// FCM's limit on `notification` and `data` together.
const MAX_PAYLOAD: usize = 4096;

/// The accounts the token endpoint knows: client e-mail and RSA public key.
pub(crate) struct Accounts(pub Vec<(String, DecodingKey)>);

pub(crate) fn handle(
    state: &State,
    accounts: &Accounts,
    request: &Request<()>,
    body: &[u8],
) -> Answer {
    let path = request.uri().path();
    if request.method() != Method::POST {
        return fcm_error(405, "Method not allowed", None, None);
    }
    if path == "/token" {
        return token(state, accounts, body);
    }
    match path
        .strip_prefix("/v1/projects/")
        .and_then(|rest| rest.strip_suffix("/messages:send"))
    {
        Some(project) => send(state, project, request, body),
        None => fcm_error(404, "Not found", None, None),
    }
}

#[derive(Deserialize)]
struct AssertionClaims {
    iss: String,
    scope: String,
}

fn token(state: &State, accounts: &Accounts, body: &[u8]) -> Answer {
    state.token_requests.fetch_add(1, Ordering::Relaxed);
    let refuse = |why: &str| {
        json_answer(
            400,
            &json!({"error": "invalid_grant", "error_description": why}),
            None,
        )
    };
    let form: Vec<(String, String)> = form_urlencoded::parse(body).into_owned().collect();
    let field = |name: &str| {
        form.iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    if field("grant_type") != Some(JWT_BEARER_GRANT) {
        return json_answer(
            400,
            &json!({"error": "unsupported_grant_type", "error_description": "Invalid grant_type"}),
            None,
        );
    }
    let Some(assertion) = field("assertion") else {
        return refuse("missing assertion");
    };
    let mut validation = Validation::new(Algorithm::RS256);
    validation.set_audience(&[&state.token_url]);
    validation.set_required_spec_claims(&["exp", "iat", "aud", "iss"]);
    validation.leeway = 0;
    let mut last_problem = "no account".to_string();
    for (email, key) in &accounts.0 {
        validation.set_issuer(&[email]);
        match jsonwebtoken::decode::<AssertionClaims>(assertion, key, &validation) {
            Ok(data) if data.claims.scope.split(' ').any(|s| s == FCM_SCOPE) => {
                debug_assert_eq!(&data.claims.iss, email);
                let access_token = state.issue();
                return json_answer(
                    200,
                    &json!({"access_token": access_token, "expires_in": state.expires_in,
                            "token_type": "Bearer"}),
                    None,
                );
            }
            Ok(_) => return refuse("the assertion does not ask for the firebase.messaging scope"),
            Err(e) => last_problem = format!("Invalid JWT: {e}"),
        }
    }
    refuse(&last_problem)
}

fn send(state: &State, project: &str, request: &Request<()>, body: &[u8]) -> Answer {
    let bearer = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    if !bearer.is_some_and(|t| state.valid(t)) {
        state.unauthenticated.fetch_add(1, Ordering::Relaxed);
        return fcm_error(
            401,
            "Request had invalid authentication credentials.",
            None,
            None,
        );
    }
    if project != state.project_id {
        return fcm_error(
            403,
            "Permission denied on the project",
            Some("SENDER_ID_MISMATCH"),
            None,
        );
    }
    let Ok(Value::Object(mut envelope)) = serde_json::from_slice::<Value>(body) else {
        return invalid("message", "the body is not a JSON object");
    };
    let Some(Value::Object(message)) = envelope.remove("message") else {
        return invalid("message", "the body has no message object");
    };
    let targets: Vec<&str> = ["token", "topic", "condition"]
        .into_iter()
        .filter(|t| message.contains_key(*t))
        .collect();
    if targets.len() != 1 {
        return invalid(
            "message",
            "exactly one of token, topic or condition must be set",
        );
    }
    let token = message
        .get("token")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let mut size = 0;
    if let Some(data) = message.get("data") {
        let Some(data) = data.as_object() else {
            return invalid("message.data", "data must be an object");
        };
        if let Some((key, _)) = data.iter().find(|(_, v)| !v.is_string()) {
            return invalid(
                &format!("message.data[{key}]"),
                "data values must be strings",
            );
        }
        size += serde_json::to_vec(data).map(|v| v.len()).unwrap_or(0);
    }
    if let Some(notification) = message.get("notification") {
        size += serde_json::to_vec(notification)
            .map(|v| v.len())
            .unwrap_or(0);
    }
    if size > MAX_PAYLOAD {
        return invalid("message", "Message is too big");
    }
    if let Some(answer) = state.scripted(&token) {
        return scripted(&answer);
    }
    let n = state.record(token, Value::Object(message));
    json_answer(
        200,
        &json!({"name": format!("projects/{}/messages/{n}", state.project_id)}),
        None,
    )
}

fn scripted(answer: &Scripted) -> Answer {
    let message = answer
        .error_code
        .clone()
        .unwrap_or_else(|| "scripted failure".into());
    let mut answer_json = error_json(answer.status, &message, answer.error_code.as_deref());
    if let Some((field, description)) = &answer.field_violation {
        push_violation(&mut answer_json, field, description);
    }
    json_answer(answer.status, &answer_json, answer.retry_after)
}

fn invalid(field: &str, description: &str) -> Answer {
    let mut body = error_json(400, description, Some("INVALID_ARGUMENT"));
    push_violation(&mut body, field, description);
    json_answer(400, &body, None)
}

fn push_violation(body: &mut Value, field: &str, description: &str) {
    if let Some(details) = body["error"]["details"].as_array_mut() {
        details.push(json!({"@type": "type.googleapis.com/google.rpc.BadRequest",
            "fieldViolations": [{"field": field, "description": description}]}));
    }
}

fn fcm_error(status: u16, message: &str, code: Option<&str>, retry_after: Option<u64>) -> Answer {
    json_answer(status, &error_json(status, message, code), retry_after)
}

/// `{"error": {"code", "message", "status", "details": [FcmError]}}` as FCM answers.
fn error_json(status: u16, message: &str, code: Option<&str>) -> Value {
    let canonical = match status {
        400 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        429 => "RESOURCE_EXHAUSTED",
        503 => "UNAVAILABLE",
        500..=599 => "INTERNAL",
        _ => "UNKNOWN",
    };
    let details: Vec<Value> = code
        .map(|c| json!({"@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode": c}))
        .into_iter()
        .collect();
    json!({"error": {"code": status, "message": message, "status": canonical, "details": details}})
}

fn json_answer(status: u16, body: &Value, retry_after: Option<u64>) -> Answer {
    let mut response = Response::builder()
        .status(StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
        .header(header::CONTENT_TYPE, "application/json; charset=UTF-8");
    if let Some(secs) = retry_after {
        response = response.header(header::RETRY_AFTER, secs);
    }
    let response = response.body(()).unwrap_or_default();
    (response, Bytes::from(body.to_string()))
}
