//! A client session in the compact form a parked connection keeps ([`ParkedSession`]): what
//! the session must not forget while the connection waits without a task, and nothing it can
//! rebuild on revival. Next to [`ClientSession`](super::ClientSession) it drops the command
//! budget (a connection parks only with a fresh one, [`ClientSession::may_park`]), keeps the
//! client's `sub` boxed to its length, its device, `user_info` and pattern sets behind one
//! pointer each and only when it has them (the sets when they are not both `**`), its
//! live-client registration as two numbers and its one usual subscription inline.
//!
//! [`ClientSession::may_park`]: super::ClientSession::may_park

use std::sync::Arc;

use herald_core::auth::{Client, TokenStamp};
use herald_core::live::ParkedRegistration;
use herald_core::outbox::Outbox;
use herald_core::pattern::PatternSet;
use herald_core::tenant::AppId;
use herald_core::usage::ConnectionGuard;
use herald_core::ChannelName;

use super::set::ParkedSet;
use crate::Edge;

/// A parked connection's session. Dropping it ends the session as dropping a
/// [`ClientSession`](super::ClientSession) does: it unsubscribes everything and leaves the
/// live clients.
pub struct ParkedSession {
    pub(super) edge: Arc<Edge>,
    pub(super) outbox: Arc<Outbox>,
    pub(super) client: Option<ParkedClient>,
    pub(super) counted: Option<ConnectionGuard>,
    pub(super) subscriptions: ParkedSet,
}

/// The authorised client of a parked session, with its place among the live clients: 88
/// bytes. What most clients lack (a device, `user_info`, grants other than `**`) is behind one
/// pointer each, allocated only when there is any.
pub(super) struct ParkedClient {
    app: AppId,
    sub: Box<str>,
    /// The token's expiry, 0 for none (no valid token expires at 0): eight bytes, not
    /// sixteen.
    expires: u64,
    token: TokenStamp,
    registered: ParkedRegistration,
    /// The device a device token names and the token's `user_info` claim, if either is there.
    rare: Option<Box<RareClaims>>,
    /// The subscribe and publish sets, `None` when both are `**` (what an anonymous client
    /// has and what many tokens grant).
    grants: Option<Box<Grants>>,
}

/// The parts of a parked client most clients do not have.
struct RareClaims {
    device: Option<Box<str>>,
    user_info: Option<Box<str>>,
}

/// A parked client's subscribe and publish sets when they are not both `**`.
struct Grants {
    subscribe: PatternSet,
    publish: PatternSet,
}

impl ParkedClient {
    /// The parked form of `client`, registered at `registered`.
    pub(super) fn new(client: Client, registered: ParkedRegistration) -> ParkedClient {
        let Client {
            app,
            device,
            sub,
            expires,
            subscribe,
            publish,
            token,
            user_info,
        } = client;
        let every = PatternSet::all();
        ParkedClient {
            app,
            sub: sub.into_boxed_str(),
            expires: expires.unwrap_or(0),
            token,
            registered,
            rare: (device.is_some() || user_info.is_some()).then(|| {
                Box::new(RareClaims {
                    device: device.map(String::into_boxed_str),
                    user_info,
                })
            }),
            grants: (subscribe != every || publish != every)
                .then(|| Box::new(Grants { subscribe, publish })),
        }
    }

    /// The client again, and where it is registered.
    pub(super) fn revive(self) -> (Client, ParkedRegistration) {
        let ParkedClient {
            app,
            sub,
            expires,
            token,
            registered,
            rare,
            grants,
        } = self;
        let (device, user_info) = match rare {
            Some(rare) => (rare.device.map(String::from), rare.user_info),
            None => (None, None),
        };
        let Grants { subscribe, publish } = match grants {
            Some(grants) => *grants,
            None => Grants {
                subscribe: PatternSet::all(),
                publish: PatternSet::all(),
            },
        };
        let client = Client {
            app,
            device,
            sub: String::from(sub),
            expires: (expires != 0).then_some(expires),
            subscribe,
            publish,
            token,
            user_info,
        };
        (client, registered)
    }
}

impl ParkedSession {
    /// The server's transports.
    pub fn edge(&self) -> &Arc<Edge> {
        &self.edge
    }

    /// The connection's outbound queue.
    pub fn outbox(&self) -> &Arc<Outbox> {
        &self.outbox
    }

    /// The channel of the session's one subscription, if it holds exactly one: a parked
    /// connection that keeps its own note of that subscription need not keep the name twice.
    pub fn lone_channel(&self) -> Option<&ChannelName> {
        match &self.subscriptions {
            ParkedSet::One(channel, _) => Some(channel),
            ParkedSet::Many(_) => None,
        }
    }

    /// When the client's token expires (seconds since the Unix epoch), if it does.
    pub fn expires(&self) -> Option<u64> {
        self.client
            .as_ref()
            .and_then(|c| (c.expires != 0).then_some(c.expires))
    }
}

impl Drop for ParkedSession {
    fn drop(&mut self) {
        for (channel, sub) in self.subscriptions.take() {
            self.edge.engine.unsubscribe(&channel, &sub);
        }
        if let Some(client) = self.client.take() {
            let (client, registered) = client.revive();
            self.edge.live.leave(&client.app, registered);
        }
    }
}

#[cfg(test)]
mod tests {
    use herald_core::lifecycle::Transport;
    use herald_core::live::LiveClients;

    use super::*;

    #[test]
    fn a_parked_session_is_smaller_than_a_live_one() {
        // Two Arcs, the client with its registration, the usage guard and one subscription
        // inline: 136 bytes, so a parked WebSocket's record with its socket, roster place and
        // flag fits jemalloc's 160-byte class (it was 176 B and the 192-byte class while the
        // client kept its device, `user_info` and both pattern sets inline).
        assert_eq!(size_of::<ParkedSet>(), 24);
        assert_eq!(size_of::<Option<ParkedClient>>(), 88);
        assert_eq!(size_of::<ParkedSession>(), 136);
    }

    fn client(device: Option<&str>, user_info: Option<&str>, subscribe: PatternSet) -> Client {
        Client {
            app: AppId::parse("app1").expect("a valid app id"),
            device: device.map(String::from),
            sub: "user-7".into(),
            expires: Some(1_900_000_000),
            subscribe,
            publish: PatternSet::new(&["chat/*"]),
            token: TokenStamp {
                jti: 1,
                iat: 2,
                secret: 3,
            },
            user_info: user_info.map(Box::from),
        }
    }

    fn same(a: &Client, b: &Client) -> bool {
        (
            &a.app,
            &a.device,
            &a.sub,
            a.expires,
            &a.subscribe,
            &a.publish,
            a.token,
            &a.user_info,
        ) == (
            &b.app,
            &b.device,
            &b.sub,
            b.expires,
            &b.subscribe,
            &b.publish,
            b.token,
            &b.user_info,
        )
    }

    #[test]
    fn a_parked_client_revives_as_it_was() {
        let clients = [
            client(None, None, PatternSet::all()),
            client(Some("dev-1"), None, PatternSet::all()),
            client(None, Some(r#"{"name":"Ann"}"#), PatternSet::new(&["news"])),
            client(Some("dev-2"), Some(""), PatternSet::new(&["a", "b/**"])),
        ];
        let live = LiveClients::new();
        let outbox = Outbox::new(1024);
        let park = |client: &Client| {
            let registered = live.register(client, &outbox, Transport::WebSocket).park();
            let place = format!("{registered:?}");
            (ParkedClient::new(client.clone(), registered), place)
        };
        for original in clients {
            let (parked, place) = park(&original);
            let (revived, registered) = parked.revive();
            assert!(same(&revived, &original), "{revived:?} != {original:?}");
            assert_eq!(format!("{registered:?}"), place);
            live.leave(&revived.app, registered);
        }
        // Both sets `**` and no device or user_info: nothing out of line but the `sub`.
        let mut anonymous = client(None, None, PatternSet::all());
        anonymous.publish = PatternSet::all();
        let (parked, _) = park(&anonymous);
        assert!(parked.rare.is_none() && parked.grants.is_none());
        let (revived, registered) = parked.revive();
        assert!(same(&revived, &anonymous));
        live.leave(&revived.app, registered);
    }
}
