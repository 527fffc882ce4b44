//! What one group-commit transaction does to the log: assigns seqs from the writer's channel
//! cache, skips messages whose idempotency key is already stored (in the database or earlier in
//! the same batch), inserts the rest (and the retained message of one appended with a retain,
//! `retained.rs`; the MQTT session hold a message carries, `mqtt_sessions.rs`), records
//! retention, trims by count and writes each touched channel's `last_seq`/`first_seq` back, all
//! inside the caller's transaction.
//!
//! Only the writer thread uses this module, so the cache needs no lock. If the transaction fails
//! the caller drops the touched cache entries ([`ChannelCache::forget_touched`]); they are
//! reloaded from the database on next use.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use herald_core::log::{Appended, Retention, StoreError};
use herald_core::message::{Epoch, NewMessage, SharedMessage, StoredMessage};
use herald_core::name::ChannelName;
use rusqlite::{params, OptionalExtension, Transaction};

use crate::common::retained::RetainedRow;
use crate::sqlite::known::KnownChannels;
use crate::sqlite::{backend, retention, seq_from_db, seq_to_db};

/// The writer's view of one channel, kept in step with its `channels` row.
#[derive(Debug, Clone)]
pub(crate) struct ChannelEntry {
    /// `channels.id`.
    pub id: i64,
    /// The channel's epoch.
    pub epoch: Epoch,
    /// Last seq handed out.
    pub last_seq: u64,
    /// Smallest retained seq (`last_seq + 1` when nothing is retained).
    pub first_seq: u64,
    /// Retention stored on the row.
    pub retention: Retention,
    /// Whether this batch changed the entry (its row must be written back).
    touched: bool,
}

/// Per-channel seq state for every channel the writer has touched since it started.
pub(crate) struct ChannelCache {
    entries: HashMap<ChannelName, ChannelEntry>,
    /// Channels touched by the batch in progress, in first-touch order.
    touched: Vec<ChannelName>,
    /// Told of every channel row created, before its transaction commits.
    known: Arc<KnownChannels>,
}

impl ChannelCache {
    /// An empty cache that adds each channel it creates a row for to `known`.
    pub fn new(known: Arc<KnownChannels>) -> Self {
        ChannelCache {
            entries: HashMap::new(),
            touched: Vec::new(),
            known,
        }
    }

    /// Drops the entries touched by a batch whose transaction failed.
    pub fn forget_touched(&mut self) {
        for name in self.touched.drain(..) {
            self.entries.remove(&name);
        }
    }

    /// Drops a channel's entry, whose row changed outside a batch (a deleted app's purge): it
    /// is read from its row again on next use. Only between batches.
    pub fn forget(&mut self, name: &ChannelName) {
        self.entries.remove(name);
    }

    /// The cached entry for a channel, if loaded.
    pub fn get_mut(&mut self, name: &ChannelName) -> Option<&mut ChannelEntry> {
        self.entries.get_mut(name)
    }

    /// Loads (or creates) the channel's entry and marks it touched by this batch.
    fn touch(
        &mut self,
        tx: &Transaction<'_>,
        name: &ChannelName,
        retention: Retention,
    ) -> Result<&mut ChannelEntry, StoreError> {
        if !self.entries.contains_key(name) {
            let entry = load_or_create(tx, name, retention, &self.known)?;
            self.entries.insert(name.clone(), entry);
        }
        let entry = self
            .entries
            .get_mut(name)
            .ok_or_else(|| StoreError::failed("channel cache lost an entry"))?;
        if !entry.touched {
            entry.touched = true;
            self.touched.push(name.clone());
        }
        Ok(entry)
    }
}

/// One group-commit transaction in the making: what each request became, and the new messages
/// for the commit sink. Valid only once the transaction commits.
#[derive(Default)]
pub(crate) struct Batch {
    /// Per request, in request order: what each message became.
    pub results: Vec<Vec<Appended>>,
    /// Newly stored messages in commit (= per-channel seq) order, for the commit sink.
    pub new_messages: Vec<SharedMessage>,
    /// Messages requested so far (duplicates included).
    pub requested: usize,
    /// Idempotency keys stored earlier in this batch, per channel id.
    keys: HashMap<i64, HashMap<String, SharedMessage>>,
}

impl Batch {
    /// Appends one request's messages inside `tx`.
    pub(crate) fn add(
        &mut self,
        tx: &Transaction<'_>,
        cache: &mut ChannelCache,
        channel: &ChannelName,
        messages: Vec<NewMessage>,
        retention: Retention,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        self.requested += messages.len();
        let entry = cache.touch(tx, channel, retention)?;
        if entry.retention != retention {
            set_retention(tx, entry.id, retention)?;
            entry.retention = retention;
        }
        let mut insert = tx
            .prepare_cached(
                "INSERT INTO messages (channel_id, seq, client_id, time, data) \
                 VALUES (?1, ?2, ?3, ?4, ?5)",
            )
            .map_err(backend)?;
        let mut results = Vec::with_capacity(messages.len());
        for message in messages {
            // An MQTT persistent session's QoS 2 hold: in this transaction, for a duplicate too.
            if let Some(hold) = &message.hold {
                crate::sqlite::mqtt_sessions::write_hold(tx, hold)?;
            }
            if let Some(key) = message.id.as_deref() {
                let earlier = self.keys.get(&entry.id).and_then(|keys| keys.get(key));
                if let Some(earlier) = earlier {
                    results.push(duplicate(earlier.clone()));
                    continue;
                }
                if let Some(stored) = find_stored(tx, channel, entry, key)? {
                    results.push(duplicate(stored));
                    continue;
                }
            }
            let seq = entry.last_seq + 1;
            insert
                .execute(params![
                    entry.id,
                    seq_to_db(seq),
                    message.id.as_deref(),
                    now_ms,
                    &message.data[..]
                ])
                .map_err(backend)?;
            entry.last_seq = seq;
            let key = message.id.clone();
            let stored = Arc::new(StoredMessage::new(
                channel.clone(),
                entry.epoch.clone(),
                seq,
                message.id,
                now_ms,
                message.data,
            ));
            // An MQTT RETAIN publish: its channel's retained message, in this transaction.
            if let Some(row) = RetainedRow::of(&stored, message.retain) {
                crate::sqlite::retained::write(tx, &row)?;
            }
            if let Some(key) = key {
                self.keys
                    .entry(entry.id)
                    .or_default()
                    .insert(key, stored.clone());
            }
            self.new_messages.push(stored.clone());
            results.push(Appended {
                message: stored,
                duplicate: false,
            });
        }
        self.results.push(results);
        Ok(())
    }
}

/// Marks the batch finished: touched entries stay cached as they are.
pub(crate) fn finish(cache: &mut ChannelCache) {
    for name in cache.touched.drain(..) {
        if let Some(entry) = cache.entries.get_mut(&name) {
            entry.touched = false;
        }
    }
}

fn duplicate(message: SharedMessage) -> Appended {
    Appended {
        message,
        duplicate: true,
    }
}

/// Trims each touched channel by count and writes its seq range back to its row; the last step
/// of a batch before commit.
pub(crate) fn write_back_touched(
    tx: &Transaction<'_>,
    cache: &mut ChannelCache,
) -> Result<(), StoreError> {
    let mut update = tx
        .prepare_cached("UPDATE channels SET last_seq = ?2, first_seq = ?3 WHERE id = ?1")
        .map_err(backend)?;
    for name in &cache.touched {
        let Some(entry) = cache.entries.get_mut(name) else {
            continue;
        };
        if let Some(new_first) = retention::count_trim_target(entry) {
            retention::delete_before(tx, entry.id, new_first)?;
            entry.first_seq = new_first;
        }
        update
            .execute(params![
                entry.id,
                seq_to_db(entry.last_seq),
                seq_to_db(entry.first_seq)
            ])
            .map_err(backend)?;
    }
    Ok(())
}

fn set_retention(tx: &Transaction<'_>, id: i64, retention: Retention) -> Result<(), StoreError> {
    tx.prepare_cached("UPDATE channels SET max_messages = ?2, max_age_ms = ?3 WHERE id = ?1")
        .and_then(|mut stmt| {
            stmt.execute(params![
                id,
                seq_to_db(retention.max_messages),
                seq_to_db(retention.max_age_ms)
            ])
        })
        .map_err(backend)?;
    Ok(())
}

/// The stored message with idempotency key `key` in this channel, if any.
fn find_stored(
    tx: &Transaction<'_>,
    channel: &ChannelName,
    entry: &ChannelEntry,
    key: &str,
) -> Result<Option<SharedMessage>, StoreError> {
    let mut stmt = tx
        .prepare_cached(
            "SELECT seq, time, data FROM messages WHERE channel_id = ?1 AND client_id = ?2",
        )
        .map_err(backend)?;
    let row = stmt
        .query_row(params![entry.id, key], |row| {
            Ok((
                row.get::<_, i64>(0)?,
                row.get::<_, i64>(1)?,
                row.get::<_, Vec<u8>>(2)?,
            ))
        })
        .optional()
        .map_err(backend)?;
    let Some((seq, time, data)) = row else {
        return Ok(None);
    };
    Ok(Some(Arc::new(StoredMessage::new(
        channel.clone(),
        entry.epoch.clone(),
        seq_from_db(seq)?,
        Some(key.to_owned()),
        time,
        Bytes::from(data),
    ))))
}

/// Reads the channel's row, or inserts one for a new channel (fresh epoch, nothing appended).
fn load_or_create(
    tx: &Transaction<'_>,
    name: &ChannelName,
    retention: Retention,
    known: &KnownChannels,
) -> Result<ChannelEntry, StoreError> {
    let row = tx
        .prepare_cached(
            "SELECT id, epoch, last_seq, first_seq, max_messages, max_age_ms \
             FROM channels WHERE name = ?1",
        )
        .and_then(|mut stmt| {
            stmt.query_row([name.as_str()], |row| {
                Ok((
                    row.get::<_, i64>(0)?,
                    row.get::<_, String>(1)?,
                    row.get::<_, i64>(2)?,
                    row.get::<_, i64>(3)?,
                    row.get::<_, Option<i64>>(4)?,
                    row.get::<_, Option<i64>>(5)?,
                ))
            })
            .optional()
        })
        .map_err(backend)?;
    if let Some((id, epoch, last_seq, first_seq, max_messages, max_age_ms)) = row {
        return Ok(ChannelEntry {
            id,
            epoch: Epoch::new(&epoch),
            last_seq: seq_from_db(last_seq)?,
            first_seq: seq_from_db(first_seq)?,
            retention: Retention {
                max_messages: max_messages.map_or(Ok(0), seq_from_db)?,
                max_age_ms: max_age_ms.map_or(Ok(0), seq_from_db)?,
            },
            touched: false,
        });
    }
    // Before the row can commit: from then on a subscriber must read it (see known.rs).
    known.add(name);
    let epoch = Epoch::generate();
    tx.prepare_cached(
        "INSERT INTO channels (name, epoch, last_seq, first_seq, max_messages, max_age_ms) \
         VALUES (?1, ?2, 0, 1, ?3, ?4)",
    )
    .and_then(|mut stmt| {
        stmt.execute(params![
            name.as_str(),
            epoch.as_str(),
            seq_to_db(retention.max_messages),
            seq_to_db(retention.max_age_ms)
        ])
    })
    .map_err(backend)?;
    Ok(ChannelEntry {
        id: tx.last_insert_rowid(),
        epoch,
        last_seq: 0,
        first_seq: 1,
        retention,
        touched: false,
    })
}
