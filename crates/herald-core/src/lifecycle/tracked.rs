//! The client connections a [`super::Lifecycle`] reports on, kept only while a kind of event
//! that needs them is wanted ([`super::Kinds::TRACKED`]; forgotten when none is any more):
//! who each one is ([`Connection`]), found by its outbox (the hub knows a subscriber by its
//! outbox, so a subscription's events name their connection), with the reason its transport
//! stated for ending it. The live-client registry's entries stay as small as they are; this is
//! the room lifecycle events cost, and only when they are wanted.
//!
//! It also counts each user's connections (by app and `sub`), to say when a user comes online
//! (its first) and goes offline (its last), while users' events are wanted (a connection
//! remembers whether it was counted, so a change of the kinds wanted never unbalances a
//! count): told while the count is held
//! (`Tracked::count_user`), so a user's transitions reach listeners in the order its count
//! made them, even as one connection leaves on one thread while the next arrives on another.
//!
//! An entry is keyed by its outbox's address and remembers the registry place it was made
//! for: a place left removes only its own entry, so an outbox freed and another allocated at
//! the same address never takes over a stranger's record.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock, RwLockReadGuard};

use super::{Connection, ConnectionId, DisconnectReason, Transport};
use crate::auth::Client;
use crate::tenant::AppId;

const SHARDS: usize = 16;

struct Entry {
    connection: Arc<Connection>,
    place: (u32, u32),
    stated: Option<DisconnectReason>,
    /// Whether its user's count includes it.
    counted: bool,
}

/// A tracked connection let go ([`Tracked::remove`]).
pub(super) struct Gone {
    /// Who it was.
    pub(super) connection: Arc<Connection>,
    /// The reason its transport stated for ending it, if any.
    pub(super) stated: Option<DisconnectReason>,
    /// Whether its user's count includes it (to be counted down).
    pub(super) counted: bool,
}

/// The tracked connections, by outbox address, in a few shards.
pub(super) struct Tracked {
    node: u64,
    next: AtomicU64,
    shards: Box<[Mutex<HashMap<usize, Entry>>]>,
    /// Each user's connections, by app and `sub`.
    users: Mutex<HashMap<(AppId, Box<str>), usize>>,
    /// Held (shared) while a connection is tracked, counted or let go, and (alone) while the
    /// tracked connections are forgotten ([`Tracked::clear`]).
    gate: RwLock<()>,
}

/// Whether `connection` names the same client as `client` (its `sub`, device and app).
pub(super) fn same_client(connection: &Connection, client: &Client) -> bool {
    connection.app == client.app
        && connection.sub.as_deref().unwrap_or("") == client.sub
        && connection.device.as_deref() == client.device.as_deref()
}

impl Tracked {
    pub(super) fn new(node: u64) -> Tracked {
        Tracked {
            node,
            next: AtomicU64::new(1),
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            users: Mutex::default(),
            gate: RwLock::new(()),
        }
    }

    /// Holds off [`Tracked::clear`] until dropped (held around a connection tracked, counted
    /// or let go, so that a clear never falls between its entry and its user's count). A
    /// thread may hold it again while it holds it.
    pub(super) fn gate(&self) -> RwLockReadGuard<'_, ()> {
        self.gate.read_recursive()
    }

    /// Forgets every tracked connection and user count (no tracked kind is wanted any more),
    /// once no connection is being tracked or let go.
    pub(super) fn clear(&self) {
        let _alone = self.gate.write();
        for shard in self.shards.iter() {
            *shard.lock() = HashMap::new();
        }
        *self.users.lock() = HashMap::new();
    }

    /// How many connections are tracked.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.shards.iter().map(|s| s.lock().len()).sum()
    }

    /// Counts one more (`up`) or one fewer connection of `connection`'s user, and if that was
    /// its first or its last, tells `transition` the user while the count is still held: the
    /// next change of the user's count waits until it is told.
    pub(super) fn count_user(
        &self,
        connection: &Connection,
        up: bool,
        transition: impl FnOnce(AppId, Box<str>),
    ) {
        let Some(sub) = connection.sub.as_ref() else {
            return;
        };
        let key = (connection.app.clone(), sub.clone());
        let mut users = self.users.lock();
        if up {
            let n = users.entry(key.clone()).or_default();
            *n += 1;
            if *n > 1 {
                return;
            }
        } else {
            let Some(n) = users.get_mut(&key) else {
                return;
            };
            *n -= 1;
            if *n > 0 {
                return;
            }
            users.remove(&key);
        }
        transition(key.0, key.1);
    }

    pub(super) fn node(&self) -> u64 {
        self.node
    }

    fn shard(&self, key: usize) -> &Mutex<HashMap<usize, Entry>> {
        // Outboxes are allocations of the same size: their low bits say little.
        &self.shards[(key >> 6) % SHARDS]
    }

    /// Tracks a new connection of `client` writing to the outbox at `key` (its user is counted
    /// by the caller, [`Tracked::count_user`], if `counted`).
    pub(super) fn insert(
        &self,
        key: usize,
        place: (u32, u32),
        client: &Client,
        transport: Transport,
        counted: bool,
    ) -> Arc<Connection> {
        let connection = Arc::new(Connection {
            id: ConnectionId {
                node: self.node,
                seq: self.next.fetch_add(1, Ordering::Relaxed),
            },
            app: client.app.clone(),
            sub: (!client.sub.is_empty()).then(|| client.sub.as_str().into()),
            device: client.device.as_deref().map(Into::into),
            transport,
        });
        let entry = Entry {
            connection: connection.clone(),
            place,
            stated: None,
            counted,
        };
        let replaced = self.shard(key).lock().insert(key, entry);
        if let Some(stale) = replaced.filter(|stale| stale.counted) {
            self.count_user(&stale.connection, false, |_, _| {});
        }
        connection
    }

    /// The connection writing to the outbox at `key`.
    pub(super) fn get(&self, key: usize) -> Option<Arc<Connection>> {
        self.shard(key)
            .lock()
            .get(&key)
            .map(|e| e.connection.clone())
    }

    /// Stops tracking the connection at `key` made for `place` (its user is counted down by
    /// the caller, [`Tracked::count_user`], if it was counted).
    pub(super) fn remove(&self, key: usize, place: (u32, u32)) -> Option<Gone> {
        let mut shard = self.shard(key).lock();
        if shard.get(&key)?.place != place {
            return None;
        }
        let entry = shard.remove(&key)?;
        Some(Gone {
            connection: entry.connection,
            stated: entry.stated,
            counted: entry.counted,
        })
    }

    /// Notes the reason stated for ending the connection at `key` made for `place`; the first
    /// one stated stays.
    pub(super) fn state_reason(&self, key: usize, place: (u32, u32), reason: DisconnectReason) {
        if let Some(entry) = self.shard(key).lock().get_mut(&key) {
            if entry.place == place && entry.stated.is_none() {
                entry.stated = Some(reason);
            }
        }
    }
}
