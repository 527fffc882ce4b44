//! Whether PostgreSQL takes writes now, as `/readyz` asks it
//! ([`herald_core::log::ChannelLog::takes_writes`]), without a query per probe.
//!
//! The writer task records the outcome of every commit. A caller that finds the last outcome
//! older than [`FRESH_FOR`] checks once (a pooled connection, then `SELECT
//! pg_is_in_recovery()`, within [`CHECK_TIMEOUT`]: a standby that failover has not promoted yet
//! answers queries but takes no writes), and every caller that comes meanwhile waits for that
//! check's answer instead of starting its own. So however many probes arrive, a node asks
//! PostgreSQL at most once per [`FRESH_FOR`], and not at all while it is committing.
//!
//! Every outcome recorded also goes to the store's [`OutageLog`], which says in the log when
//! the store stops taking writes and when it takes them again. Failures to reach the database
//! found by reads count too ([`Reachability::record_failure`]); and while the store is down,
//! [`Reachability::watch`] checks every [`WATCH_EVERY`], so that its return is noticed (and said)
//! even on a node that neither commits nor is probed meanwhile.

use std::time::{Duration, Instant};

use deadpool_postgres::Pool;
use herald_core::log::StoreError;
use parking_lot::Mutex;
use tokio_postgres::SimpleQueryMessage;

use super::outage::{Change, OutageLog};
use super::{pg_error, pool_error, Target};

/// How long the last write's or check's outcome stands for the store's state.
pub(crate) const FRESH_FOR: Duration = Duration::from_secs(1);

/// Longest a check waits for a connection and its answer.
pub(crate) const CHECK_TIMEOUT: Duration = Duration::from_secs(2);

/// How often the store is checked while it is down.
pub(crate) const WATCH_EVERY: Duration = Duration::from_secs(2);

/// What was last found, and when.
struct Observed {
    at: Instant,
    fault: Option<StoreError>,
}

/// The store's last known reachability (see the module documentation).
pub(crate) struct Reachability {
    last: Mutex<Option<Observed>>,
    /// Held by the one check under way.
    checking: tokio::sync::Mutex<()>,
    /// Says the store's outages in the log.
    outage: OutageLog,
    /// Wakes [`Reachability::watch`] when the store goes down.
    went_down: tokio::sync::Notify,
}

impl Reachability {
    /// The reachability of the store at `target`, nothing known yet.
    pub(crate) fn new(target: Target) -> Reachability {
        Reachability {
            last: Mutex::new(None),
            checking: tokio::sync::Mutex::new(()),
            outage: OutageLog::new(target),
            went_down: tokio::sync::Notify::new(),
        }
    }

    /// Records a commit's outcome: a commit clears any fault; a failure to reach the database,
    /// or its lack of space, is the fault from now on. Any other failure (one batch's bad
    /// statement) says nothing about whether writes work, and changes nothing.
    pub(crate) fn record_write(&self, outcome: Result<(), &StoreError>) {
        match outcome {
            Ok(()) => self.record(None),
            Err(err @ (StoreError::Unavailable { .. } | StoreError::Full { .. })) => {
                self.record(Some(err.clone()))
            }
            Err(_) => {}
        }
    }

    /// Records a failure found outside a commit (a read that could not get a connection):
    /// like a commit's, it is the fault from now on if it says the database cannot be reached
    /// or has no space; any other failure changes nothing.
    pub(crate) fn record_failure(&self, error: &StoreError) {
        self.record_write(Err(error));
    }

    /// The fault last found, however old (`None` if none, or nothing was found yet).
    pub(crate) fn last_fault(&self) -> Option<StoreError> {
        self.last.lock().as_ref().and_then(|o| o.fault.clone())
    }

    /// Whether writes work: the last outcome while it is fresh, else a check of `pool`'s
    /// database (named `target` in errors), one at a time.
    pub(crate) async fn check(&self, pool: &Pool, target: &Target) -> Result<(), StoreError> {
        if let Some(known) = self.fresh() {
            return known;
        }
        let _only_check = self.checking.lock().await;
        // Another caller may have checked while this one waited.
        if let Some(known) = self.fresh() {
            return known;
        }
        let found = ping(pool, target).await;
        self.record(found.as_ref().err().cloned());
        found
    }

    /// While the store is down, checks it every [`WATCH_EVERY`] until it is back; then waits
    /// for the next outage. Runs until aborted (the store's `close` and drop abort it).
    pub(crate) async fn watch(&self, pool: Pool, target: Target) {
        loop {
            // `notify_one` keeps a permit when nobody waits: an outage starting before this
            // waits is not missed (a stale permit only makes it look once more).
            if !self.outage.is_down() {
                self.went_down.notified().await;
            }
            while self.outage.is_down() {
                tokio::time::sleep(WATCH_EVERY).await;
                let _ = self.check(&pool, &target).await;
            }
        }
    }

    fn record(&self, fault: Option<StoreError>) {
        if self.outage.observe(fault.as_ref()) == Change::Down {
            self.went_down.notify_one();
        }
        *self.last.lock() = Some(Observed {
            at: Instant::now(),
            fault,
        });
    }

    /// The last outcome, if it is recent enough to stand.
    fn fresh(&self) -> Option<Result<(), StoreError>> {
        let last = self.last.lock();
        let observed = last.as_ref().filter(|o| o.at.elapsed() < FRESH_FOR)?;
        Some(match &observed.fault {
            Some(fault) => Err(fault.clone()),
            None => Ok(()),
        })
    }
}

/// One check: a pooled connection, and whether the server is a primary that takes writes.
async fn ping(pool: &Pool, target: &Target) -> Result<(), StoreError> {
    let check = async {
        let client = pool.get().await.map_err(|e| pool_error(target, e))?;
        let answer = client
            .simple_query("SELECT pg_is_in_recovery()")
            .await
            .map_err(pg_error)?;
        let in_recovery = answer.iter().any(|message| match message {
            SimpleQueryMessage::Row(row) => row.get(0) == Some("t"),
            _ => false,
        });
        if in_recovery {
            return Err(StoreError::Unavailable {
                context: format!(
                    "PostgreSQL at {target} is a standby (in recovery): it takes no writes"
                ),
                source: None,
            });
        }
        Ok(())
    };
    match tokio::time::timeout(CHECK_TIMEOUT, check).await {
        Ok(found) => found,
        Err(_) => Err(StoreError::Unavailable {
            context: format!("PostgreSQL at {target} did not answer within {CHECK_TIMEOUT:?}"),
            source: None,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unavailable() -> StoreError {
        StoreError::Unavailable {
            context: "PostgreSQL is not reachable".into(),
            source: None,
        }
    }

    fn reachability() -> Reachability {
        let target = super::super::connect::parse("postgres://h@127.0.0.1/x")
            .unwrap()
            .target;
        Reachability::new(target)
    }

    #[test]
    fn commits_set_and_clear_the_fault_and_other_failures_leave_it() {
        let reachability = reachability();
        assert!(reachability.fresh().is_none(), "nothing known yet");
        reachability.record_write(Err(&unavailable()));
        assert!(matches!(
            reachability.fresh(),
            Some(Err(StoreError::Unavailable { .. }))
        ));
        // A statement the database refused: it was reached, but that says nothing of writes.
        reachability.record_write(Err(&StoreError::failed("a bad row")));
        assert!(matches!(
            reachability.last_fault(),
            Some(StoreError::Unavailable { .. })
        ));
        reachability.record_write(Ok(()));
        assert!(matches!(reachability.fresh(), Some(Ok(()))));
        assert!(reachability.last_fault().is_none());
    }

    #[test]
    fn an_outcome_stands_only_while_fresh() {
        let reachability = reachability();
        *reachability.last.lock() = Some(Observed {
            at: Instant::now() - FRESH_FOR,
            fault: Some(unavailable()),
        });
        assert!(reachability.fresh().is_none(), "stale: checked again");
        assert!(reachability.last_fault().is_some(), "still the last known");
    }
}
