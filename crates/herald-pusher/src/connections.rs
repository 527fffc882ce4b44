//! This node's Pusher connections, by app and the key they connected with, and the two ways
//! they are ended from outside:
//!
//! - **the key goes**: when an app's Pusher credentials change (the bus's
//!   `CacheEvent::CredentialsChanged { provider: "pusher" }`, on every node,
//!   [`crate::credentials::cache`]), each node reads the app's set again and closes its
//!   connections whose key is no longer the app's (credentials deleted, or replaced by a set
//!   with another key) with 4001, the code pusher-js does not reconnect after. A rotation
//!   keeps the key and closes nothing.
//! - **`terminate_connections`** ([`PusherConnections::terminate_user`]): core's
//!   `CacheEvent::Disconnect` naming the user (`Target::Sub`) on the bus, which every node's
//!   live clients apply as they apply a revocation: every connection signed in as that user,
//!   on every node, is closed with [`CloseReason::Revoked`], which a Pusher connection says
//!   as 4009 (pusher-js does not reconnect).
//!
//! A connection that ends with a code of its own (the two above, a failed sign-in) says it
//! in its entry ([`Registered::say`]) before its outbox is closed: the wire's goodbye reads it
//! ([`Registered::farewell`]).
//!
//! The registry also keeps `herald_connections{transport="pusher"}`: a connection counts from
//! its registration to its entry's end, parked or not.
//!
//! An entry is small, as every connection has one while it lives (parked too): the
//! connection's credentials (shared with every connection of the key, the key and the app
//! with them), its outbox, and the farewell, allocated only when something is said. Its
//! number is its socket id's second part.

use std::collections::HashMap;
use std::sync::{Arc, Weak};

use herald_core::bus::Bus;
use herald_core::caches::CacheEvent;
use herald_core::live::Target;
use herald_core::outbox::{CloseReason, Outbox};
use herald_core::telemetry::telemetry;
use herald_core::tenant::AppId;
use parking_lot::Mutex;

use crate::credentials::cache::OpenCredentials;
use crate::credentials::store::PusherCredentialStore;
use crate::frame::codes;

/// Shards of the registry (connections opening and closing rarely share a lock).
const SHARDS: usize = 16;

/// The code and message a connection ends with when the reason its outbox was closed with is
/// not the whole story.
#[derive(Debug)]
struct Farewell {
    code: u16,
    message: Box<str>,
}

struct Entry {
    /// The credentials the connection was opened with: its app and key.
    credentials: Arc<OpenCredentials>,
    outbox: Weak<Outbox>,
    /// What the connection ends with, once said; the first said stays.
    farewell: Option<Box<Farewell>>,
}

/// This node's Pusher connections.
pub struct PusherConnections {
    store: Arc<dyn PusherCredentialStore>,
    bus: Arc<dyn Bus>,
    shards: Box<[Mutex<HashMap<u64, Entry>>]>,
}

/// A connection's place in the registry; dropping it leaves.
pub struct Registered {
    connections: Arc<PusherConnections>,
    id: u64,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.connections.shard(self.id).lock().remove(&self.id);
        telemetry().connections_pusher.decrement(1.0);
    }
}

impl Registered {
    /// The connection's number among the node's Pusher connections (its socket id's second
    /// part).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Says `code` and `message` for the connection to end with, unless something was said
    /// already.
    pub fn say(&self, code: u16, message: impl Into<String>) {
        if let Some(entry) = self.connections.shard(self.id).lock().get_mut(&self.id) {
            say(entry, code, message.into());
        }
    }

    /// What was said for the connection to end with, if anything.
    pub fn farewell(&self) -> Option<(u16, String)> {
        let shard = self.connections.shard(self.id).lock();
        let farewell = shard.get(&self.id)?.farewell.as_ref()?;
        Some((farewell.code, farewell.message.to_string()))
    }
}

fn say(entry: &mut Entry, code: u16, message: String) {
    if entry.farewell.is_none() {
        entry.farewell = Some(Box::new(Farewell {
            code,
            message: message.into_boxed_str(),
        }));
    }
}

impl PusherConnections {
    /// An empty registry: `store` says what an app's key is now, `bus` carries
    /// `terminate_connections` to every node.
    pub fn new(store: Arc<dyn PusherCredentialStore>, bus: Arc<dyn Bus>) -> Self {
        PusherConnections {
            store,
            bus,
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
        }
    }

    fn shard(&self, id: u64) -> &Mutex<HashMap<u64, Entry>> {
        &self.shards[(id % SHARDS as u64) as usize]
    }

    /// Registers connection `id` (unique in the process: its socket id's second part), made
    /// with `credentials` (its app and key), writing to `outbox`.
    pub fn register(
        self: &Arc<Self>,
        id: u64,
        credentials: &Arc<OpenCredentials>,
        outbox: &Arc<Outbox>,
    ) -> Registered {
        let entry = Entry {
            credentials: credentials.clone(),
            outbox: Arc::downgrade(outbox),
            farewell: None,
        };
        self.shard(id).lock().insert(id, entry);
        telemetry().connections_pusher.increment(1.0);
        Registered {
            connections: self.clone(),
            id,
        }
    }

    /// Closes the connections of `app` whose key is not `current` (all of them for `None`)
    /// with 4001; returns how many.
    pub fn close_other_keys(&self, app: &AppId, current: Option<&str>) -> usize {
        let mut closed = 0;
        for shard in self.shards.iter() {
            let picked: Vec<Arc<Outbox>> = shard
                .lock()
                .values_mut()
                .filter(|e| &e.credentials.app == app && Some(&*e.credentials.key) != current)
                .filter_map(|e| {
                    let outbox = e.outbox.upgrade()?;
                    let message = format!("App key {} does not exist any more", e.credentials.key);
                    say(e, codes::APP_NOT_FOUND, message);
                    Some(outbox)
                })
                .collect();
            for outbox in picked {
                closed += usize::from(outbox.close(CloseReason::Revoked));
            }
        }
        closed
    }

    /// `app`'s Pusher credentials changed: reads its key now (in a task of the current Tokio
    /// runtime, if there is one) and closes the connections made with another.
    pub fn credentials_changed(self: &Arc<Self>, app: &AppId) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (connections, app) = (self.clone(), app.clone());
        runtime.spawn(async move {
            match connections.store.pusher_credentials(&app).await {
                Ok(set) => {
                    let key = set.map(|s| s.key);
                    let closed = connections.close_other_keys(&app, key.as_deref());
                    if closed > 0 {
                        tracing::info!(%app, closed, "Pusher connections of a key that went closed");
                    }
                }
                Err(e) => {
                    tracing::warn!(%app, error = %e, "an app's Pusher key could not be read again")
                }
            }
        });
    }

    /// Closes every connection signed in as `user` of `app`, on every node (the bus).
    pub fn terminate_user(&self, app: &AppId, user: &str) {
        self.bus.publish(CacheEvent::Disconnect {
            app: app.clone(),
            target: Target::Sub(user.to_owned()),
            reason: CloseReason::Revoked,
        });
    }
}
