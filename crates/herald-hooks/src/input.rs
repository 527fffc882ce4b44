//! What a caller sends to register or change an endpoint, checked: the JSON bodies of
//! `POST /v1/apps/{id}/hooks` ([`parse_create`]) and `PATCH /v1/apps/{id}/hooks/{hook}`
//! ([`parse_patch`]), and the URL's destination ([`check_destination`], the operator's rule
//! for tenant-given URLs, as for Web Push endpoints). Every error names its field; unknown
//! fields are refused; nothing is stored until all of it passes.
//!
//! | field | rule |
//! |---|---|
//! | `url` | `http` or `https`, a host, no user name or password, at most 2,048 characters |
//! | `events` | event type names (or `"*"` for every type), at least one |
//! | `channels` | channel patterns as tokens write them, at most 100 (empty: every channel) |
//! | `description` | at most 200 characters |
//! | `enabled` | `true` or `false` |
//! | `offline_delay_ms` | 0 to 600,000 |
//! | `format` | `standard` (the default) or `pusher`, at creation only; a `pusher` endpoint's `events` are Pusher's types ([`crate::pusher::PUSHER_TYPES`]), `"*"` those but the opt-in `subscription_count` |

use herald_core::pattern::check_pattern;
use herald_core::tenant::AppId;
use herald_providers::destination::Destinations;
use serde_json::{Map, Value};

use crate::endpoint::{Format, DEFAULT_OFFLINE_DELAY_MS, MAX_OFFLINE_DELAY_MS};
use crate::error::HooksError;
use crate::event::{EventSet, EventType};
use crate::pusher::{pusher_types, PUSHER_TYPES};
use crate::store::{EndpointPatch, NewEndpoint};

/// Longest endpoint URL, in characters.
pub const MAX_URL_LEN: usize = 2048;

/// Longest description, in characters.
pub const MAX_DESCRIPTION_LEN: usize = 200;

/// Most channel patterns an endpoint may give.
pub const MAX_CHANNEL_PATTERNS: usize = 100;

/// The fields of a create or PATCH body.
const FIELDS: [&str; 7] = [
    "url",
    "events",
    "channels",
    "description",
    "enabled",
    "offline_delay_ms",
    "format",
];

/// A checked create body: a new endpoint but for its app, secret and creation time.
#[derive(Debug, Clone, PartialEq)]
pub struct EndpointInput {
    /// Where batches go.
    pub url: String,
    /// The note (empty when not given).
    pub description: String,
    /// The event types.
    pub events: EventSet,
    /// Channel patterns (empty: every channel).
    pub channels: Vec<String>,
    /// Whether events are queued for it (`true` when not given).
    pub enabled: bool,
    /// The offline delay ([`DEFAULT_OFFLINE_DELAY_MS`] when not given).
    pub offline_delay_ms: u32,
    /// How its requests are written and signed ([`Format::Standard`] when not given).
    pub format: Format,
}

impl EndpointInput {
    /// The endpoint to store for `app`, with its sealed secret, created at `created_ms`.
    pub fn into_new(self, app: AppId, secret: Vec<u8>, created_ms: i64) -> NewEndpoint {
        NewEndpoint {
            app,
            url: self.url,
            description: self.description,
            events: self.events,
            channels: self.channels,
            enabled: self.enabled,
            offline_delay_ms: self.offline_delay_ms,
            format: self.format,
            secret,
            created_ms,
        }
    }
}

/// Checks a create body (`url` and `events` required). The destination is checked apart
/// ([`check_destination`], it resolves names).
pub fn parse_create(input: &Value) -> Result<EndpointInput, HooksError> {
    let format = match input {
        Value::Object(body) => field(body, "format", check_format)?.unwrap_or_default(),
        _ => Format::Standard,
    };
    let mut without_format = input.clone();
    if let Value::Object(body) = &mut without_format {
        body.remove("format");
    }
    let patch = parse_patch(&without_format)?;
    let url = patch
        .url
        .ok_or_else(|| HooksError::bad_input("url", "required"))?;
    let events = patch
        .events
        .ok_or_else(|| HooksError::bad_input("events", "required: event types, or [\"*\"]"))?;
    let events = events_for(format, events, &input["events"])?;
    Ok(EndpointInput {
        url,
        description: patch.description.unwrap_or_default(),
        events,
        channels: patch.channels.unwrap_or_default(),
        enabled: patch.enabled.unwrap_or(true),
        offline_delay_ms: patch.offline_delay_ms.unwrap_or(DEFAULT_OFFLINE_DELAY_MS),
        format,
    })
}

/// The event types an endpoint of `format` is told, from `events` as parsed from `names` (the
/// body's `events`): all of them for a Standard endpoint; for a Pusher endpoint the ones
/// Pusher has (`"*"` standing for those), any other named type refused.
pub fn events_for(format: Format, events: EventSet, names: &Value) -> Result<EventSet, HooksError> {
    if format == Format::Standard {
        return Ok(events);
    }
    let pusher = pusher_types();
    let named = names
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str);
    for name in named.filter(|n| *n != "*") {
        if EventType::parse(name).is_some_and(|kind| !pusher.contains(kind)) {
            let valid: Vec<&str> = PUSHER_TYPES.iter().map(|t| t.as_str()).collect();
            return Err(HooksError::bad_input(
                "events",
                format!(
                    "{name:?} has no Pusher webhook; a pusher endpoint is told {} (\"*\": \
                     all but subscription_count)",
                    valid.join(", ")
                ),
            ));
        }
    }
    Ok(events
        .iter()
        .filter(|kind| pusher.contains(*kind))
        .collect())
}

fn check_format(value: &Value) -> Result<Format, HooksError> {
    value
        .as_str()
        .and_then(Format::parse)
        .ok_or_else(|| HooksError::bad_input("format", "must be \"standard\" or \"pusher\""))
}

/// Checks a PATCH body: any of the create fields, each checked as at creation.
pub fn parse_patch(input: &Value) -> Result<EndpointPatch, HooksError> {
    let Value::Object(body) = input else {
        return Err(HooksError::bad_input("body", "must be a JSON object"));
    };
    if let Some(unknown) = body.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err(HooksError::bad_input(
            unknown.as_str(),
            format!("unknown field; the fields are {}", FIELDS.join(", ")),
        ));
    }
    if body.contains_key("format") {
        return Err(HooksError::bad_input(
            "format",
            "is set when the endpoint is created; create another endpoint for another format",
        ));
    }
    Ok(EndpointPatch {
        url: field(body, "url", check_url)?,
        description: field(body, "description", check_description)?,
        events: field(body, "events", check_events)?,
        channels: field(body, "channels", check_channels)?,
        enabled: field(body, "enabled", |v| {
            v.as_bool()
                .ok_or_else(|| HooksError::bad_input("enabled", "must be true or false"))
        })?,
        offline_delay_ms: field(body, "offline_delay_ms", check_offline_delay)?,
    })
}

/// Refuses `url` (already checked by [`parse_create`] or [`parse_patch`]) when its host is, or
/// resolves to, an address `destinations` refuses. A name that does not resolve within a few
/// seconds passes: every connection checks it again.
pub async fn check_destination(destinations: &Destinations, url: &str) -> Result<(), HooksError> {
    let parsed = url::Url::parse(url).map_err(|e| HooksError::bad_input("url", e.to_string()))?;
    let host = parsed
        .host_str()
        .ok_or_else(|| HooksError::bad_input("url", "must name a host"))?;
    destinations.check_host(host).await?;
    Ok(())
}

fn field<T>(
    body: &Map<String, Value>,
    name: &str,
    check: impl FnOnce(&Value) -> Result<T, HooksError>,
) -> Result<Option<T>, HooksError> {
    body.get(name).map(check).transpose()
}

fn string<'a>(value: &'a Value, field: &str) -> Result<&'a str, HooksError> {
    value
        .as_str()
        .ok_or_else(|| HooksError::bad_input(field, "must be a string"))
}

fn check_url(value: &Value) -> Result<String, HooksError> {
    let text = string(value, "url")?;
    let bad = |message: &str| Err(HooksError::bad_input("url", message));
    if text.chars().count() > MAX_URL_LEN {
        return bad("at most 2048 characters");
    }
    let url = match url::Url::parse(text) {
        Ok(url) => url,
        Err(e) => return bad(&format!("not a URL ({e})")),
    };
    if !matches!(url.scheme(), "http" | "https") {
        return bad("must be an http or https URL");
    }
    if url.host_str().is_none_or(str::is_empty) {
        return bad("must name a host");
    }
    if !url.username().is_empty() || url.password().is_some() {
        return bad("may not carry a user name or password (sign requests with the secret)");
    }
    Ok(text.to_owned())
}

fn check_description(value: &Value) -> Result<String, HooksError> {
    let text = string(value, "description")?;
    if text.chars().count() > MAX_DESCRIPTION_LEN {
        return Err(HooksError::bad_input(
            "description",
            "at most 200 characters",
        ));
    }
    Ok(text.to_owned())
}

fn check_events(value: &Value) -> Result<EventSet, HooksError> {
    let Some(items) = value.as_array() else {
        return Err(HooksError::bad_input(
            "events",
            "must be an array of event types",
        ));
    };
    if items.is_empty() {
        return Err(HooksError::bad_input(
            "events",
            "at least one event type, or [\"*\"] for every type",
        ));
    }
    let names = items
        .iter()
        .enumerate()
        .map(|(i, item)| string(item, &format!("events[{i}]")))
        .collect::<Result<Vec<&str>, _>>()?;
    EventSet::parse(&names).map_err(|unknown| {
        let valid: Vec<&str> = EventType::SUBSCRIBABLE.iter().map(|t| t.as_str()).collect();
        HooksError::bad_input(
            "events",
            format!(
                "unknown event type {unknown:?}; the types are {}, or \"*\" for every type \
                 but the opt-in subscription_count, pusher.client_event and pusher.cache_miss",
                valid.join(", ")
            ),
        )
    })
}

fn check_channels(value: &Value) -> Result<Vec<String>, HooksError> {
    let Some(items) = value.as_array() else {
        return Err(HooksError::bad_input(
            "channels",
            "must be an array of channel patterns",
        ));
    };
    if items.len() > MAX_CHANNEL_PATTERNS {
        return Err(HooksError::bad_input(
            "channels",
            format!("at most {MAX_CHANNEL_PATTERNS} patterns"),
        ));
    }
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let field = format!("channels[{i}]");
            let pattern = string(item, &field)?;
            check_pattern(pattern).map_err(|e| HooksError::bad_input(field, e.message))?;
            Ok(pattern.to_owned())
        })
        .collect()
}

fn check_offline_delay(value: &Value) -> Result<u32, HooksError> {
    value
        .as_u64()
        .filter(|ms| *ms <= u64::from(MAX_OFFLINE_DELAY_MS))
        .map(|ms| ms as u32)
        .ok_or_else(|| {
            HooksError::bad_input(
                "offline_delay_ms",
                format!("must be a whole number of milliseconds from 0 to {MAX_OFFLINE_DELAY_MS}"),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn field_of(result: Result<impl std::fmt::Debug, HooksError>) -> (String, String) {
        match result.unwrap_err() {
            HooksError::BadInput { field, message } => (field, message),
            other => panic!("not bad input: {other:?}"),
        }
    }

    #[test]
    fn a_full_body_is_read_and_defaults_fill_the_rest() {
        let input = parse_create(&json!({
            "url": "https://example.com/hooks?x=1",
            "events": ["user.offline", "channel.vacated"],
            "channels": ["rooms/*"],
            "description": "backend",
            "enabled": false,
            "offline_delay_ms": 0,
        }))
        .unwrap();
        assert_eq!(input.url, "https://example.com/hooks?x=1");
        assert_eq!(input.events.names(), ["user.offline", "channel.vacated"]);
        assert_eq!(input.channels, ["rooms/*"]);
        assert_eq!((input.enabled, input.offline_delay_ms), (false, 0));

        let input = parse_create(&json!({"url": "http://example.com", "events": ["*"]})).unwrap();
        assert_eq!(input.events, EventSet::all());
        assert!(input.enabled && input.channels.is_empty() && input.description.is_empty());
        assert_eq!(input.offline_delay_ms, DEFAULT_OFFLINE_DELAY_MS);

        let patch = parse_patch(&json!({"enabled": true})).unwrap();
        assert_eq!(
            patch,
            EndpointPatch {
                enabled: Some(true),
                ..EndpointPatch::default()
            }
        );
    }

    #[test]
    fn each_error_names_its_field() {
        let ok = || json!({"url": "https://example.com/h", "events": ["user.online"]});
        let with = |key: &str, value: Value| {
            let mut body = ok();
            body[key] = value;
            body
        };
        for (body, want_field, want_words) in [
            (json!({"events": ["*"]}), "url", "required"),
            (json!({"url": "https://example.com"}), "events", "required"),
            (
                with("url", json!("ftp://example.com/")),
                "url",
                "http or https",
            ),
            (
                with("url", json!("https://al:pw@example.com/")),
                "url",
                "password",
            ),
            (
                with("url", json!("https://al@example.com/")),
                "url",
                "user name",
            ),
            (with("url", json!("example.com/hooks")), "url", "not a URL"),
            (
                with(
                    "url",
                    json!(format!("https://example.com/{}", "a".repeat(2048))),
                ),
                "url",
                "2048",
            ),
            (with("url", json!(7)), "url", "string"),
            (with("events", json!([])), "events", "at least one"),
            (with("events", json!("user.online")), "events", "array"),
            (
                with("events", json!(["user.online", 3])),
                "events[1]",
                "string",
            ),
            (
                with("channels", json!(["ok/*", "bad//x"])),
                "channels[1]",
                "pattern",
            ),
            (
                with("channels", json!(vec!["a"; 101])),
                "channels",
                "at most 100",
            ),
            (
                with("description", json!("d".repeat(201))),
                "description",
                "200",
            ),
            (with("enabled", json!("yes")), "enabled", "true or false"),
            (
                with("offline_delay_ms", json!(600_001)),
                "offline_delay_ms",
                "600000",
            ),
            (
                with("offline_delay_ms", json!(-1)),
                "offline_delay_ms",
                "600000",
            ),
            (
                with("offline_delay_ms", json!(1.5)),
                "offline_delay_ms",
                "whole number",
            ),
            (with("secret", json!("whsec_x")), "secret", "unknown field"),
            (json!(["url"]), "body", "object"),
        ] {
            let (field, message) = field_of(parse_create(&body));
            assert_eq!(field, want_field, "{body}: {message}");
            assert!(message.contains(want_words), "{body}: {message}");
        }
        assert!(parse_create(&with("description", json!("d".repeat(200)))).is_ok());
        assert!(parse_create(&with("offline_delay_ms", json!(600_000))).is_ok());
    }

    #[test]
    fn a_pusher_endpoint_is_told_pushers_types_only() {
        let input = parse_create(&json!({
            "url": "https://example.com/h", "events": ["*"], "format": "pusher",
        }))
        .unwrap();
        assert_eq!(input.format, Format::Pusher);
        assert_eq!(
            input.events.names(),
            [
                "channel.occupied",
                "channel.vacated",
                "presence.member_added",
                "presence.member_removed"
            ]
        );
        let counted = parse_create(&json!({
            "url": "https://example.com/h", "events": ["*", "subscription_count"],
            "format": "pusher",
        }))
        .unwrap();
        assert!(counted.events.contains(EventType::SubscriptionCount));
        let (field, message) = field_of(parse_create(&json!({
            "url": "https://example.com/h", "events": ["user.online"], "format": "pusher",
        })));
        assert_eq!(field, "events");
        assert!(message.contains("no Pusher webhook"), "{message}");
        let (field, _) = field_of(parse_create(&json!({
            "url": "https://example.com/h", "events": ["*"], "format": "xml",
        })));
        assert_eq!(field, "format");
        let (field, message) = field_of(parse_patch(&json!({"format": "pusher"})));
        assert_eq!(field, "format");
        assert!(message.contains("created"), "{message}");
        let standard =
            parse_create(&json!({"url": "https://example.com/h", "events": ["*"]})).unwrap();
        assert_eq!(standard.format, Format::Standard);
    }

    #[test]
    fn an_unknown_event_type_is_named_with_the_valid_ones() {
        let (field, message) = field_of(parse_patch(&json!({"events": ["user.gone"]})));
        assert_eq!(field, "events");
        assert!(message.contains("\"user.gone\""), "{message}");
        for kind in EventType::SUBSCRIBABLE {
            assert!(message.contains(kind.as_str()), "{message}");
        }
        assert!(!message.contains("hook.test"), "{message}");
    }

    #[tokio::test]
    async fn destinations_outside_the_public_internet_are_refused() {
        let public = Destinations::public_only();
        for url in [
            "http://127.0.0.1:9000/h",
            "http://[::1]/h",
            "https://169.254.169.254/latest",
            "http://10.1.2.3/",
            "http://localhost:8080/h",
        ] {
            let err = check_destination(&public, url).await.unwrap_err();
            assert!(matches!(err, HooksError::Refused(_)), "{url}: {err:?}");
            assert!(err.to_string().starts_with("url: "), "{err}");
        }
        assert!(check_destination(&public, "https://8.8.8.8/h")
            .await
            .is_ok());
        let allowing = Destinations::allowing(vec!["127.0.0.0/8".parse().unwrap()]);
        assert!(check_destination(&allowing, "http://127.0.0.1:9000/h")
            .await
            .is_ok());
    }
}
