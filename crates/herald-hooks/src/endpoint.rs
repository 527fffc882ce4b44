//! An app's webhook endpoint as stored and shown ([`Endpoint`]), its signing secrets as stored
//! (sealed, [`StoredEndpoint`]), which events it is told ([`Endpoint::wants`]) and in which
//! format ([`Format`]: Standard Webhooks, or Pusher's webhooks).
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

/// How an endpoint's requests are written and signed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Format {
    /// Herald's events (`{"events":[...]}`), signed by Standard Webhooks 1.0 with the
    /// endpoint's own `whsec_` secret.
    #[default]
    Standard,
    /// Pusher's webhooks (`{"time_ms":..,"events":[{"name":"channel_occupied",..}]}`), signed
    /// with the app's Pusher secret (`X-Pusher-Key`, `X-Pusher-Signature`): only the event types
    /// Pusher has ([`crate::pusher::PUSHER_TYPES`]).
    Pusher,
}

impl Format {
    /// The format's name (`standard`, `pusher`), as the API and the store write it.
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Standard => "standard",
            Format::Pusher => "pusher",
        }
    }

    /// The format named `name`.
    pub fn parse(name: &str) -> Option<Format> {
        match name {
            "standard" => Some(Format::Standard),
            "pusher" => Some(Format::Pusher),
            _ => None,
        }
    }
}

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
    /// How its requests are written and signed (set at creation).
    pub format: Format,
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
