//! Pusher's keep-alive for one connection, in eight bytes ([`Liveness`]): when the client was
//! last heard from, or when the server's ping went out unanswered. Pusher's keep-alive is in
//! the JSON frames, not WebSocket control frames: at a keep-alive tick a connection that has
//! heard nothing for the activity timeout is sent `pusher:ping`; one whose ping has gone
//! unanswered (nothing heard since) for the pong timeout is closed with 4201. The rule
//! ([`Liveness::due`]) is shared by a connection in its task (`wire.rs`) and a parked one
//! (`park.rs`).
//!
//! While a ping is out, when the client was heard before it no longer matters (the next
//! thing heard answers it), so one instant and one flag say it all. The instant is kept as
//! nanoseconds since a process-wide origin, the flag in the top bit (2^63 ns is 292 years).

use std::sync::LazyLock;
use std::time::Instant;

use crate::frame::codes;
use crate::settings::ClientSettings;
use crate::wire::End;

/// The instants [`Liveness`] counts from.
static ORIGIN: LazyLock<Instant> = LazyLock::new(Instant::now);

/// The top bit of [`Liveness`]: a ping is out and nothing was heard since.
const PINGED: u64 = 1 << 63;

/// When the client was last heard from, or when the server's unanswered ping went out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Liveness(u64);

/// Nanoseconds from [`ORIGIN`] to `at` (0 for an instant before it), below [`PINGED`].
fn nanos(at: Instant) -> u64 {
    let since = at.saturating_duration_since(*ORIGIN).as_nanos();
    u64::try_from(since).unwrap_or(u64::MAX).min(PINGED - 1)
}

impl Liveness {
    /// A client heard from at `now` (a connection that just opened).
    pub(crate) fn heard_at(now: Instant) -> Liveness {
        Liveness(nanos(now))
    }

    /// The client was heard from at `now` (any frame answers a ping).
    pub(crate) fn heard(&mut self, now: Instant) {
        *self = Liveness::heard_at(now);
    }

    /// The server's ping went out at `now`.
    pub(crate) fn pinged(&mut self, now: Instant) {
        *self = Liveness(nanos(now) | PINGED);
    }

    /// Whether a ping is out, unanswered.
    pub(crate) fn is_pinged(&self) -> bool {
        self.0 & PINGED != 0
    }

    /// At a keep-alive tick at `now`: whether `pusher:ping` is due (the caller sends it and
    /// says so with [`Liveness::pinged`]), or how the connection ends (its ping went
    /// unanswered for the pong timeout).
    pub(crate) fn due(&self, now: Instant, settings: &ClientSettings) -> Result<bool, End> {
        let since = nanos(now).saturating_sub(self.0 & !PINGED);
        if self.is_pinged() {
            if since >= nanos_of(settings.pong_timeout) {
                return Err(End::Error(
                    codes::PONG_NOT_RECEIVED,
                    "Pong reply not received: the server's ping got no answer in time".into(),
                ));
            }
            return Ok(false);
        }
        Ok(since >= nanos_of(settings.activity_timeout))
    }
}

fn nanos_of(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// At a keep-alive tick of a connection in its task: whether to send `pusher:ping` (noted as
/// sent), or how the connection ends.
pub(crate) fn tick(
    liveness: &mut Liveness,
    now: Instant,
    settings: &ClientSettings,
) -> Result<bool, End> {
    let due = liveness.due(now, settings)?;
    if due {
        liveness.pinged(now);
    }
    Ok(due)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn settings() -> ClientSettings {
        // The origin before the test's instants, so none of them is before it.
        LazyLock::force(&ORIGIN);
        ClientSettings {
            activity_timeout: Duration::from_secs(120),
            pong_timeout: Duration::from_secs(30),
            ..ClientSettings::default()
        }
    }

    #[test]
    fn a_quiet_client_is_pinged_then_closed_unless_it_answers() {
        let s = settings();
        let start = Instant::now();
        let at = |secs| start + Duration::from_secs(secs);
        let mut live = Liveness::heard_at(start);
        assert!(
            !tick(&mut live, at(119), &s).unwrap(),
            "not quiet long enough"
        );
        assert!(tick(&mut live, at(120), &s).unwrap(), "pinged");
        assert!(live.is_pinged());
        assert!(!tick(&mut live, at(149), &s).unwrap(), "one ping at a time");
        assert!(matches!(
            tick(&mut live, at(150), &s),
            Err(End::Error(codes::PONG_NOT_RECEIVED, _))
        ));
        // Heard before the pong timeout: the ping is answered, the quiet counted from then.
        let mut live = Liveness::heard_at(start);
        assert!(tick(&mut live, at(120), &s).unwrap());
        live.heard(at(121));
        assert!(!live.is_pinged());
        assert!(!tick(&mut live, at(160), &s).unwrap());
        assert!(tick(&mut live, at(241), &s).unwrap());
    }

    #[test]
    fn a_due_ping_not_sent_stays_due() {
        let s = settings();
        let start = Instant::now();
        let live = Liveness::heard_at(start);
        let later = start + Duration::from_secs(200);
        assert!(live.due(later, &s).unwrap());
        assert!(live.due(later, &s).unwrap(), "due leaves it as it was");
        assert_eq!(size_of::<Liveness>(), 8);
    }
}
