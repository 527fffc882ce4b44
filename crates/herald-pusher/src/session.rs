//! One Pusher connection's commands over the protocol-neutral [`ClientSession`]: subscribe and
//! unsubscribe (public, `private-`, `presence-`, `private-encrypted-` and the cache channels,
//! all but the public ones with the app's signature checked in constant time), client events,
//! ping. Every answer goes through the connection's
//! outbox, so answers and channel events reach the client in the order they were produced.
//!
//! The connection's client is the app with no token patterns: each subscription is made with a
//! grant for exactly its channel ([`ClientSession::subscribe_granted`]) once Pusher's rule
//! allows it (a public channel, or a valid signature for this socket and channel).
//!
//! A sign-in (`pusher:signin`, [`crate::users`]) makes the connection's client a Herald user
//! and subscribes it to its server-to-user channel; a client's subscribe of a `#` channel is
//! refused but for its own user's channel. It makes the user online to watchlists and
//! watches the users of its own ([`crate::watchlist`]).
//!
//! A presence subscription's signed `channel_data` makes the connection's user on that channel
//! the Herald presence member `user_id` with `user_info` as its data ([`crate::presence`]);
//! core sends the subscription the members list (answered as Pusher's
//! `subscription_succeeded`), then the other users' joins and leaves. The connection keeps
//! its user id per presence channel for its client events' `user_id`.
//!
//! Refusals are Pusher's: a subscription that cannot be made is answered with
//! `pusher:subscription_error` on its channel (pusher-js hands it to the channel's listeners)
//! and leaves the connection and its other channels as they were; anything else wrong is a
//! `pusher:error` without closing.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use herald_core::engine::SubscribeRequest;
use herald_core::limits::Admission;
use herald_core::outbox::{CloseReason, OutFrame, Outbox};
use herald_core::{ChannelName, ErrorCode, HeraldError};
use herald_edge::session::{ClientSession, PresenceAsk};
use herald_edge::Edge;
use herald_hooks::event::EventType;
use serde_json::json;

use crate::channel_map::{app_channel, herald_channel, ChannelKind};
use crate::connections::Registered;
use crate::credentials::cache::OpenCredentials;
use crate::event::{check_event_name, PusherEvent};
use crate::frame::{self, codes, ClientFrame};
use crate::keepalive::Liveness;
use crate::presence::ChannelData;
use crate::resume::{Positioned, ResumeAsk};
use crate::serve::PusherClients;
use crate::settings::ClientSettings;
use crate::signature::{channel_auth_string, check_key_signature};
use crate::users::is_server_to_user;
use crate::watchlist::Watchlist;

/// A Pusher connection's session.
pub(crate) struct PusherSession {
    pub(crate) session: ClientSession,
    /// The socket id the client was given (`<digits>.<digits>`, the second number its place's
    /// among the node's Pusher connections).
    pub(crate) socket_id: Box<str>,
    /// The app's credentials (the key and secrets signatures are checked with).
    pub(crate) credentials: Arc<OpenCredentials>,
    /// The endpoint the connection came through: its settings and the node's webhooks
    /// (client events and cache misses are told to them).
    pub(crate) clients: Arc<PusherClients>,
    /// The connection's place among the node's Pusher connections (closed if its key goes),
    /// where the code it ends with for a reason of Pusher's (a failed sign-in, its key gone)
    /// is said.
    pub(crate) registered: Registered,
    /// When the client was last heard from, or the server's ping went out unanswered.
    pub(crate) liveness: Liveness,
    /// The client-event rate's current one-second window, once an event started one: when it
    /// began and how many events it counted.
    pub(crate) events_window: Option<(Instant, u32)>,
    /// The user id this connection is a member as, per presence channel it subscribed (its
    /// full Herald name).
    pub(crate) members: Vec<(ChannelName, Box<str>)>,
    /// The user the connection signed in as, and its server-to-user channel (full name).
    pub(crate) user: Option<(Box<str>, ChannelName)>,
    /// The signed-in user's watchlist, when it watches anyone ([`crate::watchlist`]).
    pub(crate) watchlist: Option<Box<Watchlist>>,
    /// The channels whose subscriptions asked for their events' positions
    /// ([`crate::resume`]).
    pub(crate) positioned: Positioned,
}

impl PusherSession {
    /// The session of a connection just opened (so heard from now), registered as
    /// `registered`, whose socket id is `socket_id`.
    pub(crate) fn new(
        session: ClientSession,
        socket_id: String,
        credentials: Arc<OpenCredentials>,
        clients: Arc<PusherClients>,
        registered: Registered,
    ) -> Self {
        PusherSession {
            session,
            socket_id: socket_id.into_boxed_str(),
            credentials,
            clients,
            registered,
            liveness: Liveness::heard_at(Instant::now()),
            events_window: None,
            members: Vec::new(),
            user: None,
            watchlist: None,
            positioned: Positioned::default(),
        }
    }

    /// Keep-alive and client-event settings.
    pub(crate) fn settings(&self) -> &ClientSettings {
        &self.clients.settings
    }

    /// Tells the node's webhooks that `channel` (its Herald channel) missed its cache, when an
    /// endpoint wants `pusher.cache_miss` about it.
    fn tell_cache_miss(&self, channel: &ChannelName) {
        if let Some(hooks) = &self.clients.hooks {
            hooks.tell_pusher(
                &self.credentials.app,
                EventType::PusherCacheMiss,
                channel.public(),
                || (None, json!({ "channel": channel.public() })),
            );
        }
    }

    pub(crate) fn edge(&self) -> &Arc<Edge> {
        self.session.edge()
    }

    pub(crate) fn outbox(&self) -> &Arc<Outbox> {
        self.session.outbox()
    }

    pub(crate) fn send(&self, bytes: Bytes) {
        self.outbox().push(OutFrame::Control(bytes));
    }

    pub(crate) fn send_error(&self, code: Option<u16>, message: &str) {
        self.send(frame::error(code, message));
    }

    /// Refuses a binary frame (the protocol is JSON text).
    pub(crate) fn reject_binary(&self) {
        self.send_error(
            None,
            "Binary frames are not supported: send JSON text frames",
        );
    }

    /// Handles one text frame: counted against the connection's command limit (malformed
    /// frames too), refused over it, and the connection closed if it goes on sending through a
    /// whole burst of refusals.
    pub(crate) async fn handle(&mut self, text: &str) {
        match self.session.admit_command() {
            Admission::Run => {}
            Admission::Refuse(_) => {
                return self.send_error(
                    None,
                    "Rate limit: this connection sends frames faster than the server allows",
                )
            }
            Admission::Disconnect => {
                self.edge().limits.command_flood();
                self.outbox().close(CloseReason::RateLimited);
                return;
            }
        }
        match ClientFrame::parse(text) {
            Ok(parsed) => self.dispatch(parsed).await,
            Err(frame::FrameError(message)) => self.send_error(None, &message),
        }
    }

    async fn dispatch(&mut self, parsed: ClientFrame) {
        match parsed {
            ClientFrame::Ping => self.send(frame::pong()),
            // Any frame counts as activity; a pong is nothing more.
            ClientFrame::Pong => {}
            ClientFrame::Subscribe {
                channel,
                auth,
                channel_data,
                resume,
            } => {
                if let Err(r) = self.subscribe(&channel, auth, channel_data, resume).await {
                    self.send(frame::subscription_error(
                        &channel, r.kind, r.status, &r.message,
                    ));
                }
            }
            ClientFrame::Unsubscribe { channel } => self.unsubscribe(&channel),
            ClientFrame::ClientEvent {
                event,
                channel,
                data,
            } => {
                if let Err(r) = self.client_event(event, &channel, data).await {
                    self.send_error(r.code, &r.message);
                }
            }
            ClientFrame::Signin { auth, user_data } => self.sign_in(&auth, &user_data).await,
            ClientFrame::Other { event } => self.send_error(
                None,
                &format!("Unsupported event {event:?}: this server does not handle it"),
            ),
        }
    }

    /// Subscribes to the Pusher channel `name` if Pusher's rule allows it; with `resume`,
    /// after its cursor and with positions ([`crate::resume`]).
    async fn subscribe(
        &mut self,
        name: &str,
        auth: Option<String>,
        channel_data: Option<String>,
        resume: Option<ResumeAsk>,
    ) -> Result<(), SubscriptionRefused> {
        if is_server_to_user(name) {
            return self.subscribe_own_user_channel(name);
        }
        let app = self.credentials.app.clone();
        let channel = app_channel(&app, name)
            .map_err(|e| SubscriptionRefused::new("InvalidChannel", 400, e.message))?;
        let kind = ChannelKind::of(name);
        let mut member = None;
        match kind {
            ChannelKind::Public | ChannelKind::Cache => {}
            // An encrypted channel is authorised as a private one; its events' data is the
            // ciphertext the server SDKs sealed, relayed as it is.
            ChannelKind::Private | ChannelKind::PrivateCache | ChannelKind::PrivateEncrypted => {
                self.check_auth(name, auth.as_deref(), None)?
            }
            ChannelKind::Presence | ChannelKind::PresenceCache => {
                let Some(data) = channel_data.as_deref() else {
                    return Err(SubscriptionRefused::new(
                        "AuthError",
                        401,
                        format!(
                            "Invalid signature: {name:?} is a presence channel; subscribing \
                             needs auth and channel_data"
                        ),
                    ));
                };
                self.check_auth(name, auth.as_deref(), Some(data))?;
                member = Some(
                    ChannelData::parse(data)
                        .map_err(|e| SubscriptionRefused::new("InvalidChannelData", 400, e))?,
                );
            }
        }
        let presence = member.is_some();
        // A cache channel's last event follows the confirmation: replayed from the log as
        // the subscription's catch-up, so before any live message; a miss is said right after
        // the confirmation. (A presence cache channel's confirmation, its members list, comes
        // after the catch-up: its cached event or miss is queued once subscribed.)
        let cache_hit = match kind {
            ChannelKind::Cache | ChannelKind::PrivateCache => Some(
                crate::cache::last_event(&self.edge().engine, &channel)
                    .await
                    .map_err(|e| refusal(&e))?
                    .is_some(),
            ),
            _ => None,
        };
        let request = SubscribeRequest {
            since: resume.as_ref().and_then(|r| r.since()).cloned(),
            last: cache_hit,
            replay_retained_if_lost: false,
        };
        let confirmed = name.to_owned();
        // A presence channel's confirmation is its members list, which core sends once the
        // subscription is a member (`crate::presence::pusher_frame`).
        let confirm = |_: &_, outcome: &herald_core::engine::SubscribeOutcome| {
            let mut frames = match (presence, cache_hit) {
                (true, _) => Vec::new(),
                (false, Some(false)) => vec![
                    frame::subscription_succeeded(&confirmed),
                    frame::cache_miss(&confirmed),
                ],
                (false, _) => vec![frame::subscription_succeeded(&confirmed)],
            };
            // The extension's frames (a presence channel's come before its members list).
            if let Some(resume) = &resume {
                frames.extend(resume.after_confirmation(&confirmed, outcome));
            }
            (!frames.is_empty()).then(|| OutFrame::Control(frame::several(&frames)))
        };
        let ask = PresenceAsk {
            frames: presence,
            member: member
                .as_ref()
                .map(|m| m.user_info.as_deref().unwrap_or("{}")),
        };
        let user = member.as_ref().map(|m| m.user_id.as_str());
        match self
            .session
            .subscribe_granted(&channel, &request, &ask, user, &confirm)
            .await
        {
            Ok(opened) => {
                if cache_hit == Some(false) {
                    self.tell_cache_miss(&channel);
                }
                if resume.is_some() {
                    self.positioned.add(channel.clone());
                }
                // A resumed subscription has had its missed events, the cached one too.
                if kind == ChannelKind::PresenceCache && !opened.outcome.recovered {
                    match crate::cache::last_event(&self.edge().engine, &channel).await {
                        Ok(Some(message)) => {
                            self.outbox().push(OutFrame::Replayed(message));
                        }
                        Ok(None) => {
                            self.send(frame::cache_miss(name));
                            self.tell_cache_miss(&channel);
                        }
                        Err(e) => tracing::debug!(error = %e, "a cached event was not read"),
                    }
                }
                if let Some(member) = member {
                    self.members
                        .push((channel, member.user_id.into_boxed_str()));
                }
                Ok(())
            }
            // Pusher answers a second subscribe as it did the first.
            Err(e) if e.code == ErrorCode::AlreadySubscribed => {
                let again = if presence {
                    let members = self.edge().engine.presence().listed(&channel).await;
                    crate::presence::subscription_succeeded(name, &members)
                } else {
                    frame::subscription_succeeded(name)
                };
                self.send(again);
                Ok(())
            }
            Err(e) => Err(refusal(&e)),
        }
    }

    /// Checks a private or presence channel's `auth` for this socket (and a presence
    /// channel's `channel_data`).
    fn check_auth(
        &self,
        name: &str,
        auth: Option<&str>,
        channel_data: Option<&str>,
    ) -> Result<(), SubscriptionRefused> {
        let Some(auth) = auth.filter(|a| !a.is_empty()) else {
            return Err(SubscriptionRefused::new(
                "AuthError",
                401,
                format!(
                    "Invalid signature: {name:?} is a {} channel; subscribing needs auth",
                    kind_name(ChannelKind::of(name))
                ),
            ));
        };
        let signed = channel_auth_string(&self.socket_id, name, channel_data);
        let now_ms = herald_core::message::now_millis();
        let secrets = self.credentials.secrets_at(now_ms);
        if check_key_signature(&self.credentials.key, secrets, &signed, auth) {
            Ok(())
        } else {
            Err(SubscriptionRefused::new(
                "AuthError",
                401,
                format!(
                    "Invalid signature: Expected HMAC SHA256 hex digest of {signed}, but got {auth}"
                ),
            ))
        }
    }

    fn unsubscribe(&mut self, name: &str) {
        // The user's channel lasts while the user is signed in (pusher-js never sends this).
        if is_server_to_user(name) {
            return;
        }
        let channel = match herald_channel(name) {
            Ok(channel) => channel,
            Err(e) => return self.send_error(None, &e.message),
        };
        // Unsubscribing from a channel not subscribed is nothing, as with Pusher.
        if let Ok(gone) = self.session.unsubscribe(channel.as_str()) {
            self.members.retain(|(c, _)| *c != gone);
            self.positioned.remove(&gone);
        }
    }

    /// Publishes a client event if Pusher's rules allow it.
    async fn client_event(
        &mut self,
        event: String,
        name: &str,
        data: String,
    ) -> Result<(), EventRefused> {
        check_event_name(&event).map_err(EventRefused::new)?;
        if ChannelKind::of(name) == ChannelKind::PrivateEncrypted {
            return Err(EventRefused::new(format!(
                "Client event rejected: {name:?} is an encrypted channel (client events are \
                 not supported on encrypted channels)"
            )));
        }
        if !matches!(
            ChannelKind::of(name),
            ChannelKind::Private
                | ChannelKind::Presence
                | ChannelKind::PrivateCache
                | ChannelKind::PresenceCache
        ) {
            return Err(EventRefused::new(format!(
                "Client event rejected: {name:?} is not a private channel or a presence \
                 channel (client events are only supported on private and presence channels)"
            )));
        }
        let app = self.credentials.app.clone();
        let channel = app_channel(&app, name).map_err(|e| EventRefused::new(e.message))?;
        if !self.session.is_subscribed(&channel) {
            return Err(EventRefused::new(format!(
                "Cannot broadcast client event (connection not subscribed to channel {name})"
            )));
        }
        if data.len() > self.settings().max_client_event_bytes {
            return Err(EventRefused::new(format!(
                "Payload too large: data is {} bytes; the limit is {}",
                data.len(),
                self.settings().max_client_event_bytes
            )));
        }
        if !self.take_client_event() {
            return Err(EventRefused {
                code: Some(codes::CLIENT_EVENT_RATE_LIMIT),
                message: format!(
                    "Client event rejected due to rate limit: at most {} a second",
                    self.settings().client_events_per_second
                ),
            });
        }
        // On a presence channel, the sender's user id, as Pusher adds it.
        let user_id = self
            .members
            .iter()
            .find(|(c, _)| *c == channel)
            .map(|(_, user)| serde_json::Value::String(user.to_string()));
        // Built only when an endpoint wants it.
        let told = self
            .clients
            .hooks
            .as_ref()
            .filter(|hooks| hooks.wants(&app, EventType::PusherClientEvent, channel.public()));
        let told = told.map(|hooks| {
            let data = json!({
                "channel": name,
                "event": &event,
                "data": &data,
                "socket_id": &*self.socket_id,
                "user_id": user_id.clone(),
            });
            (hooks.clone(), data)
        });
        let stored = PusherEvent {
            event,
            data,
            socket_id: Some(self.socket_id.to_string()),
            user_id,
        }
        .to_data();
        let publisher = &self.edge().publisher;
        let message = publisher
            .message(&app, None, stored.as_bytes())
            .map_err(|e| EventRefused::new(e.message))?;
        publisher
            .publish(&app, &channel, vec![message])
            .await
            .map_err(|e| EventRefused::new(e.message))?;
        if let Some((hooks, data)) = told {
            let user = data["user_id"].as_str().map(Into::into);
            hooks.tell_pusher(&app, EventType::PusherClientEvent, channel.public(), || {
                (user, data)
            });
        }
        Ok(())
    }

    /// Counts one client event in the current second; false when it is over the rate.
    fn take_client_event(&mut self) -> bool {
        let now = Instant::now();
        let limit = self.settings().client_events_per_second;
        let window = match &mut self.events_window {
            Some((started, count)) if now.duration_since(*started) < Duration::from_secs(1) => {
                count
            }
            window => &mut window.insert((now, 0)).1,
        };
        if *window >= limit {
            return false;
        }
        *window += 1;
        true
    }
}

/// Why a subscription was not made: the `pusher:subscription_error`'s `type`, `status` and
/// `error`.
pub(crate) struct SubscriptionRefused {
    kind: &'static str,
    status: u16,
    message: String,
}

impl SubscriptionRefused {
    pub(crate) fn new(kind: &'static str, status: u16, message: impl Into<String>) -> Self {
        SubscriptionRefused {
            kind,
            status,
            message: message.into(),
        }
    }
}

/// Why a client event was not sent: the `pusher:error`'s code (none for an error Pusher
/// gives no code) and message.
struct EventRefused {
    code: Option<u16>,
    message: String,
}

impl EventRefused {
    fn new(message: impl Into<String>) -> Self {
        EventRefused {
            code: None,
            message: message.into(),
        }
    }
}

/// A subscription the session refused, as Pusher's refusal.
fn refusal(e: &HeraldError) -> SubscriptionRefused {
    let kind = match e.code {
        ErrorCode::TooManySubscriptions => "LimitReached",
        // A presence channel at its member limit: Pusher's over-capacity code, as Pusher's
        // compatible servers answer it.
        ErrorCode::LimitExceeded => {
            return SubscriptionRefused::new(
                "LimitReached",
                codes::OVER_CAPACITY,
                format!(
                    "The maximum members per presence channel limit was reached: {}",
                    e.message
                ),
            )
        }
        ErrorCode::TooLarge | ErrorCode::BadRequest => "InvalidChannelData",
        ErrorCode::Forbidden | ErrorCode::Unauthorized => "AuthError",
        _ => "SubscriptionError",
    };
    SubscriptionRefused::new(kind, e.code.http_status(), e.message.clone())
}

fn kind_name(kind: ChannelKind) -> &'static str {
    match kind {
        ChannelKind::Public => "public",
        ChannelKind::Private => "private",
        ChannelKind::Presence => "presence",
        ChannelKind::PrivateEncrypted => "private encrypted",
        ChannelKind::Cache => "cache",
        ChannelKind::PrivateCache => "private cache",
        ChannelKind::PresenceCache => "presence cache",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use herald_core::tenant::AppId;

    #[test]
    fn an_unsubscribe_names_the_channel_the_subscribe_made() {
        // Subscribing scopes the mapped channel to the app; unsubscribing goes through the
        // session's parse of the mapped name: both must be the same channel, encoded names too.
        for app in [AppId::default_app(), AppId::parse("shop").unwrap()] {
            for name in ["news", "a,b", "=lead", "private-x;y", "user@example.com"] {
                let subscribed = app_channel(&app, name).unwrap();
                let unsubscribed = app
                    .parse_channel(herald_channel(name).unwrap().as_str())
                    .unwrap();
                assert_eq!(subscribed, unsubscribed, "{name}");
            }
        }
    }
}
