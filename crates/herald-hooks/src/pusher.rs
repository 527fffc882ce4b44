//! Pusher's webhook format, for endpoints whose format is `pusher` ([`Format::Pusher`]): the
//! event types Pusher has ([`PUSHER_TYPES`]), an event as Pusher writes it
//! ([`pusher_event`]), a batch's body (`{"time_ms":..,"events":[...]}`, [`batch_body`]) and its
//! signature ([`signature`], `X-Pusher-Signature`: the hex HMAC-SHA256 of the body under the
//! app's Pusher secret).
//!
//! What is Pusher's and not Herald's (the Pusher name of a Herald channel, an app's Pusher key
//! and secret) comes from [`PusherWebhooks`], which herald-pusher implements and the server
//! gives the service ([`crate::Hooks::set_pusher`]). Without it, a Pusher endpoint is queued
//! nothing.
//!
//! | Herald type | Pusher event |
//! |---|---|
//! | `channel.occupied` | `{"name":"channel_occupied","channel":"orders"}` |
//! | `channel.vacated` | `{"name":"channel_vacated","channel":"orders"}` |
//! | `presence.member_added` | `{"name":"member_added","channel":"presence-room","user_id":"42"}` |
//! | `presence.member_removed` | `{"name":"member_removed","channel":"presence-room","user_id":"42"}` |
//! | `subscription_count` | `{"name":"subscription_count","channel":"orders","subscription_count":3}` |
//! | `pusher.client_event` | `{"name":"client_event","channel":"private-chat","event":"client-typing","data":"{}","socket_id":"1.2"}` (and `user_id` on a presence channel) |
//! | `pusher.cache_miss` | `{"name":"cache_miss","channel":"cache-prices"}` |
//!
//! The last two are the Pusher protocol's own: herald-pusher tells them
//! ([`crate::Hooks::tell_pusher`]), only when an endpoint wants them (one look at the
//! endpoints held in memory otherwise).
//!
//! An event about a channel with no Pusher name (a `/` or `:` in it) is not sent to a Pusher
//! endpoint.
//!
//! [`Format::Pusher`]: crate::endpoint::Format::Pusher

use async_trait::async_trait;
use herald_core::tenant::AppId;
use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use sha2::Sha256;

use std::sync::Arc;

use crate::endpoint::StoredEndpoint;
use crate::event::{EventSet, EventType, HookEvent};
use crate::sender::{SendOutcome, Sender};
use crate::store::QueuedEvent;

/// The Herald event types a Pusher endpoint may ask for, each one of Pusher's webhook events.
pub const PUSHER_TYPES: [EventType; 7] = [
    EventType::ChannelOccupied,
    EventType::ChannelVacated,
    EventType::PresenceMemberAdded,
    EventType::PresenceMemberRemoved,
    EventType::SubscriptionCount,
    EventType::PusherClientEvent,
    EventType::PusherCacheMiss,
];

/// [`PUSHER_TYPES`] as a set.
pub fn pusher_types() -> EventSet {
    PUSHER_TYPES.into_iter().collect()
}

/// An app's Pusher key and secret, what a Pusher endpoint's requests are signed with.
#[derive(Clone, PartialEq, Eq)]
pub struct PusherKey {
    /// The key (`X-Pusher-Key`).
    pub key: String,
    /// The secret (the HMAC's key).
    pub secret: String,
}

impl std::fmt::Debug for PusherKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PusherKey")
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

/// What the service needs of Pusher (herald-pusher implements it).
#[async_trait]
pub trait PusherWebhooks: Send + Sync {
    /// The Pusher name of an app's channel (`channel` as the app names it), if a Pusher
    /// client can name it.
    fn channel_name(&self, channel: &str) -> Option<String>;
    /// `app`'s Pusher key and current secret; `Ok(None)` when the app has no Pusher
    /// credentials, an error when they could not be read.
    async fn signing_key(&self, app: &AppId) -> Result<Option<PusherKey>, String>;
}

/// `event` as Pusher writes it in a webhook's `events`, with the Pusher name `channel_name`
/// gives its channel; `None` when it has no Pusher form (a type Pusher has not, or a channel
/// with no Pusher name).
pub fn pusher_event(
    event: &HookEvent,
    channel_name: impl FnOnce(&str) -> Option<String>,
) -> Option<Value> {
    let name = match event.kind {
        EventType::ChannelOccupied => "channel_occupied",
        EventType::ChannelVacated => "channel_vacated",
        EventType::PresenceMemberAdded => "member_added",
        EventType::PresenceMemberRemoved => "member_removed",
        EventType::SubscriptionCount => "subscription_count",
        EventType::PusherClientEvent => "client_event",
        EventType::PusherCacheMiss => "cache_miss",
        _ => return None,
    };
    let channel = channel_name(event.channel.as_deref()?)?;
    let mut out = json!({ "name": name, "channel": channel });
    match event.kind {
        EventType::PusherClientEvent => {
            for field in ["event", "data", "socket_id", "user_id"] {
                let value = &event.data[field];
                if !value.is_null() {
                    out[field] = value.clone();
                }
            }
        }
        EventType::PresenceMemberAdded | EventType::PresenceMemberRemoved => {
            out["user_id"] = json!(event.user.as_deref()?);
        }
        EventType::SubscriptionCount => {
            out["subscription_count"] = event.data["subscription_count"].clone();
        }
        _ => {}
    }
    Some(out)
}

/// A Pusher batch's body, `{"time_ms":..,"events":[...]}`, from its events' stored JSON as it
/// is, `time_ms` the time of the request (as Pusher's).
pub fn batch_body(time_ms: i64, events: &[QueuedEvent]) -> Vec<u8> {
    let head = format!("{{\"time_ms\":{time_ms},\"events\":[");
    let size = events.iter().map(|e| e.payload.len() + 1).sum::<usize>() + head.len() + 2;
    let mut body = Vec::with_capacity(size);
    body.extend_from_slice(head.as_bytes());
    for (i, event) in events.iter().enumerate() {
        if i > 0 {
            body.push(b',');
        }
        body.extend_from_slice(event.payload.as_bytes());
    }
    body.extend_from_slice(b"]}");
    body
}

/// `X-Pusher-Signature`: the hex HMAC-SHA256 of `body` under `secret`.
pub fn signature(secret: &str, body: &[u8]) -> String {
    let mut mac =
        Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes any key length");
    mac.update(body);
    mac.finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Sends a Pusher endpoint `stored` the batch `events` at `time_ms`, signed with its app's
/// Pusher key and secret (through `pusher`): what came of it, or why nothing was sent (no
/// [`PusherWebhooks`], the app has no Pusher credentials, they could not be read).
pub(crate) async fn send_batch(
    sender: &Sender,
    pusher: Option<&Arc<dyn PusherWebhooks>>,
    stored: &StoredEndpoint,
    events: &[QueuedEvent],
    time_ms: i64,
) -> Result<SendOutcome, String> {
    let pusher = pusher.ok_or("Pusher webhooks are not available on this server")?;
    let key = pusher
        .signing_key(&stored.endpoint.app)
        .await
        .map_err(|e| format!("the app's Pusher credentials could not be read: {e}"))?
        .ok_or("the app has no Pusher credentials (herald pusher create) to sign with")?;
    Ok(sender
        .send_pusher(stored, &key, batch_body(time_ms, events))
        .await)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::EventId;

    fn event(kind: EventType, channel: &str, user: Option<&str>, data: Value) -> HookEvent {
        HookEvent {
            id: EventId::new(1),
            app: AppId::default_app(),
            kind,
            at_ms: 1,
            user: user.map(Into::into),
            channel: Some(channel.into()),
            data,
        }
    }

    fn same(name: &str) -> Option<String> {
        (!name.contains('/')).then(|| name.to_owned())
    }

    #[test]
    fn events_are_written_as_pushers() {
        let occupied = event(EventType::ChannelOccupied, "orders", None, json!({}));
        assert_eq!(
            pusher_event(&occupied, same),
            Some(json!({"name":"channel_occupied","channel":"orders"}))
        );
        let added = event(
            EventType::PresenceMemberAdded,
            "presence-room",
            Some("42"),
            json!({}),
        );
        assert_eq!(
            pusher_event(&added, same),
            Some(json!({"name":"member_added","channel":"presence-room","user_id":"42"}))
        );
        let count = event(
            EventType::SubscriptionCount,
            "orders",
            None,
            json!({"channel":"orders","subscription_count":3}),
        );
        assert_eq!(
            pusher_event(&count, same),
            Some(json!({"name":"subscription_count","channel":"orders","subscription_count":3}))
        );
        // A channel with no Pusher name, and a type Pusher has not.
        let unnamed = event(EventType::ChannelVacated, "rooms/1", None, json!({}));
        assert_eq!(pusher_event(&unnamed, same), None);
        let subscribed = event(EventType::ClientSubscribed, "orders", None, json!({}));
        assert_eq!(pusher_event(&subscribed, same), None);
        let client = event(
            EventType::PusherClientEvent,
            "presence-room",
            Some("42"),
            json!({"channel":"presence-room","event":"client-hi","data":"{}",
                   "socket_id":"1.2","user_id":"42"}),
        );
        assert_eq!(
            pusher_event(&client, same),
            Some(
                json!({"name":"client_event","channel":"presence-room","event":"client-hi",
                        "data":"{}","socket_id":"1.2","user_id":"42"})
            )
        );
        let miss = event(EventType::PusherCacheMiss, "cache-x", None, json!({}));
        assert_eq!(
            pusher_event(&miss, same),
            Some(json!({"name":"cache_miss","channel":"cache-x"}))
        );
    }

    /// The body and signature a Pusher SDK checks: hex HMAC-SHA256 of the body.
    #[test]
    fn bodies_and_signatures_are_pushers() {
        let events = [QueuedEvent {
            row: 1,
            event_id: "evt_1".into(),
            payload: r#"{"name":"channel_occupied","channel":"a"}"#.into(),
        }];
        let body = batch_body(7, &events);
        assert_eq!(
            String::from_utf8(body.clone()).unwrap(),
            r#"{"time_ms":7,"events":[{"name":"channel_occupied","channel":"a"}]}"#
        );
        // RFC 4231 test case 2.
        assert_eq!(
            signature("Jefe", b"what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }
}
