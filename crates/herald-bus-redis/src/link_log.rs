//! The bus's link to Redis in the log, in Herald's words and once per change: one WARN when it
//! is lost (naming Redis, the cause, and what it means for subscribers), one INFO when it is back
//! (after how long, how many failed attempts meanwhile); the client's errors in between are DEBUG
//! lines. [`watch`] follows both Redis connections (their error and reconnection notices, and
//! their state once a second) and tells the [`LinkLog`]; the Redis client's own lines are left
//! to the log filter (Herald's default shows only its errors).

use std::sync::Arc;
use std::time::{Duration, Instant};

use fred::prelude::{ClientLike, EventInterface};
use herald_core::bus::BusLink;
use parking_lot::Mutex;
use tokio::sync::broadcast::error::RecvError;

use crate::bus::{link_of, Shared};
use crate::error::in_words;

/// How often the connections' state is looked at besides their notices.
const LOOK_EVERY: Duration = Duration::from_secs(1);

/// How long a client error stands as the cause of a loss found after it.
const CAUSE_FRESH_FOR: Duration = Duration::from_secs(5);

/// Since when the link is down, and how many errors the client reported since.
struct Down {
    since: Instant,
    errors: u64,
}

/// What the log knows of the link.
#[derive(Default)]
struct State {
    down: Option<Down>,
    /// The client's last error, in words, and when it came.
    last_error: Option<(String, Instant)>,
}

/// What an observation changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Change {
    /// Nothing: still connected, or still down.
    None,
    /// The link was lost (a WARN line).
    Lost,
    /// The link is back (an INFO line).
    Back,
}

/// The link's state, told in the log (see the module documentation).
pub(crate) struct LinkLog {
    /// `Redis at host:port` (or `Redis Cluster at ...`), for the lines.
    redis: String,
    state: Mutex<State>,
}

impl LinkLog {
    /// A log of the link to `redis` (how the lines name it), connected until told otherwise.
    pub(crate) fn new(redis: String) -> LinkLog {
        LinkLog {
            redis,
            state: Mutex::new(State::default()),
        }
    }

    /// Whether the link is down as last observed.
    pub(crate) fn is_down(&self) -> bool {
        self.state.lock().down.is_some()
    }

    /// Takes what was found: whether both connections are up, and the error the client just
    /// reported, if that is what prompted the look.
    pub(crate) fn observe(&self, connected: bool, error: Option<String>) -> Change {
        self.observe_at(connected, error, Instant::now())
    }

    fn observe_at(&self, connected: bool, error: Option<String>, now: Instant) -> Change {
        let mut state = self.state.lock();
        let reported = error.is_some();
        if let Some(error) = error {
            state.last_error = Some((error, now));
        }
        match (state.down.as_mut(), connected) {
            (None, true) => Change::None,
            (Some(down), false) => {
                if reported {
                    down.errors += 1;
                    let error = state.last_error.as_ref().map_or("", |(e, _)| e.as_str());
                    tracing::debug!(%error, "the bus is still disconnected from Redis");
                }
                Change::None
            }
            (None, false) => {
                state.down = Some(Down {
                    since: now,
                    errors: u64::from(reported),
                });
                let cause = match &state.last_error {
                    Some((error, at)) if now.saturating_duration_since(*at) < CAUSE_FRESH_FOR => {
                        error.clone()
                    }
                    _ => "the connection was lost".to_owned(),
                };
                drop(state);
                tracing::warn!(
                    "the bus ({}) is disconnected: {cause}; this node's subscribers still get \
                     this node's publishes, other nodes' arrive when it is back (read from the \
                     log); it reconnects by itself",
                    self.redis
                );
                Change::Lost
            }
            (Some(_), true) => {
                let down = state.down.take().expect("down");
                state.last_error = None;
                drop(state);
                let took = now.saturating_duration_since(down.since);
                tracing::info!(
                    down_ms = took.as_millis() as u64,
                    failed_attempts = down.errors,
                    "the bus ({}) is reconnected after {} s; what other nodes published \
                     meanwhile is read from the log",
                    self.redis,
                    took.as_secs()
                );
                Change::Back
            }
        }
    }
}

/// Follows the bus's two Redis connections and tells `shared.link_log` what it finds; runs
/// until the connections are gone or the task is aborted (the bus's shutdown aborts it before
/// closing them, so a shutdown is not told as a loss).
pub(crate) async fn watch(shared: Arc<Shared>) {
    let mut publisher_errors = shared.publisher.error_rx();
    let mut subscriber_errors = shared.subscriber.error_rx();
    let mut publisher_back = shared.publisher.reconnect_rx();
    let mut subscriber_back = shared.subscriber.reconnect_rx();
    let mut look = tokio::time::interval(LOOK_EVERY);
    look.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let error = tokio::select! {
            got = publisher_errors.recv() => match got {
                Ok((error, _)) => Some(in_words(&error)),
                Err(RecvError::Lagged(_)) => None,
                Err(RecvError::Closed) => return,
            },
            got = subscriber_errors.recv() => match got {
                Ok((error, _)) => Some(in_words(&error)),
                Err(RecvError::Lagged(_)) => None,
                Err(RecvError::Closed) => return,
            },
            got = publisher_back.recv() => match got {
                Ok(_) | Err(RecvError::Lagged(_)) => None,
                Err(RecvError::Closed) => return,
            },
            got = subscriber_back.recv() => match got {
                Ok(_) | Err(RecvError::Lagged(_)) => None,
                Err(RecvError::Closed) => return,
            },
            _ = look.tick() => None,
        };
        let link = link_of(shared.publisher.state(), shared.subscriber.state());
        shared.link_log.observe(link == BusLink::Connected, error);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use herald_testkit::logs::capture;
    use tracing::Level;

    #[test]
    fn a_loss_is_one_warn_and_the_return_one_info_with_the_duration() {
        let log = LinkLog::new("Redis at 127.0.0.1:6379".into());
        let start = Instant::now();
        let lines = capture(|| {
            assert_eq!(log.observe_at(true, None, start), Change::None);
            // The error comes while the client still says connected; the state follows.
            let closed = Some("connection closed".to_owned());
            assert_eq!(log.observe_at(true, closed, start), Change::None);
            let refused = || Some("connection refused".to_owned());
            let at = start + Duration::from_millis(50);
            assert_eq!(log.observe_at(false, refused(), at), Change::Lost);
            for i in 1..=4 {
                let at = start + Duration::from_secs(i);
                assert_eq!(log.observe_at(false, refused(), at), Change::None);
                assert_eq!(log.observe_at(false, None, at), Change::None);
            }
            assert!(log.is_down());
            let back = start + Duration::from_secs(22);
            assert_eq!(log.observe_at(true, None, back), Change::Back);
            assert_eq!(log.observe_at(true, None, back), Change::None);
        });
        let said: Vec<_> = lines.iter().filter(|(l, _)| *l <= Level::INFO).collect();
        assert_eq!(said.len(), 2, "{lines:?}");
        assert_eq!(said[0].0, Level::WARN);
        assert!(
            said[0].1.starts_with(
                "the bus (Redis at 127.0.0.1:6379) is disconnected: connection refused; this \
                 node's subscribers still get this node's publishes, other nodes' arrive when \
                 it is back"
            ),
            "{}",
            said[0].1
        );
        assert_eq!(said[1].0, Level::INFO);
        assert!(
            said[1]
                .1
                .starts_with("the bus (Redis at 127.0.0.1:6379) is reconnected after 21 s"),
            "{}",
            said[1].1
        );
        assert!(said[1].1.contains("failed_attempts=5"), "{}", said[1].1);
        let repeated = lines.iter().filter(|(l, _)| *l == Level::DEBUG).count();
        assert_eq!(repeated, 4, "{lines:?}");
        assert!(!log.is_down());
    }

    #[test]
    fn a_loss_found_without_a_recent_error_says_the_connection_was_lost() {
        let log = LinkLog::new("Redis at r:6379".into());
        let start = Instant::now();
        let lines = capture(|| {
            log.observe_at(true, Some("an old error".into()), start);
            log.observe_at(false, None, start + CAUSE_FRESH_FOR);
        });
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(
            lines[0]
                .1
                .contains("is disconnected: the connection was lost;"),
            "{}",
            lines[0].1
        );
    }
}
