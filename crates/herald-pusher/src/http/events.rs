//! `POST /apps/{app_id}/events` (one event to up to 100 channels) and
//! `POST /apps/{app_id}/batch_events` (up to 10 events, each to one channel), as Pusher's
//! HTTP API reference describes them: `name`, `data` (a string), `channel` or `channels`,
//! `socket_id` (the connection not to send it to), `info` (`subscription_count`, and
//! `user_count`, refused for a channel that is not a presence channel as Pusher refuses it;
//! counted as [`super::channels`] counts them). Each event becomes one message per channel whose data is the
//! `$pusher` envelope ([`crate::event`]), appended through core's [`Publisher`]; the answer,
//! `{}` (or the channels' info when asked), comes after every append is durable. Fields
//! Pusher does not document are ignored, as Pusher does.
//!
//! [`Publisher`]: herald_core::publish::Publisher

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use herald_core::limits::AppAction;
use herald_core::tenant::AppId;
use herald_core::{ChannelName, NewMessage};
use serde_json::{json, Map, Value};

use super::auth::read_signed;
use super::channels::{counts, Info};
use super::{Answer, HttpLimits, PusherHttp};
use crate::channel_map::{app_channel, ChannelKind};
use crate::event::{check_event_name, check_socket_id, PusherEvent};

/// One event to publish, checked.
struct Trigger {
    event: PusherEvent,
    /// Pusher names, in the order given.
    channels: Vec<String>,
    info: Info,
}

/// `POST /apps/{app_id}/events`.
pub async fn events(
    State(http): State<Arc<PusherHttp>>,
    Path(app_id): Path<String>,
    method: Method,
    uri: Uri,
    body: Body,
) -> Response {
    handle(&http, &app_id, &method, &uri, body, false)
        .await
        .unwrap_or_else(IntoResponse::into_response)
}

/// `POST /apps/{app_id}/batch_events`.
pub async fn batch_events(
    State(http): State<Arc<PusherHttp>>,
    Path(app_id): Path<String>,
    method: Method,
    uri: Uri,
    body: Body,
) -> Response {
    handle(&http, &app_id, &method, &uri, body, true)
        .await
        .unwrap_or_else(IntoResponse::into_response)
}

async fn handle(
    http: &PusherHttp,
    app_id: &str,
    method: &Method,
    uri: &Uri,
    body: Body,
    batch: bool,
) -> Result<Response, Answer> {
    let limit = http.settings.max_body_bytes();
    let (body, credentials) =
        read_signed(&http.credentials, limit, app_id, method, uri, body).await?;
    let parsed: Value = serde_json::from_slice(&body)
        .map_err(|e| Answer::bad_request(format!("Invalid JSON body: {e}")))?;
    let triggers = if batch {
        read_batch(&parsed, &http.settings)?
    } else {
        vec![read_trigger(&parsed, &http.settings, "")?]
    };
    let app = &credentials.app;
    let published = publish(http, app, &credentials.key, &triggers).await?;
    let answer = if batch {
        if triggers.iter().any(|t| t.info.asked()) {
            let mut infos = Vec::with_capacity(triggers.len());
            for trigger in &triggers {
                infos.push(channel_info(http, trigger, &published).await.remove(0));
            }
            json!({ "batch": infos })
        } else {
            json!({})
        }
    } else {
        let trigger = &triggers[0];
        if trigger.info.asked() {
            let mut channels = Map::new();
            for (name, info) in trigger
                .channels
                .iter()
                .zip(channel_info(http, trigger, &published).await)
            {
                channels.insert(name.clone(), info);
            }
            json!({ "channels": channels })
        } else {
            json!({})
        }
    };
    Ok(axum::Json(answer).into_response())
}

/// The info a trigger asked for, one object per channel in its order.
async fn channel_info(
    http: &PusherHttp,
    trigger: &Trigger,
    channels: &HashMap<String, ChannelName>,
) -> Vec<Value> {
    let mut infos = Vec::with_capacity(trigger.channels.len());
    for name in &trigger.channels {
        let fields = match channels.get(name) {
            Some(channel) => counts(http, channel, trigger.info).await,
            None => Map::new(),
        };
        infos.push(Value::Object(fields));
    }
    infos
}

/// Appends every trigger's event to each of its channels (one channel's messages in the
/// order given; channels at once), after the app's publish rate limit. The Herald channel of
/// each Pusher name.
async fn publish(
    http: &PusherHttp,
    app: &AppId,
    key: &str,
    triggers: &[Trigger],
) -> Result<HashMap<String, ChannelName>, Answer> {
    let cost: usize = triggers.iter().map(|t| t.channels.len()).sum();
    let limits = http.usage.app(app).limits();
    http.limits.check_app(
        app,
        &limits,
        &format!("pusher:{key}"),
        AppAction::Publish,
        u32::try_from(cost).unwrap_or(u32::MAX),
    )?;
    let mut names: HashMap<String, ChannelName> = HashMap::new();
    let mut groups: Vec<(ChannelName, Vec<NewMessage>)> = Vec::new();
    let mut group_of: HashMap<ChannelName, usize> = HashMap::new();
    for trigger in triggers {
        let data = trigger.event.to_data();
        for name in &trigger.channels {
            let channel = match names.get(name) {
                Some(channel) => channel.clone(),
                None => {
                    let channel = app_channel(app, name).map_err(Answer::from)?;
                    names.insert(name.clone(), channel.clone());
                    channel
                }
            };
            let message = http.publisher.message(app, None, data.as_bytes())?;
            let group = *group_of.entry(channel.clone()).or_insert_with(|| {
                groups.push((channel, Vec::new()));
                groups.len() - 1
            });
            groups[group].1.push(message);
        }
    }
    let appends = groups.into_iter().map(|(channel, messages)| async move {
        http.publisher.publish(app, &channel, messages).await
    });
    for outcome in futures_util::future::join_all(appends).await {
        outcome?;
    }
    Ok(names)
}

/// A batch body: `{"batch":[event, ...]}`, 1 to `max_batch_events` events.
fn read_batch(body: &Value, limits: &HttpLimits) -> Result<Vec<Trigger>, Answer> {
    let events = body
        .get("batch")
        .and_then(Value::as_array)
        .ok_or_else(|| Answer::bad_request("Missing batch: the body is {\"batch\":[...]}"))?;
    if events.is_empty() {
        return Err(Answer::bad_request("Empty batch: send 1 or more events"));
    }
    if events.len() > limits.max_batch_events {
        return Err(Answer::bad_request(format!(
            "Batch too large: {} events; the limit is {}",
            events.len(),
            limits.max_batch_events
        )));
    }
    events
        .iter()
        .enumerate()
        .map(|(i, event)| read_trigger(event, limits, &format!("batch[{i}]: ")))
        .collect()
}

/// One event's fields, checked; `at` prefixes each refusal (`batch[2]: `).
fn read_trigger(body: &Value, limits: &HttpLimits, at: &str) -> Result<Trigger, Answer> {
    let refuse = |text: String| Answer::bad_request(format!("{at}{text}"));
    let object = body
        .as_object()
        .ok_or_else(|| refuse("the event is not a JSON object".into()))?;
    let string = |field: &str| -> Result<Option<&str>, Answer> {
        match object.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(refuse(format!("{field} must be a string"))),
        }
    };
    let name = string("name")?.ok_or_else(|| refuse("Missing event name".into()))?;
    check_event_name(name).map_err(&refuse)?;
    let data = string("data")?.ok_or_else(|| refuse("Missing data".into()))?;
    if data.len() > limits.max_data_bytes {
        return Err(Answer::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "{at}Payload too large: data is {} bytes; the limit is {}",
                data.len(),
                limits.max_data_bytes
            ),
        ));
    }
    let channels: Vec<String> = match (object.get("channels"), string("channel")?) {
        (Some(Value::Array(list)), None) => list
            .iter()
            .map(|c| c.as_str().map(str::to_owned))
            .collect::<Option<_>>()
            .ok_or_else(|| refuse("channels must be an array of strings".into()))?,
        (Some(Value::Null) | None, Some(one)) => vec![one.to_owned()],
        (Some(Value::Null) | None, None) => {
            return Err(refuse("Missing channels: name channels or channel".into()))
        }
        (Some(Value::Array(_)), Some(_)) => {
            return Err(refuse("name channels or channel, not both".into()))
        }
        (Some(_), _) => return Err(refuse("channels must be an array of strings".into())),
    };
    if channels.is_empty() {
        return Err(refuse("Missing channels: the list is empty".into()));
    }
    // An encrypted channel's data is sealed for that channel alone (Pusher's SDKs refuse
    // this too).
    if channels.len() > 1
        && channels
            .iter()
            .any(|c| ChannelKind::of(c) == ChannelKind::PrivateEncrypted)
    {
        return Err(refuse(
            "You cannot trigger to multiple channels when using encrypted channels".into(),
        ));
    }
    if channels.len() > limits.max_channels {
        return Err(refuse(format!(
            "Too many channels: {}; the limit is {}",
            channels.len(),
            limits.max_channels
        )));
    }
    for channel in &channels {
        crate::channel_map::herald_channel(channel).map_err(|e| refuse(e.message))?;
    }
    let socket_id = string("socket_id")?;
    if let Some(socket_id) = socket_id {
        check_socket_id(socket_id).map_err(&refuse)?;
    }
    let info = Info::parse(string("info")?).map_err(&refuse)?;
    if info.user_count {
        if let Some(name) = channels.iter().find(|c| !ChannelKind::of(c).is_presence()) {
            return Err(refuse(format!(
                "Invalid info attribute user_count: {name:?} is not a presence channel (only \
                 presence channels have users)"
            )));
        }
    }
    Ok(Trigger {
        event: PusherEvent {
            event: name.to_owned(),
            data: data.to_owned(),
            socket_id: socket_id.map(str::to_owned),
            user_id: None,
        },
        channels,
        info,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(body: Value) -> Result<Trigger, Answer> {
        read_trigger(&body, &HttpLimits::default(), "")
    }

    #[test]
    fn a_trigger_names_channel_or_channels() {
        let t =
            read(json!({"name":"e","data":"d","channels":["a","b"],"socket_id":"1.2"})).unwrap();
        assert_eq!(t.channels, ["a", "b"]);
        assert_eq!(t.event.socket_id.as_deref(), Some("1.2"));
        let t = read(json!({"name":"e","data":"d","channel":"a","extra":1})).unwrap();
        assert_eq!(t.channels, ["a"]);
        for (body, says) in [
            (json!({"data":"d","channel":"a"}), "Missing event name"),
            (json!({"name":"e","channel":"a"}), "Missing data"),
            (
                json!({"name":"e","data":{"x":1},"channel":"a"}),
                "data must be a string",
            ),
            (json!({"name":"e","data":"d"}), "Missing channels"),
            (
                json!({"name":"e","data":"d","channels":[]}),
                "the list is empty",
            ),
            (
                json!({"name":"e","data":"d","channels":"a"}),
                "array of strings",
            ),
            (
                json!({"name":"e","data":"d","channel":"a b"}),
                "Invalid channel name",
            ),
            (
                json!({"name":"e","data":"d","channel":"a","socket_id":"x"}),
                "Invalid socket id",
            ),
            (
                json!({"name":"e","data":"d","channel":"a","info":"nope"}),
                "Invalid info",
            ),
            (
                json!({"name":"e","data":"d","channel":"a","channels":["b"]}),
                "not both",
            ),
            (
                json!({"name":"e","data":"d","channels":["private-encrypted-a","b"]}),
                "multiple channels when using encrypted channels",
            ),
        ] {
            let answer = read(body.clone()).err().expect("refused");
            assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{body}");
            assert!(answer.text.contains(says), "{body}: {}", answer.text);
        }
    }

    #[test]
    fn pushers_limits_are_the_defaults() {
        let channels: Vec<String> = (0..101).map(|i| format!("c{i}")).collect();
        let answer = read(json!({"name":"e","data":"d","channels":channels}))
            .err()
            .unwrap();
        assert_eq!(answer.status, StatusCode::BAD_REQUEST);
        assert!(
            answer.text.contains("Too many channels: 101"),
            "{}",
            answer.text
        );
        assert!(read(json!({"name":"e","data":"x".repeat(10240),"channel":"a"})).is_ok());
        let answer = read(json!({"name":"e","data":"x".repeat(10241),"channel":"a"}))
            .err()
            .unwrap();
        assert_eq!(answer.status, StatusCode::PAYLOAD_TOO_LARGE);
        let answer = read(json!({"name":"e".repeat(201),"data":"d","channel":"a"}))
            .err()
            .unwrap();
        assert!(
            answer.text.contains("Event name too long"),
            "{}",
            answer.text
        );
        let batch: Vec<Value> = (0..11)
            .map(|_| json!({"name":"e","data":"d","channel":"a"}))
            .collect();
        let answer = read_batch(&json!({ "batch": batch }), &HttpLimits::default())
            .err()
            .unwrap();
        assert!(
            answer.text.contains("Batch too large: 11 events"),
            "{}",
            answer.text
        );
        let answer = read_batch(
            &json!({"batch":[{"name":"e","data":"d"}]}),
            &HttpLimits::default(),
        )
        .err()
        .unwrap();
        assert!(
            answer.text.starts_with("batch[0]: Missing channels"),
            "{}",
            answer.text
        );
    }
}
