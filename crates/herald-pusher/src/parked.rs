//! A Pusher session in the compact form a parked connection keeps ([`ParkedPusherSession`],
//! stored in `crate::park`'s record): what it must not forget while it waits without a task,
//! and nothing it can rebuild on revival.
//!
//! Next to [`PusherSession`] it keeps the client session in its parked form
//! ([`ParkedSession`]: the client's strings boxed to their length, its live-client
//! registration as two numbers, no command budget, so a connection parks only with a fresh
//! one, as a WebSocket does); the socket id as its number alone (its place among the node's
//! Pusher connections: the string is made again on revival); and what only some connections
//! have (presence memberships, a sign-in and its watchlist, positioned channels, a
//! client-event window still counting) in one box, [`Rare`], allocated only for a connection
//! that has any of it. The keep-alive state ([`Liveness`]), the credentials and the endpoint
//! are kept as they are, so a revived connection carries on exactly where it parked.

use std::sync::Arc;
use std::time::{Duration, Instant};

use herald_core::lifecycle::Transport;
use herald_core::outbox::Outbox;
use herald_core::ChannelName;
use herald_edge::session::{ClientSession, ParkedSession};

use crate::connections::Registered;
use crate::credentials::cache::OpenCredentials;
use crate::keepalive::Liveness;
use crate::resume::Positioned;
use crate::serve::{socket_id, PusherClients};
use crate::session::PusherSession;
use crate::settings::ClientSettings;
use crate::watchlist::Watchlist;

/// A parked Pusher connection's session (see the module docs).
pub(crate) struct ParkedPusherSession {
    session: ParkedSession,
    clients: Arc<PusherClients>,
    credentials: Arc<OpenCredentials>,
    registered: Registered,
    pub(crate) liveness: Liveness,
    rare: Option<Box<Rare>>,
}

/// What only some parked connections have: one box, or nothing.
struct Rare {
    events_window: Option<(Instant, u32)>,
    members: Vec<(ChannelName, Box<str>)>,
    user: Option<(Box<str>, ChannelName)>,
    watchlist: Option<Box<Watchlist>>,
    positioned: Positioned,
}

impl PusherSession {
    /// The session in its parked form. Call it only on a session that may park
    /// ([`ClientSession::may_park`]).
    pub(crate) fn park(self) -> ParkedPusherSession {
        let PusherSession {
            session,
            // Made again from the registration's number on revival.
            socket_id: _,
            credentials,
            clients,
            registered,
            liveness,
            events_window,
            mut members,
            user,
            watchlist,
            positioned,
        } = self;
        let events_window = still_counting(events_window, Instant::now());
        let rare = (events_window.is_some()
            || !members.is_empty()
            || user.is_some()
            || watchlist.is_some()
            || positioned.any())
        .then(|| {
            members.shrink_to_fit();
            Box::new(Rare {
                events_window,
                members,
                user,
                watchlist,
                positioned,
            })
        });
        ParkedPusherSession {
            session: session.park(),
            clients,
            credentials,
            registered,
            liveness,
            rare,
        }
    }

    /// The session of a parked connection again, with a fresh command budget.
    pub(crate) fn revive(parked: ParkedPusherSession) -> PusherSession {
        let ParkedPusherSession {
            session,
            clients,
            credentials,
            registered,
            liveness,
            rare,
        } = parked;
        let Rare {
            events_window,
            members,
            user,
            watchlist,
            positioned,
        } = rare.map_or_else(Rare::none, |rare| *rare);
        PusherSession {
            session: ClientSession::revive_for(Transport::Pusher, session),
            socket_id: socket_id(registered.id()).into_boxed_str(),
            credentials,
            clients,
            registered,
            liveness,
            events_window,
            members,
            user,
            watchlist,
            positioned,
        }
    }
}

/// The client-event window at `now`, if it still counts: one a second old or more counts
/// nothing any more (the next event starts a new one, as for a connection that never parked).
fn still_counting(window: Option<(Instant, u32)>, now: Instant) -> Option<(Instant, u32)> {
    window.filter(|(started, _)| now.duration_since(*started) < Duration::from_secs(1))
}

impl Rare {
    fn none() -> Rare {
        Rare {
            events_window: None,
            members: Vec::new(),
            user: None,
            watchlist: None,
            positioned: Positioned::default(),
        }
    }
}

impl ParkedPusherSession {
    /// The connection's outbound queue.
    pub(crate) fn outbox(&self) -> &Arc<Outbox> {
        self.session.outbox()
    }

    /// Keep-alive settings.
    pub(crate) fn settings(&self) -> &ClientSettings {
        &self.clients.settings
    }

    /// The server's transports.
    pub(crate) fn edge(&self) -> &Arc<herald_edge::Edge> {
        self.session.edge()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_event_window_is_kept_while_it_counts() {
        let started = Instant::now();
        let window = Some((started, 3));
        let later = |ms| started + Duration::from_millis(ms);
        assert_eq!(still_counting(window, later(999)), window);
        assert_eq!(still_counting(window, later(1000)), None);
        assert_eq!(still_counting(None, later(10)), None);
    }

    #[test]
    fn sizes_of_the_parked_session() {
        // The parked client session, two Arcs, the registration (an Arc and the socket
        // number), the keep-alive instant and one pointer for the rare parts.
        println!(
            "ParkedSession {}, Registered {}, Liveness {}, Rare {}, PusherSession {}",
            size_of::<ParkedSession>(),
            size_of::<Registered>(),
            size_of::<Liveness>(),
            size_of::<Rare>(),
            size_of::<PusherSession>(),
        );
        assert_eq!(
            size_of::<ParkedPusherSession>(),
            size_of::<ParkedSession>() + 48
        );
    }
}
