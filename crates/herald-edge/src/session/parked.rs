//! A client session in the compact form a parked connection keeps ([`ParkedSession`]): what
//! the session must not forget while the connection waits without a task, and nothing it can
//! rebuild on revival. Next to [`ClientSession`](super::ClientSession) it drops the command
//! budget (a connection parks only with a fresh one, [`ClientSession::may_park`]), keeps the
//! client's `sub` boxed to its length, its device, `user_info` and pattern sets behind one
//! pointer and only when it has any of them (the sets when they are not both `**`), its
//! live-client registration in four bytes, its token's expiry in four, and its one usual
//! subscription inline. It keeps no copy of the token's stamp (`jti`, `iat`, secret): the
//! live-client registry's entry holds it for revocations, and revival reads it from there
//! ([`LiveClients::token`]).
//!
//! [`LiveClients::token`]: herald_core::live::LiveClients::token
//!
//! [`ClientSession::may_park`]: super::ClientSession::may_park

use std::sync::Arc;

use herald_core::auth::Client;
use herald_core::live::{LiveClients, ParkedRegistration};
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

/// The authorised client of a parked session, with its place among the live clients: 40
/// bytes. What most clients lack (a device, `user_info`, grants other than `**`, an expiry
/// past 2106) is behind one pointer, allocated only when there is any. Its token's stamp is
/// the live-client registry's ([`ParkedClient::revive`]).
pub(super) struct ParkedClient {
    app: AppId,
    sub: Box<str>,
    /// The device a device token names, the token's `user_info` claim, an expiry too late
    /// for [`ParkedClient::expires`], and the subscribe and publish sets when they are not
    /// both `**` (what an anonymous client has and what many tokens grant), if any is there:
    /// one pointer for all of them (it was one for the claims and one for the sets).
    rare: Option<Box<RareClaims>>,
    /// The token's expiry in seconds since the Unix epoch, 0 for none (no valid token expires
    /// at 0) or for one past `u32::MAX` (then in `rare`): four bytes, not sixteen.
    /// [`NO_EXPIRY_NO_GRANTS`] for none and both sets empty.
    expires: u32,
    registered: ParkedRegistration,
}

/// [`ParkedClient::expires`] of a client without an expiry whose two sets are both empty: a
/// client its protocol authorises by its own rule (Pusher's, granted one channel at a time),
/// which then needs no box for its grants. No live client's token expired at second 1.
const NO_EXPIRY_NO_GRANTS: u32 = 1;

/// The parts of a parked client most clients do not have: 64 bytes (jemalloc's 64-byte
/// class), so that a client with any of them holds no more than it did while its claims and
/// its grants were behind a pointer each (a 48-byte box of claims, a 32-byte box of grants).
struct RareClaims {
    /// The subscribe and publish sets, both `**` (which allocates nothing) when the client's
    /// are.
    grants: Grants,
    /// The device's id and then the `user_info` claim, in one string ([`RareClaims::device`],
    /// [`RareClaims::user_info`]).
    texts: Box<str>,
    /// The token's expiry when it is past `u32::MAX` seconds (February 2106), 0 for none.
    far_expiry: u64,
    /// Where the device's id ends in `texts`.
    device_len: u32,
    /// [`RareClaims::DEVICE`] and [`RareClaims::USER_INFO`]: which of the two the client has.
    has: u8,
}

impl RareClaims {
    const DEVICE: u8 = 1;
    const USER_INFO: u8 = 2;

    fn new(
        grants: Grants,
        device: Option<String>,
        user_info: Option<Box<str>>,
        far_expiry: Option<u64>,
    ) -> RareClaims {
        let mut has = 0;
        let mut texts = String::new();
        if let Some(device) = &device {
            has |= RareClaims::DEVICE;
            texts.push_str(device);
        }
        let device_len = texts.len();
        if let Some(user_info) = &user_info {
            has |= RareClaims::USER_INFO;
            texts.push_str(user_info);
        }
        RareClaims {
            grants,
            texts: texts.into_boxed_str(),
            far_expiry: far_expiry.unwrap_or(0),
            // A device id is a short string; one longer than 4 GiB is not a device's.
            device_len: u32::try_from(device_len).unwrap_or(u32::MAX),
            has,
        }
    }

    /// Where `texts` splits into the device's id and the `user_info` claim.
    fn split(&self) -> usize {
        usize::try_from(self.device_len).map_or(0, |len| len.min(self.texts.len()))
    }

    fn device(&self) -> Option<&str> {
        let (device, _) = self.texts.split_at_checked(self.split())?;
        (self.has & RareClaims::DEVICE != 0).then_some(device)
    }

    fn user_info(&self) -> Option<&str> {
        let (_, user_info) = self.texts.split_at_checked(self.split())?;
        (self.has & RareClaims::USER_INFO != 0).then_some(user_info)
    }

    fn far_expiry(&self) -> Option<u64> {
        (self.far_expiry != 0).then_some(self.far_expiry)
    }
}

/// A parked client's subscribe and publish sets.
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
            // The registry's entry keeps the token's stamp (`Who`): revival reads it back.
            token: _,
            user_info,
        } = client;
        let every = PatternSet::all();
        let (expires, far_expiry) = match expires.map(u32::try_from) {
            None => (0, None),
            Some(Ok(expires)) if expires != NO_EXPIRY_NO_GRANTS => (expires, None),
            // Past `u32::MAX`, or second 1 (never a live client's): kept in the box.
            Some(_) => (0, expires),
        };
        let none = PatternSet::default();
        // A client its protocol authorised by its own rule (Pusher's: no expiry, both sets
        // empty) needs no box for its grants.
        let no_grants =
            expires == 0 && far_expiry.is_none() && subscribe == none && publish == none;
        let expires = if no_grants {
            NO_EXPIRY_NO_GRANTS
        } else {
            expires
        };
        let rare = device.is_some()
            || user_info.is_some()
            || far_expiry.is_some()
            || (!no_grants && (subscribe != every || publish != every));
        ParkedClient {
            app,
            sub: sub.into_boxed_str(),
            rare: rare.then(|| {
                let grants = Grants { subscribe, publish };
                Box::new(RareClaims::new(grants, device, user_info, far_expiry))
            }),
            expires,
            registered,
        }
    }

    /// When the token expires (seconds since the Unix epoch), if it does.
    fn expires(&self) -> Option<u64> {
        match self.expires {
            0 | NO_EXPIRY_NO_GRANTS => self.rare.as_ref().and_then(|rare| rare.far_expiry()),
            expires => Some(u64::from(expires)),
        }
    }

    /// The client again, with the token's stamp its entry in `live` (the registry it was
    /// registered in) holds, and where it is registered.
    pub(super) fn revive(self, live: &LiveClients) -> (Client, ParkedRegistration) {
        let expires = self.expires();
        let no_grants = self.expires == NO_EXPIRY_NO_GRANTS;
        let ParkedClient {
            app,
            sub,
            rare,
            expires: _,
            registered,
        } = self;
        // The entry is there until the registration leaves, which only its owner does; a
        // blank stamp (an anonymous client's) is not reached.
        let token = live.token(&app, &registered).unwrap_or_default();
        let (device, user_info, Grants { subscribe, publish }) = match rare {
            Some(rare) => (
                rare.device().map(String::from),
                rare.user_info().map(Box::from),
                rare.grants,
            ),
            None => {
                let grants = if no_grants {
                    Grants {
                        subscribe: PatternSet::default(),
                        publish: PatternSet::default(),
                    }
                } else {
                    Grants {
                        subscribe: PatternSet::all(),
                        publish: PatternSet::all(),
                    }
                };
                (None, None, grants)
            }
        };
        let client = Client {
            app,
            device,
            sub: String::from(sub),
            expires,
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
        self.client.as_ref().and_then(ParkedClient::expires)
    }

    /// The authorised client again, if there is one, and where it is registered.
    pub(super) fn take_client(&mut self) -> Option<(Client, ParkedRegistration)> {
        let client = self.client.take()?;
        Some(client.revive(&self.edge.live))
    }
}

impl Drop for ParkedSession {
    fn drop(&mut self) {
        for (channel, sub) in self.subscriptions.take() {
            self.edge.engine.unsubscribe(&channel, &sub);
        }
        if let Some(client) = self.client.take() {
            self.edge.live.leave(&client.app, client.registered);
        }
    }
}

#[cfg(test)]
mod tests {
    use herald_core::auth::TokenStamp;
    use herald_core::lifecycle::Transport;

    use super::*;

    #[test]
    fn a_parked_session_is_smaller_than_a_live_one() {
        // Two Arcs, the client with its registration, the usage guard and one subscription
        // inline: 88 bytes, so a parked WebSocket's record with its socket, roster place and
        // flag fits jemalloc's 112-byte class, an MQTT connection's its 128-byte class. It was
        // 104 B while the client's app id was two words and its rare claims and its grants
        // were behind a pointer each, 136 B while the client kept its token's stamp (24 B, the registry's entry has it), its
        // expiry in 8 bytes and its registration in 8, and 176 B while it kept its device,
        // `user_info` and both pattern sets inline.
        assert_eq!(size_of::<ParkedSet>(), 24);
        assert_eq!(size_of::<Option<ParkedClient>>(), 40);
        // What most clients lack, in one box of jemalloc's 64-byte class.
        assert_eq!(size_of::<RareClaims>(), 64);
        assert_eq!(size_of::<ParkedSession>(), 88);
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
        let mut clients = vec![
            client(None, None, PatternSet::all()),
            client(Some("dev-1"), None, PatternSet::all()),
            client(None, Some(r#"{"name":"Ann"}"#), PatternSet::new(&["news"])),
            client(Some("dev-2"), Some(""), PatternSet::new(&["a", "b/**"])),
            // The device's id and `user_info` share one string: empty, multibyte.
            client(Some(""), Some("x"), PatternSet::all()),
            client(Some("dév-3"), Some(r#"{"ü":1}"#), PatternSet::all()),
        ];
        // Expiries: none, the last second four bytes hold, the first one past them, the last.
        let u32_max = u64::from(u32::MAX);
        for (i, expires) in [None, Some(u32_max), Some(u32_max + 1), Some(u64::MAX)]
            .into_iter()
            .enumerate()
        {
            let mut expiring = client(None, None, PatternSet::all());
            expiring.expires = expires;
            expiring.token = TokenStamp {
                jti: 10 + i as u64,
                iat: u64::MAX - i as u64,
                secret: u64::MAX,
            };
            clients.push(expiring);
        }
        let live = LiveClients::new();
        let outbox = Outbox::new(1024);
        let park = |client: &Client| {
            let registered = live.register(client, &outbox, Transport::WebSocket).park();
            let place = format!("{registered:?}");
            (ParkedClient::new(client.clone(), registered), place)
        };
        for original in clients {
            let (parked, place) = park(&original);
            assert_eq!(parked.expires(), original.expires);
            let far = original.expires.is_some_and(|e| e > u32_max);
            assert_eq!(
                parked
                    .rare
                    .as_ref()
                    .is_some_and(|r| r.far_expiry().is_some()),
                far
            );
            let (revived, registered) = parked.revive(&live);
            assert!(same(&revived, &original), "{revived:?} != {original:?}");
            assert_eq!(format!("{registered:?}"), place);
            live.leave(&revived.app, registered);
        }
        // Both sets `**` and no device, user_info or far expiry: nothing out of line but the
        // `sub`.
        let mut anonymous = client(None, None, PatternSet::all());
        anonymous.publish = PatternSet::all();
        let (parked, _) = park(&anonymous);
        assert!(parked.rare.is_none());
        let (revived, registered) = parked.revive(&live);
        assert!(same(&revived, &anonymous));
        live.leave(&revived.app, registered);
        // No expiry and both sets empty (a Pusher connection's client): nothing out of line.
        let mut granted = client(None, None, PatternSet::default());
        (granted.publish, granted.expires) = (PatternSet::default(), None);
        let (parked, _) = park(&granted);
        assert!(parked.rare.is_none() && parked.expires().is_none());
        let (revived, registered) = parked.revive(&live);
        assert!(same(&revived, &granted), "{revived:?}");
        live.leave(&revived.app, registered);
        // The same with an expiry, and an expiry at second 1 (no live client's): exact.
        for expires in [Some(1), Some(2), Some(1_900_000_000)] {
            granted.expires = expires;
            let (parked, _) = park(&granted);
            let (revived, registered) = parked.revive(&live);
            assert!(same(&revived, &granted), "{revived:?}");
            live.leave(&revived.app, registered);
        }
        // Only grants other than `**`: out of line with nothing else.
        let (parked, _) = park(&client(None, None, PatternSet::new(&["news"])));
        assert!(parked.rare.as_ref().is_some_and(|r| r.texts.is_empty()
            && r.device().is_none()
            && r.user_info().is_none()
            && r.far_expiry().is_none()));
        let (revived, registered) = parked.revive(&live);
        assert_eq!(revived.subscribe, PatternSet::new(&["news"]));
        live.leave(&revived.app, registered);
    }
}
