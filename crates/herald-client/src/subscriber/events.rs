//! What a [`Subscriber`](super::Subscriber) reports: the [`Event`]s its `next()` yields (a
//! presence channel's members, joins and leaves as [`Presence`]), why a connection was lost
//! ([`Lost`]), why it stopped for good ([`Stopped`]), and the [`Position`] it keeps for every
//! channel.

use std::fmt;
use std::time::Duration;

use herald_proto::command::Since;
use herald_proto::ErrorCode;

pub use crate::api::PresenceMember;
use crate::types::{Connected, Message, Subscribed};
use crate::ws::{Closed, Frame};
use crate::{Error, ServerError};

/// Where a channel's stream stands: the epoch and seq of the last message received (or of the
/// channel's newest message when a subscription started, before any arrived).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Position {
    /// The epoch; `None` means the channel's current one (a position given without an epoch).
    pub epoch: Option<String>,
    /// The seq.
    pub seq: u64,
}

impl Position {
    /// A position in the channel's current epoch, whatever it is.
    pub fn in_current_epoch(seq: u64) -> Position {
        Position { epoch: None, seq }
    }

    /// A position in `epoch`.
    pub fn new(epoch: impl Into<String>, seq: u64) -> Position {
        Position {
            epoch: Some(epoch.into()),
            seq,
        }
    }

    /// The position as a `subscribe` command carries it.
    pub fn since(&self) -> Since {
        Since {
            seq: self.seq,
            epoch: self.epoch.clone(),
        }
    }
}

/// One thing that happened, in the order it happened.
#[derive(Debug)]
pub enum Event {
    /// The server accepted the token (`connect` reply); only when there is a token.
    Connected(Connected),
    /// A subscription (re)started on a new connection.
    Subscribed(Subscribed),
    /// Right after the [`Event::Subscribed`] of a resumed channel: the server could not resume
    /// exactly after `after` (`recovered: false`), because retention removed messages or the
    /// channel's log was reset. Messages between `after` and `now` may be missing (read them with
    /// the history API); the subscription goes on from `now`.
    ResumeInexact {
        /// The channel.
        channel: String,
        /// The position the subscription asked to resume after.
        after: Position,
        /// Where the channel is now: the subscription continues after it.
        now: Position,
    },
    /// A message: each one once, in seq order per channel, across reconnects.
    Message(Message),
    /// On a channel subscribed with presence ([`ChannelOptions::presence`](super::ChannelOptions::presence)):
    /// its members (after every (re)subscribe), then each join and leave. The subscriber has
    /// already applied it to the channel's member list
    /// ([`Subscriber::members`](super::Subscriber::members)).
    Presence(Presence),
    /// The connection was lost for a reason a reconnect fixes; the next connection is opened
    /// after `after`, and every channel resumes from its position.
    Reconnecting {
        /// Which attempt in a row this is, from 1 (back to 1 once a connection opens).
        attempt: u32,
        /// How long the subscriber waits before it.
        after: Duration,
        /// Why the connection was lost.
        why: Lost,
    },
    /// A frame the subscriber does not handle itself (or cannot parse), as the server sent it.
    Other(Frame),
}

/// A presence channel's `presence` frame (docs/protocol.md, section 10). Presence is live state:
/// never resumed, so after a reconnect [`Presence::Members`] comes again and replaces the list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Presence {
    /// Everyone on the channel now (the subscriber's own user included), in the order they
    /// joined: sent first on every (re)subscribe.
    Members {
        /// The channel.
        channel: String,
        /// Its members.
        members: Vec<PresenceMember>,
    },
    /// A user joined (its first subscription to the channel).
    Join {
        /// The channel.
        channel: String,
        /// Who, with its data.
        member: PresenceMember,
    },
    /// A user left (its last subscription to the channel ended).
    Leave {
        /// The channel.
        channel: String,
        /// The user id.
        user: String,
    },
}

impl Presence {
    /// The channel it is about.
    pub fn channel(&self) -> &str {
        match self {
            Presence::Members { channel, .. }
            | Presence::Join { channel, .. }
            | Presence::Leave { channel, .. } => channel,
        }
    }
}

/// Why a connection ended, when a reconnect fixes it.
#[derive(Debug, thiserror::Error)]
pub enum Lost {
    /// The server sent `disconnect` with a code whose remedy is to reconnect and resume
    /// (`shutdown`, `slow_consumer`; `token_expired` when a token supplier gives a fresh one).
    #[error("disconnected by the server: {0}")]
    Disconnected(ServerError),
    /// The server closed the WebSocket (with its close frame, if it sent one).
    #[error("connection closed by the server{}", .0.as_ref().map(|c| format!(": {} ({})", c.reason, c.code)).unwrap_or_default())]
    Closed(Option<Closed>),
    /// Reading from or writing to the connection failed.
    #[error("connection lost: {0}")]
    Broken(Error),
    /// A reconnect attempt failed: the token supplier failed, the server could not be reached,
    /// or it refused the WebSocket.
    #[error("cannot connect: {0}")]
    Connect(Error),
}

/// What the server refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// The `connect` carrying the token.
    Connect,
    /// The `subscribe` to this channel.
    Subscribe(String),
    /// A request the subscriber cannot name (an `error` frame with an unknown id).
    Other,
}

impl fmt::Display for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Request::Connect => f.write_str("connect"),
            Request::Subscribe(channel) => write!(f, "subscribe to {channel:?}"),
            Request::Other => f.write_str("request"),
        }
    }
}

/// Why a subscriber stopped: what reconnecting cannot fix. Once `next()` returned one, the
/// subscriber is done: later calls return [`Stopped::Ended`].
#[derive(Debug, thiserror::Error)]
pub enum Stopped {
    /// The first connection could not be opened (nothing was ever connected, so the URL, the
    /// server or the token supplier is wrong, not the network for a moment).
    #[error("cannot connect: {0}")]
    Connect(Error),
    /// The server answered a request with an error: the token was rejected or has expired
    /// (`connect`), or a subscription was refused (`subscribe`).
    #[error("{request} failed: {error}")]
    Refused {
        /// What was refused.
        request: Request,
        /// The server's error.
        error: ServerError,
    },
    /// The server disconnected for a reason a reconnect does not fix (`token_expired` without
    /// a token supplier, `revoked`, ...).
    #[error("disconnected by the server: {0}")]
    Disconnected(ServerError),
    /// The connection was lost and reconnecting is turned off.
    #[error("{0}")]
    Lost(Lost),
    /// `next()` was called again after the subscriber stopped.
    #[error("the subscriber has stopped")]
    Ended,
}

impl Stopped {
    /// The server's error, when the server said why.
    pub fn server(&self) -> Option<&ServerError> {
        match self {
            Stopped::Refused { error, .. } | Stopped::Disconnected(error) => Some(error),
            Stopped::Connect(e) => e.server(),
            Stopped::Lost(Lost::Disconnected(e)) => Some(e),
            _ => None,
        }
    }

    /// The server's error code, when it is one the contract knows.
    pub fn code(&self) -> Option<ErrorCode> {
        self.server().and_then(ServerError::code)
    }
}
