//! One group commit's transaction: the appends of a batch, grouped by channel, stored in one
//! PostgreSQL transaction.
//!
//! **How seqs stay gapless across nodes.** A channel's `channels` row holds the last seq handed
//! out. Every append transaction locks that row before it picks seqs and writes the new
//! `last_seq` in the same transaction, so two nodes appending to one channel take turns: the
//! second waits for the first to commit, then reads the seq the first left (READ COMMITTED takes
//! a fresh snapshot per statement, so it sees the first's rows). A failed transaction rolls back
//! its `last_seq` with its messages, so no seq is skipped. Channels are locked in name order, so
//! two batches that share channels never deadlock.
//!
//! The lock and the reservation are one statement for the whole batch: `INSERT .. SELECT .. FROM unnest(..) ORDER BY name ON
//! CONFLICT (name) DO UPDATE SET last_seq = last_seq + n RETURNING` creates the rows of new
//! channels, locks every row, adds each channel's message count and answers where each
//! channel's messages start. Channels with idempotency keys reserve nothing in that statement
//! (n = 0), look their keys up once the row is locked, and write `last_seq` after. Then one
//! `INSERT .. SELECT .. FROM unnest(..)` stores every channel's messages: a batch costs two
//! statements and the commit whether it touches one channel or many (and one more per MQTT
//! RETAIN publish: its channel's retained message, `retained.rs`; an MQTT persistent session's
//! QoS 2 holds go with the insert, `mqtt_sessions.rs`). docs/benchmarks.md
//! ("PostgreSQL store") has the measured rates, and those of the alternatives tried: a statement
//! per channel, and an advisory lock per channel (`pg_advisory_xact_lock`) before the row is read
//! and written, both slower.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;
use deadpool_postgres::Transaction;
use futures_util::future::try_join_all;
use herald_core::log::{Appended, Retention, StoreError};
use herald_core::message::{Epoch, NewMessage, Retain, SharedMessage, StoredMessage};
use herald_core::name::ChannelName;

use super::pg_error;
use crate::common::retained::RetainedRow;
use crate::common::values::{seq_from_db, seq_to_db};

/// One append request of a batch.
pub(crate) struct Requested<'a> {
    pub channel: &'a ChannelName,
    pub messages: &'a [NewMessage],
    pub retention: Retention,
}

/// What a committed batch produced.
pub(crate) struct Committed {
    /// Per request, in request order: what each message became.
    pub results: Vec<Vec<Appended>>,
    /// Newly stored messages, each channel's in seq order, for the commit sink.
    pub new_messages: Vec<SharedMessage>,
}

/// Creates the rows of new channels and locks the others, in name order, adding each one's
/// count to its `last_seq`.
const RESERVE: &str = "INSERT INTO channels (name, epoch, last_seq, first_seq, max_messages, \
     max_age_ms) \
     SELECT n, e, c, 1, mm, ma \
     FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::bigint[]) \
         AS r(n, e, c, mm, ma) \
     ORDER BY n \
     ON CONFLICT (name) DO UPDATE SET last_seq = channels.last_seq + excluded.last_seq, \
         max_messages = excluded.max_messages, max_age_ms = excluded.max_age_ms \
     RETURNING name, id, epoch, last_seq, first_seq";
const FIND_KEYS: &str = "SELECT client_id, seq, time, data FROM messages \
     WHERE channel_id = $1 AND client_id = ANY($2)";
const INSERT_MESSAGES: &str = "INSERT INTO messages (channel_id, seq, client_id, time, data) \
     SELECT c, s, k, $4, d \
     FROM unnest($1::bigint[], $2::bigint[], $3::text[], $5::bytea[]) AS m(c, s, k, d)";
const WRITE_ROW: &str = "UPDATE channels SET last_seq = $2, first_seq = GREATEST(first_seq, $3), \
     max_messages = $4, max_age_ms = $5 WHERE id = $1";
/// Deletes the channel's messages from its first retained seq `$2` up to `$3`. The lower bound
/// matters: deleted rows stay in the primary key's index until a vacuum, and `seq < $3` alone
/// made every trim walk all of them again (a channel trimmed every 125 messages read them
/// back over and over, under its row's lock, while the other nodes waited).
const TRIM: &str = "DELETE FROM messages WHERE channel_id = $1 AND seq >= $2 AND seq < $3";

/// Smallest number of extra messages a channel may hold beyond its limit before a count trim
/// runs (the same rule as SQLite's `retention::count_trim_target`).
const MIN_TRIM_SLACK: u64 = 16;

/// The batch's messages for one channel.
pub(super) struct ChannelPlan<'a> {
    pub name: &'a ChannelName,
    /// The retention of the channel's last request in the batch.
    pub retention: Retention,
    /// (request, message) positions, in arrival order.
    pub positions: Vec<(usize, usize)>,
    /// Whether a message carries an idempotency key.
    pub keyed: bool,
}

/// A channel's row once locked.
struct Row {
    id: i64,
    epoch: Epoch,
    /// The last seq before this batch's messages.
    base: u64,
    first_seq: u64,
}

/// A statement of the batch's last step; they are sent together, without waiting for one
/// another's answers (pipelined on the one connection).
type Pending<'t> = Pin<Box<dyn Future<Output = Result<u64, tokio_postgres::Error>> + Send + 't>>;

/// Stores `requests` in `tx` (not committed here).
pub(crate) async fn store(
    tx: &Transaction<'_>,
    requests: &[Requested<'_>],
    now_ms: i64,
) -> Result<Committed, StoreError> {
    let plans = plan(requests);
    let rows = lock_rows(tx, &plans).await?;
    let stored = find_keys(tx, &plans, &rows, requests).await?;

    let mut results: Vec<Vec<Option<Appended>>> = requests
        .iter()
        .map(|r| vec![None; r.messages.len()])
        .collect();
    let mut new_messages = Vec::new();
    let mut channel_ids = Vec::new();
    // MQTT RETAIN publishes: their channels' retained messages, written in this transaction.
    let mut retains = Vec::new();
    // An MQTT persistent session's QoS 2 holds, a duplicate's too: written in this transaction.
    let mut holds = Vec::new();
    let mut writes: Vec<Pending<'_>> = Vec::new();
    let insert = tx.prepare_cached(INSERT_MESSAGES).await.map_err(pg_error)?;
    let write_row = tx.prepare_cached(WRITE_ROW).await.map_err(pg_error)?;
    let trim = tx.prepare_cached(TRIM).await.map_err(pg_error)?;
    for ((plan, row), mut keys) in plans.iter().zip(&rows).zip(stored) {
        let mut added = Vec::new();
        let mut next = row.base;
        for &(r, m) in &plan.positions {
            let message = &requests[r].messages[m];
            holds.extend(message.hold.as_deref());
            if let Some(earlier) = message.id.as_deref().and_then(|k| keys.get(k)) {
                results[r][m] = Some(Appended {
                    message: earlier.clone(),
                    duplicate: true,
                });
                continue;
            }
            next += 1;
            let stored = Arc::new(StoredMessage::new(
                plan.name.clone(),
                row.epoch.clone(),
                next,
                message.id.clone(),
                now_ms,
                message.data.clone(),
            ));
            if let Some(key) = &message.id {
                keys.insert(key.clone(), stored.clone());
            }
            if message.retain != Retain::Untouched {
                retains.push((stored.clone(), message.retain));
            }
            added.push(stored.clone());
            results[r][m] = Some(Appended {
                message: stored,
                duplicate: false,
            });
        }
        channel_ids.resize(channel_ids.len() + added.len(), row.id);
        new_messages.extend(added);
        let last_seq = next;
        let trim_to = count_trim_target(row.first_seq, last_seq, plan.retention);
        let first_seq = trim_to.unwrap_or(row.first_seq);
        // `last_seq` was written when the seqs were reserved, unless the channel's keys decided
        // how many it needed.
        if plan.keyed || trim_to.is_some() {
            let params = (
                seq_to_db(last_seq),
                seq_to_db(first_seq),
                seq_to_db(plan.retention.max_messages),
                seq_to_db(plan.retention.max_age_ms),
            );
            let write_row = write_row.clone();
            writes.push(Box::pin(async move {
                tx.execute(
                    &write_row,
                    &[&row.id, &params.0, &params.1, &params.2, &params.3],
                )
                .await
            }));
        }
        if let Some(first) = trim_to {
            let (trim, from, to) = (trim.clone(), seq_to_db(row.first_seq), seq_to_db(first));
            writes.push(Box::pin(async move {
                tx.execute(&trim, &[&row.id, &from, &to]).await
            }));
        }
    }
    if !new_messages.is_empty() {
        let added = &new_messages;
        let channel_ids = &channel_ids;
        writes.push(Box::pin(async move {
            let seqs: Vec<i64> = added.iter().map(|m| seq_to_db(m.seq)).collect();
            let keys: Vec<Option<&str>> = added.iter().map(|m| m.client_id.as_deref()).collect();
            let data: Vec<&[u8]> = added.iter().map(|m| &m.data[..]).collect();
            tx.execute(&insert, &[channel_ids, &seqs, &keys, &now_ms, &data])
                .await
        }));
    }
    if !holds.is_empty() {
        let holds = &holds;
        writes.push(Box::pin(async move {
            super::mqtt_sessions::write_holds(tx, holds).await
        }));
    }
    try_join_all(writes).await.map_err(pg_error)?;
    let retained_rows: Vec<RetainedRow<'_>> = retains
        .iter()
        .filter_map(|(message, retain)| RetainedRow::of(message, *retain))
        .collect();
    super::retained::write(tx, &retained_rows).await?;
    let results = results
        .into_iter()
        .map(|r| r.into_iter().collect::<Option<Vec<_>>>())
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| StoreError::failed("an append lost a message"))?;
    Ok(Committed {
        results,
        new_messages,
    })
}

/// The batch grouped by channel, in name order (the order rows are locked in).
pub(super) fn plan<'a>(requests: &[Requested<'a>]) -> Vec<ChannelPlan<'a>> {
    let mut plans: BTreeMap<&str, ChannelPlan<'_>> = BTreeMap::new();
    for (r, request) in requests.iter().enumerate() {
        let plan = plans
            .entry(request.channel.as_str())
            .or_insert_with(|| ChannelPlan {
                name: request.channel,
                retention: request.retention,
                positions: Vec::new(),
                keyed: false,
            });
        plan.retention = request.retention;
        for (m, message) in request.messages.iter().enumerate() {
            plan.positions.push((r, m));
            plan.keyed |= message.id.is_some();
        }
    }
    plans.into_values().collect()
}

/// The per-channel parameters of a reservation (`RESERVE` here, `append_unkeyed`'s `STORE`):
/// each planned channel's name, an epoch for a new row, how many seqs to reserve, and its
/// retention.
pub(super) struct ChannelColumns<'a> {
    pub names: Vec<&'a str>,
    pub epochs: Vec<String>,
    pub counts: Vec<i64>,
    pub max_messages: Vec<i64>,
    pub max_ages: Vec<i64>,
}

impl<'a> ChannelColumns<'a> {
    /// The columns of `plans`, reserving `count` seqs for each.
    pub(super) fn of(plans: &[ChannelPlan<'a>], count: impl Fn(&ChannelPlan<'a>) -> i64) -> Self {
        ChannelColumns {
            names: plans.iter().map(|p| p.name.as_str()).collect(),
            epochs: plans
                .iter()
                .map(|_| Epoch::generate().as_str().to_owned())
                .collect(),
            counts: plans.iter().map(count).collect(),
            max_messages: plans
                .iter()
                .map(|p| seq_to_db(p.retention.max_messages))
                .collect(),
            max_ages: plans
                .iter()
                .map(|p| seq_to_db(p.retention.max_age_ms))
                .collect(),
        }
    }
}

/// Locks every planned channel's row (creating the rows of new channels), in name order, in one
/// statement that also reserves the seqs of channels without keys, and answers where each
/// channel stood before this batch.
async fn lock_rows(
    tx: &Transaction<'_>,
    plans: &[ChannelPlan<'_>],
) -> Result<Vec<Row>, StoreError> {
    let reserve = tx.prepare_cached(RESERVE).await.map_err(pg_error)?;
    let ChannelColumns {
        names,
        epochs,
        counts,
        max_messages,
        max_ages,
    } = ChannelColumns::of(plans, reserved);
    let returned = tx
        .query(
            &reserve,
            &[&names, &epochs, &counts, &max_messages, &max_ages],
        )
        .await
        .map_err(pg_error)?;
    let mut by_name = HashMap::with_capacity(returned.len());
    for row in &returned {
        let name: &str = row.try_get(0).map_err(pg_error)?;
        by_name.insert(name, row);
    }
    plans
        .iter()
        .map(|plan| {
            let row = by_name
                .get(plan.name.as_str())
                .ok_or_else(|| StoreError::failed("a channel's row was not reserved"))?;
            let mut row = row_of(row, 1)?;
            row.base = row.base.saturating_sub(reserved(plan) as u64);
            Ok(row)
        })
        .collect()
}

/// How many seqs a channel reserves up front: its message count, or none
/// when idempotency keys decide it once the row is locked.
fn reserved(plan: &ChannelPlan<'_>) -> i64 {
    if plan.keyed {
        0
    } else {
        plan.positions.len() as i64
    }
}

/// A `channels` row's id, epoch, last_seq and first_seq, from column `at`.
fn row_of(row: &tokio_postgres::Row, at: usize) -> Result<Row, StoreError> {
    let epoch: String = row.try_get(at + 1).map_err(pg_error)?;
    Ok(Row {
        id: row.try_get(at).map_err(pg_error)?,
        epoch: Epoch::new(&epoch),
        base: seq_from_db(row.try_get(at + 2).map_err(pg_error)?)?,
        first_seq: seq_from_db(row.try_get(at + 3).map_err(pg_error)?)?,
    })
}

/// For each channel with idempotency keys, the messages already stored under them (read once
/// its row is locked, so no other node can store one meanwhile).
async fn find_keys(
    tx: &Transaction<'_>,
    plans: &[ChannelPlan<'_>],
    rows: &[Row],
    requests: &[Requested<'_>],
) -> Result<Vec<HashMap<String, SharedMessage>>, StoreError> {
    if !plans.iter().any(|p| p.keyed) {
        return Ok(plans.iter().map(|_| HashMap::new()).collect());
    }
    let find = tx.prepare_cached(FIND_KEYS).await.map_err(pg_error)?;
    let found = try_join_all(plans.iter().zip(rows).map(|(plan, row)| {
        let keys: Vec<&str> = plan
            .positions
            .iter()
            .filter_map(|&(r, m)| requests[r].messages[m].id.as_deref())
            .collect();
        let find = &find;
        async move {
            if keys.is_empty() {
                return Ok(Vec::new());
            }
            tx.query(find, &[&row.id, &keys]).await
        }
    }))
    .await
    .map_err(pg_error)?;
    let mut stored = Vec::with_capacity(plans.len());
    for ((plan, row), found) in plans.iter().zip(rows).zip(found) {
        let mut keys = HashMap::new();
        for r in found {
            let key: String = r.try_get(0).map_err(pg_error)?;
            let data: Vec<u8> = r.try_get(3).map_err(pg_error)?;
            let message = StoredMessage::new(
                plan.name.clone(),
                row.epoch.clone(),
                seq_from_db(r.try_get(1).map_err(pg_error)?)?,
                Some(key.clone()),
                r.try_get(2).map_err(pg_error)?,
                Bytes::from(data),
            );
            keys.insert(key, Arc::new(message));
        }
        stored.push(keys);
    }
    Ok(stored)
}

/// If a channel holding `first_seq..=last_seq` holds too many messages, the seq that should
/// become its first retained one: a trim runs past `max_messages` plus
/// `max(max_messages / 8, 16)` and keeps exactly `max_messages` (a limit of 0 keeps 1).
pub(super) fn count_trim_target(
    first_seq: u64,
    last_seq: u64,
    retention: Retention,
) -> Option<u64> {
    let max = retention.max_messages.max(1);
    let slack = (max / 8).max(MIN_TRIM_SLACK);
    let retained = (last_seq + 1).saturating_sub(first_seq);
    (retained > max.saturating_add(slack)).then(|| last_seq - max + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn count_trims_in_chunks_and_keeps_the_limit() {
        let keep = |max_messages| Retention {
            max_messages,
            max_age_ms: 0,
        };
        assert_eq!(count_trim_target(1, 26, keep(10)), None);
        assert_eq!(count_trim_target(1, 27, keep(10)), Some(18));
        assert_eq!(count_trim_target(1, 18, keep(0)), Some(18));
        assert_eq!(count_trim_target(5, 4, keep(1)), None, "nothing retained");
    }
}
