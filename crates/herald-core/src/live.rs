//! The registry of live client connections on this node, by app: what revocations reach
//! ([`crate::caches::Caches`] applies them on every node, from the bus). Every transport's
//! connection registers when its client is authorised and leaves when it closes
//! ([`Registration`]'s drop); nothing on the publish or fan-out path looks at it.
//!
//! An entry is 48 bytes: a weak reference to the connection's outbox (closing it with a
//! [`CloseReason`] is how a connection is told to end) and what a revocation can match of the
//! client ([`Who`]: fingerprints of its `sub` and device, and its token's [`TokenStamp`]). The
//! connection holds a [`Registration`] of 32 bytes to leave with. Entries are kept per app in
//! a few shards, each in pages ([`crate::paged`]), so connections opening and closing on
//! different threads rarely share a lock; a revocation walks the shards' entries of its app
//! (not every connection's).
//!
//! Registering and leaving are also where [`crate::lifecycle`]'s `connected` and
//! `disconnected` events come from, once the registry shares the hub's lifecycle registry
//! ([`LiveClients::set_lifecycle`]) and a kind of event that needs the connections tracked is
//! wanted ([`crate::lifecycle::Kinds::TRACKED`]; until then registering and leaving read one
//! atomic word for it and do nothing more): who the connection is and the reason its
//! transport states ([`Registration::set_disconnect_reason`]) are then kept beside the
//! registry ([`crate::lifecycle::tracked`]), not in its entries.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, Weak};

use parking_lot::Mutex;

use crate::auth::{Client, TokenStamp};
use crate::lifecycle::{DisconnectReason, Kinds, Lifecycle, Transport};
use crate::outbox::{CloseReason, Outbox};
use crate::paged::PagedVec;
use crate::revoked::fingerprint;
use crate::tenant::AppId;

/// Shards of the registry.
const SHARDS: usize = 16;

/// What a revocation can match of one live client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Who {
    /// [`fingerprint`] of the client's `sub` (0 for none).
    pub sub: u64,
    /// [`fingerprint`] of the client's device (0 for none).
    pub device: u64,
    /// The token the client presented.
    pub token: TokenStamp,
}

impl Who {
    /// What a revocation can match of `client`.
    pub fn of(client: &Client) -> Who {
        Who {
            sub: if client.sub.is_empty() {
                0
            } else {
                fingerprint(&client.sub)
            },
            device: client.device.as_deref().map_or(0, fingerprint),
            token: client.token,
        }
    }
}

/// Which live clients of an app a disconnect names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Every connection of the app.
    All,
    /// Connections whose token has this `sub`.
    Sub(String),
    /// Connections whose token names this device.
    Device(String),
    /// Connections whose token has this `jti`.
    Jti(String),
    /// Connections whose token was issued before this time (seconds since the Unix epoch), or
    /// has no `iat`. Anonymous connections presented no token and are not matched.
    IssuedBefore(u64),
}

impl Target {
    /// Whether a client matches.
    pub fn matches(&self, who: &Who) -> bool {
        let present = who.token.secret != 0;
        match self {
            Target::All => true,
            Target::Sub(sub) => who.sub != 0 && who.sub == fingerprint(sub),
            Target::Device(device) => who.device != 0 && who.device == fingerprint(device),
            Target::Jti(jti) => who.token.jti != 0 && who.token.jti == fingerprint(jti),
            Target::IssuedBefore(t) => present && who.token.iat < *t,
        }
    }
}

struct Entry {
    outbox: Weak<Outbox>,
    who: Who,
}

/// An app's entries in one shard, by slot number; paged, so their room stays close to the
/// connections they hold (a doubling `Vec` held up to twice that, [`crate::paged`]).
#[derive(Default)]
struct AppSlots {
    slots: PagedVec<Option<Entry>>,
    free: Vec<u32>,
}

/// Every live client connection of this node, by app.
pub struct LiveClients {
    shards: Box<[Mutex<HashMap<AppId, AppSlots>>]>,
    next: AtomicUsize,
    /// Told of connections registering and leaving ([`LiveClients::set_lifecycle`]).
    lifecycle: OnceLock<Arc<Lifecycle>>,
}

impl Default for LiveClients {
    fn default() -> Self {
        LiveClients {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            next: AtomicUsize::new(0),
            lifecycle: OnceLock::new(),
        }
    }
}

/// A connection's place in the registry; dropping it leaves.
pub struct Registration {
    live: Arc<LiveClients>,
    app: AppId,
    shard: u32,
    slot: u32,
}

impl std::fmt::Debug for Registration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registration")
            .field("app", &self.app)
            .finish_non_exhaustive()
    }
}

/// A slot number no registration has: a [`Registration`] holding it has been parked and
/// leaves nothing when dropped.
const PARKED: u32 = u32::MAX;

impl Drop for Registration {
    fn drop(&mut self) {
        if self.slot != PARKED {
            self.live.leave(&self.app, self.parked_form());
        }
    }
}

impl Registration {
    fn parked_form(&self) -> ParkedRegistration {
        ParkedRegistration::new(self.shard, self.slot)
    }

    /// Says why the connection is about to end, for its `disconnected` event (see
    /// [`crate::lifecycle`]): a transport calls this when it ends a connection for a reason
    /// its outbox does not know (a keep-alive timeout, a shutdown it heard of directly). The
    /// first reason stated stays; a reason the outbox was closed with comes before it.
    pub fn set_disconnect_reason(&self, reason: DisconnectReason) {
        self.live
            .set_disconnect_reason(&self.app, &self.parked_form(), reason);
    }

    /// The connection (over `transport`) authorised again (a token refresh) as `client`, of the same app: the
    /// entry keeps its place and matches what a revocation can match of the new token from
    /// now on (one swap under the shard's lock, so no revocation falls between the two).
    pub fn refresh(&mut self, client: &Client, transport: Transport) {
        debug_assert_eq!(client.app, self.app);
        let mut shard = self.live.shards[self.shard as usize].lock();
        let entry = shard
            .get_mut(&self.app)
            .and_then(|slots| slots.slots.get_mut(self.slot as usize))
            .and_then(Option::as_mut);
        let Some(entry) = entry else {
            return;
        };
        entry.who = Who::of(client);
        let outbox = entry.outbox.upgrade();
        drop(shard);
        if let (Some(lifecycle), Some(outbox)) = (self.live.listening(), outbox) {
            let place = (self.shard, self.slot);
            lifecycle.reauthorised(&outbox, place, client, transport);
        }
    }

    /// The registration in 4 bytes, for a connection parked without a task: the registry and
    /// the app are the connection's to keep meanwhile (the edge's registry, the client's
    /// app). The connection stays registered; it leaves with [`LiveClients::leave`] or comes
    /// back with [`ParkedRegistration::revive`].
    pub fn park(mut self) -> ParkedRegistration {
        let parked = self.parked_form();
        self.slot = PARKED;
        parked
    }
}

/// How many low bits of a [`ParkedRegistration`] are its slot; its shard is above them.
const PARKED_SLOT_BITS: u32 = 28;

const _: () = assert!(SHARDS <= 1 << (32 - PARKED_SLOT_BITS));

/// A [`Registration`] without its registry and app ([`Registration::park`]), in 4 bytes: its
/// shard in the top four bits and its slot below. Dropping it leaves nothing: its owner calls
/// [`LiveClients::leave`].
#[derive(Debug, PartialEq, Eq)]
#[must_use = "a parked registration is left with LiveClients::leave or revived"]
pub struct ParkedRegistration(u32);

impl ParkedRegistration {
    fn new(shard: u32, slot: u32) -> ParkedRegistration {
        ParkedRegistration((shard << PARKED_SLOT_BITS) | slot)
    }

    fn shard(&self) -> u32 {
        self.0 >> PARKED_SLOT_BITS
    }

    fn slot(&self) -> u32 {
        self.0 & ((1 << PARKED_SLOT_BITS) - 1)
    }

    /// The registration again, in `live` (the registry it was made in) for `app` (the app it
    /// was made for).
    pub fn revive(self, live: Arc<LiveClients>, app: AppId) -> Registration {
        Registration {
            live,
            app,
            shard: self.shard(),
            slot: self.slot(),
        }
    }
}

impl LiveClients {
    /// An empty registry.
    pub fn new() -> Arc<LiveClients> {
        Arc::new(LiveClients::default())
    }

    /// Shares `lifecycle` (the hub's, [`crate::hub::Hub::lifecycle`]): connections registering
    /// and leaving are told to it while a kind of event that tracks them is wanted. `false` if
    /// one was already set.
    pub fn set_lifecycle(&self, lifecycle: Arc<Lifecycle>) -> bool {
        self.lifecycle.set(lifecycle).is_ok()
    }

    /// The lifecycle registry, if set and a kind of event that tracks connections is wanted
    /// ([`Kinds::TRACKED`]; one relaxed load once set).
    fn listening(&self) -> Option<&Arc<Lifecycle>> {
        self.lifecycle.get().filter(|l| l.emits(Kinds::TRACKED))
    }

    /// Registers a connection of `client` writing to `outbox`, which came over `transport`.
    pub fn register(
        self: &Arc<Self>,
        client: &Client,
        outbox: &Arc<Outbox>,
        transport: Transport,
    ) -> Registration {
        let shard = self.next.fetch_add(1, Ordering::Relaxed) % SHARDS;
        let entry = Some(Entry {
            outbox: Arc::downgrade(outbox),
            who: Who::of(client),
        });
        let mut apps = self.shards[shard].lock();
        let app = apps.entry(client.app.clone()).or_default();
        let slot = match app.free.pop() {
            Some(slot) => {
                app.slots[slot as usize] = entry;
                slot
            }
            None => u32::try_from(app.slots.push(entry))
                .ok()
                .filter(|slot| *slot < 1 << PARKED_SLOT_BITS)
                .expect("fewer than 2^28 connections of one app per shard"),
        };
        drop(apps);
        if let Some(lifecycle) = self.listening() {
            lifecycle.connected(client, outbox, transport, (shard as u32, slot));
        }
        Registration {
            live: self.clone(),
            app: client.app.clone(),
            shard: shard as u32,
            slot,
        }
    }

    /// Leaves the place a parked registration of `app` held.
    pub fn leave(&self, app: &AppId, place: ParkedRegistration) {
        let (shard_no, slot) = (place.shard(), place.slot());
        let mut shard = self.shards[shard_no as usize].lock();
        let Some(slots) = shard.get_mut(app) else {
            return;
        };
        let mut left = None;
        if let Some(entry) = slots.slots.get_mut(slot as usize) {
            left = entry.take();
            if left.is_some() {
                slots.free.push(slot);
            }
        }
        if slots.free.len() == slots.slots.len() {
            shard.remove(app);
        }
        drop(shard);
        if let (Some(lifecycle), Some(left)) = (self.listening(), left) {
            lifecycle.disconnected(&left.outbox, (shard_no, slot));
        }
    }

    /// The token the connection registered at `place` of `app` presented (the one a refresh
    /// last gave it: what revocations match), if it is still registered. A parked
    /// connection's session does not keep its own copy ([`Registration::park`]).
    pub fn token(&self, app: &AppId, place: &ParkedRegistration) -> Option<TokenStamp> {
        self.shards[place.shard() as usize]
            .lock()
            .get(app)
            .and_then(|slots| slots.slots.get(place.slot() as usize))
            .and_then(|e| e.as_ref().map(|e| e.who.token))
    }

    /// Says why the connection parked at `place` of `app` is about to end (see
    /// [`Registration::set_disconnect_reason`]).
    pub fn set_disconnect_reason(
        &self,
        app: &AppId,
        place: &ParkedRegistration,
        reason: DisconnectReason,
    ) {
        let Some(lifecycle) = self.listening() else {
            return;
        };
        let outbox = self.shards[place.shard() as usize]
            .lock()
            .get(app)
            .and_then(|slots| slots.slots.get(place.slot() as usize))
            .and_then(|e| e.as_ref().map(|e| e.outbox.clone()));
        if let Some(outbox) = outbox {
            lifecycle.state_reason(&outbox, (place.shard(), place.slot()), reason);
        }
    }

    /// Closes every connection of `app` whose client `close` gives a reason for, with that
    /// reason; returns how many this call closed (connections already closing are not counted
    /// again).
    pub fn close_where(&self, app: &AppId, close: impl Fn(&Who) -> Option<CloseReason>) -> usize {
        let mut closed = 0;
        for shard in self.shards.iter() {
            // Picked under the lock, closed outside it: closing wakes the connection's task.
            let picked: Vec<(Arc<Outbox>, CloseReason)> = match shard.lock().get(app) {
                Some(slots) => slots
                    .slots
                    .iter()
                    .flatten()
                    .filter_map(|e| close(&e.who).and_then(|r| Some((e.outbox.upgrade()?, r))))
                    .collect(),
                None => continue,
            };
            closed += picked.iter().filter(|(o, r)| o.close(*r)).count();
        }
        closed
    }

    /// Closes every connection `target` names, with `reason`; returns how many.
    pub fn disconnect(&self, app: &AppId, target: &Target, reason: CloseReason) -> usize {
        self.close_where(app, |who| target.matches(who).then_some(reason))
    }

    /// The apps with live connections on this node.
    pub fn apps(&self) -> Vec<AppId> {
        let mut apps: Vec<AppId> = self
            .shards
            .iter()
            .flat_map(|s| s.lock().keys().cloned().collect::<Vec<_>>())
            .collect();
        apps.sort();
        apps.dedup();
        apps
    }

    /// Live connections of `app` registered on this node.
    pub fn count(&self, app: &AppId) -> usize {
        self.shards
            .iter()
            .map(|s| {
                s.lock()
                    .get(app)
                    .map_or(0, |a| a.slots.len() - a.free.len())
            })
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(app: &str, sub: &str, device: Option<&str>, token: TokenStamp) -> Client {
        Client {
            app: AppId::parse(app).unwrap(),
            sub: sub.into(),
            device: device.map(str::to_owned),
            token,
            ..Client::anonymous()
        }
    }

    #[test]
    fn revocations_reach_the_matching_connections_of_their_app_only() {
        let live = LiveClients::new();
        let stamp = |jti: &str, iat| TokenStamp {
            jti: fingerprint(jti),
            iat,
            secret: 7,
        };
        let shop = AppId::parse("shop").unwrap();
        let clients = [
            client("shop", "alice", None, stamp("j1", 100)),
            client("shop", "alice", Some("phone"), stamp("j2", 200)),
            client("shop", "bob", None, stamp("j3", 300)),
            client("other", "alice", None, stamp("j1", 100)),
        ];
        let boxes: Vec<_> = clients.iter().map(|_| Outbox::new(1024)).collect();
        let regs: Vec<_> = clients
            .iter()
            .zip(&boxes)
            .map(|(c, o)| live.register(c, o, Transport::WebSocket))
            .collect();
        assert_eq!(live.count(&shop), 3);
        let reason = CloseReason::Revoked;
        assert_eq!(
            live.disconnect(&shop, &Target::Device("phone".into()), reason),
            1
        );
        assert_eq!(
            live.disconnect(&shop, &Target::Sub("alice".into()), reason),
            1
        );
        assert_eq!(live.disconnect(&shop, &Target::Jti("j3".into()), reason), 1);
        assert_eq!(
            live.disconnect(&shop, &Target::All, reason),
            0,
            "all closed"
        );
        assert_eq!(boxes[3].take().1, None, "another app's client");
        assert_eq!(
            live.disconnect(
                &AppId::parse("other").unwrap(),
                &Target::IssuedBefore(101),
                reason
            ),
            1
        );
        assert_eq!(boxes[0].take().1, Some(CloseReason::Revoked));
        drop(regs);
        assert_eq!(live.count(&shop), 0);
        assert!(live.apps().is_empty(), "empty apps are forgotten");
        // Anonymous clients are reached only by a disconnect of all.
        let anonymous = Outbox::new(1024);
        let _reg = live.register(&Client::anonymous(), &anonymous, Transport::Sse);
        let default = AppId::default_app();
        assert_eq!(
            live.disconnect(&default, &Target::IssuedBefore(u64::MAX), reason),
            0
        );
        assert_eq!(
            live.disconnect(&default, &Target::Sub(String::new()), reason),
            0
        );
        assert_eq!(live.disconnect(&default, &Target::All, reason), 1);
    }

    #[test]
    fn a_parked_registration_is_still_reached_and_leaves_once() {
        let live = LiveClients::new();
        let shop = AppId::parse("shop").unwrap();
        let alice = client("shop", "alice", None, TokenStamp::default());
        let outbox = Outbox::new(1024);
        let parked = live.register(&alice, &outbox, Transport::WebSocket).park();
        assert_eq!(live.count(&shop), 1, "parking does not leave");
        let revived = parked.revive(live.clone(), shop.clone());
        let reason = CloseReason::Revoked;
        assert_eq!(
            live.disconnect(&shop, &Target::Sub("alice".into()), reason),
            1
        );
        live.leave(&shop, revived.park());
        assert_eq!(live.count(&shop), 0);
        assert!(live.apps().is_empty());
    }

    #[test]
    fn a_parked_registration_gives_back_its_place_and_token() {
        let live = LiveClients::new();
        let shop = AppId::parse("shop").unwrap();
        let stamp = |jti: &str, iat| TokenStamp {
            jti: fingerprint(jti),
            iat,
            secret: 3,
        };
        let outboxes: Vec<_> = (0..40).map(|_| Outbox::new(1024)).collect();
        // Enough registrations to use every shard, some more than once.
        let parked: Vec<_> = outboxes
            .iter()
            .enumerate()
            .map(|(i, outbox)| {
                let token = stamp(&format!("j{i}"), i as u64);
                let client = client("shop", "alice", None, token);
                (
                    live.register(&client, outbox, Transport::Mqtt).park(),
                    token,
                )
            })
            .collect();
        for (place, token) in &parked {
            assert_eq!(live.token(&shop, place), Some(*token), "{place:?}");
            assert_eq!(live.token(&AppId::default_app(), place), None);
        }
        // A refresh's token is the one given back.
        let (first, _) = parked.into_iter().next().expect("registered");
        let mut revived = first.revive(live.clone(), shop.clone());
        let refreshed = client("shop", "alice", None, stamp("fresh", 9));
        revived.refresh(&refreshed, Transport::Mqtt);
        let place = revived.park();
        assert_eq!(live.token(&shop, &place), Some(refreshed.token));
        live.leave(&shop, place);
        assert_eq!(live.count(&shop), 39);
    }

    #[test]
    fn an_entry_stays_small() {
        assert_eq!(size_of::<Option<Entry>>(), 48);
        // The app's id is one word (two until session 37).
        assert_eq!(size_of::<Registration>(), 24);
        // A parked connection's session keeps it: 4 bytes (8 while shard and slot were a
        // `u32` each).
        assert_eq!(size_of::<ParkedRegistration>(), 4);
    }
}
