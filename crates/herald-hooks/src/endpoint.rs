//! An app's webhook endpoint as stored and shown ([`Endpoint`]), its signing secrets as stored
//! (sealed, [`StoredEndpoint`]) and which events it is told ([`Endpoint::wants`]).
//!
//! Checking what a caller sends (a URL, event names, channel patterns) is [`crate::input`]'s.

use herald_core::pattern::PatternSet;
use herald_core::tenant::AppId;

use crate::event::{EventSet, HookEvent};

/// An endpoint's id, unique in the server (or the cluster's database).
pub type EndpointId = i64;

/// The default wait before a user's `user.offline` is sent, during which the user's return
/// withdraws it (Pusher's presence webhooks wait as long).
pub const DEFAULT_OFFLINE_DELAY_MS: u32 = 3_000;

/// Longest offline delay an endpoint may ask for.
pub const MAX_OFFLINE_DELAY_MS: u32 = 600_000;

/// A webhook endpoint as shown (never with its secret).
#[derive(Debug, Clone, PartialEq)]
pub struct Endpoint {
    /// Its id.
    pub id: EndpointId,
    /// The app whose events it is told.
    pub app: AppId,
    /// Where batches are `POST`ed (`http` or `https`).
    pub url: String,
    /// What the operator wrote about it (may be empty).
    pub description: String,
    /// The event types it asked for.
    pub events: EventSet,
    /// Channel patterns (as tokens write them): events about a channel are sent only when one
    /// matches the channel's name within the app; empty is every channel. Events about no
    /// channel are not filtered by them.
    pub channels: Vec<String>,
    /// Whether events are queued for it (a disabled endpoint is told nothing, and what was
    /// queued waits).
    pub enabled: bool,
    /// How long a `user.offline` waits before it is sent, withdrawn with the `user.online`
    /// that follows when the user comes back within it.
    pub offline_delay_ms: u32,
    /// When it was registered, milliseconds since the Unix epoch.
    pub created_ms: i64,
}

impl Endpoint {
    /// The endpoint's channel patterns, compiled.
    pub fn patterns(&self) -> PatternSet {
        if self.channels.is_empty() {
            PatternSet::all()
        } else {
            PatternSet::new(&self.channels)
        }
    }

    /// Whether `event` is for this endpoint: its app, a type it asked for, and a channel one of
    /// `patterns` (this endpoint's, compiled) matches. A disabled endpoint wants nothing.
    pub fn wants(&self, patterns: &PatternSet, event: &HookEvent) -> bool {
        self.enabled
            && self.app == event.app
            && self.events.contains(event.kind)
            && event
                .channel
                .as_deref()
                .is_none_or(|channel| patterns.allows(channel))
    }
}

/// An endpoint as the store keeps it: the endpoint and its signing secrets, sealed (AES-256-GCM
/// under the server's credentials key, the app as associated data: [`crate::seal`]).
#[derive(Debug, Clone, PartialEq)]
pub struct StoredEndpoint {
    /// The endpoint.
    pub endpoint: Endpoint,
    /// The current secret, sealed.
    pub secret: Vec<u8>,
    /// The secret it replaced, sealed, and until when (milliseconds since the Unix epoch)
    /// requests are signed with it too.
    pub previous_secret: Option<(Vec<u8>, i64)>,
}
