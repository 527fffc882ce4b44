//! The store's outages in the log, in Herald's words and once per change: one WARN when
//! PostgreSQL stops taking writes (it cannot be reached, it is out of space, it refuses), naming
//! the server, the cause and what clients get meanwhile; one INFO when it takes them again,
//! saying after how long and how many failures were seen meanwhile. The failures in between are
//! DEBUG lines. [`super::reachability::Reachability`] feeds it every outcome it records.

use std::error::Error;
use std::fmt;
use std::time::{Duration, Instant};

use herald_core::log::StoreError;
use herald_core::store_error::BackendError;
use parking_lot::Mutex;

use super::Target;

/// What is wrong with the store while it is down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// It cannot be reached (refused, reset, timed out, a standby), publishes answer 503.
    Unreachable,
    /// It is out of disk space, publishes answer 507.
    Full,
    /// It answers, but with an error of its own (a refused login, a missing permission).
    Failing,
}

impl Fault {
    fn of(error: &StoreError) -> Option<Fault> {
        match error {
            StoreError::Unavailable { .. } => Some(Fault::Unreachable),
            StoreError::Full { .. } => Some(Fault::Full),
            StoreError::Backend { .. } => Some(Fault::Failing),
            // Closing is not an outage; a halt is the embedded store's, said where it happens.
            StoreError::Closed | StoreError::Halted { .. } => None,
        }
    }
}

/// Since when the store is down, why, and how many failures were seen since.
struct Down {
    since: Instant,
    fault: Fault,
    failures: u64,
}

/// What an observation changed (for the caller that watches for recovery, and for tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Change {
    /// Nothing: still up, or still down for the same kind of fault.
    None,
    /// It went down, or down for another kind of fault (a WARN line).
    Down,
    /// It came back (an INFO line).
    Up,
}

/// The store's outage state, told in the log (see the module documentation).
pub(crate) struct OutageLog {
    target: Target,
    down: Mutex<Option<Down>>,
}

impl OutageLog {
    /// An outage log for the store at `target`, up until told otherwise.
    pub(crate) fn new(target: Target) -> OutageLog {
        OutageLog {
            target,
            down: Mutex::new(None),
        }
    }

    /// Whether the store is down as last observed.
    pub(crate) fn is_down(&self) -> bool {
        self.down.lock().is_some()
    }

    /// Takes one outcome: `None` (a write or check worked) or the fault found.
    pub(crate) fn observe(&self, fault: Option<&StoreError>) -> Change {
        self.observe_at(fault, Instant::now())
    }

    fn observe_at(&self, found: Option<&StoreError>, now: Instant) -> Change {
        let mut down = self.down.lock();
        let Some(error) = found else {
            let Some(was) = down.take() else {
                return Change::None;
            };
            drop(down);
            let took = now.saturating_duration_since(was.since);
            let again = match was.fault {
                Fault::Unreachable => "is reachable again",
                Fault::Full => "takes writes again (it has space)",
                Fault::Failing => "works again",
            };
            tracing::info!(
                down_ms = took.as_millis() as u64,
                failures = was.failures,
                "the store (PostgreSQL at {}) {again} after {}",
                self.target,
                Seconds(took)
            );
            return Change::Up;
        };
        let Some(fault) = Fault::of(error) else {
            return Change::None;
        };
        match down.as_mut() {
            Some(was) if was.fault == fault => {
                was.failures += 1;
                tracing::debug!(error = %error.chain(), failures = was.failures, "the store is still down");
                Change::None
            }
            _ => {
                let since = down.as_ref().map_or(now, |was| was.since);
                *down = Some(Down {
                    since,
                    fault,
                    failures: 1,
                });
                drop(down);
                let cause = cause_in_words(error);
                let target = &self.target;
                match fault {
                    Fault::Unreachable => tracing::warn!(
                        "the store (PostgreSQL at {target}) cannot be reached: {cause}; publishes \
                         answer 503 store_unavailable until it is back"
                    ),
                    Fault::Full => tracing::warn!(
                        "the store (PostgreSQL at {target}) is out of disk space: {cause}; \
                         publishes answer 507 insufficient_storage until space is freed"
                    ),
                    Fault::Failing => tracing::warn!(
                        "the store (PostgreSQL at {target}) refuses Herald: {cause}; publishes \
                         answer 500 store_failed until it is fixed"
                    ),
                }
                Change::Down
            }
        }
    }
}

/// A duration as an operator reads it: `0.4 s`, `21 s`, `3 min 5 s`.
pub(crate) struct Seconds(pub(crate) Duration);

impl fmt::Display for Seconds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = self.0;
        if d < Duration::from_secs(10) {
            write!(f, "{:.1} s", d.as_secs_f64())
        } else if d < Duration::from_secs(120) {
            write!(f, "{} s", d.as_secs())
        } else {
            write!(f, "{} min {} s", d.as_secs() / 60, d.as_secs() % 60)
        }
    }
}

/// The innermost cause of `error`, in words: an I/O error as its message (`connection
/// refused`, without the `(os error 111)`), else the deepest source's message (a server's
/// answer without its severity: `the database system is shutting down`), else what the store
/// was doing (Herald's own words, kept as they are).
pub(crate) fn cause_in_words(error: &StoreError) -> String {
    let mut deepest: Option<&(dyn Error + 'static)> = None;
    let mut next = error.source().map(unshared);
    while let Some(cause) = next {
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            return io_words(io);
        }
        deepest = Some(cause);
        next = cause.source().map(unshared);
    }
    match (deepest, error) {
        (Some(cause), _) => {
            let text = cause.to_string();
            let answer = ["FATAL: ", "ERROR: ", "PANIC: "]
                .iter()
                .find_map(|severity| text.strip_prefix(severity))
                .unwrap_or(&text);
            lowercase_first(answer)
        }
        (
            None,
            StoreError::Unavailable { context, .. }
            | StoreError::Full { context, .. }
            | StoreError::Backend { context, .. }
            | StoreError::Halted { context },
        ) => context.clone(),
        (None, StoreError::Closed) => "the store is closed".to_owned(),
    }
}

/// The error a [`BackendError`] shares (its `Arc` shows the same text but hides the error's
/// type, and skips it as a source).
fn unshared<'a>(cause: &'a (dyn Error + 'static)) -> &'a (dyn Error + 'static) {
    match cause.downcast_ref::<BackendError>() {
        Some(shared) => &**shared,
        None => cause,
    }
}

/// An I/O error's message without the operating system's number: `connection refused`.
fn io_words(io: &std::io::Error) -> String {
    let text = io.to_string();
    let text = match text.find(" (os error ") {
        Some(at) => &text[..at],
        None => &text,
    };
    lowercase_first(text)
}

fn lowercase_first(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        // Keep acronyms (`TLS handshake`) as they are.
        Some(first) if !chars.next().is_some_and(|c| c.is_uppercase()) => first
            .to_lowercase()
            .chain(text[first.len_utf8()..].chars())
            .collect(),
        _ => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use herald_testkit::logs::capture;
    use tracing::Level;

    fn target() -> Target {
        super::super::connect::parse("postgres://herald@db.example:5432/herald")
            .unwrap()
            .target
    }

    fn refused() -> StoreError {
        let io = std::io::Error::from_raw_os_error(111);
        StoreError::unavailable("cannot reach PostgreSQL at db.example:5432/herald", io)
    }

    #[test]
    fn an_outage_is_one_warn_when_it_starts_and_one_info_when_it_ends() {
        let log = OutageLog::new(target());
        let start = Instant::now();
        let lines = capture(|| {
            assert_eq!(log.observe_at(None, start), Change::None, "up stays up");
            assert_eq!(log.observe_at(Some(&refused()), start), Change::Down);
            for i in 1..=5 {
                let at = start + Duration::from_secs(i);
                assert_eq!(log.observe_at(Some(&refused()), at), Change::None);
            }
            // Closing is no news.
            let at = start + Duration::from_secs(6);
            assert_eq!(log.observe_at(Some(&StoreError::Closed), at), Change::None);
            assert!(log.is_down());
            let back = start + Duration::from_secs(21);
            assert_eq!(log.observe_at(None, back), Change::Up);
            assert_eq!(log.observe_at(None, back), Change::None);
        });
        let said: Vec<_> = lines.iter().filter(|(l, _)| *l <= Level::INFO).collect();
        assert_eq!(said.len(), 2, "{lines:?}");
        assert_eq!(said[0].0, Level::WARN);
        assert_eq!(
            said[0].1,
            "the store (PostgreSQL at db.example:5432/herald) cannot be reached: connection \
             refused; publishes answer 503 store_unavailable until it is back"
        );
        assert_eq!(said[1].0, Level::INFO);
        assert!(
            said[1].1.starts_with(
                "the store (PostgreSQL at db.example:5432/herald) is reachable again after 21 s"
            ),
            "{}",
            said[1].1
        );
        assert!(said[1].1.contains("failures=6"), "{}", said[1].1);
        let repeated = lines.iter().filter(|(l, _)| *l == Level::DEBUG).count();
        assert_eq!(repeated, 5, "each repeated failure at DEBUG: {lines:?}");
        assert!(!log.is_down());
    }

    #[test]
    fn another_kind_of_fault_is_a_change_and_keeps_the_outage_start() {
        let log = OutageLog::new(target());
        let start = Instant::now();
        let full = StoreError::full(
            "PostgreSQL is out of disk space",
            std::io::Error::other("could not extend file"),
        );
        let lines = capture(|| {
            log.observe_at(Some(&refused()), start);
            assert_eq!(
                log.observe_at(Some(&full), start + Duration::from_secs(3)),
                Change::Down
            );
            log.observe_at(None, start + Duration::from_secs(130));
        });
        let said: Vec<_> = lines.iter().filter(|(l, _)| *l <= Level::INFO).collect();
        assert_eq!(said.len(), 3, "{lines:?}");
        assert!(said[1]
            .1
            .contains("is out of disk space: could not extend file"));
        assert!(
            said[2]
                .1
                .contains("takes writes again (it has space) after 2 min 10 s"),
            "{}",
            said[2].1
        );
    }

    #[test]
    fn causes_are_words_not_debug_forms() {
        assert_eq!(cause_in_words(&refused()), "connection refused");
        let timeout = StoreError::Unavailable {
            context: "PostgreSQL at h:5432/x did not answer within 2s".into(),
            source: None,
        };
        assert_eq!(
            cause_in_words(&timeout),
            "PostgreSQL at h:5432/x did not answer within 2s"
        );
        let wrapped = StoreError::backend("database error", std::io::Error::other("Disk gone"));
        assert_eq!(cause_in_words(&wrapped), "disk gone");
        #[derive(Debug, thiserror::Error)]
        #[error("FATAL: the database system is shutting down")]
        struct Answer;
        let answered = StoreError::unavailable("PostgreSQL is not reachable", Answer);
        assert_eq!(
            cause_in_words(&answered),
            "the database system is shutting down"
        );
        assert_eq!(Seconds(Duration::from_millis(1500)).to_string(), "1.5 s");
        assert_eq!(Seconds(Duration::from_secs(59)).to_string(), "59 s");
    }

    #[tokio::test]
    async fn a_refused_connection_reads_connection_refused() {
        // A port nothing listens on.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let url = format!("postgres://herald@127.0.0.1:{port}/herald");
        let connection = super::super::connect::parse(&url).unwrap();
        let pool = super::super::connect::pool(&connection, 1).unwrap();
        let error = super::super::pool_error(&connection.target, pool.get().await.unwrap_err());
        assert!(matches!(error, StoreError::Unavailable { .. }), "{error:?}");
        assert_eq!(cause_in_words(&error), "connection refused");
    }
}
