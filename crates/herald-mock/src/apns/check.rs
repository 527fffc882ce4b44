//! The request checks APNs makes before it looks at the device: method, path and device token,
//! topic, push type against the topic's suffix, priority, expiration, collapse id and payload
//! size. Each failure is Apple's status and `reason`.

use http::{HeaderMap, HeaderValue, Method, Request, StatusCode};

/// A request APNs would refuse: status and reason.
pub type Refusal = (StatusCode, &'static str);

/// The push types APNs takes, with the topic suffix each requires (`None`: any topic).
const PUSH_TYPES: [(&str, Option<&str>); 10] = [
    ("alert", None),
    ("background", None),
    ("mdm", None),
    ("voip", Some(".voip")),
    ("liveactivity", Some(".push-type.liveactivity")),
    ("complication", Some(".complication")),
    ("fileprovider", Some(".pushkit.fileprovider")),
    ("pushtotalk", Some(".voip-ptt")),
    ("location", Some(".location-query")),
    ("widgets", Some(".push-type.widgets")),
];

/// The headers APNs reads, found in one pass over a request's headers (a lookup per header
/// hashed its name each time: 4-5 % of the mock's CPU in a benchmark's profile).
#[derive(Debug, Default)]
pub struct ApnsHeaders<'a> {
    /// `authorization`.
    pub authorization: Option<&'a HeaderValue>,
    topic: Option<&'a HeaderValue>,
    push_type: Option<&'a HeaderValue>,
    priority: Option<&'a HeaderValue>,
    expiration: Option<&'a HeaderValue>,
    collapse_id: Option<&'a HeaderValue>,
    /// One of the `apns-` headers above came twice.
    duplicated: bool,
}

impl<'a> ApnsHeaders<'a> {
    /// Finds the headers in `headers`.
    pub fn read(headers: &'a HeaderMap) -> ApnsHeaders<'a> {
        let mut found = ApnsHeaders::default();
        // Every value is seen, a repeated header's too.
        for (name, value) in headers {
            let slot = match name.as_str() {
                "authorization" => {
                    found.authorization.get_or_insert(value);
                    continue;
                }
                "apns-topic" => &mut found.topic,
                "apns-push-type" => &mut found.push_type,
                "apns-priority" => &mut found.priority,
                "apns-expiration" => &mut found.expiration,
                "apns-collapse-id" => &mut found.collapse_id,
                _ => continue,
            };
            if slot.replace(value).is_some() {
                found.duplicated = true;
            }
        }
        found
    }
}

/// Checks `request` with `payload`; gives the device token when APNs would go on.
pub fn check<'a>(request: &'a Request<()>, payload: &[u8]) -> Result<&'a str, Refusal> {
    check_read(request, &ApnsHeaders::read(request.headers()), payload)
}

/// [`check`], with the request's headers already read.
pub fn check_read<'a>(
    request: &'a Request<()>,
    headers: &ApnsHeaders<'_>,
    payload: &[u8],
) -> Result<&'a str, Refusal> {
    if request.method() != Method::POST {
        return Err((StatusCode::METHOD_NOT_ALLOWED, "MethodNotAllowed"));
    }
    let token = request
        .uri()
        .path()
        .strip_prefix("/3/device/")
        .ok_or((StatusCode::NOT_FOUND, "BadPath"))?;
    if token.is_empty() {
        return Err((StatusCode::BAD_REQUEST, "MissingDeviceToken"));
    }
    if token.len() < 64 || !token.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err((StatusCode::BAD_REQUEST, "BadDeviceToken"));
    }
    if headers.duplicated {
        return Err((StatusCode::BAD_REQUEST, "DuplicateHeaders"));
    }
    let topic = text(headers.topic)?.ok_or((StatusCode::BAD_REQUEST, "MissingTopic"))?;
    let push_type = text(headers.push_type)?.unwrap_or("alert");
    let suffix = PUSH_TYPES
        .iter()
        .find(|(name, _)| *name == push_type)
        .ok_or((StatusCode::BAD_REQUEST, "InvalidPushType"))?
        .1;
    let suffixed = PUSH_TYPES
        .iter()
        .filter_map(|(_, s)| *s)
        .any(|s| topic.ends_with(s));
    let consistent = match suffix {
        Some(suffix) => topic.len() > suffix.len() && topic.ends_with(suffix),
        None => !suffixed,
    };
    if !consistent {
        return Err((StatusCode::BAD_REQUEST, "InvalidPushType"));
    }
    if let Some(priority) = text(headers.priority)? {
        if !matches!(priority, "10" | "5" | "1") {
            return Err((StatusCode::BAD_REQUEST, "BadPriority"));
        }
        if push_type == "background" && priority != "5" {
            return Err((StatusCode::BAD_REQUEST, "BadPriority"));
        }
    }
    if let Some(expiration) = text(headers.expiration)? {
        if expiration.parse::<i64>().is_err() {
            return Err((StatusCode::BAD_REQUEST, "BadExpirationDate"));
        }
    }
    if let Some(collapse_id) = text(headers.collapse_id)? {
        if collapse_id.len() > 64 {
            return Err((StatusCode::BAD_REQUEST, "BadCollapseId"));
        }
    }
    if payload.is_empty() {
        return Err((StatusCode::BAD_REQUEST, "PayloadEmpty"));
    }
    let limit = if push_type == "voip" { 5120 } else { 4096 };
    if payload.len() > limit {
        return Err((StatusCode::PAYLOAD_TOO_LARGE, "PayloadTooLarge"));
    }
    Ok(token)
}

/// A header's value as text (not text is `BadRequest`-like).
fn text(value: Option<&HeaderValue>) -> Result<Option<&str>, Refusal> {
    value
        .map(|v| {
            v.to_str()
                .map_err(|_| (StatusCode::BAD_REQUEST, "BadTopic"))
        })
        .transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(path: &str, headers: &[(&str, &str)]) -> Request<()> {
        let mut builder = Request::builder()
            .method(Method::POST)
            .uri(format!("https://localhost{path}"));
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        builder.body(()).unwrap()
    }

    /// Path, headers, body and the reason expected.
    type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], &'a [u8], &'a str);

    #[test]
    fn refusals_carry_apples_reasons() {
        let token = "a".repeat(64);
        let path = format!("/3/device/{token}");
        let ok = [
            ("apns-topic", "com.example.app"),
            ("apns-push-type", "alert"),
        ];
        assert_eq!(check(&request(&path, &ok), b"{}"), Ok(token.as_str()));
        let cases: [Case; 9] = [
            ("/3/device/xyz", &ok, b"{}", "BadDeviceToken"),
            ("/4/device/x", &ok, b"{}", "BadPath"),
            (&path, &[("apns-push-type", "alert")], b"{}", "MissingTopic"),
            (
                &path,
                &[("apns-topic", "com.example.app"), ("apns-push-type", "sms")],
                b"{}",
                "InvalidPushType",
            ),
            (
                &path,
                &[
                    ("apns-topic", "com.example.app"),
                    ("apns-push-type", "voip"),
                ],
                b"{}",
                "InvalidPushType",
            ),
            (
                &path,
                &[
                    ("apns-topic", "com.example.app.voip"),
                    ("apns-push-type", "alert"),
                ],
                b"{}",
                "InvalidPushType",
            ),
            (
                &path,
                &[("apns-topic", "a"), ("apns-priority", "7")],
                b"{}",
                "BadPriority",
            ),
            (&path, &ok, b"", "PayloadEmpty"),
            (
                &path,
                &[
                    ("apns-topic", "com.example.app"),
                    ("apns-priority", "10"),
                    ("apns-priority", "5"),
                ],
                b"{}",
                "DuplicateHeaders",
            ),
        ];
        for (path, headers, body, reason) in cases {
            assert_eq!(check(&request(path, headers), body).unwrap_err().1, reason);
        }
        let voip = [
            ("apns-topic", "com.example.app.voip"),
            ("apns-push-type", "voip"),
        ];
        assert!(check(&request(&path, &voip), &[b' '; 5000]).is_ok());
        assert_eq!(
            check(&request(&path, &ok), &[b' '; 5000]).unwrap_err().1,
            "PayloadTooLarge"
        );
    }
}
