//! Group commit of session writes: every connection hands its [`SessionWrite`]s to the
//! listener's one [`Flusher`], and its task writes whatever queued while the previous batch
//! was being written in one [`MqttSessionStore::write_mqtt_sessions`] call (one transaction,
//! one fsync), then tells the writers that wait. A position is coalesced: a channel's position
//! written again before its batch went keeps only the newest, so a subscriber acknowledging a
//! thousand messages between two commits costs one row. A PUBACK therefore costs no
//! transaction or fsync of its own.
//!
//! Writes are applied in the order they were handed in, except that a position takes the
//! place of the one it replaces; any other write ends the coalescing (a position after a
//! session's `Start` or `Delete` is never moved before it).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use herald_core::log::StoreError;
use tokio::sync::{oneshot, Notify};

use super::store::{MqttSessionStore, SessionKey, SessionWrite};

/// Told a batch's outcome once it committed (or failed).
pub(crate) type Done = Box<dyn FnOnce(Result<(), StoreError>) + Send>;

/// What waits for the next batch.
#[derive(Default)]
struct Pending {
    writes: Vec<SessionWrite>,
    /// Where each session's channel position is in `writes`.
    positions: HashMap<(SessionKey, String), usize>,
    done: Vec<Done>,
}

/// The listener's queue of session writes and the task that commits them.
pub(crate) struct Flusher {
    pending: Mutex<Pending>,
    wake: Notify,
}

impl Flusher {
    /// A flusher writing to `store`, its task spawned on the current runtime (it runs as long
    /// as the runtime does).
    pub(crate) fn start(store: Arc<dyn MqttSessionStore>) -> Arc<Flusher> {
        let flusher = Arc::new(Flusher {
            pending: Mutex::new(Pending::default()),
            wake: Notify::new(),
        });
        let task = flusher.clone();
        tokio::spawn(async move {
            loop {
                let batch = std::mem::take(&mut *task.lock());
                if batch.writes.is_empty() && batch.done.is_empty() {
                    task.wake.notified().await;
                    continue;
                }
                let result = if batch.writes.is_empty() {
                    Ok(())
                } else {
                    store.write_mqtt_sessions(batch.writes).await
                };
                if let Err(e) = &result {
                    tracing::warn!(error = %e, "MQTT sessions: a batch of session writes failed");
                }
                for done in batch.done {
                    done(result.clone());
                }
            }
        });
        flusher
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues `write` for the next batch, nothing told when it committed.
    pub(crate) fn push(&self, write: SessionWrite) {
        self.push_all(vec![write], None);
    }

    /// Queues `writes` for the next batch; `done` is told its outcome.
    pub(crate) fn push_all(&self, writes: Vec<SessionWrite>, done: Option<Done>) {
        {
            let mut pending = self.lock();
            for write in writes {
                if let SessionWrite::Position { key, position } = &write {
                    let slot = (key.clone(), position.channel.clone());
                    if let Some(&at) = pending.positions.get(&slot) {
                        pending.writes[at] = write;
                        continue;
                    }
                    let at = pending.writes.len();
                    pending.positions.insert(slot, at);
                } else {
                    pending.positions.clear();
                }
                pending.writes.push(write);
            }
            if let Some(done) = done {
                pending.done.push(done);
            }
        }
        self.wake.notify_one();
    }

    /// Queues `writes` and waits until they (and what queued before them) committed.
    pub(crate) async fn write(&self, writes: Vec<SessionWrite>) -> Result<(), StoreError> {
        let (tx, rx) = oneshot::channel();
        self.push_all(
            writes,
            Some(Box::new(move |result| {
                let _ = tx.send(result);
            })),
        );
        rx.await
            .unwrap_or_else(|_| Err(StoreError::failed("the MQTT session writer stopped")))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex as StdMutex;

    use async_trait::async_trait;
    use herald_core::tenant::AppId;

    use super::super::store::{StoredPosition, StoredSession, StoredWill, WaitingWill};
    use super::*;

    #[derive(Default)]
    struct Recording(StdMutex<Vec<Vec<SessionWrite>>>);

    #[async_trait]
    impl MqttSessionStore for Recording {
        async fn mqtt_session(
            &self,
            _: &AppId,
            _: &str,
        ) -> Result<Option<StoredSession>, StoreError> {
            Ok(None)
        }
        async fn write_mqtt_sessions(&self, writes: Vec<SessionWrite>) -> Result<(), StoreError> {
            self.0.lock().unwrap().push(writes);
            Ok(())
        }
        async fn take_mqtt_will(&self, _: &SessionKey) -> Result<Option<StoredWill>, StoreError> {
            Ok(None)
        }
        async fn mqtt_wills_waiting(&self) -> Result<Vec<WaitingWill>, StoreError> {
            Ok(Vec::new())
        }
    }

    fn key(id: &str) -> SessionKey {
        SessionKey {
            app: AppId::default_app(),
            client_id: id.into(),
        }
    }

    fn position(id: &str, channel: &str, seq: u64) -> SessionWrite {
        SessionWrite::Position {
            key: key(id),
            position: StoredPosition {
                channel: channel.into(),
                epoch: "e".into(),
                seq,
            },
        }
    }

    fn idle() -> Flusher {
        Flusher {
            pending: Mutex::new(Pending::default()),
            wake: Notify::new(),
        }
    }

    #[test]
    fn a_channel_position_queued_again_keeps_its_place_with_the_newest_seq() {
        let flusher = idle();
        flusher.push(position("a", "news", 1));
        flusher.push(position("b", "news", 1));
        flusher.push(position("a", "news", 2));
        flusher.push(position("a", "sport", 7));
        flusher.push(position("a", "news", 3));
        assert_eq!(
            flusher.lock().writes,
            [
                position("a", "news", 3),
                position("b", "news", 1),
                position("a", "sport", 7)
            ]
        );
    }

    #[test]
    fn a_position_is_never_moved_before_another_write() {
        let flusher = idle();
        let start = SessionWrite::Start {
            key: key("a"),
            expiry_ms: 1000,
        };
        flusher.push(position("a", "news", 5));
        flusher.push(start.clone());
        flusher.push(position("a", "news", 6));
        assert_eq!(
            flusher.lock().writes,
            [position("a", "news", 5), start, position("a", "news", 6)]
        );
    }

    #[tokio::test]
    async fn a_write_returns_once_its_batch_committed() {
        let store = Arc::new(Recording::default());
        let flusher = Flusher::start(store.clone());
        flusher.push(position("a", "news", 1));
        flusher
            .write(vec![position("a", "sport", 2)])
            .await
            .unwrap();
        let written: Vec<SessionWrite> =
            store.0.lock().unwrap().iter().flatten().cloned().collect();
        assert_eq!(
            written,
            [position("a", "news", 1), position("a", "sport", 2)]
        );
    }
}
