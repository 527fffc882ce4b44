//! The queue as a worker runs it, whatever its jobs send: [`OutboundStore`], the storage trait a
//! store implements for each kind of job, and [`Outbound`], the rules a worker applies around
//! it.
//!
//! A job is *leased* while a worker runs it: each lease counts an attempt, and a lease that
//! runs out unsettled (the process died) makes the job due again, marked in doubt (its send may
//! have happened). A lease skips the destinations paused now ([`Outbound::lease`]). A failed
//! attempt ([`Outbound::failed`]) pauses its destination when the failure was the
//! destination's as a whole, then is retried after the policy's backoff (or the destination's
//! `Retry-After`), or, after the last attempt, becomes a dead letter, which stays until it is
//! replayed (due again, attempts reset) or dropped. A success lifts its destination's pause
//! ([`Outbound::succeeded`]).

use std::hash::Hash;
use std::time::Duration;

use async_trait::async_trait;
use herald_core::log::StoreError;

use crate::pauses::Pauses;
use crate::retry::RetryPolicy;

/// A job's id in its queue.
pub type JobId = i64;

/// A dead letter as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetter<J> {
    /// The job's id.
    pub id: JobId,
    /// The job.
    pub job: J,
    /// Attempts made.
    pub attempts: u32,
    /// The last failure.
    pub reason: String,
    /// When it died, milliseconds since the Unix epoch.
    pub died_ms: i64,
}

/// The durable queue of one kind of job, implemented by the store (in the same database as
/// what the jobs are about).
#[async_trait]
pub trait OutboundStore: Send + Sync {
    /// Where a job goes, as far as pauses go (an app's provider, an endpoint).
    type Destination: Clone + Eq + Hash + Send + Sync;
    /// A leased job as the worker holds it (with its id, attempts and doubt).
    type Leased: Send;
    /// How a leased job ends (done with a result, retried at a time, dead).
    type Settlement: Send;
    /// Whose dead letters are listed, replayed and dropped (an app).
    type Owner: ?Sized + Sync;
    /// A job as its dead letter shows it.
    type Job: Send;
    /// How deep the queue is for one owner and destination (jobs waiting, the oldest one's
    /// age, dead letters), as the store counts it.
    type Depth: Send;

    /// Leases up to `limit` due jobs (due at or before `now_ms`, or leased with a lease that
    /// ran out, which marks them in doubt) until `now_ms + lease_ms`, oldest due first,
    /// skipping the destinations in `paused`. Each lease counts an attempt.
    async fn lease(
        &self,
        now_ms: i64,
        limit: usize,
        lease_ms: i64,
        paused: &[Self::Destination],
    ) -> Result<Vec<Self::Leased>, StoreError>;
    /// Settles leased jobs (one transaction). A job no longer leased is left alone.
    async fn settle(&self, settled: Vec<(JobId, Self::Settlement)>) -> Result<(), StoreError>;
    /// Dead letters of `owner`, in id order after `after`.
    async fn dead_letters(
        &self,
        owner: &Self::Owner,
        after: Option<JobId>,
        limit: usize,
    ) -> Result<Vec<DeadLetter<Self::Job>>, StoreError>;
    /// Makes a dead letter due now with its attempts reset; `false` if it is not a dead letter
    /// of `owner`.
    async fn replay(&self, owner: &Self::Owner, id: JobId, now_ms: i64)
        -> Result<bool, StoreError>;
    /// Deletes a dead letter; `false` if it is not a dead letter of `owner`.
    async fn drop_dead(&self, owner: &Self::Owner, id: JobId) -> Result<bool, StoreError>;
    /// Queue depth and dead letters (`owner`: only that owner's).
    async fn depth(&self, owner: Option<&Self::Owner>) -> Result<Vec<Self::Depth>, StoreError>;
}

/// One failed attempt, as [`Outbound::failed`] judges it.
#[derive(Debug, Clone, Copy)]
pub struct Failure<'a, D> {
    /// Where it went.
    pub destination: &'a D,
    /// Attempts made, this one included (1 for the first).
    pub attempts: u32,
    /// The destination's `Retry-After`, when it gave one.
    pub retry_after: Option<Duration>,
    /// Whether the destination failed as a whole (a rate limit, an outage): its other jobs
    /// wait too.
    pub destination_wide: bool,
}

/// What becomes of a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Run it again then, milliseconds since the Unix epoch.
    Retry {
        /// When.
        due_ms: i64,
    },
    /// It had its last attempt: a dead letter.
    Dead,
}

/// [`Outbound::failed`]'s answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    /// Retry or dead letter.
    pub next: Next,
    /// When the failure paused its destination: how long this failure asked it to wait.
    pub paused_for: Option<Duration>,
}

/// The queue's rules as a worker applies them: its retry policy and its destinations' pauses.
#[derive(Debug)]
pub struct Outbound<D> {
    policy: RetryPolicy,
    pauses: Pauses<D>,
}

impl<D: Clone + Eq + Hash> Outbound<D> {
    /// Rules retrying with `policy`, nothing paused.
    pub fn new(policy: RetryPolicy) -> Self {
        Outbound {
            policy,
            pauses: Pauses::default(),
        }
    }

    /// The retry policy.
    pub fn policy(&self) -> &RetryPolicy {
        &self.policy
    }

    /// The destinations' pauses.
    pub fn pauses(&self) -> &Pauses<D> {
        &self.pauses
    }

    /// Leases up to `limit` due jobs from `store` until `now_ms + lease_ms`, skipping the
    /// destinations paused now.
    pub async fn lease<S>(
        &self,
        store: &S,
        now_ms: i64,
        limit: usize,
        lease_ms: i64,
    ) -> Result<Vec<S::Leased>, StoreError>
    where
        S: OutboundStore<Destination = D> + ?Sized,
    {
        let paused = self.pauses.paused(now_ms);
        store.lease(now_ms, limit, lease_ms, &paused).await
    }

    /// What a failed attempt at `now_ms` becomes: its destination paused first when it failed
    /// as a whole, then a retry after the backoff (or its `Retry-After`), or a dead letter
    /// after the last attempt.
    pub fn failed(&self, failure: Failure<'_, D>, now_ms: i64) -> Verdict {
        let paused_for = failure.destination_wide.then(|| {
            self.pauses
                .pause(failure.destination, now_ms, failure.retry_after)
        });
        let next = match self
            .policy
            .next_attempt(failure.attempts, failure.retry_after)
        {
            Some(wait) => Next::Retry {
                due_ms: now_ms.saturating_add(wait.as_millis() as i64),
            },
            None => Next::Dead,
        };
        Verdict { next, paused_for }
    }

    /// A send to `destination` went through: its pause is lifted. Answers whether it had been
    /// paused (to say once that it works again).
    pub fn succeeded(&self, destination: &D) -> bool {
        self.pauses.resume(destination)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use parking_lot::Mutex;

    /// A queue in memory, kept as the storage trait says: the contract a store implements.
    #[derive(Default)]
    struct Memory {
        jobs: Mutex<Vec<Row>>,
    }

    #[derive(Debug, Clone)]
    struct Row {
        id: JobId,
        destination: &'static str,
        due_ms: i64,
        attempts: u32,
        state: &'static str,
        reason: String,
    }

    #[derive(Debug, Clone, PartialEq)]
    enum Ending {
        Done,
        Retry { due_ms: i64, reason: String },
        Dead { reason: String },
    }

    #[async_trait]
    impl OutboundStore for Memory {
        type Destination = &'static str;
        type Leased = Row;
        type Settlement = Ending;
        type Owner = str;
        type Job = &'static str;
        type Depth = (&'static str, u64);

        async fn lease(
            &self,
            now_ms: i64,
            limit: usize,
            lease_ms: i64,
            paused: &[&'static str],
        ) -> Result<Vec<Row>, StoreError> {
            let mut jobs = self.jobs.lock();
            let mut due: Vec<&mut Row> = jobs
                .iter_mut()
                .filter(|r| matches!(r.state, "queued" | "leased") && r.due_ms <= now_ms)
                .filter(|r| !paused.contains(&r.destination))
                .collect();
            due.sort_by_key(|r| (r.due_ms, r.id));
            Ok(due
                .into_iter()
                .take(limit)
                .map(|r| {
                    r.state = "leased";
                    r.due_ms = now_ms + lease_ms;
                    r.attempts += 1;
                    r.clone()
                })
                .collect())
        }

        async fn settle(&self, settled: Vec<(JobId, Ending)>) -> Result<(), StoreError> {
            let mut jobs = self.jobs.lock();
            for (id, ending) in settled {
                let Some(row) = jobs.iter_mut().find(|r| r.id == id && r.state == "leased") else {
                    continue;
                };
                match ending {
                    Ending::Done => row.state = "done",
                    Ending::Retry { due_ms, reason } => {
                        (row.state, row.due_ms, row.reason) = ("queued", due_ms, reason)
                    }
                    Ending::Dead { reason } => (row.state, row.reason) = ("dead", reason),
                }
            }
            Ok(())
        }

        async fn dead_letters(
            &self,
            _owner: &str,
            after: Option<JobId>,
            limit: usize,
        ) -> Result<Vec<DeadLetter<&'static str>>, StoreError> {
            Ok(self
                .jobs
                .lock()
                .iter()
                .filter(|r| r.state == "dead" && after.is_none_or(|a| r.id > a))
                .take(limit)
                .map(|r| DeadLetter {
                    id: r.id,
                    job: r.destination,
                    attempts: r.attempts,
                    reason: r.reason.clone(),
                    died_ms: 0,
                })
                .collect())
        }

        async fn replay(&self, _owner: &str, id: JobId, now_ms: i64) -> Result<bool, StoreError> {
            let mut jobs = self.jobs.lock();
            let Some(row) = jobs.iter_mut().find(|r| r.id == id && r.state == "dead") else {
                return Ok(false);
            };
            (row.state, row.due_ms, row.attempts) = ("queued", now_ms, 0);
            Ok(true)
        }

        async fn drop_dead(&self, _owner: &str, id: JobId) -> Result<bool, StoreError> {
            let mut jobs = self.jobs.lock();
            let before = jobs.len();
            jobs.retain(|r| !(r.id == id && r.state == "dead"));
            Ok(jobs.len() < before)
        }

        async fn depth(
            &self,
            _owner: Option<&str>,
        ) -> Result<Vec<(&'static str, u64)>, StoreError> {
            let mut depth: Vec<(&'static str, u64)> = Vec::new();
            for row in self.jobs.lock().iter().filter(|r| r.state == "dead") {
                match depth.iter_mut().find(|(d, _)| *d == row.destination) {
                    Some((_, n)) => *n += 1,
                    None => depth.push((row.destination, 1)),
                }
            }
            Ok(depth)
        }
    }

    fn queue(rows: &[(JobId, &'static str)]) -> Memory {
        let memory = Memory::default();
        memory.jobs.lock().extend(rows.iter().map(|(id, d)| Row {
            id: *id,
            destination: d,
            due_ms: 0,
            attempts: 0,
            state: "queued",
            reason: String::new(),
        }));
        memory
    }

    /// Runs one round at `now`: leases, fails every job of `failing` (destination-wide when
    /// `wide`), succeeds the rest; answers the ids leased.
    async fn round(
        rules: &Outbound<&'static str>,
        q: &Memory,
        now: i64,
        failing: &str,
        wide: bool,
    ) -> Vec<JobId> {
        let leased = rules.lease(q, now, 10, 60_000).await.unwrap();
        let mut settled = Vec::new();
        for row in &leased {
            let ending = if row.destination == failing {
                let failure = Failure {
                    destination: &row.destination,
                    attempts: row.attempts,
                    retry_after: None,
                    destination_wide: wide,
                };
                match rules.failed(failure, now).next {
                    Next::Retry { due_ms } => Ending::Retry {
                        due_ms,
                        reason: "503".into(),
                    },
                    Next::Dead => Ending::Dead {
                        reason: "503".into(),
                    },
                }
            } else {
                rules.succeeded(&row.destination);
                Ending::Done
            };
            settled.push((row.id, ending));
        }
        q.settle(settled).await.unwrap();
        leased.iter().map(|r| r.id).collect()
    }

    #[tokio::test]
    async fn a_paused_destination_is_not_leased_until_its_time() {
        let rules = Outbound::new(RetryPolicy::default());
        let q = queue(&[(1, "down"), (2, "down"), (3, "up")]);
        // Job 1 fails as a whole: its destination pauses for 2 s; job 2, leased with it,
        // fails too without lengthening the pause.
        assert_eq!(round(&rules, &q, 0, "down", true).await, [1, 2, 3]);
        q.jobs.lock().push(Row {
            id: 4,
            destination: "down",
            due_ms: 0,
            attempts: 0,
            state: "queued",
            reason: String::new(),
        });
        // Due, but its destination is paused: not leased until 2 s.
        assert!(round(&rules, &q, 1_999, "", false).await.is_empty());
        assert_eq!(rules.pauses().paused(1_999), ["down"]);
        let at_two = round(&rules, &q, 2_000, "", false).await;
        assert!(at_two.contains(&4), "{at_two:?}");
        assert!(rules.pauses().paused(2_000).is_empty());
    }

    #[tokio::test]
    async fn the_last_attempt_makes_a_dead_letter_that_is_replayed_or_dropped() {
        let policy = RetryPolicy {
            max_attempts: 3,
            base: Duration::from_millis(100),
            cap: Duration::from_secs(1),
        };
        let rules = Outbound::new(policy);
        let q = queue(&[(1, "down"), (2, "down")]);
        let mut now = 0;
        for attempt in 1..=3u32 {
            let mut leased = round(&rules, &q, now, "down", false).await;
            leased.sort_unstable();
            assert_eq!(leased, [1, 2], "attempt {attempt}");
            let rows = q.jobs.lock().clone();
            for row in &rows {
                assert_eq!(row.attempts, attempt);
                if attempt < 3 {
                    // Backoff with jitter: between half and all of 100 ms, 200 ms.
                    let step = 100 << (attempt - 1);
                    let wait = row.due_ms - now;
                    assert!(wait >= step / 2 && wait <= step, "{wait}");
                    assert_eq!(row.state, "queued");
                }
            }
            now += 1_000;
        }
        let dead = q.dead_letters("app", None, 10).await.unwrap();
        assert_eq!(dead.iter().map(|d| d.id).collect::<Vec<_>>(), [1, 2]);
        assert_eq!(q.depth(None).await.unwrap(), [("down", 2)]);
        assert!(dead.iter().all(|d| d.attempts == 3 && d.reason == "503"));
        assert!(round(&rules, &q, now, "", false).await.is_empty());
        // Replayed: due now with its attempts reset, and it goes through.
        assert!(q.replay("app", 1, now).await.unwrap());
        assert!(!q.replay("app", 1, now).await.unwrap());
        assert_eq!(round(&rules, &q, now, "", false).await, [1]);
        assert_eq!(q.jobs.lock()[0].attempts, 1);
        // Dropped: gone.
        assert!(q.drop_dead("app", 2).await.unwrap());
        assert!(q.dead_letters("app", None, 10).await.unwrap().is_empty());
    }

    #[test]
    fn a_destination_wide_failure_pauses_and_its_retry_after_is_honoured() {
        let rules = Outbound::new(RetryPolicy::default());
        let failure = Failure {
            destination: &"d",
            attempts: 1,
            retry_after: Some(Duration::from_secs(30)),
            destination_wide: true,
        };
        let verdict = rules.failed(failure, 1_000);
        assert_eq!(
            verdict,
            Verdict {
                next: Next::Retry { due_ms: 31_000 },
                paused_for: Some(Duration::from_secs(30)),
            }
        );
        assert_eq!(rules.pauses().paused(30_999), ["d"]);
        // A failure of one job only pauses nothing.
        let one = Failure {
            destination: &"e",
            destination_wide: false,
            ..failure
        };
        assert_eq!(rules.failed(one, 1_000).paused_for, None);
        assert!(!rules.pauses().is_paused(&"e", 1_000));
        // A success lifts the pause, said once.
        assert!(rules.succeeded(&"d"));
        assert!(!rules.succeeded(&"d"));
        assert!(rules.pauses().paused(2_000).is_empty());
    }
}
