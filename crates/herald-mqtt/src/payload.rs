//! MQTT payloads and message properties ↔ a message's JSON data: the `$mqtt` envelope
//! (docs/design/mqtt.md, "Payloads are bytes, Herald's data is JSON").
//!
//! Every other transport and the store hold a message's data as JSON text. [`to_data`] stores an
//! MQTT PUBLISH as:
//!
//! - **its payload, byte for byte**, when the payload is one JSON value in UTF-8 (whitespace
//!   around it allowed), is not an object with a top-level `$mqtt` key, the PUBLISH has RETAIN
//!   0 and no message properties: `{"t":21.5}` and `21.5` are the same message to a WebSocket
//!   subscriber and an MQTT one;
//! - otherwise **an envelope**, one JSON object with the single key `$mqtt` holding exactly one
//!   payload field, `"json"` (a JSON payload to be wrapped, byte for byte), `"text"` (UTF-8
//!   that is not JSON, such as `ON`, or the empty payload) or `"base64"` (any other bytes,
//!   standard alphabet, padded); then, when set, `"retain":true`, `"clear":true` (a retained
//!   clear: RETAIN with an empty payload) and the v5 message properties ([`MessageProps`]):
//!   `"content_type"`, `"format"` (0 or 1), `"expiry"` (absolute, Unix ms),
//!   `"response_topic"`, `"correlation_base64"`, `"user_properties"` (`[[key, value], ...]`,
//!   in order). `{"$mqtt":{"text":"ON","retain":true}}`.
//!
//! One exception to `"json"`: a JSON payload with whitespace before or after its value that
//! must be wrapped is stored as `"text"`, since a JSON value inside the envelope cannot keep its
//! surrounding whitespace; it is still UTF-8, so nothing is lost.
//!
//! [`from_data`] reverses it for an MQTT subscriber: an envelope gives its payload, flags and
//! properties, never the envelope itself, whichever transport published it (so a backend can
//! send `ON`); any other data is the payload as it is. A **malformed envelope** (an object whose
//! only key is `$mqtt`, but whose value is not an object, has an unknown or mistyped field, not
//! exactly one payload field, bad base64, `"clear"` without `"retain"` or with a payload, a
//! `"format"` other than 0 or 1, a property string MQTT cannot carry (U+0000, over 65,535
//! bytes, a response topic with a wildcard)) is not an envelope: it is delivered as the JSON it
//! is. `null` for an optional field is the field left out (`"json":null` is the JSON payload
//! `null`). A retained empty payload is a clear whether or not `"clear"` says so.
//!
//! So `from_data(to_data(p, r, props))` is `(p, r, props)`, with `clear` set exactly for a
//! retained empty payload, for every payload and every set of properties.

use std::borrow::Cow;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use bytes::Bytes;
use herald_core::Retain;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::value::RawValue;

/// The key of the envelope.
pub const ENVELOPE_KEY: &str = "$mqtt";

/// The MQTT 5.0 properties of an application message that travel with it to every
/// subscriber (MQTT 5.0 3.3.2.3), kept in the stored message's envelope so they survive the
/// log and reach a subscriber that resumes. MQTT 3.1.1 subscribers never see them.
///
/// The codec has its own property types (`packet::PublishProperties`, which also holds the
/// per-hop Topic Alias and Subscription Identifiers, not kept here); the connection converts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MessageProps {
    /// Content Type (0x03): a MIME-like description of the payload, forwarded as is.
    pub content_type: Option<String>,
    /// Payload Format Indicator (0x01), kept when the publisher sent it (even as 0), since
    /// the server forwards it unaltered [MQTT-3.3.2-4].
    pub payload_format: Option<PayloadFormat>,
    /// When the message expires, in Unix milliseconds: the PUBLISH's Message Expiry Interval
    /// added to the time it was received, so the interval sent onwards is what remains
    /// [MQTT-3.3.2-6].
    pub expiry_at_ms: Option<u64>,
    /// Response Topic (0x08): the topic name a responder publishes its answer to.
    pub response_topic: Option<String>,
    /// Correlation Data (0x09): bytes the requester uses to match the response.
    pub correlation_data: Option<Bytes>,
    /// User Properties (0x26), in the order received, repeats allowed [MQTT-3.3.2-17].
    pub user_properties: Vec<(String, String)>,
}

impl MessageProps {
    /// Whether no property is set, so a JSON payload can be stored unwrapped.
    pub fn is_empty(&self) -> bool {
        *self == MessageProps::default()
    }
}

/// The Payload Format Indicator's two values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PayloadFormat {
    /// 0: unspecified bytes.
    Unspecified,
    /// 1: UTF-8 encoded character data.
    Utf8,
}

impl PayloadFormat {
    /// Its value on the wire and in the envelope.
    pub fn value(self) -> u8 {
        match self {
            PayloadFormat::Unspecified => 0,
            PayloadFormat::Utf8 => 1,
        }
    }

    /// The format of wire value `value`, if it is one.
    pub fn from_value(value: u8) -> Option<PayloadFormat> {
        match value {
            0 => Some(PayloadFormat::Unspecified),
            1 => Some(PayloadFormat::Utf8),
            _ => None,
        }
    }
}

/// A stored message as an MQTT subscriber is sent it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outgoing {
    /// The application message's payload.
    pub payload: Bytes,
    /// Whether it was published with RETAIN (for Retain As Published).
    pub retain: bool,
    /// Whether it is a retained clear: live subscribers get it as an empty message, and while
    /// it is the channel's newest a new subscription finds no retained message.
    pub clear: bool,
    /// Its v5 message properties.
    pub props: MessageProps,
}

/// The JSON data stored for a PUBLISH of `payload` with RETAIN `retain` and properties
/// `props` (see the module doc). A retained empty payload is marked `"clear":true`. `props` are
/// what a PUBLISH can carry (the codec checks them: no U+0000, a response topic without
/// wildcards), which is what [`from_data`] reads back.
pub fn to_data(payload: &Bytes, retain: bool, props: &MessageProps) -> Bytes {
    let text = std::str::from_utf8(payload).ok();
    let json = text.and_then(|t| serde_json::from_str::<&RawValue>(t).ok());
    if let Some(json) = json {
        if !retain && props.is_empty() && !has_envelope_key(json) {
            return payload.clone();
        }
    }
    let mut body = BodyOut {
        retain,
        clear: retain && payload.is_empty(),
        content_type: props.content_type.as_deref(),
        format: props.payload_format.map(PayloadFormat::value),
        expiry: props.expiry_at_ms,
        response_topic: props.response_topic.as_deref(),
        correlation_base64: props.correlation_data.as_ref().map(|c| BASE64.encode(c)),
        user_properties: &props.user_properties,
        ..BodyOut::default()
    };
    match (json, text) {
        // A value without surrounding whitespace is its own exact text.
        (Some(json), Some(text)) if json.get().len() == text.len() => body.json = Some(json),
        (_, Some(text)) => body.text = Some(text),
        (_, None) => body.base64 = Some(BASE64.encode(payload)),
    }
    let envelope = EnvelopeOut { body };
    Bytes::from(serde_json::to_vec(&envelope).expect("serialising strings and numbers"))
}

/// What storing a PUBLISH (or a will) of `payload` with RETAIN `retain` and properties `props`
/// does to its channel's retained message (core's [`Retain`], written with the message): a
/// retained non-empty payload becomes it until its Message Expiry Interval passes
/// ([MQTT-3.3.1-5]), a retained empty one clears it (3.1.1 [MQTT-3.3.1-10], v5
/// [MQTT-3.3.1-6]), RETAIN 0 leaves it (3.1.1 [MQTT-3.3.1-12], v5 [MQTT-3.3.1-8]).
pub fn retain_of(payload: &Bytes, retain: bool, props: &MessageProps) -> Retain {
    match (retain, payload.is_empty()) {
        (false, _) => Retain::Untouched,
        (true, true) => Retain::Clear,
        (true, false) => Retain::Keep {
            expires_at_ms: props.expiry_at_ms,
        },
    }
}

/// What storing a message whose data is `data` does to its channel's retained message when
/// another transport than MQTT publishes it (an HTTP or WebSocket publish: core's
/// `RetainRule`): a well-formed envelope with `"retain":true` does what an MQTT PUBLISH with
/// its payload, RETAIN 1 and its `"expiry"` does ([`retain_of`]: sets it, or clears it when the
/// payload is empty); any other data leaves it. Data that is not an object is answered at its
/// first byte; an object whose first key is not `$mqtt` at that key.
pub fn retain_of_data(data: &Bytes) -> Retain {
    match envelope(data) {
        Some(out) if out.retain => retain_of(&out.payload, true, &out.props),
        _ => Retain::Untouched,
    }
}

/// What an MQTT subscriber is sent for a message whose data is `data` (see the module doc).
pub fn from_data(data: &Bytes) -> Outgoing {
    envelope(data).unwrap_or_else(|| Outgoing {
        payload: data.clone(),
        retain: false,
        clear: false,
        props: MessageProps::default(),
    })
}

/// `data` decoded as a well-formed envelope, `None` when it is not one.
fn envelope(data: &Bytes) -> Option<Outgoing> {
    if !may_be_envelope(data) {
        return None;
    }
    let Envelope { body } = serde_json::from_slice(data).ok()?;
    let payload = match (body.json, body.text, body.base64) {
        (Some(json), None, None) => data.slice_ref(json.get().as_bytes()),
        (None, Some(Text(Cow::Borrowed(text))), None) => data.slice_ref(text.as_bytes()),
        (None, Some(Text(Cow::Owned(text))), None) => Bytes::from(text),
        (None, None, Some(Text(b64))) => Bytes::from(BASE64.decode(b64.as_bytes()).ok()?),
        _ => return None,
    };
    let retain = body.retain.unwrap_or(false);
    if body.clear == Some(true) && (!retain || !payload.is_empty()) {
        return None;
    }
    let props = MessageProps {
        payload_format: match body.format {
            None => None,
            Some(value) => Some(PayloadFormat::from_value(value)?),
        },
        correlation_data: match body.correlation_base64 {
            None => None,
            Some(Text(b64)) => Some(Bytes::from(BASE64.decode(b64.as_bytes()).ok()?)),
        },
        content_type: body.content_type,
        expiry_at_ms: body.expiry,
        response_topic: body.response_topic,
        user_properties: body.user_properties.unwrap_or_default(),
    };
    let strings = props
        .content_type
        .iter()
        .chain(&props.response_topic)
        .chain(props.user_properties.iter().flat_map(|(k, v)| [k, v]));
    for s in strings {
        if s.contains('\0') || s.len() > usize::from(u16::MAX) {
            return None;
        }
    }
    if props
        .response_topic
        .as_ref()
        .is_some_and(|t| t.is_empty() || t.contains(['+', '#']))
    {
        return None;
    }
    Some(Outgoing {
        clear: retain && payload.is_empty(),
        retain,
        payload,
        props,
    })
}

/// Whether `data` may be an envelope: an object whose first key is `$mqtt`, or reads as its
/// start up to an escape (which only the parse can read). Everything else, most data that is not an
/// MQTT publisher's (every HTTP and WebSocket publish is asked), is answered here, before the
/// parse: serde would answer it too, with an error it formats for nobody.
fn may_be_envelope(data: &[u8]) -> bool {
    let mut rest = data.iter().skip_while(|b| b.is_ascii_whitespace());
    if rest.next() != Some(&b'{') {
        return false;
    }
    let mut rest = rest.skip_while(|b| b.is_ascii_whitespace());
    if rest.next() != Some(&b'"') {
        return false;
    }
    // Compared as it is read, without a copy: every publish comes this way.
    let key = ENVELOPE_KEY.as_bytes();
    let mut matched = 0;
    for &b in rest {
        match b {
            b'\\' => return true,
            b'"' => return matched == key.len(),
            _ if key.get(matched) == Some(&b) => matched += 1,
            _ => return false,
        }
    }
    false
}

/// Whether JSON value `json` is an object with a top-level `$mqtt` key (escaped or not).
fn has_envelope_key(json: &RawValue) -> bool {
    if !json.get().starts_with('{') {
        return false;
    }
    serde_json::from_str::<EnvelopeKeyCheck>(json.get()).is_ok_and(|check| check.0)
}

/// Deserialises an object's keys, remembering whether one is `$mqtt`.
struct EnvelopeKeyCheck(bool);

impl<'de> Deserialize<'de> for EnvelopeKeyCheck {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Keys;
        impl<'de> serde::de::Visitor<'de> for Keys {
            type Value = EnvelopeKeyCheck;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Self::Value, A::Error> {
                let mut found = false;
                while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                    found |= key == ENVELOPE_KEY;
                    map.next_value::<serde::de::IgnoredAny>()?;
                }
                Ok(EnvelopeKeyCheck(found))
            }
        }
        d.deserialize_map(Keys)
    }
}

#[derive(Serialize)]
struct EnvelopeOut<'a> {
    #[serde(rename = "$mqtt")]
    body: BodyOut<'a>,
}

/// The envelope's fields as [`to_data`] writes them: the payload field first, then only what
/// is set.
#[derive(Serialize, Default)]
struct BodyOut<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    json: Option<&'a RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    text: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    base64: Option<String>,
    #[serde(skip_serializing_if = "is_false")]
    retain: bool,
    #[serde(skip_serializing_if = "is_false")]
    clear: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    content_type: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    format: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    expiry: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_topic: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    correlation_base64: Option<String>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    user_properties: &'a [(String, String)],
}

fn is_false(b: &bool) -> bool {
    !*b
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Envelope<'a> {
    #[serde(rename = "$mqtt", borrow)]
    body: Body<'a>,
}

/// The envelope's fields as [`from_data`] reads them: strictly (no unknown field, every field
/// of its type); the combination is checked after.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Body<'a> {
    #[serde(default, borrow, deserialize_with = "present")]
    json: Option<&'a RawValue>,
    #[serde(default, borrow)]
    text: Option<Text<'a>>,
    #[serde(default, borrow)]
    base64: Option<Text<'a>>,
    #[serde(default)]
    retain: Option<bool>,
    #[serde(default)]
    clear: Option<bool>,
    #[serde(default)]
    content_type: Option<String>,
    #[serde(default)]
    format: Option<u8>,
    #[serde(default)]
    expiry: Option<u64>,
    #[serde(default)]
    response_topic: Option<String>,
    #[serde(default, borrow)]
    correlation_base64: Option<Text<'a>>,
    #[serde(default)]
    user_properties: Option<Vec<(String, String)>>,
}

/// A string field, borrowed from the data when it has no escapes.
#[derive(Deserialize)]
struct Text<'a>(#[serde(borrow)] Cow<'a, str>);

/// `"json"` is the payload whatever its value, `null` included.
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

#[cfg(test)]
mod tests;
