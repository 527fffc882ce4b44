//! The writer task: one per store. It waits for the first append, drains whatever else queued
//! meanwhile (up to `max_batch` messages), stores it all in one transaction (one statement when
//! no message carries an idempotency key, [`super::append_unkeyed`]; else [`super::append`]),
//! hands the new messages to the [`CommitSink`] and only then replies. Batches form from
//! requests that arrived while the previous commit ran; when fewer are queued than the last
//! batch took, it waits a little for more first ([`super::gather`]: at most as long as the last
//! commit took, never over 2 ms; a lone publisher never waits).
//!
//! Between batches it sweeps expired messages about every 30 s: the channels whose oldest
//! retained message is past their age limit, each in a short transaction of its own that locks
//! the channel's row, so appends from other nodes wait for one channel at a time; then the
//! expired and old cleared retained messages, a page at a time (`common::retained`); then it
//! deletes a chunk of finished provider jobs of long-expired pushes. It exits when every sender
//! is gone, after finishing what was queued.
//!
//! Between batches it also purges what deleted apps left (their channels, messages and
//! retained messages), a short step at a time, every 250 ms while steps find something
//! (`common::app_purge`).
//!
//! A batch or sweep that fails because the database cannot be reached (or is out of space) is
//! only a DEBUG line: the store's outage log (`super::outage`) says the outage once.

use std::sync::Arc;
use std::time::Instant;

use deadpool_postgres::Pool;
use herald_core::log::{CommitSink, StoreError};
use herald_core::message::now_millis;
use tokio::sync::mpsc;

use super::app_purge;
use super::append::{self, Committed, Requested};
use super::append_unkeyed;
use super::gather::{Batch, Gather};
use super::jobs::prune_expired_chunk;
use super::reachability::Reachability;
use super::{pg_error, pool_failure, retained, PostgresOptions};
use crate::common;
use crate::common::app_purge::PurgeSchedule;
use crate::common::jobs::{DONE_JOBS_KEPT_AFTER_EXPIRY_MS, PRUNE_CHUNK};
use crate::common::retained::{SweepCursor, SWEEP_PAGES};
use crate::common::values::{seq_from_db, seq_to_db};
use crate::common::writer::AGE_TRIM_INTERVAL;
pub(crate) use crate::common::writer::{AppendRequest, Reply};

/// Whether `error` is the database being unreachable or out of space: the store's outage log
/// says that once (`super::outage`), so each failed batch or sweep is only a DEBUG line.
fn is_outage(error: &StoreError) -> bool {
    matches!(
        error,
        StoreError::Unavailable { .. } | StoreError::Full { .. }
    )
}

/// Work for the writer task.
pub(crate) enum Request {
    /// Append messages to a channel.
    Append(AppendRequest),
    /// Sweep expired messages now, as if the time were `now_ms`; replies with rows deleted.
    TrimExpired { now_ms: i64, reply: Reply<usize> },
    /// Purge what deleted apps left: one step now, answering the rows it deleted or changed
    /// (`Some`), or steps from now on until nothing is left (`None`).
    PurgeDeletedApps { reply: Option<Reply<usize>> },
}

/// State owned by the writer task.
pub(crate) struct Writer {
    pool: Pool,
    sink: Arc<dyn CommitSink>,
    /// Told every commit's outcome (`/readyz` reads it).
    reachability: Arc<Reachability>,
    max_batch: usize,
    /// The last batch's size and commit time: how long the next waits for more appends.
    gather: Gather,
    /// Where the next sweep of the retained messages goes on from.
    retained_sweep: SweepCursor,
    /// When the next step of the deleted apps' purge runs.
    purge: PurgeSchedule,
}

impl Writer {
    pub(crate) fn new(
        pool: Pool,
        sink: Arc<dyn CommitSink>,
        reachability: Arc<Reachability>,
        options: &PostgresOptions,
    ) -> Self {
        Writer {
            pool,
            sink,
            reachability,
            max_batch: options.max_batch.max(1),
            gather: Gather::default(),
            retained_sweep: SweepCursor::default(),
            purge: PurgeSchedule::default(),
        }
    }

    /// The task's main loop; returns when the request channel is closed and drained.
    pub(crate) async fn run(mut self, mut requests: mpsc::UnboundedReceiver<Request>) {
        let mut pending: Option<Request> = None;
        let mut next_trim = tokio::time::Instant::now() + AGE_TRIM_INTERVAL;
        loop {
            let first = match pending.take() {
                Some(request) => request,
                None => {
                    let purge_at =
                        tokio::time::Instant::from_std(self.purge.earlier(next_trim.into_std()));
                    tokio::select! {
                        request = requests.recv() => match request {
                            Some(request) => request,
                            None => break,
                        },
                        () = tokio::time::sleep_until(purge_at) => {
                            if tokio::time::Instant::now() >= next_trim {
                                let _ = self.sweep(now_millis()).await;
                                next_trim = tokio::time::Instant::now() + AGE_TRIM_INTERVAL;
                            }
                            self.purge_if_due().await;
                            continue;
                        }
                    }
                }
            };
            match first {
                Request::Append(append) => {
                    self.commit_batch(append, &mut requests, &mut pending).await
                }
                Request::TrimExpired { now_ms, reply } => {
                    let _ = reply.send(self.sweep(now_ms).await);
                }
                Request::PurgeDeletedApps { reply: Some(reply) } => {
                    let _ = reply.send(self.purge_step().await);
                }
                Request::PurgeDeletedApps { reply: None } => self.purge.want(),
            }
            if tokio::time::Instant::now() >= next_trim {
                let _ = self.sweep(now_millis()).await;
                next_trim = tokio::time::Instant::now() + AGE_TRIM_INTERVAL;
            }
            self.purge_if_due().await;
        }
        tracing::debug!("postgres store writer stopped");
    }

    /// Commits `first` and whatever appends queued behind it (up to `max_batch` messages) in
    /// one transaction, feeds the sink, then replies to every request of the batch. When fewer
    /// requests are queued than the last batch took, waits a little for more first
    /// ([`Gather::collect`]). A request that would overflow the batch, or is not an append, is
    /// left in `pending`.
    async fn commit_batch(
        &mut self,
        first: AppendRequest,
        requests: &mut mpsc::UnboundedReceiver<Request>,
        pending: &mut Option<Request>,
    ) {
        let Batch {
            requests: batch,
            messages: size,
        } = self
            .gather
            .collect(first, requests, pending, self.max_batch)
            .await;
        let started = Instant::now();
        let outcome = self.transact(&batch).await;
        self.gather.committed(batch.len(), started.elapsed());
        self.reachability.record_write(outcome.as_ref().map(|_| ()));
        match outcome {
            Ok(committed) => {
                metrics::histogram!("herald_store_commit_seconds")
                    .record(started.elapsed().as_secs_f64());
                common::writer::committed(&*self.sink, size, &committed.new_messages);
                for (request, result) in batch.into_iter().zip(committed.results) {
                    let _ = request.reply.send(Ok(result));
                }
            }
            Err(err) => {
                if is_outage(&err) {
                    // The outage is said once, by the store's outage log.
                    tracing::debug!(error = %err.chain(), requests = batch.len(), "store batch failed");
                } else {
                    tracing::error!(error = %err.chain(), requests = batch.len(), "store batch failed");
                }
                for request in batch {
                    let _ = request.reply.send(Err(err.clone()));
                }
            }
        }
    }

    /// Stores the batch in one transaction and commits it: in one statement when no message
    /// carries an idempotency key ([`append_unkeyed`], then the count trims it found due),
    /// else in a transaction that looks the keys up under the rows' locks ([`append`]).
    async fn transact(&self, batch: &[AppendRequest]) -> Result<Committed, StoreError> {
        let mut client = self
            .pool
            .get()
            .await
            .map_err(|e| pool_failure("PostgreSQL (appends)", e))?;
        let requested: Vec<Requested<'_>> = batch
            .iter()
            .map(|r| Requested {
                channel: &r.channel,
                messages: &r.messages,
                retention: r.retention,
            })
            .collect();
        if append_unkeyed::applies(&requested) {
            let (committed, trims) =
                append_unkeyed::store(&client, &requested, now_millis()).await?;
            append_unkeyed::trim(&client, &trims).await;
            return Ok(committed);
        }
        let tx = client.transaction().await.map_err(pg_error)?;
        let committed = append::store(&tx, &requested, now_millis()).await?;
        tx.commit().await.map_err(pg_error)?;
        Ok(committed)
    }

    /// Removes, in every channel with an age limit, the messages older than
    /// `now_ms - max_age_ms`, oldest first, stopping at the first young enough one (so a clock
    /// that stepped back never leaves a hole), and advances `first_seq`.
    async fn sweep(&mut self, now_ms: i64) -> Result<usize, StoreError> {
        let result = self.sweep_channels(now_ms).await;
        match &result {
            Ok(0) => {}
            Ok(deleted) => tracing::debug!(deleted, "expired messages removed"),
            Err(err) if is_outage(err) => {
                self.reachability.record_failure(err);
                tracing::debug!(error = %err.chain(), "expired-message sweep failed");
            }
            Err(err) => tracing::error!(error = %err.chain(), "expired-message sweep failed"),
        }
        self.sweep_retained(now_ms).await;
        self.prune_jobs(now_ms).await;
        // What deleted apps left, should a restart have stopped their purge.
        self.purge.want();
        result
    }

    /// Runs the deleted apps' purge step if one is due.
    async fn purge_if_due(&mut self) {
        if self.purge.is_due() {
            let _ = self.purge_step().await;
        }
    }

    /// One step of the deleted apps' purge (`common::app_purge`): the rows it deleted or
    /// changed; the next step is planned from what it found.
    async fn purge_step(&mut self) -> Result<usize, StoreError> {
        let result = async {
            let mut client = self
                .pool
                .get()
                .await
                .map_err(|e| pool_failure("PostgreSQL (the purge)", e))?;
            app_purge::step(&mut client).await
        }
        .await;
        match &result {
            Ok(0) => {}
            Ok(deleted) => tracing::debug!(deleted, "rows of deleted apps removed"),
            Err(err) if is_outage(err) => {
                self.reachability.record_failure(err);
                tracing::debug!(error = %err.chain(), "deleted apps' purge failed");
            }
            Err(err) => tracing::error!(error = %err.chain(), "deleted apps' purge failed"),
        }
        self.purge.stepped(result.as_ref().ok().copied());
        result
    }

    /// Deletes the retained messages expired at `now_ms` and the old cleared markers, a page
    /// at a time (one statement each), at most [`SWEEP_PAGES`] pages (`common::retained`); a
    /// failure is logged and left for the next sweep.
    async fn sweep_retained(&mut self, now_ms: i64) {
        let client = match self.pool.get().await {
            Ok(client) => client,
            Err(e) => {
                let err = pool_failure("PostgreSQL (the sweep)", e);
                self.reachability.record_failure(&err);
                tracing::debug!(error = %err.chain(), "retained-message sweep failed");
                return;
            }
        };
        let mut deleted = 0;
        for _ in 0..SWEEP_PAGES {
            match retained::sweep_step(&client, self.retained_sweep.after(), now_ms).await {
                Ok((n, last)) => {
                    deleted += n;
                    if !self.retained_sweep.stepped(last) {
                        break;
                    }
                }
                Err(err) => {
                    if is_outage(&err) {
                        self.reachability.record_failure(&err);
                        tracing::debug!(error = %err.chain(), "retained-message sweep failed");
                    } else {
                        tracing::error!(error = %err.chain(), "retained-message sweep failed");
                    }
                    break;
                }
            }
        }
        if deleted > 0 {
            tracing::debug!(deleted, "expired and cleared retained messages removed");
        }
    }

    /// Deletes a chunk of finished send jobs of pushes that expired more than a day before
    /// `now_ms`; a failure is logged and left for the next sweep.
    async fn prune_jobs(&self, now_ms: i64) {
        let result = async {
            let mut client = self
                .pool
                .get()
                .await
                .map_err(|e| pool_failure("PostgreSQL (the sweep)", e))?;
            let before = now_ms.saturating_sub(DONE_JOBS_KEPT_AFTER_EXPIRY_MS);
            prune_expired_chunk(&mut client, before, Some(PRUNE_CHUNK)).await
        }
        .await;
        match result {
            Ok(0) => {}
            Ok(pruned) => tracing::debug!(pruned, "finished jobs of expired pushes removed"),
            Err(err) if is_outage(&err) => {
                self.reachability.record_failure(&err);
                tracing::debug!(error = %err.chain(), "finished-job prune failed");
            }
            Err(err) => tracing::error!(error = %err.chain(), "finished-job prune failed"),
        }
    }

    async fn sweep_channels(&self, now_ms: i64) -> Result<usize, StoreError> {
        let mut client = self
            .pool
            .get()
            .await
            .map_err(|e| pool_failure("PostgreSQL (the sweep)", e))?;
        // Channels whose oldest retained message has expired.
        let candidates = client
            .query(
                "SELECT c.id FROM channels c JOIN messages m
                     ON m.channel_id = c.id AND m.seq = c.first_seq
                 WHERE c.max_age_ms > 0 AND c.first_seq <= c.last_seq
                   AND m.time < $1 - c.max_age_ms
                 ORDER BY c.name",
                &[&now_ms],
            )
            .await
            .map_err(pg_error)?;
        let mut deleted = 0;
        for candidate in candidates {
            let id: i64 = candidate.try_get(0).map_err(pg_error)?;
            let tx = client.transaction().await.map_err(pg_error)?;
            let Some(row) = tx
                .query_opt(
                    "SELECT last_seq, first_seq, max_age_ms FROM channels WHERE id = $1
                     FOR UPDATE",
                    &[&id],
                )
                .await
                .map_err(pg_error)?
            else {
                continue;
            };
            let (last_seq, first_seq, max_age_ms): (i64, i64, i64) = (
                row.try_get(0).map_err(pg_error)?,
                row.try_get(1).map_err(pg_error)?,
                row.try_get(2).map_err(pg_error)?,
            );
            if max_age_ms <= 0 {
                continue;
            }
            let cutoff = now_ms.saturating_sub(max_age_ms);
            let oldest_kept: Option<i64> = tx
                .query_opt(
                    "SELECT seq FROM messages WHERE channel_id = $1 AND seq >= $2
                       AND time >= $3 ORDER BY seq LIMIT 1",
                    &[&id, &first_seq, &cutoff],
                )
                .await
                .map_err(pg_error)?
                .map(|r| r.try_get(0))
                .transpose()
                .map_err(pg_error)?;
            let new_first = match oldest_kept {
                Some(seq) => seq_from_db(seq)?,
                None => seq_from_db(last_seq)? + 1,
            };
            if new_first <= seq_from_db(first_seq)? {
                continue;
            }
            let first = seq_to_db(new_first);
            // From the first retained seq: rows deleted before stay in the index until a
            // vacuum, and an unbounded `seq < $3` would walk them all again.
            let n = tx
                .execute(
                    "DELETE FROM messages WHERE channel_id = $1 AND seq >= $2 AND seq < $3",
                    &[&id, &first_seq, &first],
                )
                .await
                .map_err(pg_error)?;
            tx.execute(
                "UPDATE channels SET first_seq = $2 WHERE id = $1",
                &[&id, &first],
            )
            .await
            .map_err(pg_error)?;
            tx.commit().await.map_err(pg_error)?;
            deleted += n as usize;
        }
        Ok(deleted)
    }
}
