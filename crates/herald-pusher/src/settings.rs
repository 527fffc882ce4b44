//! The client protocol's settings (the `[pusher]` table, docs/config.md): the activity
//! timeout a connection is told and kept to, how long a ping waits for its pong, how many
//! client events a connection may send a second, and how many members a presence channel
//! holds. The defaults are Pusher's documented ones.

use std::time::Duration;

/// How Pusher connections are kept alive and limited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientSettings {
    /// Seconds without a frame from the client after which the server sends `pusher:ping`;
    /// sent in `pusher:connection_established` as `activity_timeout` (pusher-js pings after
    /// the lesser of this and its own). Pusher: 120.
    pub activity_timeout: Duration,
    /// How long the server waits for anything (a `pusher:pong`) after its ping before it closes
    /// the connection with 4201. Pusher recommends 30 s.
    pub pong_timeout: Duration,
    /// Client events (`client-*`) one connection may send a second; more are refused with
    /// `pusher:error` 4301. Pusher: 10.
    pub client_events_per_second: u32,
    /// Largest `data` of a client event, in bytes (Pusher: 10 KB, as the HTTP API's).
    pub max_client_event_bytes: usize,
    /// Members (user ids) one presence channel holds at most; a subscription that would add
    /// one more is refused (`pusher:subscription_error`, `LimitReached`). Pusher: 100.
    pub presence_max_members: u32,
}

impl Default for ClientSettings {
    fn default() -> Self {
        ClientSettings {
            activity_timeout: Duration::from_secs(120),
            pong_timeout: Duration::from_secs(30),
            client_events_per_second: 10,
            max_client_event_bytes: 10 * 1024,
            presence_max_members: crate::presence::DEFAULT_MAX_MEMBERS,
        }
    }
}
