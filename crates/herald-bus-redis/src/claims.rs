//! The cluster's claims ([`herald_core::claims`]) over Redis: which node holds each claimed
//! name of an app (an MQTT client identifier), and the takeovers between nodes.
//!
//! - **Who holds a key**: the string `PREFIX:claim:APP:NAME` = `NODE:ID` (the node in hex, the
//!   claim's id). A claim sets it and reads what it held in one command (`SET .. GET`); a
//!   release deletes it only if it still names the releasing claim (a script), so a node that
//!   lets a key go after another claimed it changes nothing.
//! - **Takeover**: a claim that found another node's claim sends that node a takeover on the
//!   cache events' sharded channel (so it needs no subscription of its own and survives
//!   reconnects as events do) and waits for its answer there. The holder's
//!   [`ClaimHolder`] ends and stores what it held, then the holder answers; a node that does
//!   not hold the key any more answers at once. A node that crashed holding a key never
//!   answers: its key costs the next claim the wait it was given.
//! - **Redis down**: a claim that cannot reach Redis within [`REDIS_WAIT`] goes ahead as if
//!   nobody held the key (nodes cut off from each other cannot take a name from each other).
//!
//! ```text
//! u8 'c', u8 kind, u64 from node, u64 to node, u64 request, then by kind:
//!   1 takeover: u8 fresh (0 | 1), u8 app length, app, u16 length, name
//!   2 released: -
//! ```

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use fred::prelude::{KeysInterface, LuaInterface, PubsubInterface};
use fred::types::Value;
use herald_core::claims::{ClaimHolder, ClaimKey, ClusterClaims};
use herald_core::tenant::AppId;
use parking_lot::Mutex;
use tokio::sync::oneshot;

use crate::bus::Shared;
use crate::codec::{put_str16, Reader};
use crate::error::DecodeError;

/// The first byte of a claims message on the events channel (cache events start with their
/// version, 1).
pub(crate) const MARK: u8 = b'c';

/// How long a claim waits for Redis to answer before it goes ahead.
const REDIS_WAIT: Duration = Duration::from_millis(500);

/// Deletes `KEYS[1]` if it holds `ARGV[1]`.
const RELEASE: &str = r#"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"#;

/// This node's side of the claims: its holder, and the claims waiting for an answer.
#[derive(Default)]
pub(crate) struct ClaimState {
    holder: OnceLock<Arc<dyn ClaimHolder>>,
    ids: AtomicU64,
    waiting: Mutex<HashMap<u64, oneshot::Sender<()>>>,
}

/// A claims message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ClaimMessage {
    /// `from` claimed `key`, which `to` held; `to` answers `request` once it let it go.
    Takeover {
        from: u64,
        to: u64,
        request: u64,
        fresh: bool,
        key: ClaimKey,
    },
    /// `from` let go of the key `to` claimed in `request`.
    Released { from: u64, to: u64, request: u64 },
}

impl ClaimMessage {
    pub(crate) fn encode(&self) -> Bytes {
        let mut out = BytesMut::with_capacity(64);
        out.put_u8(MARK);
        match self {
            ClaimMessage::Takeover {
                from,
                to,
                request,
                fresh,
                key,
            } => {
                out.put_u8(1);
                out.put_u64(*from);
                out.put_u64(*to);
                out.put_u64(*request);
                out.put_u8(u8::from(*fresh));
                let app = key.app.as_str();
                let len = app.len().min(255);
                out.put_u8(len as u8);
                out.put_slice(&app.as_bytes()[..len]);
                put_str16(&mut out, &key.name);
            }
            ClaimMessage::Released { from, to, request } => {
                out.put_u8(2);
                out.put_u64(*from);
                out.put_u64(*to);
                out.put_u64(*request);
            }
        }
        out.freeze()
    }

    pub(crate) fn decode(payload: &Bytes) -> Result<ClaimMessage, DecodeError> {
        let mut r = Reader(payload.clone());
        if r.u8()? != MARK {
            return Err(DecodeError::Malformed("claims mark"));
        }
        let kind = r.u8()?;
        let (from, to, request) = (r.u64()?, r.u64()?, r.u64()?);
        let message = match kind {
            1 => {
                let fresh = r.u8()? != 0;
                let app_len = usize::from(r.u8()?);
                let app = AppId::parse(&r.string(app_len)?).map_err(|_| DecodeError::App)?;
                let name = r.str16()?;
                ClaimMessage::Takeover {
                    from,
                    to,
                    request,
                    fresh,
                    key: ClaimKey { app, name },
                }
            }
            2 => ClaimMessage::Released { from, to, request },
            _ => return Err(DecodeError::Malformed("claims kind")),
        };
        if !r.is_empty() {
            return Err(DecodeError::Malformed("trailing bytes"));
        }
        Ok(message)
    }
}

/// The claims a [`crate::RedisBus`] offers ([`herald_core::bus::Bus::claims`]).
pub(crate) struct RedisClaims(pub(crate) Weak<Shared>);

fn redis_key(shared: &Shared, key: &ClaimKey) -> String {
    format!(
        "{}:claim:{}:{}",
        shared.options.prefix,
        key.app.as_str(),
        key.name
    )
}

fn value(node: u64, id: u64) -> String {
    format!("{node:016x}:{id}")
}

/// The node a key's value names.
fn node_of(value: &str) -> Option<u64> {
    let (node, _) = value.split_once(':')?;
    u64::from_str_radix(node, 16).ok()
}

impl ClaimState {
    /// The holder set, if any.
    pub(crate) fn holder(&self) -> Option<Arc<dyn ClaimHolder>> {
        self.holder.get().cloned()
    }
}

#[async_trait::async_trait]
impl ClusterClaims for RedisClaims {
    fn node(&self) -> u64 {
        self.0.upgrade().map_or(0, |shared| shared.node)
    }

    fn set_holder(&self, holder: Arc<dyn ClaimHolder>) {
        if let Some(shared) = self.0.upgrade() {
            let _ = shared.claims.holder.set(holder);
        }
    }

    async fn claim(&self, key: &ClaimKey, fresh: bool, wait: Duration) -> u64 {
        let Some(shared) = self.0.upgrade() else {
            return 0;
        };
        let id = shared.claims.ids.fetch_add(1, Ordering::Relaxed) + 1;
        let set = shared.publisher.set::<Option<String>, _, _>(
            redis_key(&shared, key),
            value(shared.node, id),
            None,
            None,
            true,
        );
        let previous = match tokio::time::timeout(REDIS_WAIT, set).await {
            Ok(Ok(previous)) => previous,
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "a claim could not reach Redis; going ahead");
                None
            }
            Err(_) => {
                tracing::debug!("Redis did not answer a claim in time; going ahead");
                None
            }
        };
        let Some(holder) = previous.as_deref().and_then(node_of) else {
            return id;
        };
        if holder == shared.node {
            // This node's own claim: its local table already took it over.
            return id;
        }
        let (answered, answer) = oneshot::channel();
        shared.claims.waiting.lock().insert(id, answered);
        let takeover = ClaimMessage::Takeover {
            from: shared.node,
            to: holder,
            request: id,
            fresh,
            key: key.clone(),
        };
        let sent = shared
            .publisher
            .spublish::<(), _, _>(shared.names.events(), Value::Bytes(takeover.encode()));
        match tokio::time::timeout(REDIS_WAIT, sent).await {
            Ok(Ok(())) => {
                if tokio::time::timeout(wait, answer).await.is_err() {
                    tracing::debug!(
                        holder = format!("{holder:016x}"),
                        "the node holding a claimed name did not answer in time"
                    );
                }
            }
            _ => tracing::debug!("a takeover could not be sent to the holding node"),
        }
        shared.claims.waiting.lock().remove(&id);
        id
    }

    /// This node's fence (`crate::fence`).
    fn fenced(&self) -> bool {
        self.0
            .upgrade()
            .is_some_and(|shared| shared.fence.is_fenced())
    }

    fn release(&self, key: &ClaimKey, id: u64) {
        let Some(shared) = self.0.upgrade() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (redis_key, value) = (redis_key(&shared, key), value(shared.node, id));
        runtime.spawn(async move {
            let released =
                shared
                    .publisher
                    .eval::<i64, _, _, _>(RELEASE, vec![redis_key], vec![value]);
            if let Ok(Err(e)) = tokio::time::timeout(REDIS_WAIT, released).await {
                tracing::debug!(error = %e, "a claim could not be released in Redis");
            }
        });
    }
}

/// A claims message from the events channel (see the module documentation).
pub(crate) fn on_message(shared: &Arc<Shared>, payload: &Bytes) {
    let message = match ClaimMessage::decode(payload) {
        Ok(message) => message,
        Err(error) => {
            shared
                .counters
                .decode_errors
                .fetch_add(1, Ordering::Relaxed);
            tracing::debug!(%error, "undecodable claims message on the Redis bus");
            return;
        }
    };
    match message {
        ClaimMessage::Released { to, request, .. } if to == shared.node => {
            if let Some(answered) = shared.claims.waiting.lock().remove(&request) {
                let _ = answered.send(());
            }
        }
        ClaimMessage::Takeover {
            from,
            to,
            request,
            fresh,
            key,
        } if to == shared.node => {
            let shared = shared.clone();
            tokio::spawn(async move {
                if let Some(holder) = shared.claims.holder.get().cloned() {
                    holder.taken(&key, fresh).await;
                }
                let released = ClaimMessage::Released {
                    from: shared.node,
                    to: from,
                    request,
                };
                let _ = shared
                    .publisher
                    .spublish::<(), _, _>(shared.names.events(), Value::Bytes(released.encode()))
                    .await;
            });
        }
        // For another node.
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_messages_round_trip_and_values_name_their_node() {
        let takeover = ClaimMessage::Takeover {
            from: 0xabc,
            to: 0xdef,
            request: 7,
            fresh: true,
            key: ClaimKey {
                app: AppId::parse("shop").unwrap(),
                name: "sensor-1".into(),
            },
        };
        let released = ClaimMessage::Released {
            from: 0xdef,
            to: 0xabc,
            request: 7,
        };
        for message in [takeover, released] {
            let bytes = message.encode();
            assert_eq!(bytes[0], MARK);
            assert_eq!(ClaimMessage::decode(&bytes).unwrap(), message);
            let truncated = bytes.slice(..bytes.len() - 1);
            assert!(ClaimMessage::decode(&truncated).is_err());
        }
        assert_eq!(node_of(&value(0x1234, 9)), Some(0x1234));
        assert_eq!(node_of("garbage"), None);
    }
}
