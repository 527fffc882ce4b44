//! The WARN lines an operator must see when provider delivery fails: each dead letter (a send
//! that used its last attempt, or a job that cannot run) and each pause of an app's provider,
//! naming the app, the provider, the job and the provider's answer.
//!
//! Rate-limited (the outbound queue's [`LineLimiter`]): at most one line per app, provider and
//! kind every [`FailureLog::EVERY`]; the next line says how many were held back meanwhile
//! (`held_back`), so a broadcast whose every send fails writes a line every few seconds, not
//! one per device. `herald jobs dead`, the receipts and `herald_provider_jobs_dead` have every
//! one.

use std::time::{Duration, Instant};

use herald_core::tenant::AppId;
use herald_outbound::LineLimiter;

use crate::device::Platform;

/// What a line reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    DeadLetter,
    Pause,
}

/// Whose lines a window counts: an app, its provider (`None`: a broadcast's expansion), a kind.
type Key = (AppId, Option<Platform>, Kind);

/// The rate-limited WARN lines of failed deliveries (see the module documentation).
pub(super) struct FailureLog {
    lines: LineLimiter<Key>,
}

impl Default for FailureLog {
    fn default() -> Self {
        FailureLog {
            lines: LineLimiter::new(Self::EVERY),
        }
    }
}

/// A provider's name in a line (`expand` for a broadcast's expansion job).
fn provider_name(provider: Option<Platform>) -> &'static str {
    provider.map_or("expand", |p| p.as_str())
}

impl FailureLog {
    /// Shortest time between two lines of one app, provider and kind.
    pub(super) const EVERY: Duration = Duration::from_secs(10);

    /// Job `job` of `app` became a dead letter after `attempts` attempts; `reason` is the
    /// provider's last answer (or why the job cannot run).
    pub(super) fn dead_letter(
        &self,
        app: &AppId,
        provider: Option<Platform>,
        job: i64,
        attempts: u32,
        reason: &str,
    ) {
        let Some(held_back) = self.admit(app, provider, Kind::DeadLetter, Instant::now()) else {
            return;
        };
        tracing::warn!(
            app = %app.as_str(),
            provider = provider_name(provider),
            job,
            attempts,
            answer = %reason,
            held_back,
            "provider job failed for good: a dead letter (`herald jobs dead` lists it; replay it \
             once the cause is fixed)"
        );
    }

    /// `app`'s `provider` is paused for `wait` after job `job`'s send got a provider-wide
    /// `reason` (throttling, the service down, credentials refused).
    pub(super) fn paused(
        &self,
        app: &AppId,
        provider: Platform,
        job: i64,
        reason: &str,
        wait: Duration,
    ) {
        let Some(held_back) = self.admit(app, Some(provider), Kind::Pause, Instant::now()) else {
            return;
        };
        tracing::warn!(
            app = %app.as_str(),
            provider = provider.as_str(),
            job,
            answer = %reason,
            wait_ms = wait.as_millis() as u64,
            held_back,
            "provider paused for this app: its sends wait, then retry"
        );
    }

    /// Whether a line of `kind` for `app` and `provider` may be written at `now`: `Some` with
    /// how many were held back since the last one, or `None` (this one is held back).
    fn admit(
        &self,
        app: &AppId,
        provider: Option<Platform>,
        kind: Kind,
        now: Instant,
    ) -> Option<u64> {
        self.lines.admit((app.clone(), provider, kind), now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_app_provider_and_kind_every_period_counting_the_rest() {
        let log = FailureLog::default();
        let (shop, news) = (AppId::parse("shop").unwrap(), AppId::parse("news").unwrap());
        let web = Some(Platform::Webpush);
        let start = Instant::now();
        assert_eq!(log.admit(&shop, web, Kind::DeadLetter, start), Some(0));
        for _ in 0..5 {
            assert_eq!(log.admit(&shop, web, Kind::DeadLetter, start), None);
        }
        // Another app, provider or kind has its own window.
        assert_eq!(log.admit(&news, web, Kind::DeadLetter, start), Some(0));
        let apns = Some(Platform::Apns);
        assert_eq!(log.admit(&shop, apns, Kind::DeadLetter, start), Some(0));
        assert_eq!(log.admit(&shop, web, Kind::Pause, start), Some(0));
        // A period later: one line, saying how many were held back.
        let later = start + FailureLog::EVERY;
        assert_eq!(log.admit(&shop, web, Kind::DeadLetter, later), Some(5));
        assert_eq!(log.admit(&shop, web, Kind::DeadLetter, later), None);
        let much_later = later + FailureLog::EVERY * 3;
        assert_eq!(log.admit(&shop, web, Kind::DeadLetter, much_later), Some(1));
    }
}
