//! Small HTTP helpers shared by the transports: JSON error responses, reading the client token
//! from `?token=` or `Authorization: Bearer`, and query strings with repeated keys.

use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use herald_core::HeraldError;

/// `{"error":{"code","message"}}` with the code's HTTP status, as `herald_proto::http` renders
/// every HTTP error.
pub fn error_response(e: &HeraldError) -> Response {
    let (status, body) = error_parts(e);
    let json = HeaderValue::from_static("application/json");
    (status, [(header::CONTENT_TYPE, json)], body).into_response()
}

/// The HTTP status and JSON body of [`error_response`], for a transport that writes its own
/// answer.
pub fn error_parts(e: &HeraldError) -> (StatusCode, Vec<u8>) {
    let (status, body) = herald_proto::http::error_answer(e);
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST);
    (status, body)
}

/// Resolves when a token that expires at `expires` (seconds since the Unix epoch) has expired;
/// never when `None`.
pub async fn until_expiry(expires: Option<u64>) {
    match expires {
        Some(exp) => tokio::time::sleep(secs_until(exp)).await,
        None => std::future::pending().await,
    }
}

/// Time from now until `exp` (seconds since the Unix epoch); zero if it has passed.
pub fn secs_until(exp: u64) -> std::time::Duration {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    std::time::Duration::from_secs(exp.saturating_sub(now))
}

/// A boolean query parameter: `true`/`1`/empty or `false`/`0`.
pub fn parse_bool(v: &str) -> Result<bool, HeraldError> {
    match v {
        "true" | "1" | "" => Ok(true),
        "false" | "0" => Ok(false),
        _ => Err(HeraldError::bad_request(format!(
            "invalid boolean {v:?}: use true or false"
        ))),
    }
}

/// The decoded `key=value` pairs of a query string, in order (repeated keys kept).
pub fn query_pairs(query: Option<&str>) -> Vec<(String, String)> {
    let query = query.unwrap_or("");
    // Sized once: a stream request may name a thousand channels.
    let mut pairs = Vec::with_capacity(query.bytes().filter(|&b| b == b'&').count() + 1);
    pairs.extend(form_urlencoded::parse(query.as_bytes()).into_owned());
    pairs
}

/// [`client_token`] read straight from the query string, without keeping its pairs (decoded
/// values are borrowed unless they hold escapes).
pub fn client_token_in_query(query: Option<&str>, headers: &HeaderMap) -> Option<String> {
    token_from(
        form_urlencoded::parse(query.unwrap_or("").as_bytes()),
        headers,
    )
}

/// The client token from `?token=` or an `Authorization: Bearer` header; an empty one counts
/// as none. A `?token=` parameter wins even when it is empty: the header is then not looked at
/// (docs/protocol.md, "Where to send the token"), so a request never gains the header's rights
/// by blanking the query.
pub fn client_token(pairs: &[(String, String)], headers: &HeaderMap) -> Option<String> {
    token_from(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())), headers)
}

/// [`client_token`] over any `(key, value)` pairs.
fn token_from<K: AsRef<str>, V: AsRef<str>>(
    pairs: impl IntoIterator<Item = (K, V)>,
    headers: &HeaderMap,
) -> Option<String> {
    if let Some((_, t)) = pairs.into_iter().find(|(k, _)| k.as_ref() == "token") {
        let t = t.as_ref().trim();
        return (!t.is_empty()).then(|| t.to_owned());
    }
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(herald_proto::http::bearer)
        .filter(|t| !t.is_empty())
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_bearer(token: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::AUTHORIZATION,
            format!("Bearer {token}").parse().unwrap(),
        );
        headers
    }

    #[test]
    fn the_token_read_from_the_query_string_is_the_token_read_from_its_pairs() {
        let cases = [
            (
                Some("channel=a&token=%20abc%20&token=second"),
                HeaderMap::new(),
            ),
            (Some("channel=a"), with_bearer("from-header")),
            (Some("token=&channel=a"), with_bearer("from-header")),
            (Some("token=a%2Bb+c"), HeaderMap::new()),
            (None, with_bearer("from-header")),
            (None, HeaderMap::new()),
        ];
        let expected = [
            Some("abc"),
            Some("from-header"),
            None,
            Some("a+b c"),
            Some("from-header"),
            None,
        ];
        for ((query, headers), want) in cases.iter().zip(expected) {
            let from_pairs = client_token(&query_pairs(*query), headers);
            assert_eq!(from_pairs.as_deref(), want, "{query:?}");
            assert_eq!(
                client_token_in_query(*query, headers),
                from_pairs,
                "{query:?}"
            );
        }
    }

    #[test]
    fn query_pairs_keeps_every_pair_in_order() {
        let pairs = query_pairs(Some("channel=a&channel=b&since=1%2C2&last"));
        let got: Vec<(&str, &str)> = pairs
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("channel", "a"),
                ("channel", "b"),
                ("since", "1,2"),
                ("last", "")
            ]
        );
        assert!(query_pairs(None).is_empty());
    }
}
