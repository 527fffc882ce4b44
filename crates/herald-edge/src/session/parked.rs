//! A client session in the compact form a parked connection keeps ([`ParkedSession`]): what
//! the session must not forget while the connection waits without a task, and nothing it can
//! rebuild on revival. Next to [`ClientSession`](super::ClientSession) it drops the command
//! budget (a connection parks only with a fresh one, [`ClientSession::may_park`]), keeps the
//! client's strings boxed to their length, its live-client registration as two numbers and
//! its one usual subscription inline.
//!
//! [`ClientSession::may_park`]: super::ClientSession::may_park

use std::sync::Arc;

use herald_core::auth::{Client, TokenStamp};
use herald_core::live::ParkedRegistration;
use herald_core::outbox::Outbox;
use herald_core::pattern::PatternSet;
use herald_core::tenant::AppId;
use herald_core::usage::ConnectionGuard;

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

/// The authorised client of a parked session, with its place among the live clients.
pub(super) struct ParkedClient {
    app: AppId,
    device: Option<Box<str>>,
    sub: Box<str>,
    /// The token's expiry, 0 for none (no valid token expires at 0): eight bytes, not
    /// sixteen, which pays for `user_info`'s pointer.
    expires: u64,
    subscribe: PatternSet,
    publish: PatternSet,
    token: TokenStamp,
    /// The token's `user_info` claim, boxed once more: one thin pointer in every parked
    /// client, an allocation only in those that have one.
    #[allow(clippy::box_collection, clippy::redundant_allocation)]
    user_info: Option<Box<Box<str>>>,
    registered: ParkedRegistration,
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
        ParkedClient {
            app,
            device: device.map(String::into_boxed_str),
            sub: sub.into_boxed_str(),
            expires: expires.unwrap_or(0),
            subscribe,
            publish,
            token,
            user_info: user_info.map(Box::new),
            registered,
        }
    }

    /// The client again, and where it is registered.
    pub(super) fn revive(self) -> (Client, ParkedRegistration) {
        let ParkedClient {
            app,
            device,
            sub,
            expires,
            subscribe,
            publish,
            token,
            user_info,
            registered,
        } = self;
        let client = Client {
            app,
            device: device.map(String::from),
            sub: String::from(sub),
            expires: (expires != 0).then_some(expires),
            subscribe,
            publish,
            token,
            user_info: user_info.map(|u| *u),
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
    use super::*;

    #[test]
    fn a_parked_session_is_smaller_than_a_live_one() {
        // Two Arcs, the client with its registration, the usage guard and one subscription
        // inline: 176 bytes, so a parked WebSocket's record with its socket, roster place and
        // flag fits jemalloc's 192-byte class.
        assert_eq!(size_of::<ParkedSet>(), 24);
        assert_eq!(size_of::<Option<ParkedClient>>(), 128);
        assert_eq!(size_of::<ParkedSession>(), 176);
    }
}
