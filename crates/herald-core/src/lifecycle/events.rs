//! The lifecycle events themselves: who a connection is ([`Connection`]), over what
//! ([`Transport`]), why it ended ([`DisconnectReason`]) and the events ([`LifecycleEvent`]).

use std::fmt;
use std::sync::Arc;

use crate::name::ChannelName;
use crate::outbox::CloseReason;
use crate::tenant::AppId;

/// The transport a client connection came over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Transport {
    /// Herald's WebSocket protocol.
    WebSocket,
    /// Server-sent events.
    Sse,
    /// HTTP long-poll (one connection per request).
    LongPoll,
    /// Meteor's subscriber protocol.
    Meteor,
    /// MQTT 3.1.1 and 5.0 (`herald-mqtt`).
    Mqtt,
    /// The Pusher Channels client protocol (`herald-pusher`).
    Pusher,
}

impl Transport {
    /// Every transport, in a fixed order.
    pub const ALL: [Transport; 6] = [
        Transport::WebSocket,
        Transport::Sse,
        Transport::LongPoll,
        Transport::Meteor,
        Transport::Mqtt,
        Transport::Pusher,
    ];

    /// The transport's name in events (`websocket`, `sse`, `long_poll`, `meteor`, `mqtt`, `pusher`).
    pub fn as_str(self) -> &'static str {
        match self {
            Transport::WebSocket => "websocket",
            Transport::Sse => "sse",
            Transport::LongPoll => "long_poll",
            Transport::Meteor => "meteor",
            Transport::Mqtt => "mqtt",
            Transport::Pusher => "pusher",
        }
    }

    /// The transport named `name` by [`Transport::as_str`].
    pub fn parse(name: &str) -> Option<Transport> {
        Transport::ALL.into_iter().find(|t| t.as_str() == name)
    }
}

/// Why a connection ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DisconnectReason {
    /// The client closed the connection or went away (the default).
    Closed,
    /// The client stopped answering (keep-alive or idle timeout).
    TimedOut,
    /// The client's token expired.
    TokenExpired,
    /// The client's access was revoked: its token or device, its app deleted, or its app's
    /// secret changed.
    Revoked,
    /// The client read too slowly and its queue overflowed.
    SlowConsumer,
    /// The server shut down.
    Shutdown,
    /// The node holding the connection stopped answering and another node reported the
    /// connection gone (a cluster only, see [`crate::bus`]).
    NodeLost,
    /// The client went on sending commands through a burst of refusals.
    RateLimited,
    /// Retention removed messages a catch-up had not read yet; the client resumes again.
    ResumeLost,
    /// A catch-up could not read its next page from the store.
    StoreUnavailable,
    /// The connection authorised again as another client (an anonymous connection that sent
    /// a token): the next [`LifecycleEvent::Connected`] names the new client.
    Reauthenticated,
}

impl DisconnectReason {
    /// Every reason, in a fixed order.
    pub const ALL: [DisconnectReason; 11] = [
        DisconnectReason::Closed,
        DisconnectReason::TimedOut,
        DisconnectReason::TokenExpired,
        DisconnectReason::Revoked,
        DisconnectReason::SlowConsumer,
        DisconnectReason::Shutdown,
        DisconnectReason::NodeLost,
        DisconnectReason::RateLimited,
        DisconnectReason::ResumeLost,
        DisconnectReason::StoreUnavailable,
        DisconnectReason::Reauthenticated,
    ];

    /// The reason's name in events.
    pub fn code(self) -> &'static str {
        match self {
            DisconnectReason::Closed => "closed",
            DisconnectReason::TimedOut => "timed_out",
            DisconnectReason::TokenExpired => "token_expired",
            DisconnectReason::Revoked => "revoked",
            DisconnectReason::SlowConsumer => "slow_consumer",
            DisconnectReason::Shutdown => "shutdown",
            DisconnectReason::NodeLost => "node_lost",
            DisconnectReason::RateLimited => "rate_limited",
            DisconnectReason::ResumeLost => "resume_lost",
            DisconnectReason::StoreUnavailable => "store_unavailable",
            DisconnectReason::Reauthenticated => "reauthenticated",
        }
    }

    /// The reason named `code` by [`DisconnectReason::code`].
    pub fn parse(code: &str) -> Option<DisconnectReason> {
        DisconnectReason::ALL.into_iter().find(|r| r.code() == code)
    }
}

impl From<CloseReason> for DisconnectReason {
    fn from(reason: CloseReason) -> Self {
        match reason {
            CloseReason::SlowConsumer => DisconnectReason::SlowConsumer,
            CloseReason::Shutdown => DisconnectReason::Shutdown,
            CloseReason::TokenExpired => DisconnectReason::TokenExpired,
            CloseReason::Revoked
            | CloseReason::AppDeleted
            | CloseReason::SecretChanged
            | CloseReason::DeviceRevoked => DisconnectReason::Revoked,
            CloseReason::RateLimited => DisconnectReason::RateLimited,
            CloseReason::ResumeLost => DisconnectReason::ResumeLost,
            CloseReason::StoreUnavailable => DisconnectReason::StoreUnavailable,
        }
    }
}

/// A connection's id, unique in the cluster: the [`crate::lifecycle::Lifecycle`]'s random
/// node number and a count on that node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnectionId {
    /// The node's random number (per start).
    pub node: u64,
    /// The connection's number on that node, from 1.
    pub seq: u64,
}

impl fmt::Display for ConnectionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}-{}", self.node, self.seq)
    }
}

/// Who a client connection is: what every event about it carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Connection {
    /// Its id.
    pub id: ConnectionId,
    /// The client's app.
    pub app: AppId,
    /// The token's `sub`; `None` for an anonymous client or a token without one.
    pub sub: Option<Box<str>>,
    /// The device the token names, if any.
    pub device: Option<Box<str>>,
    /// The transport it came over.
    pub transport: Transport,
}

/// Something that happened to a client connection or a channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LifecycleEvent {
    /// A client connection was authorised (it registered among the live clients).
    Connected {
        /// The connection.
        connection: Arc<Connection>,
    },
    /// A client connection ended. Its subscriptions' [`LifecycleEvent::Unsubscribed`] come
    /// first.
    Disconnected {
        /// The connection.
        connection: Arc<Connection>,
        /// Why.
        reason: DisconnectReason,
    },
    /// A connection subscribed to a channel.
    Subscribed {
        /// The connection; `None` for a subscriber that is not a registered client
        /// connection.
        connection: Option<Arc<Connection>>,
        /// The channel (its full name; [`ChannelName::public`] is the app's name for it).
        channel: ChannelName,
    },
    /// A connection's subscription to a channel ended.
    Unsubscribed {
        /// The connection, as in [`LifecycleEvent::Subscribed`].
        connection: Option<Arc<Connection>>,
        /// The channel.
        channel: ChannelName,
    },
    /// A user (an app's token `sub`) has its first connection (in a cluster: its first on any
    /// node). Anonymous connections and tokens without a `sub` are no user.
    UserOnline {
        /// The app.
        app: AppId,
        /// The token's `sub`.
        sub: Box<str>,
    },
    /// A user's last connection ended (in a cluster: its last on any node). Not debounced: a
    /// user who reconnects at once goes offline and online again.
    UserOffline {
        /// The app.
        app: AppId,
        /// The token's `sub`.
        sub: Box<str>,
    },
    /// A channel got its first subscriber (in a cluster: its first on any node).
    ChannelOccupied {
        /// The channel.
        channel: ChannelName,
    },
    /// A channel lost its last subscriber (in a cluster: its last on any node).
    ChannelVacated {
        /// The channel.
        channel: ChannelName,
    },
    /// A user became a member of a presence channel: its first subscription to it
    /// ([`crate::presence`]; in a cluster, its first on any node, told once, see
    /// [`crate::presence::PresenceRelay`]).
    MemberAdded {
        /// The channel.
        channel: ChannelName,
        /// The user id (the token's `sub`).
        user: Box<str>,
        /// The member's data, a JSON object's text.
        data: Arc<str>,
    },
    /// A user's last subscription to a presence channel ended: it is no member any more.
    MemberRemoved {
        /// The channel.
        channel: ChannelName,
        /// The user id.
        user: Box<str>,
    },
}

impl LifecycleEvent {
    /// The event's type as webhooks name it (`client.connected`, `client.disconnected`,
    /// `client.subscribed`, `client.unsubscribed`, `user.online`, `user.offline`,
    /// `channel.occupied`, `channel.vacated`, `presence.member_added`,
    /// `presence.member_removed`).
    pub fn kind(&self) -> &'static str {
        match self {
            LifecycleEvent::Connected { .. } => "client.connected",
            LifecycleEvent::Disconnected { .. } => "client.disconnected",
            LifecycleEvent::Subscribed { .. } => "client.subscribed",
            LifecycleEvent::Unsubscribed { .. } => "client.unsubscribed",
            LifecycleEvent::UserOnline { .. } => "user.online",
            LifecycleEvent::UserOffline { .. } => "user.offline",
            LifecycleEvent::ChannelOccupied { .. } => "channel.occupied",
            LifecycleEvent::ChannelVacated { .. } => "channel.vacated",
            LifecycleEvent::MemberAdded { .. } => "presence.member_added",
            LifecycleEvent::MemberRemoved { .. } => "presence.member_removed",
        }
    }

    /// The app the event belongs to.
    pub fn app(&self) -> AppId {
        match self {
            LifecycleEvent::Connected { connection }
            | LifecycleEvent::Disconnected { connection, .. } => connection.app.clone(),
            LifecycleEvent::UserOnline { app, .. } | LifecycleEvent::UserOffline { app, .. } => {
                app.clone()
            }
            LifecycleEvent::Subscribed { channel, .. }
            | LifecycleEvent::Unsubscribed { channel, .. }
            | LifecycleEvent::ChannelOccupied { channel }
            | LifecycleEvent::ChannelVacated { channel }
            | LifecycleEvent::MemberAdded { channel, .. }
            | LifecycleEvent::MemberRemoved { channel, .. } => app_of(channel),
        }
    }

    /// The channel the event is about, if it is about one.
    pub fn channel(&self) -> Option<&ChannelName> {
        match self {
            LifecycleEvent::Connected { .. }
            | LifecycleEvent::Disconnected { .. }
            | LifecycleEvent::UserOnline { .. }
            | LifecycleEvent::UserOffline { .. } => None,
            LifecycleEvent::Subscribed { channel, .. }
            | LifecycleEvent::Unsubscribed { channel, .. }
            | LifecycleEvent::ChannelOccupied { channel }
            | LifecycleEvent::ChannelVacated { channel }
            | LifecycleEvent::MemberAdded { channel, .. }
            | LifecycleEvent::MemberRemoved { channel, .. } => Some(channel),
        }
    }
}

/// The app a full channel name belongs to.
pub fn app_of(channel: &ChannelName) -> AppId {
    let (app, _) = crate::tenant::split_app(channel.as_str());
    AppId::parse(app).unwrap_or_else(|_| AppId::default_app())
}

/// Whether a full channel name is one of an app's reserved logs (`$app`, a device's inbox):
/// subscriptions to those are the device inbox's, not channels an app names, and raise no
/// event.
pub fn is_reserved(channel: &ChannelName) -> bool {
    crate::tenant::split_app(channel.as_str())
        .1
        .starts_with(crate::tenant::RESERVED)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back_and_close_reasons_map() {
        for t in Transport::ALL {
            assert_eq!(Transport::parse(t.as_str()), Some(t));
        }
        assert_eq!(Transport::Mqtt.as_str(), "mqtt");
        assert_eq!(Transport::parse("mqtt"), Some(Transport::Mqtt));
        assert_eq!(Transport::Pusher.as_str(), "pusher");
        assert_eq!(Transport::parse("pusher"), Some(Transport::Pusher));
        for r in DisconnectReason::ALL {
            assert_eq!(DisconnectReason::parse(r.code()), Some(r));
        }
        assert_eq!(
            DisconnectReason::from(CloseReason::SecretChanged),
            DisconnectReason::Revoked
        );
        assert_eq!(
            DisconnectReason::from(CloseReason::SlowConsumer).code(),
            "slow_consumer"
        );
        let shop = AppId::parse("shop").unwrap();
        let news = shop.parse_channel("news").unwrap();
        assert_eq!(app_of(&news), shop);
        assert!(!is_reserved(&news));
        assert!(is_reserved(&shop.reserved_log("$app")));
        let plain = ChannelName::parse("news").unwrap();
        assert_eq!(app_of(&plain), AppId::default_app());
        let event = LifecycleEvent::ChannelVacated { channel: news };
        assert_eq!((event.kind(), event.app()), ("channel.vacated", shop));
    }
}
