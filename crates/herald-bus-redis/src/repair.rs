//! The repair task: looks, every third of [`crate::BusOptions::gap_wait`], at the channels
//! that need it. It starts newly followed channels after the hub's head floor (at once, so the
//! node's own commits flow even while Redis is away), reads from the log what a channel may
//! have missed while not subscribed (once Redis confirmed the subscription, and after a
//! reconnect) and fills gaps whose missing seq did not arrive from Redis in time. Before reading
//! what a channel may have missed, the heads of all such channels of a round are read at once,
//! from Redis (`crate::heads`: one pipeline) or, when Redis cannot vouch for them, in one store
//! call ([`ChannelLog::states`]), and only the channels whose head is beyond what they
//! released are read from the log: a subscribe storm of new channels costs a few Redis
//! pipelines and no log read for a channel that had no message meanwhile. Reads run a few at a
//! time; what they return goes through the channel's sequencer like anything else, so a
//! message both read and received is delivered once.

use std::sync::Arc;
use std::time::{Duration, Instant};

use herald_core::log::{ChannelLog, CommitSink, ReadFrom, StoreError};
use herald_core::message::SharedMessage;
use herald_core::ChannelName;
use tokio::sync::Semaphore;

use crate::bus::Shared;
use crate::followed::{Follow, StartRead};

/// Log reads running at once.
const CONCURRENT_READS: usize = 16;
/// Messages per log read.
const PAGE: usize = 1000;
/// Channels whose heads one store call reads.
const CHECKS_PER_READ: usize = 1000;
/// Wait before retrying a failed read.
const READ_RETRY: Duration = Duration::from_millis(100);

/// What the task does with one channel this round.
enum Step {
    Nothing,
    /// Read after this seq, if the channel's head is beyond it.
    Check(u64),
    /// Read after this seq (a gap was seen).
    Read(u64),
}

/// Starts a newly followed channel after the hub's head `floor`. What was committed since
/// the floor (this node's commits made before it followed the channel, other nodes'
/// messages) is read once Redis confirms the subscription, with the round's other heads: the
/// messages only if the head moved. Not before, which would read twice, unless Redis is away
/// (`read_now`): then now, so that this node's own commits reach its subscribers (the
/// subscription task asks for it if the subscription fails). Nothing at all if the engine's
/// subscribers were told a head read after Redis confirmed the subscription, and stand at it:
/// everything after it arrives from Redis (`crate::head_reads`).
fn start(
    follow: &mut Follow,
    floor: u64,
    read_now: bool,
    now: Instant,
    ready: &mut Vec<SharedMessage>,
) -> Step {
    follow.sequencer.start_after(floor, now, ready);
    let head_read = follow.take_head_read();
    if follow.listening && head_read.is_some_and(|head| floor >= head) {
        follow.needs_read = false;
        return Step::Nothing;
    }
    if !read_now && !follow.listening {
        follow.start_read = StartRead::Deferred;
        return Step::Nothing;
    }
    Step::Check(floor)
}

pub(crate) async fn run(shared: Arc<Shared>) {
    let log = loop {
        let attached = shared.attached.notified();
        if let Some(log) = shared.log.get() {
            break log.clone();
        }
        attached.await;
    };
    let reads = Arc::new(Semaphore::new(CONCURRENT_READS));
    let mut tick =
        tokio::time::interval((shared.options.gap_wait / 3).max(Duration::from_millis(2)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let wait = shared.options.gap_wait;
    loop {
        tick.tick().await;
        // Channels that may have missed messages (newly followed, newly listening): their
        // heads are read in batches, and only those whose head is beyond what was released
        // are read; a gap seen in what arrived is read at once.
        let mut to_check: Vec<(ChannelName, u64)> = Vec::new();
        let attention = shared.followed.take_attention();
        shared
            .counters
            .repair_looks
            .fetch_add(attention.len() as u64, std::sync::atomic::Ordering::Relaxed);
        // Redis away: a channel started now reads what it may have missed at once, so that
        // this node's own commits reach its subscribers (the subscription task asks for it if
        // a subscription fails later).
        let read_now = shared.link_log.is_down();
        for (channel, told) in attention {
            // Where the hub's subscribers stand: as the hub told it with the mark
            // (`head_known`, a storm's new channel), else read before the channel's shard is
            // locked (the hub takes its own lock), so that one look both decides and starts a
            // newly followed channel.
            let floor = told.or_else(|| shared.fan_out.hub().head_floor(&channel));
            let step = shared.followed.step(
                &channel,
                |follow, now, ready| {
                    let step = if follow.repairing {
                        Step::Nothing
                    } else if follow.sequencer.next().is_none() {
                        // Even before Redis confirms the subscription: this node's own
                        // commits then reach its subscribers while Redis is away.
                        match floor {
                            Some(floor) => start(follow, floor, read_now, now, ready),
                            // Until the hub knows where its subscribers stand: it says when
                            // it does (the interest hook's `head_known` attends the channel
                            // again).
                            None => Step::Nothing,
                        }
                    } else if follow.needs_read
                        && (follow.listening || follow.start_read == StartRead::Owed)
                    {
                        Step::Check(follow.sequencer.next().map_or(0, |n| n - 1))
                    } else if let Some(gap) = follow.sequencer.overdue_gap(now, wait) {
                        Step::Read(gap.after)
                    } else {
                        Step::Nothing
                    };
                    if matches!(step, Step::Check(_) | Step::Read(_)) {
                        follow.repairing = true;
                        follow.start_read = StartRead::Done;
                        // A read before Redis confirmed the subscription may miss messages
                        // other nodes publish until it does: read again then.
                        if follow.listening {
                            follow.needs_read = false;
                        }
                    }
                    step
                },
                |ready| shared.fan_out.committed(ready),
            );
            match step {
                Some(Step::Check(after)) => to_check.push((channel, after)),
                Some(Step::Read(after)) => spawn_read(&shared, &log, &reads, channel, after),
                Some(Step::Nothing) => {}
                // The hub told its floor before the subscription task followed the channel:
                // looked at again next round while the hub still has it (the subscription
                // task follows every channel the hub has an entry for).
                None if told.is_some() => {
                    if let Some(floor) = shared.fan_out.hub().head_floor(&channel) {
                        shared.followed.attend_at(&channel, floor);
                    }
                }
                None => {}
            }
        }
        for batch in to_check.chunks(CHECKS_PER_READ) {
            let permit = reads.clone().acquire_owned();
            let (shared, log, reads, batch) =
                (shared.clone(), log.clone(), reads.clone(), batch.to_vec());
            tokio::spawn(async move {
                let permit = permit.await;
                check_heads(&shared, &log, &reads, batch, permit).await;
            });
        }
    }
}

fn spawn_read(
    shared: &Arc<Shared>,
    log: &Arc<dyn ChannelLog>,
    reads: &Arc<Semaphore>,
    channel: ChannelName,
    after: u64,
) {
    let permit = reads.clone().acquire_owned();
    let (shared, log) = (shared.clone(), log.clone());
    tokio::spawn(async move {
        let _permit = permit.await;
        read_after(&shared, &log, channel, after).await;
    });
}

/// Reads the heads of `batch` (each a channel being repaired and the seq it has released up
/// to) from Redis, or in one store call if Redis cannot vouch for them, and reads from the log
/// only the channels whose head is beyond it: a read after `after` would return nothing for
/// the others. What is committed after the heads were read arrives from Redis, since a head
/// moves in the same step as its message is published (or, for a channel not yet listening, is
/// checked again once it is).
async fn check_heads(
    shared: &Arc<Shared>,
    log: &Arc<dyn ChannelLog>,
    reads: &Arc<Semaphore>,
    batch: Vec<(ChannelName, u64)>,
    permit: Result<tokio::sync::OwnedSemaphorePermit, tokio::sync::AcquireError>,
) {
    let channels: Vec<ChannelName> = batch.iter().map(|(c, _)| c.clone()).collect();
    shared
        .counters
        .head_checks
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    shared
        .counters
        .checked_channels
        .fetch_add(batch.len() as u64, std::sync::atomic::Ordering::Relaxed);
    let heads: Result<Vec<u64>, StoreError> = match crate::heads::read(shared, &channels).await {
        Some(heads) => {
            shared
                .counters
                .heads_from_redis
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            Ok(heads.into_iter().map(|head| head.last_seq).collect())
        }
        None => {
            shared
                .counters
                .heads_not_vouched
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            log.states(&channels)
                .await
                .map(|states| states.into_iter().map(|state| state.last_seq).collect())
        }
    };
    drop(permit);
    let heads: Vec<u64> = match heads {
        Ok(heads) if heads.len() == batch.len() => heads,
        Ok(_) => {
            // A store answering another count than asked: read each channel instead.
            for (channel, after) in batch {
                spawn_read(shared, log, reads, channel, after);
            }
            return;
        }
        Err(error) => {
            if !matches!(error, StoreError::Closed) {
                tracing::debug!(error = %error.chain(), channels = batch.len(), "the Redis bus cannot read channel heads from the log yet");
                tokio::time::sleep(READ_RETRY).await;
            }
            for (channel, _) in batch {
                finish(shared, &channel, true);
            }
            return;
        }
    };
    for ((channel, after), head) in batch.into_iter().zip(heads) {
        if head > after {
            spawn_read(shared, log, reads, channel, after);
        } else {
            finish(shared, &channel, false);
        }
    }
}

/// Ends `channel`'s repair (`failed`: to be done again). The task looks at the channel again
/// only if it needs it ([`crate::followed::Followed::with`] marks it: a gap awaited, a read
/// owed while listening), not after every check.
fn finish(shared: &Shared, channel: &ChannelName, failed: bool) {
    shared.followed.with(
        channel,
        |follow, _, _| {
            follow.repairing = false;
            follow.needs_read |= failed;
        },
        |_| {},
    );
}

/// Reads `channel` from the log after `after` up to its head, through the sequencer.
async fn read_after(shared: &Shared, log: &Arc<dyn ChannelLog>, channel: ChannelName, after: u64) {
    shared
        .counters
        .repairs
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut position = after;
    let outcome = loop {
        let slice = match log.read(&channel, ReadFrom::After(position), PAGE).await {
            Ok(slice) => slice,
            Err(error) => break Err(error),
        };
        let last = slice.state.last_seq;
        let read_to = slice.messages.last().map_or(position, |m| m.seq);
        let first = slice.messages.first().map(|m| m.seq);
        let done = slice.messages.is_empty() || read_to >= last;
        shared.followed.with(
            &channel,
            |follow, now, ready| {
                if let Some(first) = first.filter(|&f| f > position + 1) {
                    // Retention removed what came before: nobody can have it any more.
                    follow.sequencer.skip_to(first, now, ready);
                }
                for message in slice.messages {
                    follow.sequencer.offer(message, now, ready);
                }
            },
            |ready| shared.fan_out.committed(ready),
        );
        position = read_to;
        if done {
            break Ok(());
        }
    };
    match &outcome {
        // The node is stopping: nothing is left to deliver to, and no reason to warn per channel.
        Err(StoreError::Closed) => return,
        // The store says its own outage once; each channel's retry is no news.
        Err(error @ StoreError::Unavailable { .. }) => {
            tracing::debug!(error = %error.chain(), channel = channel.as_str(), "the Redis bus cannot read a gap from the log yet");
            tokio::time::sleep(READ_RETRY).await;
        }
        Err(error) => {
            tracing::warn!(error = %error.chain(), channel = channel.as_str(), "the Redis bus cannot read a gap from the log yet");
            tokio::time::sleep(READ_RETRY).await;
        }
        Ok(()) => {}
    }
    finish(shared, &channel, outcome.is_err());
}
